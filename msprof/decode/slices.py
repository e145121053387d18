"""Slice files of one data type and device form one byte stream (raw-format.md §4).

``group_files`` sorts a result directory's raw files into streams; ``SliceStream`` reads one stream in
bounded chunks of whole records, dropping a partial record at the head (ring buffer overwrite) or at
the tail (app died), and hashes every file on the way so the store can record what it read.
"""
import codecs
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from msprof.decode import zeros

# Small enough that the buffers are reused (reads of megabytes fault their pages in again each time), large
# enough for whole-chunk decoding to pay off.
CHUNK_BYTES = 256 << 10
PROBE_RECORDS = 8  # records looked at to find where whole records start

# Name patterns, checked in order: "<stem>.<dev>.slice_<n>" and the legacy "<stem>.<dev>.<seq>".
_SLICE_NAME = re.compile(r"^(?P<stem>.+)\.(?P<dev>\d+)\.slice_(?P<seq>\d+)$")
_HOST_SLICE_NAME = re.compile(r"^(?P<stem>(?:un)?aging\..+)\.slice_(?P<seq>\d+)$")
_LEGACY_NAME = re.compile(r"^(?P<stem>.+)\.(?P<dev>\d+)\.(?P<seq>\d+)$")

# stem (lower case) → data kind; first match wins.
KINDS: List[Tuple[re.Pattern, str]] = [
    (re.compile(r"^aclmodule\.(acl_model|acl_op|acl_rts|acl_others)$"), "acl"),
    (re.compile(r"^hwts\.data(\.\d+)?$"), "hwts"),
    (re.compile(r"^(aacore|aicore)\.data(\.\d+)?$"), "pmu"),
    (re.compile(r"^ts_track\.data(\.\d+)?$"), "step_trace"),
    (re.compile(r"^lpmfreqconv\.data(\.\d+)?$"), "freq"),
    (re.compile(r"^stars_soc\.data(\.\d+)?$"), "stars"),
    (re.compile(r"^(un)?aging\.api_event\.data$"), "api_event"),
    (re.compile(r"^(un)?aging\.additional\.type_info_dic$"), "type_info_dic"),
    (re.compile(r"^(un)?aging\.additional\.hash_dic$"), "hash_dic"),
    (re.compile(r"^(un)?aging\.compact\.node_basic_info$"), "node_basic_info"),
    (re.compile(r"^(un)?aging\.compact\.task_track$"), "task_track"),
    (re.compile(r"^(un)?aging\.additional\.graph_id_map$"), "graph_id_map"),
    (re.compile(r"^(un)?aging\.additional\.tensor_info$"), "tensor_info"),
]


@dataclass
class StreamFiles:
    """The ordered slice files of one stream, e.g. all ``hwts.data.0.slice_*``."""

    kind: str
    stem: str
    device: Optional[str]
    files: List[Path] = field(default_factory=list)


