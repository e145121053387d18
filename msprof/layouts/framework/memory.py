"""memory_record.csv (docs/framework-target.md §8; operator_memory.csv: msprof.layouts.framework.opmemory) from
the torch caching allocator's records (``torch_memory``), as torch_npu writes them when the PROF_ holds no CANN
memory data: msprof decodes no GE nor APP memory records, so memory_record has the PTA side only (each PTA row
followed by its ``PTA+GE`` row, which then repeats the PTA totals) and operator_memory the PTA allocations only.

Numbers are printed as torch_npu's ``csv.writer`` prints them: sizes in KB and MB are Python floats (bytes /
1024, bytes / 1024²) printed by ``repr``, times are µs text of local epoch ns with a TAB after them.
"""
from decimal import Decimal
from typing import Iterator, List, Optional

from msprof.events import us_text
from msprof.layouts.framework.clock import FrameworkClock
from msprof.tables import TEXT, Column, Table

NPU = 20                        # device type of an NPU record (CPU: 0)
WORKSPACE = 1                   # component of a workspace record (0: the caching allocator)
INNER_ALLOCATOR = 0             # the torch allocator's records (operator_memory reads only these)
MALLOC, FREE, BLOCK_FREE = 0, 1, 2
KB, MB = 1024.0, 1024.0 ** 2

RECORD_COLUMNS = ("Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                  "Stream Ptr", "Device Type")
MS_RECORD_COLUMNS = tuple(c for c in RECORD_COLUMNS if c != "Stream Ptr")
OPERATOR_COLUMNS = ("Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                    "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                    "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                    "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type")
FIELDS = "seq, {time}, ptr, size, allocated, reserved, active, stream_ptr, device_index, component, data_type, tid, pid"
BATCH = 10_000


def clock_of(report) -> FrameworkClock:
    return FrameworkClock(**(report.meta_json("clock") or {}))


def device_of(report) -> Optional[int]:
    """The PROF_'s device when it has exactly one (every NPU row is then tagged with it), else None."""
    numbers = {device.device_number for device in report.devices}
    return next(iter(numbers)) if len(numbers) == 1 else None


def memory_files(report) -> tuple:
    """The memory files a framework unit writes: both from torch's NPU records, memory_record alone from
    MindSpore's (its analysis writes operator_memory from CANN data only)."""
    if report.conn.execute("SELECT 1 FROM torch_memory WHERE device_type = ? LIMIT 1", (NPU,)).fetchone():
        return ("memory_record", "operator_memory")
    return ("memory_record",) if report.count("ms_memory") else ()


def _records(report) -> Iterator[tuple]:
    """The NPU memory records in time order (file order for equal times), local epoch ns."""
    sql = (f"SELECT {FIELDS.format(time=clock_of(report).local_sql('time') + ' AS local')} FROM torch_memory"
           f" WHERE device_type = {NPU} ORDER BY local, seq")
    return report.conn.execute(sql)


def _text(value) -> str:
    return "" if value is None else str(value)


def memory_record(report) -> Table:
    return ms_memory_record(report) if report.count("ms_memory") else pta_memory_record(report)


def ms_memory_record(report) -> Table:
    """MindSpore's memory_record (target §9; MindSpore 2.5's analysis, read, not run): per record of
    cpu_ms_memory_record in time order a ``MindSpore`` row and a ``MindSpore+GE`` one, times as written (ns /
    1000 in decimal, trailing zeros dropped), sizes in its "MB" of bytes / 1024 / 1000, the rank's NPU."""
    rank = report.meta.get("rank") or "0"
    rank = rank if rank.lstrip("-").isdigit() and int(rank) >= 0 else "0"

    def batches() -> Iterator[List[tuple]]:
        rows = report.conn.execute("SELECT time, allocated, reserved, active FROM ms_memory ORDER BY time, seq")
        while True:
            chunk = rows.fetchmany(BATCH)
            if not chunk:
                return
            out = []
            for time, *sizes in chunk:
                cells = (str(Decimal(time) / 1000),) + tuple(str(size / KB / 1000) for size in sizes) + (
                    f"NPU:{rank}",)
                out += [("MindSpore",) + cells, ("MindSpore+GE",) + cells]
            yield out

    return Table("memory_record", "memory_record", [Column(name, TEXT) for name in MS_RECORD_COLUMNS], batches(),
                 line_end="\r\n")


def pta_memory_record(report) -> Table:
    """One row per NPU record (a workspace record: ``WORKSPACE``), each caching one followed by its ``PTA+GE``."""
    device = device_of(report)

    def batches() -> Iterator[List[tuple]]:
        rows = _records(report)
        while True:
            chunk = rows.fetchmany(BATCH)
            if not chunk:
                return
            out = []
            for (_seq, time, _ptr, _size, allocated, reserved, active, stream, index, component, *_rest) in chunk:
                cells = (us_text(time) + "\t", str(allocated / MB), str(reserved / MB), str(active / MB),
                         str(stream), "NPU:%d" % (index if device is None else device))
                if component == WORKSPACE:
                    out.append(("WORKSPACE",) + cells)
                else:
                    out += [("PTA",) + cells, ("PTA+GE",) + cells]
            yield out

    return Table("memory_record", "memory_record", [Column(name, TEXT) for name in RECORD_COLUMNS], batches(),
                 line_end="\r\n")
