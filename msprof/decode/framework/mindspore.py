"""MindSpore's FRAMEWORK files (framework.md §3) into the tables of ``msprof.layouts.framework.schema``:

* ``op_range_<rank>`` (``mindspore.op_range`` in newer releases): TLV records, struct ``<5Qi3Hb3?`` (thread,
  flow id, step, start, end; process id; module, event and stage indexes; level; graph data, stage, stack
  flags), inner fields 13 name, 14 full name, 15 module graph, 16 event graph, 17 custom info. Times are
  counter values, kept as written.
* ``cpu_ms_memory_record_<rank>.txt``: a header line, then ``time (ns), total allocated, total reserved, total
  active (bytes)`` per line; a line that does not read as four integers is skipped and counted.
"""
import struct
from msprof.decode.base import LineDecoder, Rows, Tally
from msprof.decode.framework.stream import TlvDecoder
from msprof.decode.framework.torch import END_BEFORE_START

MS_FIELDS = (13, 14, 15, 16, 17)
MS_COLUMNS = ("seq", "tid", "flow_id", "step", "start", "end", "pid", "module", "event", "stage", "level",
              "is_graph_data", "is_stage", "is_stack", "name", "full_name", "module_graph", "event_graph",
              "custom_info")
INT64 = (-(1 << 63), (1 << 63) - 1)


class MsOpRangeDecoder(TlvDecoder):
    kind, label = "ms_op_range", "MindSpore op_range"
    fixed = struct.Struct("<5qi3Hb3?")        # 54 B
    field_types = MS_FIELDS

    def row(self, seq: int, values: tuple, fields: tuple, tally: Tally, index: int):
        if values[4] < values[3]:
            tally.skip(END_BEFORE_START, 1, index)
            return None
        return (seq,) + values[:10] + tuple(int(v) for v in values[10:]) + fields

    def output(self, rows: list) -> list:
        return [Rows("ms_op", MS_COLUMNS, rows)]


class MsMemoryDecoder(LineDecoder):
    kind, label = "ms_memory", "cpu_ms_memory_record"

    def __init__(self):
        self.line = 0

    def decode(self, lines, tally: Tally):
        rows = []
        for index, line in enumerate(lines):
            self.line += 1
            if not line.strip() or (self.line == 1 and not line[:1].isdigit()):
                continue            # (the header)
            values = _ints(line)
            if values is None:
                tally.skip("not four integers", 1, index)
                continue
            rows.append((self.line - 1,) + values)
        return [Rows("ms_memory", ("seq", "time", "allocated", "reserved", "active"), rows)]


def _ints(line: str):
    parts = line.split(",")
    if len(parts) != 4:
        return None
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        return None
    return values if all(INT64[0] <= v <= INT64[1] for v in values) else None
