"""AA Core per-task PMU, ``AAcore.data.*`` — 128 B ``=BBHHHIIQ10Q6I`` (raw-format.md §5.5)."""
import itertools
from collections import defaultdict
from typing import List

from msprof.decode.blocks import Layout, valid_part

RECORD_SIZE = 128
COUNTERS = 10
MAGIC = 0x6BD3
PMU_LOG = 4
# core id, task id, stream id, total cycles, 10 counters (flags and magic are checked on the raw bytes;
# reserved fields skipped); exec_n is computed
LAYOUT = Layout("pmu", "xBxxxxHxxxxIq10q24x",
                ["core_id", "task_id", "stream_id", "total_cycles"] + [f"c{i}" for i in range(COUNTERS)],
                extras=["exec_n"])
CHECKS = {0: (0x07, PMU_LOG), 2: (0xFF, MAGIC & 0xFF), 3: (0xFF, MAGIC >> 8)}
assert LAYOUT.size == RECORD_SIZE


def looks_aligned(record: bytes) -> bool:
    return record[2:4] == b"\xd3\x6b" and record[0] & 7 == PMU_LOG


class Numberer:
    """Decodes the valid records of a stream and numbers the executions of each (stream, task) from 0
    (``exec_n``: the n-th record of a task is matched to its n-th HWTS execution)."""

    def __init__(self):
        self.executions = defaultdict(itertools.count)   # (stream, task) → its next exec_n
        self.skipped = 0

    def feed(self, chunk: bytes) -> List[tuple]:
        """Blocks of LAYOUT (record values, then exec_n of each record) of a chunk's valid records."""
        chunk, skipped = valid_part(chunk, RECORD_SIZE, CHECKS)
        self.skipped += skipped
        width, executions = LAYOUT.width, self.executions.__getitem__
        return [block + tuple(map(next, map(executions, zip(block[2::width], block[1::width]))))
                for block in LAYOUT.blocks(chunk)]
