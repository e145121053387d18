"""The one decoder contract of every record family (JOB and PROF alike), and the one loop that feeds a stream
of slice files through a decoder into the store.

A *decoder* turns chunks of whole fixed-size records into store rows::

    decoder = Family()                      # a new one per stream: it may keep state across chunks
    out = decoder.decode(chunk, tally)      # [Rows | Blocks]: what to insert, per table
    out = decoder.finish(tally)             # what is left when the stream ends (e.g. unpaired starts)
    decoder.messages(name_of)               # warnings found on the way (counter gaps, ...)

It validates only what the format guarantees (record sizes, documented magics, counters) and counts what it
skips in ``tally``, by reason, with the stream offset of the first skipped record, so the warning names the
file and offset where it happened. ``load_streams`` is the only loop over streams: slice files → chunks →
decoder → inserts, then the counts and warnings of the stream.
"""
import functools
import itertools
import os
from operator import gt
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

from msprof import progress
from msprof.decode.blocks import RecordLayout, insert_blocks, insert_sql, rows_per_statement
from msprof.decode.slices import LineStream, SliceStream, StreamFiles


# A call or task whose start is 2^63 or more (read signed: only damage writes one), or whose end comes before
# its start, cannot be real: every family that records both times skips and counts it, for this reason, rather
# than put a nonsense duration into every statistic.
IMPOSSIBLE_TIMES = "time stamp of 2^63 or more, or an end before its start"


def impossible_times(starts, ends) -> bool:
    """Whether any (start, end) of these columns cannot be real (IMPOSSIBLE_TIMES), at C speed."""
    return min(starts, default=0) < 0 or any(map(gt, starts, ends))


def impossible_time(start: int, end: int) -> bool:
    """IMPOSSIBLE_TIMES for one record."""
    return start < 0 or end < start


class Tally:
    """Records a decoder skipped, by reason, and where the first of each reason was (stream byte offset)."""

    def __init__(self, record_size: int = 1):
        self.record_size = record_size
        self.base = 0                       # stream offset of the chunk being decoded
        self.counts: Dict[str, int] = {}
        self.first: Dict[str, int] = {}
        self.quiet: set = set()             # reasons that are normal (other record kinds): counted, not warned

    def skip(self, reason: str, n: int = 1, index: int = 0, warn: bool = True) -> None:
        """``n`` records skipped for ``reason``; ``index``: the first one's record index in the chunk;
        ``warn=False`` for records the format allows and this family does not use."""
        if n <= 0:
            return
        if reason not in self.counts:
            self.first[reason] = self.base + index * self.record_size
            self.counts[reason] = 0
        if not warn:
            self.quiet.add(reason)
        self.counts[reason] += n

    def offset(self, index: int) -> int:
        """Stream offset of record ``index`` of the current chunk."""
        return self.base + index * self.record_size

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class Rows:
    """Rows for one table: equal-length tuples of the values of ``columns``."""

    table: str
    columns: Sequence[str]
    rows: list

    def insert(self, conn) -> int:
        return insert_rows(conn, self.table, tuple(self.columns), self.rows)


@dataclass
class Blocks:
    """Flat parameter tuples of a whole-chunk decoder (msprof.decode.blocks.RecordLayout): one multi-row INSERT each."""

    layout: RecordLayout
    blocks: list = field(default_factory=list)

    def insert(self, conn) -> int:
        return self.layout.insert(conn, self.blocks) if self.blocks else 0


class Decoder:
    """Base of every record family's decoder (see the module docstring)."""

    kind = ""               # data kind of its files (msprof.decode.slices.KINDS)
    label = ""              # how messages name the data ("HWTS", "aicore PMU", ...)
    record_size = 0
    # A family of records of varying length (record_size 1: chunks of bytes cut anywhere) counts its records
    # itself, and the bytes of a record cut off at the end of the stream: set by the decoder, else None / 0.
    records: Optional[int] = None
    tail_lost = 0
    # Whether a record of all zero bytes cannot be real and is left out before the decoder sees it (counted and
    # summarised: msprof.decode.zeros). False for a byte stream, whose zero bytes are data like any other.
    zero_records = True

    # A record boundary test for streams that lost bytes at the head (ring buffer): a documented magic. None:
    # the family has no magic, and the spec's rule (drop total % size bytes at the head) applies.
    looks_aligned: Optional[Callable[[bytes], bool]] = None

    def decode(self, chunk: bytes, tally: Tally) -> list:
        raise NotImplementedError

    def finish(self, tally: Tally) -> list:
        return []

    def messages(self, where: Callable[[int], str]) -> List[str]:
        """Warnings beyond skipped records; ``where(stream_offset)`` names a file and offset."""
        return []


