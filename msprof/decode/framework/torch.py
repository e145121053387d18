"""torch_npu's FRAMEWORK files (framework.md §2), little-endian, into the tables of
``msprof.layouts.framework.schema``. Times are kept as written (ns of CLOCK_MONOTONIC_RAW, or counter values
when profiler_info's ``syscnt_enable``); 64-bit unsigned fields are kept as the signed value with the same bits
(the package's rule). A record whose times cannot be real (an end before its start), whose fixed part is all
zeros, or whose op mark names no category of the format, is skipped and counted.
"""
import struct
from typing import List

from msprof.decode.base import Rows, Tally
from msprof.decode.framework.stream import FixedDecoder, TlvDecoder

# inner field types of torch.op_range: name, input dtypes, input shapes, input tensors, input tensor lists,
# input scalars, call stack, module hierarchy, extra args (flops)
OP_FIELDS = (2, 3, 4, 5, 6, 7, 8, 9, 10)
OP_COLUMNS = ("seq", "start", "end", "sequence_number", "pid", "tid", "end_tid", "fwd_tid", "scope", "is_async",
              "name", "input_dtypes", "input_shapes", "input_tensors", "input_tensor_lists", "input_scalars",
              "call_stack", "module_hierarchy", "extra_args")
MARK_CATEGORIES = (0, 1, 2, 3)     # enqueue start, enqueue end, dequeue start, dequeue end
MEMORY_COLUMNS = ("seq", "ptr", "time", "size", "allocated", "reserved", "active", "stream_ptr", "device_type",
                  "device_index", "component", "data_type", "allocator", "tid", "pid")
ZERO_TIMES = "all-zero record"
END_BEFORE_START = "an end before its start"


class OpRangeDecoder(TlvDecoder):
    kind, label = "torch_op_range", "torch.op_range"
    fixed = struct.Struct("<3q4qB?")          # 58 B: start, end, sequence number; pid, tids ×3; scope; async
    field_types = OP_FIELDS

    def row(self, seq: int, values: tuple, fields: tuple, tally: Tally, index: int):
        start, end = values[0], values[1]
        if not any(values):
            tally.skip(ZERO_TIMES, 1, index)
            return None
        if end < start:
            tally.skip(END_BEFORE_START, 1, index)
            return None
        return (seq,) + values[:8] + (int(values[8]),) + fields

    def output(self, rows: list) -> list:
        return [Rows("torch_op", OP_COLUMNS, rows)]


class OpMarkDecoder(TlvDecoder):
    kind, label = "torch_op_mark", "torch.op_mark"
    fixed = struct.Struct("<q4q")             # 40 B: time; category, correlation id, tid, pid
    field_types = (1,)                        # name

    def row(self, seq: int, values: tuple, fields: tuple, tally: Tally, index: int):
        if values[1] not in MARK_CATEGORIES:
            tally.skip("a category the format does not have", 1, index)
            return None
        return (seq,) + values + fields

    def rows(self, seqs, values, fields, tally: Tally, indexes) -> list:
        """(a comprehension: no call a record; a chunk with a category the format lacks goes record by record)"""
        values, indexes = list(values), list(indexes)
        if all(v[1] in MARK_CATEGORIES for v in values):
            return list(map(_joined, seqs, values, fields))
        return super().rows(seqs, values, fields, tally, indexes)

    def output(self, rows: list) -> list:
        return [Rows("op_mark", ("seq", "time", "category", "corr_id", "tid", "pid", "name"), rows)]


def _joined(seq: int, values: tuple, fields: tuple) -> tuple:
    return (seq,) + values + fields


class MemoryDecoder(TlvDecoder):
    kind, label = "torch_memory", "torch.memory_usage"
    fixed = struct.Struct("<7q2b3B2q")        # 77 B (field order: MEMORY_COLUMNS after seq)

    def row(self, seq: int, values: tuple, fields: tuple, tally: Tally, index: int):
        if not any(values):
            tally.skip(ZERO_TIMES, 1, index)
            return None
        return (seq,) + values

    def output(self, rows: list) -> list:
        return [Rows("torch_memory", MEMORY_COLUMNS, rows)]


class KeyTextDecoder(TlvDecoder):
    """torch.python_tracer_hash (key → function text) and torch.param_tensor_info (key → module and
    optimizer parameter text)."""

    fixed = struct.Struct("<q")
    intern = False

    def __init__(self, table: str, kind: str, label: str, columns: tuple, field_types: tuple, strings=None):
        super().__init__(strings)
        self.table, self.kind, self.label = table, kind, label
        self.columns, self.field_types = columns, field_types

    def row(self, seq: int, values: tuple, fields: tuple, tally: Tally, index: int):
        return (seq, values[0]) + fields

    def output(self, rows: list) -> list:
        return [Rows(self.table, self.columns, rows)]


def python_hash_decoder(strings=None) -> KeyTextDecoder:
    return KeyTextDecoder("py_name", "torch_python_hash", "torch.python_tracer_hash", ("seq", "hash_key", "text"),
                          (1,), strings)


def param_tensor_decoder(strings=None) -> KeyTextDecoder:
    return KeyTextDecoder("param_tensor", "torch_param_tensor", "torch.param_tensor_info",
                          ("seq", "hash_key", "module_params", "optimizer_params"), (1, 2), strings)


class GcDecoder(FixedDecoder):
    kind, label = "torch_gc", "torch.gc_record"
    fixed = struct.Struct("<3q")              # 24 B: pid, start, end

    def rows(self, values: List[tuple], tally: Tally, base: int) -> list:
        first = self.records - len(values)
        out = []
        for n, (pid, start, end) in enumerate(values):
            if end < start:
                tally.skip(END_BEFORE_START, 1, base + n * self.fixed.size)
            elif pid or start or end:
                out.append((first + n, pid, start, end))
            else:
                tally.skip(ZERO_TIMES, 1, base + n * self.fixed.size)
        return out

    def output(self, rows: list) -> list:
        return [Rows("gc_record", ("seq", "pid", "start", "end"), rows)]


class PythonCallDecoder(FixedDecoder):
    kind, label = "torch_python_func", "torch.python_tracer_func"
    fixed = struct.Struct("<4qB")             # 33 B: time, tid, pid, hash key; trace tag

    def rows(self, values: List[tuple], tally: Tally, base: int) -> list:
        first = self.records - len(values)
        return [(first + n,) + v for n, v in enumerate(values)]

    def output(self, rows: list) -> list:
        return [Rows("py_call", ("seq", "time", "tid", "pid", "hash_key", "tag"), rows)]