def group_files(files: List[Path], kinds: Optional[List[Tuple[re.Pattern, str]]] = None
                ) -> Tuple[Dict[str, List[StreamFiles]], List[Path]]:
    """Sort raw files into streams by kind (``kinds``: (stem pattern, kind) pairs, first match wins; default
    ``KINDS``). Returns ({kind: [streams]}, files not recognised)."""
    streams: Dict[Tuple[str, Optional[str]], Tuple[str, List[Tuple[int, Path]]]] = {}
    unknown: List[Path] = []
    for path in files:
        parsed = _parse_name(path.name)
        kind = parsed and _kind_of(parsed[0], KINDS if kinds is None else kinds)
        if not kind:
            unknown.append(path)
            continue
        stem, device, seq = parsed
        streams.setdefault((stem, device), (kind, []))[1].append((seq, path))
    grouped: Dict[str, List[StreamFiles]] = {}
    for (stem, device), (kind, members) in sorted(streams.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        ordered = [p for _, p in sorted(members, key=lambda m: (m[0], m[1].name))]
        grouped.setdefault(kind, []).append(StreamFiles(kind, stem, device, ordered))
    return grouped, unknown


def _parse_name(name: str):
    for pattern in (_SLICE_NAME, _HOST_SLICE_NAME, _LEGACY_NAME):
        match = pattern.match(name)
        if match:
            groups = match.groupdict()
            return groups["stem"], groups.get("dev"), int(groups["seq"])
    return None


def _kind_of(stem: str, kinds: List[Tuple[re.Pattern, str]]) -> Optional[str]:
    lowered = stem.lower()
    for pattern, kind in kinds:
        if pattern.match(lowered):
            return kind
    return None


@dataclass
class FileDigest:
    path: Path
    size: int
    mtime_ns: int
    sha256: str


class SliceStream:
    """Whole records of one stream, read in chunks of at most ``CHUNK_BYTES``.

    ``looks_aligned(record) -> bool`` (optional) recognises a record boundary, e.g. by its magic. The
    spec drops ``total % size`` bytes from the head; when that leaves the first record misaligned but
    offset 0 (or another offset) is aligned, the loss is at the tail (or split) instead — a cut-off
    file must not shift every record.
    """

    def __init__(self, files: List[Path], record_size: int, label: str,
                 looks_aligned: Optional[Callable[[bytes], bool]] = None, zero_records: bool = True):
        self.files = list(files)
        self.zero_records = zero_records   # False: a byte stream (TLV), whose zero bytes are data like any other
        self.record_size = record_size
        self.label = label
        self.sizes = [p.stat().st_size for p in self.files]
        self.total_bytes = sum(self.sizes)
        self.marked = looks_aligned is not None       # records carry a mark that shows where they start
        self.head_lost = self._head_offset(looks_aligned)
        self.tail_lost = (self.total_bytes - self.head_lost) % record_size
        self.records = (self.total_bytes - self.head_lost - self.tail_lost) // record_size
        self.digests: List[FileDigest] = []
        self.zeros = zeros.ZeroRuns()
        self.done = 0           # bytes of the files read (or skipped as holes) so far

    def _head_offset(self, looks_aligned) -> int:
        """Bytes to drop at the head: the offset at which most of the first records look whole.

        The spec's offset (``total % size``) wins ties, so a stream without a recognisable record
        start, or one whose first records are all corrupt, follows the spec."""
        size = self.record_size
        remainder = self.total_bytes % size
        if looks_aligned is None or self.total_bytes < size:
            return remainder
        probe = self._read_head(min(self.total_bytes, (PROBE_RECORDS + 1) * size))

        def score(offset: int) -> int:
            return sum(1 for o in range(offset, len(probe) - size + 1, size)[:PROBE_RECORDS]
                       if looks_aligned(probe[o:o + size]))

        best, best_score = remainder, score(remainder)
        for offset in range(size):
            candidate = score(offset) if offset != remainder else -1
            if candidate > best_score:
                best, best_score = offset, candidate
        return best

    def _read_head(self, count: int) -> bytes:
        parts = []
        for path in self.files:
            with open(path, "rb") as handle:
                parts.append(handle.read(count - sum(map(len, parts))))
            if sum(map(len, parts)) >= count:
                break
        return b"".join(parts)

    def chunks(self) -> Iterator[Tuple[int, bytes]]:
        """Yield (stream offset, bytes of whole records) in stream order, records of all zero bytes left out
        (counted in ``zeros``); fill ``digests``."""
        size = self.record_size
        chunk_bytes = max(size, CHUNK_BYTES - CHUNK_BYTES % size)
        records = _Records(size, self.head_lost, self.records * size, self.zeros if self.zero_records else None)
        self.digests = []
        for path in self.files:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                for block in zeros.blocks(handle, chunk_bytes, stat.st_size):
                    if isinstance(block, int):
                        self.done += block
                        zeros.hash_zeros(digest, block)
                        yield from records.hole(block)
                        continue
                    self.done += len(block)
                    digest.update(block)
                    yield from records.data(block)
            self.digests.append(FileDigest(path, stat.st_size, stat.st_mtime_ns, digest.hexdigest()))

    def where(self, offset: int) -> str:
        """'<file> offset <n>' of a byte at ``offset`` of the decoded stream (whole records, after the head loss)."""
        return _where(self.files, self.sizes, offset + self.head_lost)

    def loss_messages(self) -> List[str]:
        messages = []
        if self.head_lost:
            why = "partial record, ring buffer overwrite"
            if not self.marked:     # nothing in the records says which end lost the bytes: the spec's rule
                why += ("; taken to be at the head as the format says, since its records carry no mark: had the"
                        " file been cut at its end instead, every record is misread")
            messages.append(f"{self.head_lost} bytes of {self.label} data lost at the head of "
                            f"{self.files[0].name} ({why})")
        if self.tail_lost:
            messages.append(f"{self.tail_lost} bytes of {self.label} data lost at the tail of "
                            f"{self.files[-1].name} (partial record, collection cut off)")
        return messages + self.zeros.message(f"{self.label} record(s) of all zero bytes", self.where)


class _Records:
    """Whole records out of a stream's blocks as read: ``head`` bytes dropped first, ``total`` bytes of
    records at most (the tail loss after them), a record cut by a file boundary joined, and the records of
    all zero bytes left out (to ``zeros``; None: kept, as a byte stream's data)."""

    def __init__(self, size: int, head: int, total: int, zero_runs: Optional[zeros.ZeroRuns]):
        self.size, self.to_skip, self.remaining, self.zeros = size, head, total, zero_runs
        self.carry = b""
        self.offset = 0             # stream offset of the next record

    def data(self, block: bytes) -> Iterator[Tuple[int, bytes]]:
        size = self.size
        if self.to_skip:
            skipped = min(self.to_skip, len(block))
            block = block[skipped:]
            self.to_skip -= skipped
        if self.carry:
            block = self.carry + block
            self.carry = b""
        usable = min(len(block) - len(block) % size, self.remaining)
        if usable:
            self.remaining -= usable
            offset, self.offset = self.offset, self.offset + usable
            whole = block[:usable] if usable < len(block) else block
            if self.zeros is None:
                yield offset, whole
            else:
                yield from zeros.split(whole, size, offset, self.zeros)
        self.carry = block[usable:] if self.remaining else b""

    def hole(self, count: int) -> Iterator[Tuple[int, bytes]]:
        """``count`` zero bytes, not read: whole records of them counted, the rest kept as bytes (a record
        begun before the hole and ended in it is handed on, unless it is all zeros too)."""
        if self.zeros is None:          # (read as data, a chunk at a time)
            for start in range(0, count, CHUNK_BYTES):
                yield from self.data(bytes(min(CHUNK_BYTES, count - start)))
            return
        size = self.size
        skipped = min(self.to_skip, count)
        self.to_skip -= skipped
        count -= skipped
        if self.carry and count:
            take = min(size - len(self.carry), count)
            count -= take
            yield from self.data(bytes(take))
        whole = min(count - count % size, self.remaining)
        self.zeros.add(self.offset, whole // size, size)
        self.offset += whole
        self.remaining -= whole
        self.carry = bytes(min(count - whole, self.remaining)) if self.remaining else b""


def _where(files: List[Path], sizes: List[int], position: int) -> str:
    """'<file> offset <n>' of the byte at ``position`` of the files one after another."""
    for path, size in zip(files, sizes):
        if position < size:
            return f"{path.name} offset {position}"
        position -= size
    return f"{files[-1].name} offset {sizes[-1] + position}" if files else f"offset {position}"


def digest_file(path: Path) -> FileDigest:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        for block in zeros.blocks(handle, CHUNK_BYTES, stat.st_size):
            if isinstance(block, int):
                zeros.hash_zeros(digest, block)
            else:
                digest.update(block)
    return FileDigest(path, stat.st_size, stat.st_mtime_ns, digest.hexdigest())


class LineStream:
    """The text lines of a stream of slice files (a line may be cut in two by a slice boundary), in batches;
    the SliceStream interface for line-based families (``chunks`` yields lists of lines without their ends).
    Zeros where text belongs (a sparse file's holes, blocks of nothing but zero bytes) are skipped, counted
    and said, as a SliceStream's all-zero records are."""

    BATCH = 4096
    BATCH_CHARS = 4 << 20       # (a batch of long lines is cut sooner: memory stays bounded)
    MAX_LINE = 1 << 20

    def __init__(self, files: List[Path], label: str = ""):
        self.files = list(files)
        self.label = label
        self.sizes = [p.stat().st_size for p in self.files]
        self.total_bytes = sum(self.sizes)
        self.head_lost = self.tail_lost = 0
        self.digests: List[FileDigest] = []
        self.zeros = zeros.ZeroRuns()
        self.done = 0           # bytes of the files read (or skipped as holes) so far
        self._line_files: List[Tuple[int, str]] = []     # (first line number of a file in the stream, name)

    def chunks(self) -> Iterator[Tuple[int, List[str]]]:
        """Yield (stream index of the first line, lines)."""
        carry, batch, number, chars = "", [], 0, 0
        self.digests = []
        text = codecs.getincrementaldecoder("utf-8")("replace")
        for path in self.files:
            self._line_files.append((number, path.name))
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                for data in zeros.blocks(handle, CHUNK_BYTES, stat.st_size):
                    if isinstance(data, int) or zeros.is_zeros(data):
                        count = data if isinstance(data, int) else len(data)
                        if isinstance(data, int):
                            zeros.hash_zeros(digest, count)
                        else:
                            digest.update(data)
                        self.zeros.add(self.done, count, 1)
                        self.done += count
                        continue
                    digest.update(data)
                    self.done += len(data)
                    lines = (carry + text.decode(data)).split("\n")
                    carry = lines.pop()
                    if len(carry) > self.MAX_LINE:        # no line is that long: cut it rather than grow
                        lines.append(carry)
                        carry = ""
                    for line in lines:
                        batch.append(line.rstrip("\r"))
                        chars += len(line)
                        if len(batch) >= self.BATCH or chars >= self.BATCH_CHARS:
                            yield number, batch
                            number += len(batch)
                            batch, chars = [], 0
            self.digests.append(FileDigest(path, stat.st_size, stat.st_mtime_ns, digest.hexdigest()))
        if carry:
            batch.append(carry.rstrip("\r"))
        if batch:
            yield number, batch

    def where(self, line_index: int) -> str:
        name = self.files[0].name if self.files else "?"
        first = 0
        for start, file_name in self._line_files:
            if start <= line_index:
                name, first = file_name, start
        return f"{name} line {line_index - first + 1}"

    def loss_messages(self) -> List[str]:
        return self.zeros.message(f"{self.label} zero byte(s)", lambda offset: _where(self.files, self.sizes, offset))