class LineDecoder(Decoder):
    """A text family: ``decode`` gets lists of lines (record size 1: a tally index is a line number)."""

    record_size = 1
    lines = True


def insert_rows(conn, table: str, columns: tuple, rows) -> int:
    """Insert tuples of ``columns`` values with multi-row INSERTs (fewer statement steps than one row each:
    about 25 % faster on large loads)."""
    rows = rows if isinstance(rows, list) else list(rows)
    if not rows:
        return 0
    width = len(columns)
    per = rows_per_statement(width)
    flat = list(itertools.chain.from_iterable(rows))
    step = per * width
    blocks = [flat[i:i + step] for i in range(0, len(flat), step)]
    return insert_blocks(conn, functools.partial(insert_sql, table, tuple(columns), ()), blocks, width, per)


@dataclass
class StreamCount:
    """What one stream held: the decode_count row of the store (and the digests of its files)."""

    stream: str
    kind: str
    files: int
    bytes: int
    records: int
    skipped: int
    head_lost: int
    tail_lost: int
    digests: list


def stream_name(item: StreamFiles) -> str:
    return item.stem + (f".{item.device}" if item.device else "")


def load_streams(conn, streams: Sequence[StreamFiles], make: Callable[[StreamFiles], Decoder], notices,
                 counts: Dict[str, StreamCount]) -> List[Decoder]:
    """Decode every stream with a fresh decoder from ``make`` and insert what it yields; record the stream's
    counts and warn (``notices.warn``) about lost bytes and skipped records, naming file and offset.
    Returns the decoders (their state, e.g. unpaired counts, for the caller)."""
    decoders = []
    with progress.step("importing", _size(streams), "bytes") as shown:
        for item in streams:
            decoders.append(_load_stream(conn, item, make, notices, counts, shown))
    return decoders


def _size(streams: Sequence[StreamFiles]) -> int:
    try:
        return sum(os.path.getsize(path) for item in streams for path in item.files)
    except OSError:           # said with its name where the stream is opened
        return 0


def _load_stream(conn, item: StreamFiles, make: Callable[[StreamFiles], Decoder], notices,
                 counts: Dict[str, StreamCount], shown: progress.Step) -> Decoder:
    decoder = make(item)
    shown.phase(f"importing {stream_name(item)}")
    if getattr(decoder, "lines", False):
        stream = LineStream(item.files, decoder.label)
    else:
        stream = SliceStream(item.files, decoder.record_size, decoder.label, decoder.looks_aligned,
                             decoder.zero_records)
    tally = Tally(decoder.record_size)
    records = done = 0
    for offset, chunk in stream.chunks():
        tally.base = offset
        for out in decoder.decode(chunk, tally):
            out.insert(conn)
        records += len(chunk) // decoder.record_size
        shown.advance(stream.done - done)       # (bytes of the files, the zeros left out included)
        done = stream.done
    records += stream.zeros.records
    for out in decoder.finish(tally):
        out.insert(conn)
    for message in stream.loss_messages():
        notices.warn(message)
    for reason, n in tally.counts.items():
        if reason not in tally.quiet:
            notices.warn(f"{stream.where(tally.first[reason])}: {n} {decoder.label} record(s) skipped ({reason})")
    for message in decoder.messages(stream.where):
        notices.warn(message)
    if decoder.records is not None:
        records = decoder.records
    counts[stream_name(item)] = StreamCount(stream_name(item), item.kind, len(stream.files), stream.total_bytes,
                                            records, tally.total + stream.zeros.records, stream.head_lost,
                                            stream.tail_lost + decoder.tail_lost, stream.digests)
    return decoder
