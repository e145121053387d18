"""STARS AI Core PMU, ``ffts_profile.data.N.slice_k`` — 128-byte records (docs/prof-format.md, "STARS AI Core
PMU"), platform 5 and later.

The low 6 bits of the first half-word say what a record is: 40 a context record (one per executed AI Core,
AI Vector Core or MIX task: its total cycles, 8 counters in the slot order of sample.json's events, and its
start and end counters), 41 a block record (one per block of a MIX task's second core type; with sample.json's
taskBlock on, of its first core type too). Anything else is another STARS log, skipped by its size and
counted. Records that cannot be real are skipped and counted: a context record whose overflow bit is set (its
cycle count is not valid: the reference drops it too) and one that ends before it starts.

Stream and task ids are read as the STARS task logs read them (msprof.decode.stars.stars_ids). The subtask
id is a context id only in an FFTS+ record (FFTS type 4); any other record's is NULL (the reference's default
context). Context records are numbered per (stream, task, context) in file order (``exec_n``): the n-th is
the n-th run of that context, which is how the reference pairs them with the task list. The block records of
MIX tasks (FFTS+, subtask type 6 or 7) are numbered per (stream, task, subtask) in file order (``block_n``):
the report takes a run's blocks as a range of these numbers.

A chunk is unpacked with one struct and read as columns (msprof.decode.blocks): at 1M tasks a statement per
record would cost more than the rest of the import of this family.
"""
from collections import deque
from itertools import compress, repeat
from operator import and_, getitem, lshift, lt, or_
from typing import List, Sequence

from msprof.decode.base import Decoder, Rows, Tally
from msprof.decode.blocks import byte_column, record_struct
from msprof.decode.occurrences import Occurrences
from msprof.decode.stars import stars_ids

RECORD_SIZE = 128
CONTEXT, BLOCK = 40, 41
# The fields both records have at the same place, unpacked a chunk at a time: stream @4, task @6, subtask id
# @18, a block record's sub-block @28 and block @30, total cycles @32, the 8 counters @48, start @112 and end
# @120. The subtask type (byte 16), the overflow bit (bit 10 of the half-word @16), the FFTS type (the top 3
# bits of byte 21) and a block record's core (byte 20: bit 0 the type, bits 1-7 the id) are byte columns.
RECORD = "4xHH10xH2x6xHHQ8x10Q"
WIDTH = 16
STREAM, TASK, SUBTASK, SUB_BLOCK, BLOCK_ID, CYCLES = range(6)
COUNTERS = range(6, 14)
START, END = 14, 15
OVERFLOW = 0x04             # (bit 10 of the half-word @16: bit 2 of byte 17)
FFTS_PLUS = 4
MIX_SUBTASKS = (6, 7)       # MIX_AIC, MIX_AIV
NO_CONTEXT = 0xFFFF         # (the key of a record without a context: FFTS+ context ids are small)
# (the reference masks the subtask type with the decimal number 11111111, a typo for 0xFF: every real type
# (0..12) reads the same either way)
_FUNC = bytes(b & 0x3F for b in range(256))
_FFTS = bytes(b >> 5 for b in range(256))
_CORE_TYPE = bytes(b & 1 for b in range(256))
_PLUS = bytes(int(b == FFTS_PLUS) for b in range(256))
_MIX = bytes(int(b in MIX_SUBTASKS) for b in range(256))
_CORE_ID = bytes(b >> 1 for b in range(256))

