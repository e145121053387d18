"""HWTS task log, ``hwts.data.*`` — 64 B ``=BBHHHQ12I`` (raw-format.md §5.4).

Start and end records are paired by (stream id, task id) in file order (msprof.decode.pairing). An end
without a start, or a start that never ends, is kept as an unpaired task (one time missing), never given a
made-up time.
"""
import itertools
import struct
from operator import and_, eq, gt, lshift, mul, or_
from typing import List, Optional, Tuple

from msprof.decode import zeros
from msprof.decode.base import Decoder, Tally
from msprof.decode.blocks import byte_column, record_struct
from msprof.decode.occurrences import Occurrences
from msprof.decode.pairing import Pairing

RECORD_SIZE = 64
# flags (log type | counter << 4), task type, task id, syscnt, stream field (magic and reserved skipped:
# the magic is not enforced, raw-format.md §5.4)
LAYOUT = struct.Struct("<BB4xHqI44x")
# a start record followed by its end: task type, task id, start syscnt, stream field, end syscnt
PAIR_FORMAT = "xB4xHqI44x8xq48x"
LOG_START, LOG_END = 0, 1
TASK_TYPES = {0: "AA_CORE", 1: "AA_CPU"}
STREAM_MASK = 0x7FF
# Records checked and paired together by the whole-run path (see Pairer.feed)
RUN_RECORDS = 4096
_LOG_TYPE = bytes(b & 7 for b in range(256))
_COUNTER = bytes(b >> 4 for b in range(256))
_ROLLING = bytes(i & 15 for i in range(RUN_RECORDS + 16))
_ALTERNATING = bytes((LOG_START, LOG_END)) * (RUN_RECORDS // 2)
_ZERO_RECORD = bytes(RECORD_SIZE)
GAPS_NAMED = 5          # counter gaps a warning names (the rest are counted)

# A piece of pairing output: (True, columns (stream, task, type, start, end, exec_n) of tasks that all have
# both times) or (False, rows of the same fields, where a start or end may be None)
Piece = Tuple[bool, object]


APART = 1 << 32         # a key bit above (stream, task): the executions of a task type numbered apart (Pairer)


def looks_aligned(record: bytes) -> bool:
    return record[2:4] == b"\xd3\x6b"


class Pairer:
    """Stateful pairing over the whole stream. ``feed`` returns pieces of finished tasks:
    (stream_id, task_id, task_type, start_syscnt, end_syscnt, exec_n) with None for a missing side.

    ``exec_n`` numbers the executions of one (stream, task) from 0, so the n-th PMU record of that
    task can be matched to it. ``apart``: a task type whose executions are numbered on their own (a JOB's
    AA_CPU tasks have no PMU record: sharing the count with an AA Core task of the same ids, another model's,
    shifted its records by one).

    A device running one task at a time logs start, end, start, end… with an unbroken rolling counter.
    Runs of records that are exactly that are checked on byte columns and paired whole (C speed);
    anything else (interleaved streams, lost records, other log types) goes record by record.
    """

    def __init__(self, apart: Optional[int] = None):
        # (stream_id << 16 | task_id) → (start syscnt, task type, record index) of the starts waiting
        self.pairing = Pairing()
        self.executions = Occurrences()   # same key (| APART for an ``apart`` task) → its executions so far
        self.apart = apart
        self.last_counter = None
        self.consumed = 0       # stream index of the next record fed
        self.gaps = []          # the first GAPS_NAMED (stream_id, task_id, expected counter, found counter, index)
        self.gap_count = 0
        self.backwards = 0      # tasks whose end counter is below their start's (their end is dropped)
        self.first_backwards = None     # the record index of the first
        self.other_logs = 0

    def feed(self, chunk: bytes, tally: Tally) -> List[Piece]:
        """The tasks the records of ``chunk`` (at stream offset ``tally.base``) finish; records that cannot be
        real are skipped and counted in ``tally``."""
        pieces: List[Piece] = []
        run_bytes = RUN_RECORDS * RECORD_SIZE
        self.consumed = tally.base // RECORD_SIZE
        for offset in range(0, len(chunk), run_bytes):
            self._feed_run(chunk[offset:offset + run_bytes], pieces, tally, offset // RECORD_SIZE)
        return pieces

    def _feed_run(self, run: bytes, pieces: List[Piece], tally: Tally, at: int) -> None:
        """``run``: records from index ``at`` of the chunk."""
        size, count = RECORD_SIZE, len(run) // RECORD_SIZE
        first = 0
        slow = []
        while first < count and self.pairing.waiting:        # close what is open, usually one record
            slow += self._records(run[first * size:(first + 1) * size], tally, at + first)
            first += 1
        if slow:
            pieces.append((False, slow))
        pairs = (count - first) // 2
        body = run[first * size:(first + 2 * pairs) * size]
        whole = self._pair_whole(body) if pairs and self._alternates(body) else None
        if whole is not None:
            pieces.append(whole)
            first += 2 * pairs
        if first < count:
            pieces.append((False, self._records(run[first * size:], tally, at + first)))

    def _alternates(self, body: bytes) -> bool:
        """True when ``body`` is start, end, start, end… of the same task two by two, counter unbroken."""
        count = len(body) // RECORD_SIZE
        flags = body[0::RECORD_SIZE]
        if flags.translate(_LOG_TYPE) != _ALTERNATING[:count]:
            return False
        counters = flags.translate(_COUNTER)
        first = counters[0] if self.last_counter is None else (self.last_counter + 1) & 15
        if counters != _ROLLING[first:first + count]:
            return False
        for offset, mask in ((6, 0xFF), (7, 0xFF), (16, 0xFF), (17, STREAM_MASK >> 8)):
            column = byte_column(body, RECORD_SIZE, offset, mask)
            if column[0::2] != column[1::2]:
                return False
        return True

    def _pair_whole(self, body: bytes) -> Optional[Piece]:
        """The tasks of ``body`` (``_alternates``), or None when a start is not a counter (0: perhaps a record
        of zeros; below it: 2^63 or more), for the record-by-record path to tell."""
        # all pairs in one flat tuple (one struct for the run: no tuple per pair), columns by slicing
        flat = record_struct(PAIR_FORMAT, len(body) // (2 * RECORD_SIZE)).unpack(body)
        types, tasks, starts, fields, ends = (flat[i::5] for i in range(5))
        if min(starts) <= 0:
            return None
        streams = list(map(and_, fields, itertools.repeat(STREAM_MASK)))
        keys = map(or_, map(lshift, streams, itertools.repeat(16)), tasks)
        if self.apart is not None and self.apart in types:      # (C speed: APART * (type == apart))
            keys = map(or_, keys, map(mul, map(eq, types, itertools.repeat(self.apart)), itertools.repeat(APART)))
        exec_n = self.executions.take(list(keys))
        self.last_counter = body[-RECORD_SIZE] >> 4
        base = self.consumed
        self.consumed += len(body) // RECORD_SIZE
        if any(map(gt, starts, ends)):      # (damage: rare) the tasks that end before they start lose their end
            rows = list(zip(streams, tasks, types, starts, ends, exec_n))
            for i, (_stream, _task, _type, start, end, _n) in enumerate(rows):
                if end < start:
                    self._backwards(base + 2 * i + 1)
                    rows[i] = rows[i][:4] + (None,) + rows[i][5:]
            return False, rows
        return True, (streams, tasks, types, starts, ends, exec_n)

    def _backwards(self, index: int) -> None:
        """An end record whose counter is below its start's: no duration can be taken from the pair."""
        self.backwards += 1
        if self.first_backwards is None:
            self.first_backwards = index

    def _records(self, data: bytes, tally: Tally, at: int) -> list:
        """Record-by-record pairing of ``data`` (records from index ``at`` of the chunk): rows of finished
        tasks."""
        finished = []
        append = finished.append
        pairing = self.pairing
        pending = pairing.waiting               # (its start and end inlined: the loop's cost is per record)
        executions = self.executions
        last = self.last_counter
        expected = None if last is None else (last + 1) & 15
        base = self.consumed
        self.consumed += len(data) // RECORD_SIZE
        for index, (flags, task_type, task_id, syscnt, stream_field) in enumerate(LAYOUT.iter_unpack(data)):
            if syscnt <= 0 and _impossible(data, index, syscnt, tally, at):
                continue
            if flags >> 4 != expected and expected is not None:
                self.gap_count += 1
                if len(self.gaps) < GAPS_NAMED:
                    self.gaps.append((stream_field & STREAM_MASK, task_id, expected, flags >> 4, base + index))
            expected = ((flags >> 4) + 1) & 15
            log_type = flags & 7
            key = (stream_field & STREAM_MASK) << 16 | task_id
            if log_type == LOG_END:
                started = pending.pop(key, None)
                n = executions.next(key | APART if task_type == self.apart else key)
                if started is None:
                    pairing.alone(base + index)
                    append((key >> 16, task_id, task_type, None, syscnt, n))
                elif syscnt < started[0]:
                    self._backwards(base + index)
                    append((key >> 16, task_id, started[1], started[0], None, n))
                else:
                    append((key >> 16, task_id, started[1], started[0], syscnt, n))
            elif log_type == LOG_START:
                earlier = pending.get(key)
                if earlier is not None:  # previous start never ended
                    pairing.never_ended(earlier[2])
                    append((key >> 16, task_id, earlier[1], earlier[0], None,
                            executions.next(key | APART if earlier[1] == self.apart else key)))
                pending[key] = (syscnt, task_type, base + index)
            else:
                self.other_logs += 1
        if expected is not None:
            self.last_counter = (expected - 1) & 15
        return finished

    def warnings(self, name: str, where=None):
        """One line per kind of problem met in stream ``name`` (for the import's notices); ``where(offset)``
        names the file and offset of a stream byte (the first counter gap)."""
        lines = []
        if self.gaps:
            shown = ", ".join(f"stream {s} task {t} (counter {found}, expected {want})"
                              for s, t, want, found, _ in self.gaps)
            more = f" and {self.gap_count - len(self.gaps)} more" if self.gap_count > len(self.gaps) else ""
            at = where(self.gaps[0][4] * RECORD_SIZE) if where else name
            lines.append(f"{at}: rolling counter gap, HWTS records lost before {shown}{more}")
        def at(index) -> str:
            return where(index * RECORD_SIZE) if where and index is not None else name

        pairing = self.pairing
        if pairing.ends_alone:
            lines.append(f"{at(pairing.first_alone)}: {pairing.ends_alone} task end(s) without a start, the first "
                         "here (no start time invented)")
        if pairing.unended:
            lines.append(f"{at(pairing.first_unended)}: {pairing.unended} task start(s) never ended, the first here "
                         "(no end time invented)")
        if self.backwards:
            lines.append(f"{at(self.first_backwards)}: {self.backwards} task end(s) before their start (a counter "
                         "below the start's), the first here: those ends are dropped, the tasks kept with their start "
                         "only")
        return lines

    def finish(self):
        """Starts still open at the end of the stream, in start order."""
        left = []
        for key, (syscnt, task_type, _) in sorted(self.pairing.finish(), key=lambda kv: kv[1][0]):
            left.append((key >> 16, key & 0xFFFF, task_type, syscnt, None,
                         self.executions.next(key | APART if task_type == self.apart else key)))
        return left


def _impossible(data: bytes, index: int, syscnt: int, tally: Tally, at: int) -> bool:
    """Whether record ``index`` of ``data`` cannot be real (its syscnt is 0 or below), and is then skipped:
    one of all zero bytes, or one whose counter is 2^63 or more (read signed: only damage writes one)."""
    if syscnt < 0:
        tally.skip("time stamp of 2^63 or more", 1, at + index)
        return True
    if data[index * RECORD_SIZE:(index + 1) * RECORD_SIZE] == _ZERO_RECORD:
        tally.skip(zeros.REASON, 1, at + index)
        return True
    return False


class HwtsDecoder(Decoder):
    """Pairs a stream's start/end records (``Pairer``) and turns the finished tasks into store rows with
    ``to_rows(piece) -> [Rows]``, which each layout supplies (a JOB places tasks into iterations and layers).
    Log types other than start and end are skipped by their size (counted, not warned)."""

    kind = "hwts"
    label = "HWTS"
    record_size = RECORD_SIZE
    looks_aligned = staticmethod(looks_aligned)

    def __init__(self, to_rows, apart: Optional[int] = None):
        self.pairer = Pairer(apart)
        self.to_rows = to_rows
        self.name = ""

    def decode(self, chunk: bytes, tally: Tally):
        before = self.pairer.other_logs
        out = [rows for piece in self.pairer.feed(chunk, tally) for rows in self.to_rows(piece)]
        tally.skip("other log type", self.pairer.other_logs - before, warn=False)
        return out

    def finish(self, tally: Tally):
        return self.to_rows((False, self.pairer.finish()))

    def messages(self, where):
        name = where(0).split(" offset ")[0]
        return self.pairer.warnings(name, where)

    @property
    def unpaired(self) -> int:
        return self.pairer.pairing.unpaired + self.pairer.backwards
