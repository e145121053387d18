"""AI CPU records of a device, ``aicpu.data.N.slice_k`` — 256-byte additional records (magic 0x5A5A, level
6000) whose struct type (bytes 4–8) says what follows (docs/prof-format.md, "AI CPU"):

* 0, an AI CPU task (``=HHIIIQHHIQQQQQQQIIQQQQIIIHBB14Q``): stream and task ids, start and end counters, the
  kernel's compute start, memory-copy start and end (µs of the AI CPU's clock), submit and after-run
  counters, dispatch time (µs);
* 1, a data-preprocessing event (``=HHIIIQ16s64sQQ2Q15Q``): action and source (NUL-terminated texts), the
  cached buffer size; its time is the header's time stamp (host ns).

Other struct types (helper model-with-queue marks, MindSpore queue info, KFC and HCCL records of AI CPU
communication, …) are skipped by their size and counted, as are records with another magic or level, and a
task record that ends before it starts.
"""
import struct

from msprof.decode.api_event import MAGIC, looks_aligned
from msprof.decode.base import Decoder, Rows, Tally
from msprof.decode.stars import stars_ids

RECORD_SIZE = 256
LEVEL_AICPU = 6000
NODE, DP = 0, 1
HEAD = struct.Struct("<HHI")
NODE_RECORD = struct.Struct("<HHIIIQHHIQQQQQQQIIQQQQIIIHBB14Q")
DP_RECORD = struct.Struct("<HHIIIQ16s64sQQ2Q15Q")
NODE_COLUMNS = ("stream_id", "task_id", "start_syscnt", "end_syscnt", "compute_start_us", "memcpy_start_us",
                "memcpy_end_us", "submit_syscnt", "after_run_syscnt", "dispatch_us")
DP_COLUMNS = ("ts", "action", "source", "buffer_size")
assert NODE_RECORD.size == DP_RECORD.size == RECORD_SIZE


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "ignore")


class AicpuDecoder(Decoder):
    """Rows of ``aicpu_task`` (struct type 0) and ``aicpu_dp`` (struct type 1)."""

    kind = "aicpu"
    label = "aicpu"
    record_size = RECORD_SIZE
    looks_aligned = staticmethod(looks_aligned)

    def decode(self, chunk: bytes, tally: Tally):
        tasks, events = [], []
        for index in range(len(chunk) // RECORD_SIZE):
            offset = index * RECORD_SIZE
            magic, level, kind = HEAD.unpack_from(chunk, offset)
            if magic != MAGIC or level != LEVEL_AICPU:
                tally.skip("bad magic or level", 1, index)
            elif kind == NODE:
                fields = NODE_RECORD.unpack_from(chunk, offset)
                start, end = fields[10], fields[15]
                if end < start:
                    tally.skip("end before start", 1, index)
                    continue
                stream_id, task_id = stars_ids(fields[6], fields[7])
                tasks.append((stream_id, task_id, start, end, fields[11], fields[12], fields[13], fields[18],
                              fields[21], fields[23]))
            elif kind == DP:
                fields = DP_RECORD.unpack_from(chunk, offset)
                events.append((fields[5], _text(fields[6]), _text(fields[7]), fields[9]))
            else:
                tally.skip("other aicpu record type", 1, index, warn=False)
        return [Rows("aicpu_task", NODE_COLUMNS, tasks), Rows("aicpu_dp", DP_COLUMNS, events)]
