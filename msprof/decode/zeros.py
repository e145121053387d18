"""Zeros in raw files: the holes of a sparse file, read without reading them, and records of all zero bytes.

No record of any family is all zeros: each holds a time, a count or an id that a real one sets. A file
preallocated, zero-filled or left sparse by a crash holds such records by the million, and a decoder that
took them in would make millions of tasks at time 0. So a stream leaves them out before any decoder sees
them, counts them, and names the runs they came in (``ZeroRuns``). The holes of a sparse file are skipped by
the file system's SEEK_HOLE/SEEK_DATA, not read; a chunk whose first or last record is all zeros is searched
for the runs it holds (a real chunk costs two comparisons of one record).
"""
import hashlib
import os
import re
from typing import Callable, Iterator, List, Tuple, Union

# bytes of zeros compared with and hashed for a hole (one buffer, never copied whole)
_ZEROS = bytes(1 << 20)
_NONZERO = re.compile(b"[^\x00]")
RUNS_NAMED = 3          # runs a warning names; the rest are counted
# why a decoder skips a record of zeros the stream passed on (one among others, where whole runs are the
# stream's to leave out)
REASON = "all zero bytes"


def blocks(handle, chunk_bytes: int, size: int) -> Iterator[Union[bytes, int]]:
    """The first ``size`` bytes of an open file, in order: ``bytes`` read (at most ``chunk_bytes`` each) or,
    for a hole of a sparse file, its length as an ``int`` (its zeros are not read). Where the file system
    cannot say where its holes are, every byte is read."""
    fd = handle.fileno()
    position = 0
    while position < size:
        hole = _seek(fd, position, getattr(os, "SEEK_HOLE", None), size)
        while position < hole:
            block = os.pread(fd, min(chunk_bytes, hole - position), position)
            if not block:          # (the file shrank while read)
                return
            position += len(block)
            yield block
        if position >= size:
            return
        data = _seek(fd, position, getattr(os, "SEEK_DATA", None), size)
        if data <= position:       # (no hole after all: the file changed, or the call is not supported)
            data = min(size, position + chunk_bytes)
            block = os.pread(fd, data - position, position)
            if not block:
                return
            position += len(block)
            yield block
            continue
        yield data - position
        position = data


def _seek(fd: int, position: int, whence, size: int) -> int:
    """lseek(fd, position, whence) within ``size``: where the next hole or data starts (``size`` when none,
    or when the system does not tell holes from data)."""
    if whence is None:
        return size
    try:
        return min(os.lseek(fd, position, whence), size)
    except OSError:                # ENXIO: no data after ``position``; EINVAL: holes not supported here
        return size


def hash_zeros(digest: "hashlib._Hash", count: int) -> None:
    """Add ``count`` zero bytes to ``digest`` (a hole's), from one buffer."""
    view = memoryview(_ZEROS)
    while count > 0:
        step = min(count, len(_ZEROS))
        digest.update(view[:step])
        count -= step


def is_zeros(data: bytes) -> bool:
    return data == _ZEROS[:len(data)] if len(data) <= len(_ZEROS) else not _NONZERO.search(data)


class ZeroRuns:
    """Records of all zero bytes left out of a stream: how many, and where the first runs of them start
    (stream offsets; consecutive records are one run)."""

    def __init__(self):
        self.records = 0
        self.runs = 0
        self.named: List[List[int]] = []       # [offset, records] of the first RUNS_NAMED runs
        self.end = -1                          # stream offset just after the last run

    def add(self, offset: int, records: int, size: int) -> None:
        if records <= 0:
            return
        self.records += records
        if offset == self.end:                 # (a hole and a zero-filled chunk after it are one run)
            if self.named and self.named[-1][0] + self.named[-1][1] * size == offset:
                self.named[-1][1] += records
        else:
            self.runs += 1
            if len(self.named) < RUNS_NAMED:
                self.named.append([offset, records])
        self.end = offset + records * size

    def message(self, what: str, where: Callable[[int], str]) -> List[str]:
        """The one warning of the stream's runs (``what``: what each is, "HWTS record(s) of all zero bytes"),
        naming the file and offset where each of the first runs starts, and how many it held."""
        if not self.records:
            return []
        shown = ", ".join(f"{where(offset)} ({count})" for offset, count in self.named)
        more = f" and {self.runs - len(self.named)} more run(s)" if self.runs > len(self.named) else ""
        return [f"{self.records} {what} skipped (a zero-filled or sparse file: nothing was recorded there), in "
                f"{self.runs} run(s): {shown}{more}"]


def split(whole: bytes, size: int, offset: int, zeros: ZeroRuns) -> Iterator[Tuple[int, bytes]]:
    """(stream offset, bytes) of the runs of ``whole`` (whole records, at stream ``offset``) that are not all
    zeros; the records that are go to ``zeros``."""
    zero = _ZEROS[:size] if size <= len(_ZEROS) else bytes(size)
    if whole[:size] != zero and whole[-size:] != zero:
        yield offset, whole
        return
    if is_zeros(whole):
        zeros.add(offset, len(whole) // size, size)
        return
    start = 0                                  # the first record not yet handed on or counted
    found = whole.find(zero)
    while found >= 0:
        match = _NONZERO.search(whole, found)
        end = match.start() if match else len(whole)
        first, last = -(-found // size) * size, end - end % size     # the whole records inside the run
        if last > first:
            if first > start:
                yield offset + start, whole[start:first]
            zeros.add(offset + first, (last - first) // size, size)
            start = last
        found = whole.find(zero, end) if end < len(whole) else -1
    if start < len(whole):
        yield offset + start, whole[start:] if start else whole
