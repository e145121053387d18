"""L2 cache per task, ``l2_cache.data.N.slice_k`` — 72 bytes ``=HHHH8Q`` (docs/prof-format.md, "L2 cache"):
task type, stream id, task id, reserved, and 8 counters in the order of sample.json's
``l2CacheTaskProfilingEvents``. The format has no magic; a record of all zeros cannot be a task's and is
skipped and counted.
"""
import struct

from msprof.decode.base import Decoder, Rows, Tally
from msprof.decode.dicts import signed64

RECORD = struct.Struct("<HHHH8Q")
COLUMNS = ("task_type", "stream_id", "task_id") + tuple(f"c{i}" for i in range(8))


class L2CacheDecoder(Decoder):
    kind = label = "l2_cache"
    record_size = RECORD.size

    def decode(self, chunk: bytes, tally: Tally):
        rows = []
        zero = bytes(RECORD.size)
        for index, (task_type, stream, task, _r, *counters) in enumerate(RECORD.iter_unpack(chunk)):
            if chunk[index * RECORD.size:(index + 1) * RECORD.size] == zero:
                tally.skip("all zeros", 1, index)
                continue
            rows.append((task_type, stream, task, *map(signed64, counters)))
        return [Rows("l2_cache", COLUMNS, rows)]