CONTEXT_COLUMNS = ("stream_id", "task_id", "subtask_id", "subtask_type", "ffts_type", "total_cycles",
                   "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "start_syscnt", "end_syscnt", "exec_n")
BLOCK_COLUMNS = ("stream_id", "task_id", "subtask_id", "subtask_type", "ffts_type", "core_type", "core_id",
                 "block_id", "sub_block_id", "total_cycles", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7",
                 "start_syscnt", "end_syscnt", "block_n")


class FftsPmuDecoder(Decoder):
    """Rows of ``ffts_pmu`` (context records) and ``ffts_block_pmu`` (block records)."""

    kind = "ffts_pmu"
    label = "ffts_profile"
    record_size = RECORD_SIZE

    def __init__(self):
        self.executions = Occurrences()
        self.block_ranks = Occurrences()

    def decode(self, chunk: bytes, tally: Tally) -> List[Rows]:
        count = len(chunk) // RECORD_SIZE
        funcs = byte_column(chunk, RECORD_SIZE, 0).translate(_FUNC)
        values = record_struct(RECORD, count).unpack(chunk) if count else ()
        is_context, is_block = _flags(funcs, CONTEXT), _flags(funcs, BLOCK)
        others = count - sum(is_context) - sum(is_block)
        if others:
            tally.skip("other STARS log", others, _first_other(funcs), warn=False)
        columns = [*_ids(chunk, values)] + [values[at::WIDTH] for at in range(2, WIDTH)]
        sub_types = byte_column(chunk, RECORD_SIZE, 16)
        ffts = byte_column(chunk, RECORD_SIZE, 21).translate(_FFTS)
        contexts = self._contexts(chunk, columns, sub_types, ffts, is_context, tally)
        blocks = self._blocks(chunk, columns, sub_types, ffts, is_block, tally)
        return [Rows("ffts_pmu", CONTEXT_COLUMNS, contexts), Rows("ffts_block_pmu", BLOCK_COLUMNS, blocks)]

    def _contexts(self, chunk: bytes, columns: list, sub_types: bytes, ffts: bytes, flags: list,
                  tally: Tally) -> list:
        """The context records' rows, numbered; those that overflowed or end before they start skipped."""
        overflow = list(byte_column(chunk, RECORD_SIZE, 17, OVERFLOW))
        if any(compress(overflow, flags)):
            _skip(tally, "counter overflow (cycle count not valid)", flags, overflow)
            flags = bytes(f and not o for f, o in zip(flags, overflow))
        flags = _ended(tally, columns, flags)
        if not any(flags):
            return []
        kept = [list(compress(column, flags)) for column in columns]
        types, kinds = list(compress(sub_types, flags)), list(compress(ffts, flags))
        plus = bytes(kinds).translate(_PLUS)
        contexts = _pick(plus, kept[SUBTASK], None)
        keys = _keys(kept[STREAM], kept[TASK], _pick(plus, kept[SUBTASK], NO_CONTEXT))
        return list(zip(kept[STREAM], kept[TASK], contexts, types, kinds, kept[CYCLES],
                        *(kept[at] for at in COUNTERS), kept[START], kept[END], self.executions.take(keys)))

    def _blocks(self, chunk: bytes, columns: list, sub_types: bytes, ffts: bytes, flags: list,
                tally: Tally) -> list:
        """The block records' rows, those of MIX tasks ranked; those that end before they start skipped."""
        flags = _ended(tally, columns, flags)
        if not any(flags):
            return []
        kept = [list(compress(column, flags)) for column in columns]
        types, kinds = list(compress(sub_types, flags)), list(compress(ffts, flags))
        cores = bytes(compress(byte_column(chunk, RECORD_SIZE, 20), flags))
        mix = bytes(map(and_, bytes(kinds).translate(_PLUS), bytes(types).translate(_MIX)))
        keys = _keys(list(compress(kept[STREAM], mix)), list(compress(kept[TASK], mix)),
                     list(compress(kept[SUBTASK], mix)))
        block_n = [None] * len(mix)
        deque(map(block_n.__setitem__, compress(range(len(mix)), mix), self.block_ranks.take(keys)), maxlen=0)
        return list(zip(kept[STREAM], kept[TASK], kept[SUBTASK], types, kinds, cores.translate(_CORE_TYPE),
                        cores.translate(_CORE_ID), kept[BLOCK_ID], kept[SUB_BLOCK], kept[CYCLES],
                        *(kept[at] for at in COUNTERS), kept[START], kept[END], block_n))


def _flags(funcs: bytes, func: int) -> bytes:
    """1 for each record of that func type, else 0."""
    return funcs.translate(bytes(int(b == func) for b in range(256)))


def _pick(flags: bytes, values: list, other) -> list:
    """Each value where its flag is 1, else ``other`` (by indexing pairs: no Python statement per value)."""
    return list(map(getitem, zip(repeat(other), values), flags))


def _first_other(funcs: bytes) -> int:
    return next(i for i, f in enumerate(funcs) if f not in (CONTEXT, BLOCK))


def _ids(chunk: bytes, values: tuple) -> tuple:
    """The stream and task id columns, read as the STARS task logs read them (only a stream field of 2048 or
    more needs reading record by record)."""
    streams, tasks = values[STREAM::WIDTH], values[TASK::WIDTH]
    if not any(byte_column(chunk, RECORD_SIZE, 5, 0xF8)):
        return streams, tasks
    pairs = list(map(stars_ids, streams, tasks))
    return [s for s, _t in pairs], [t for _s, t in pairs]


def _ended(tally: Tally, columns: list, flags: list) -> list:
    """The flags less the records that end before they start (skipped and counted)."""
    early = list(map(lt, columns[END], columns[START]))
    if not any(compress(early, flags)):
        return flags
    _skip(tally, "end before start", flags, early)
    return bytes(f and not e for f, e in zip(flags, early))


def _skip(tally: Tally, reason: str, flags: Sequence[bool], bad: Sequence) -> None:
    hits = [i for i, (f, b) in enumerate(zip(flags, bad)) if f and b]
    tally.skip(reason, len(hits), hits[0])


def _keys(streams: list, tasks: list, ids: list) -> List[int]:
    """stream << 32 | task << 16 | id of each record (msprof.decode.occurrences' keys)."""
    return list(map(or_, map(or_, map(lshift, streams, repeat(32)), map(lshift, tasks, repeat(16))), ids))
