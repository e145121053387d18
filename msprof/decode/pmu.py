"""Per-task PMU records, 128 B: SVP ``AAcore.data.*`` (raw-format.md §5.5) and Ascend ``aicore.data.*`` (§6).

Both families are one record per executed task, in execution order; the n-th record of a (stream, task) is
matched to its n-th execution (``exec_n``). They differ only in where the fields sit and in what the format
guarantees: the SVP record documents a magic (0x6BD3 at byte 2) and a log type (4 in the head's low bits),
which are checked; the Ascend record documents neither (the reference analyser reads those bytes as
reserved, and real devices need not set them), so every Ascend record of the right size is accepted.
"""
import itertools
from operator import lshift, or_
from typing import List, Optional

from msprof.decode import zeros
from msprof.decode.base import Blocks, Decoder, Tally
from msprof.decode.blocks import Checks, RecordLayout, bad_records, index_before, valid_part
from msprof.decode.occurrences import Occurrences

RECORD_SIZE = 128
MAGIC = 0x6BD3
PMU_LOG = 4
_ZERO_RECORD = bytes(RECORD_SIZE)


class PmuFormat:
    """Where one family's fields sit: a struct format and the column each unpacked field goes to (core_id,
    task_id, stream_id, total_cycles and the counters c0, c1, ... in slot order), which bytes are checked,
    and the mask of the stream id field."""

    def __init__(self, name: str, record_format: str, fields: List[str], checks: Optional[Checks],
                 stream_mask: int = 0xFFFFFFFF):
        self.name = name
        self.counters = sum(1 for f in fields if f.startswith("c") and f[1:].isdigit())
        self.checks = checks or {}
        self.stream_mask = stream_mask
        self.layout = RecordLayout("pmu", record_format, fields, extras=["exec_n"])
        self.stream_at, self.task_at = fields.index("stream_id"), fields.index("task_id")
        # the cycles and counters: 64-bit unsigned, read signed (SQLite's integers); a value from 2^63 on
        # reads negative
        self.count_at = [i for i, f in enumerate(fields) if f == "total_cycles" or f in _counters(self.counters)]
        self.cycles_at = fields.index("total_cycles")
        self.counters_at = [at for at in self.count_at if at != self.cycles_at]
        assert self.layout.size == RECORD_SIZE, name


def _counters(n: int) -> List[str]:
    return [f"c{i}" for i in range(n)]


# SVP: head, core id, magic, reserved, task id @6, reserved, stream id @12, total cycles @16, 10 counters @24
SVP = PmuFormat("AA Core PMU", "xBxxxxHxxxxIq10q24x", ["core_id", "task_id", "stream_id", "total_cycles"]
                + _counters(10), checks={0: (0x07, PMU_LOG), 2: (0xFF, MAGIC & 0xFF), 3: (0xFF, MAGIC >> 8)})
# Ascend: head, core id, reserved x2, task id @6, reserved x2, total cycles @16, a reserved Q, 8 counters @32,
# stream id @96 (its low 11 bits: stream ids are 11-bit on these chips), reserved tail
ASCEND = PmuFormat("aicore PMU", "xBxxxxHxxxxxxxxq8x8qI28x", ["core_id", "task_id", "total_cycles"]
                   + _counters(8) + ["stream_id"], checks=None, stream_mask=0x7FF)


def svp_looks_aligned(record: bytes) -> bool:
    return record[2:4] == b"\xd3\x6b" and record[0] & 7 == PMU_LOG


class PmuDecoder(Decoder):
    """Decodes the records of one stream and numbers the executions of each (stream, task) from 0."""

    record_size = RECORD_SIZE
    kind = "pmu"

    def __init__(self, fmt: PmuFormat):
        self.fmt = fmt
        self.label = fmt.name
        self.looks_aligned = svp_looks_aligned if fmt.checks else None
        self.executions = Occurrences()   # stream << 16 | task → its executions so far
        self.damaged = 0
        self.first_damaged = 0

    def decode(self, chunk: bytes, tally: Tally) -> List[Blocks]:
        fmt = self.fmt
        bad: List[int] = []
        if fmt.checks:
            bad = bad_records(chunk, RECORD_SIZE, fmt.checks)
            chunk, skipped, first = valid_part(chunk, RECORD_SIZE, fmt.checks, bad)
            tally.skip("bad magic or log type", skipped, first)
        layout = fmt.layout
        width, executions = layout.width, self.executions
        at_stream, at_task = fmt.stream_at, fmt.task_at
        blocks = []
        for n, block in enumerate(layout.blocks(chunk)):
            if fmt.stream_mask != 0xFFFFFFFF:
                block = _masked(block, at_stream, width, fmt.stream_mask)
            low = min(block[fmt.cycles_at::width])
            if low < 0 or any(min(block[at::width]) < 0 for at in fmt.counters_at):
                block = self._without_damaged_counts(block, n * layout.block, tally.base, bad)
            if low <= 0 and not fmt.checks and 0 in block[fmt.cycles_at::width]:
                # (no check has left out the records of zeros: a record whose cycles are 0 may be one)
                block = _without_zeros(block, chunk, n * layout.block, width, tally, fmt.cycles_at)
                if not block:
                    continue
            keys = map(or_, map(lshift, block[at_stream::width], itertools.repeat(16)), block[at_task::width])
            blocks.append(block + tuple(executions.take(list(keys))))
        return [Blocks(layout, blocks)]

    def _without_damaged_counts(self, block: tuple, first: int, base: int, bad: List[int]) -> tuple:
        """A record with a cycle count or counter of 2^63 or more (no task runs for 146 years at 2 GHz: the
        record is damaged) keeps its place (the executions stay paired) but none of its counts: NULL, so its
        task's PMU columns are N/A. Counted and said (at its offset in the stream: ``block`` starts at record
        ``first`` of the chunk at stream offset ``base`` that the records ``bad`` were left out of)."""
        fmt, width = self.fmt, self.fmt.layout.width
        values = list(block)
        for r in range(len(block) // width):
            record = values[r * width:(r + 1) * width]
            if any(record[at] < 0 for at in fmt.count_at):
                if not self.damaged:
                    self.first_damaged = base + index_before(first + r, bad) * RECORD_SIZE
                self.damaged += 1
                for at in fmt.count_at:
                    values[r * width + at] = None
        return tuple(values)

    def messages(self, where) -> List[str]:
        if not self.damaged:
            return []
        return [f"{where(self.first_damaged)}: {self.damaged} {self.label} record(s) with a cycle count or counter"
                " of 2^63 or more (damaged): their tasks' PMU columns are N/A"]


def _without_zeros(block: tuple, chunk: bytes, first: int, width: int, tally: Tally, cycles_at: int) -> tuple:
    """``block`` (records from index ``first`` of ``chunk``) without its records of all zero bytes (skipped and
    counted: no task ran in 0 cycles, and a record of zeros is no record)."""
    kept, gone, first_gone = [], 0, 0
    for r in range(len(block) // width):
        index = first + r
        if block[r * width + cycles_at] == 0 and chunk[index * RECORD_SIZE:(index + 1) * RECORD_SIZE] == _ZERO_RECORD:
            first_gone = first_gone if gone else index
            gone += 1
        else:
            kept.extend(block[r * width:(r + 1) * width])
    tally.skip(zeros.REASON, gone, first_gone)
    return tuple(kept) if gone else block


def _masked(block: tuple, at: int, width: int, mask: int) -> tuple:
    values = list(block)
    values[at::width] = [s & mask for s in values[at::width]]
    return tuple(values)
