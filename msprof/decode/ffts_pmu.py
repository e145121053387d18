"""STARS AI Core PMU, ``ffts_profile.data.N.slice_k`` — 128-byte records (docs/prof-format.md, "STARS AI Core
PMU"), platform 5 and later.

The low 6 bits of the first half-word say what a record is: 40 a context record (one per executed AI Core,
AI Vector Core or MIX task: its total cycles, 8 counters in the slot order of sample.json's events, and its
start and end counters), 41 a block record (one per block of a MIX task's second core type). Anything else is
another STARS log, skipped by its size and counted. Records that cannot be real are skipped and counted: a
context record whose overflow bit is set (its cycle count is not valid: the reference drops it too) and one
that ends before it starts.

Stream and task ids are read as the STARS task logs read them (msprof.decode.stars.stars_ids). The subtask
id is a context id only in an FFTS+ record (FFTS type 4); any other record's is NULL (the reference's default
context). Context records are numbered per (stream, task, context) in file order (``exec_n``): the n-th is
the n-th run of that context, which is how the reference pairs them with the task list.
"""
import struct
from typing import List

from msprof.decode.base import Decoder, Rows, Tally
from msprof.decode.occurrences import Occurrences
from msprof.decode.stars import stars_ids

RECORD_SIZE = 128
CONTEXT, BLOCK = 40, 41
# head, magic, stream, task, reserved Q, subtask type and overflow bit, subtask id, FFTS type (top 3 bits),
# reserved H, reserved Q, total cycles, reserved Q, 8 counters, start, end
CONTEXT_RECORD = struct.Struct("<4HQ4HQ12Q")
# head, magic, stream, task, reserved Q, subtask type, subtask id, core (bit 0 type, bits 1-7 id), FFTS type
# (top 3 bits), reserved H and I, sub-block id, block id, total cycles, reserved Q, 8 counters, start, end
BLOCK_RECORD = struct.Struct("<4HQ2HBBHIHH12Q")
OVERFLOW_BIT = 1 << 10
FFTS_PLUS = 4
NO_CONTEXT = 0xFFFF         # (the key of a record without a context: FFTS+ context ids are small)
# (the reference masks the subtask type with the decimal number 11111111, a typo for 0xFF: every real type
# (0..12) reads the same either way)
SUBTASK_TYPE_MASK = 0xFF

CONTEXT_COLUMNS = ("stream_id", "task_id", "subtask_id", "subtask_type", "ffts_type", "total_cycles",
                   "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "start_syscnt", "end_syscnt", "exec_n")
BLOCK_COLUMNS = ("stream_id", "task_id", "subtask_id", "subtask_type", "ffts_type", "core_type", "core_id",
                 "block_id", "sub_block_id", "total_cycles", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7",
                 "start_syscnt", "end_syscnt")
assert CONTEXT_RECORD.size == BLOCK_RECORD.size == RECORD_SIZE


class FftsPmuDecoder(Decoder):
    """Rows of ``ffts_pmu`` (context records) and ``ffts_block_pmu`` (block records)."""

    kind = "ffts_pmu"
    label = "ffts_profile"
    record_size = RECORD_SIZE

    def __init__(self):
        self.executions = Occurrences()

    def decode(self, chunk: bytes, tally: Tally) -> List[Rows]:
        contexts, blocks = [], []
        keys = []
        for index, head in enumerate(chunk[0::RECORD_SIZE]):
            func = head & 0x3F
            offset = index * RECORD_SIZE
            if func == CONTEXT:
                row = self._context(chunk, offset, index, tally)
                if row is not None:
                    contexts.append(row)
                    keys.append(row[0] << 32 | row[1] << 16 | (NO_CONTEXT if row[2] is None else row[2]))
            elif func == BLOCK:
                row = self._block(chunk, offset, index, tally)
                if row is not None:
                    blocks.append(row)
            else:
                tally.skip("other STARS log", 1, index, warn=False)
        numbered = [row + (n,) for row, n in zip(contexts, self.executions.take(keys))] if contexts else []
        return [Rows("ffts_pmu", CONTEXT_COLUMNS, numbered), Rows("ffts_block_pmu", BLOCK_COLUMNS, blocks)]

    @staticmethod
    def _context(chunk: bytes, offset: int, index: int, tally: Tally):
        (_head, _magic, stream, task, _r, sub_head, subtask, ffts, _r2, _r3, cycles, _r4, *counters, start,
         end) = CONTEXT_RECORD.unpack_from(chunk, offset)
        if sub_head & OVERFLOW_BIT:
            tally.skip("counter overflow (cycle count not valid)", 1, index)
            return None
        if end < start:
            tally.skip("end before start", 1, index)
            return None
        stream_id, task_id = stars_ids(stream, task)
        ffts >>= 13
        context = subtask if ffts == FFTS_PLUS else None
        return (stream_id, task_id, context, sub_head & SUBTASK_TYPE_MASK, ffts, cycles, *counters, start, end)

    @staticmethod
    def _block(chunk: bytes, offset: int, index: int, tally: Tally):
        (_head, _magic, stream, task, _r, sub_head, subtask, core, ffts, _r2, _r3, sub_block, block, cycles, _r4,
         *counters, start, end) = BLOCK_RECORD.unpack_from(chunk, offset)
        if end < start:
            tally.skip("end before start", 1, index)
            return None
        stream_id, task_id = stars_ids(stream, task)
        return (stream_id, task_id, subtask, sub_head & SUBTASK_TYPE_MASK, ffts >> 5, core & 1, core >> 1, block,
                sub_block, cycles, *counters, start, end)
