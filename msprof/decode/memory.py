"""Memory records (docs/prof-format.md, "Memory"):

* ``npu_mem.data.N.slice_k`` (device) — 32 B ``=IIQQQ``: event (0 app, 1 device), DDR and HBM bytes, and the
  sample time, µs, in field 0 (a 32-bit word) in collection version 1.0 and field 2 in 2.0 (info.json
  ``version``): the decoder keeps both words and the report takes the version's;
* ``npu_module_mem.data.N.slice_k`` (device) — 24 B ``=IIQQ``: module id, reserved, time stamp (host clock),
  total reserved bytes (a size of 2^63 or more is read as -1: "reversed", as the reference reads it);
* ``(un)aging.additional.task_memory_info`` (host) — 256 B, level 10000: an op's allocation (size > 0) or
  free (size < 0): address, size, op (node hash), total allocated and reserved after it, device id and type.

A record of all zeros cannot be a sample: skipped and counted.
"""
import struct

from msprof.decode.api_event import LEVEL_NODE
from msprof.decode.base import Decoder, Rows, Tally
from msprof.decode.blocks import RecordLayout
from msprof.decode.compact import CompactFamily

NPU_MEM = struct.Struct("<IIQQQ")
MODULE_MEM = struct.Struct("<IIQQ")
NPU_MEM_COLUMNS = ("ts_v1", "event", "ts_v2", "ddr", "hbm")
MODULE_MEM_COLUMNS = ("module_id", "syscnt", "total_size")
MAX_SIZE = (1 << 63) - 1

TASK_MEMORY = CompactFamily("task_memory_info", LEVEL_NODE, RecordLayout(
    "task_memory", "8xI4xqqqqqqII184x",
    ["thread", "ts", "addr", "size", "node_hash", "total_allocated", "total_reserved", "device_id",
     "device_type"]), False)
assert TASK_MEMORY.layout.size == 256


class _Samples(Decoder):
    """Fixed-size samples without a magic: every record is taken but one of all zeros."""

    record = NPU_MEM
    table = ""
    columns = ()

    def decode(self, chunk: bytes, tally: Tally):
        rows = []
        zero = bytes(self.record_size)
        for index, fields in enumerate(self.record.iter_unpack(chunk)):
            if chunk[index * self.record_size:(index + 1) * self.record_size] == zero:
                tally.skip("all zeros", 1, index)
                continue
            rows.append(self.row(fields))
        return [Rows(self.table, self.columns, rows)]

    def row(self, fields: tuple) -> tuple:
        return fields


class NpuMemDecoder(_Samples):
    kind = label = "npu_mem"
    record_size = NPU_MEM.size
    record = NPU_MEM
    table, columns = "npu_mem", NPU_MEM_COLUMNS

    def row(self, fields: tuple) -> tuple:
        ts_v1, event, ts_v2, ddr, hbm = fields
        return ts_v1, event, min(ts_v2, MAX_SIZE), min(ddr, MAX_SIZE), min(hbm, MAX_SIZE)


class ModuleMemDecoder(_Samples):
    kind = label = "npu_module_mem"
    record_size = MODULE_MEM.size
    record = MODULE_MEM
    table, columns = "npu_module_mem", MODULE_MEM_COLUMNS

    def row(self, fields: tuple) -> tuple:
        module, _reserved, syscnt, size = fields
        return module, min(syscnt, MAX_SIZE), -1 if size > MAX_SIZE else size
