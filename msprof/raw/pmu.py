"""AA Core per-task PMU, ``AAcore.data.*`` — 128 B ``=BBHHHIIQ10Q6I`` (raw-format.md §5.5)."""
import struct

RECORD_SIZE = 128
COUNTERS = 10
MAGIC = 0x6BD3
PMU_LOG = 4
# flags, core id, magic, task id, stream id, total cycles, 10 counters (reserved skipped)
LAYOUT = struct.Struct("<BBHxxHxxxxIq10q24x")


def looks_aligned(record: bytes) -> bool:
    return record[2:4] == b"\xd3\x6b" and record[0] & 7 == PMU_LOG


class Numberer:
    """Adds exec_n (the n-th record of this (stream, task), from 0) to each valid record."""

    def __init__(self):
        self.executions = {}
        self.skipped = 0

    def feed(self, chunk: bytes):
        rows = []
        append = rows.append
        executions = self.executions
        for record in LAYOUT.iter_unpack(chunk):
            flags, core_id, magic, task_id, stream_id = record[:5]
            if magic != MAGIC or flags & 7 != PMU_LOG:
                self.skipped += 1
                continue
            key = (stream_id, task_id)
            n = executions.get(key, 0)
            executions[key] = n + 1
            append((core_id, stream_id, task_id, n) + record[5:])
        return rows
