"""memory_record.csv and operator_memory.csv (docs/framework-target.md §8) from the torch caching allocator's
records (``torch_memory``), as torch_npu writes them when the PROF_ holds no CANN memory data: msprof decodes no
GE nor APP memory records, so memory_record has the PTA side only (each PTA row followed by its ``PTA+GE`` row,
which then repeats the PTA totals) and operator_memory the PTA allocations only.

Numbers are printed as torch_npu's ``csv.writer`` prints them: sizes in KB and MB are Python floats (bytes /
1024, bytes / 1024²) printed by ``repr``, times are µs text of local epoch ns with a TAB after them.
"""
import bisect
from decimal import Decimal
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.events import us_text
from msprof.layouts.framework.clock import FrameworkClock
from msprof.tables import TEXT, Column, Table

NPU = 20                        # device type of an NPU record (CPU: 0)
WORKSPACE = 1                   # component of a workspace record (0: the caching allocator)
CACHING = 0
INNER_ALLOCATOR = 0             # the torch allocator's records (operator_memory reads only these)
MALLOC, FREE, BLOCK_FREE = 0, 1, 2
GROUP = 3                       # at most one record of each data type in an allocation's group
KB, MB = 1024.0, 1024.0 ** 2
# ops an allocation is never named after (torch_npu leaves them out of its per-thread op lists)
UNNAMING = ("empty_tensor", "malloc_workspace")
# the prefixes of the op an enqueued allocation is named after (the first of them up the enqueuing op's parents)
NAMING = ("aten", "npu")
DEQUEUE_START, DEQUEUE_END, ENQUEUE_START, ENQUEUE_END = 2, 3, 0, 1

RECORD_COLUMNS = ("Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                  "Stream Ptr", "Device Type")
MS_RECORD_COLUMNS = tuple(c for c in RECORD_COLUMNS if c != "Stream Ptr")
OPERATOR_COLUMNS = ("Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                    "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                    "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                    "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type")
FIELDS = "seq, {time}, ptr, size, allocated, reserved, active, stream_ptr, device_index, component, data_type, tid, pid"
BATCH = 10_000


def _clock(report) -> FrameworkClock:
    return FrameworkClock(**(report.meta_json("clock") or {}))


def _device(report) -> Optional[int]:
    """The PROF_'s device when it has exactly one (every NPU row is then tagged with it), else None."""
    numbers = {device.device_number for device in report.devices}
    return next(iter(numbers)) if len(numbers) == 1 else None


def memory_files(report) -> tuple:
    """The memory files a framework unit writes: both from torch's NPU records, memory_record alone from
    MindSpore's (its analysis writes operator_memory from CANN data only)."""
    if report.conn.execute("SELECT 1 FROM torch_memory WHERE device_type = ? LIMIT 1", (NPU,)).fetchone():
        return ("memory_record", "operator_memory")
    return ("memory_record",) if report.count("ms_memory") else ()


def _records(report, where: str = "", args: tuple = ()) -> Iterator[tuple]:
    """The NPU memory records in time order (file order for equal times), local epoch ns."""
    sql = (f"SELECT {FIELDS.format(time=_clock(report).local_sql('time') + ' AS local')} FROM torch_memory"
           f" WHERE device_type = {NPU} {where} ORDER BY local, seq")
    return report.conn.execute(sql, args)


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
    device = _device(report)

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


def _groups(records: List[tuple]) -> List[List[tuple]]:
    """One pointer's records (time order) cut into allocations as torch_npu cuts them: from each malloc, the
    records that follow while each has a data type not yet in the group, at most three."""
    groups, left, right = [], 0, 0
    buffer: List[tuple] = []
    while left < len(records) and right < len(records):
        if records[left][10] != MALLOC:
            left += 1
            right = left
        elif len(buffer) < GROUP and records[right][10] not in {r[10] for r in buffer}:
            buffer.append(records[right])
            right += 1
        else:
            groups.append(buffer)
            buffer = []
            left = right
    if buffer:
        groups.append(buffer)
    return groups


def _allocations(report) -> List[List[tuple]]:
    """The allocations of the first process (by its first record) that has framework ops, by malloc time: torch_npu
    writes one process's."""
    by_pid: Dict[int, Dict[int, List[tuple]]] = {}
    for record in _records(report, "AND allocator = ?", (INNER_ALLOCATOR,)):
        by_pid.setdefault(record[12], {}).setdefault(record[2], []).append(record)
    for pid, by_ptr in by_pid.items():
        if report.conn.execute("SELECT 1 FROM fw_op o JOIN torch_op t ON t.seq = o.seq WHERE t.pid = ? LIMIT 1",
                               (pid,)).fetchone() is None:
            continue
        groups = [group for records in by_ptr.values() for group in _groups(records)]
        groups.sort(key=lambda group: group[0][1])
        return groups
    return []


def operator_memory(report) -> Table:
    device = _device(report)
    namer = _Namer(report)
    rows = [_allocation_row(group, namer(group[0]), device) for group in _allocations(report)]
    return Table("operator_memory", "operator_memory", [Column(name, TEXT) for name in OPERATOR_COLUMNS], [rows],
                 line_end="\r\n")


def _totals(record: Optional[tuple]) -> tuple:
    return (None, None, None) if record is None else (record[4] / MB, record[5] / MB, record[6] / MB)


def _allocation_row(group: List[tuple], name: str, device: Optional[int]) -> tuple:
    """A group's row: the free gives the release and its totals, the block free the active release."""
    malloc = group[0]
    free = next((r for r in group[1:] if r[10] == FREE), None)
    active = next((r for r in group[1:] if r[10] == BLOCK_FREE), None)
    # (a group of two takes its release totals from its second record, whichever type it has)
    released = group[1] if len(group) == 2 else free

    def at(record):
        return None if record is None else us_text(record[1]) + "\t"

    def since(record):
        return None if record is None else us_text(record[1] - malloc[1]) + "\t"

    cells = (name, malloc[3] / KB, at(malloc), at(free), at(active), since(free), since(active), *_totals(malloc),
             *_totals(released), malloc[7], "NPU:%d" % (malloc[8] if device is None else device))
    return tuple(_text(cell) for cell in cells)


class _Cursor:
    """torch_npu's forward-only search of the last item starting at or before a time: it never moves back, so a
    time earlier than one asked before finds what that one found."""

    def __init__(self, starts: List[int]):
        self.starts, self.index = starts, 0

    def __call__(self, t: int) -> int:
        self.index = max(self.index, bisect.bisect_right(self.starts, t))
        return self.index - 1


class _Namer:
    """The op an allocation is named after (target §8): through the task queue when its thread dequeues and
    it lies in a dequeue range, else the last op of its own thread at or before it that has not ended."""

    def __init__(self, report):
        self.conn = report.conn
        clock = _clock(report)
        ops: Dict[int, List[Tuple[int, int]]] = {}
        for tid, start, dfs in self.conn.execute(
                "SELECT o.tid, o.start, o.dfs FROM fw_op o JOIN fw_string s ON s.id = o.name WHERE s.text NOT IN"
                f" ({', '.join('?' * len(UNNAMING))}) ORDER BY o.start, o.dfs", UNNAMING):
            ops.setdefault(tid, []).append((start, dfs))
        self.ops = {tid: [dfs for _s, dfs in items] for tid, items in ops.items()}
        self.cursors = {(tid, enqueue): _Cursor([s for s, _d in items]) for tid, items in ops.items()
                        for enqueue in (False, True)}
        self.enqueues, self.dequeues = _queue(self.conn, clock)
        self.dequeue_pids = {pid for pid, _tid in self.dequeues}
        self.dequeue_tids = {tid for _pid, tid in self.dequeues}
        self.dequeue_cursors = {key: _Cursor([start for start, _end, _corr in ranges])
                                for key, ranges in self.dequeues.items()}

    def _op(self, dfs: int) -> Tuple[int, Optional[int], str]:
        return self.conn.execute("SELECT o.end, o.parent, s.text FROM fw_op o JOIN fw_string s ON s.id = o.name"
                                 " WHERE o.dfs = ?", (dfs,)).fetchone()

    def __call__(self, record: tuple) -> str:
        time, tid, pid = record[1], record[11], record[12]
        dequeue = self._dequeue(pid, tid, time)
        return self._own(time, tid) if dequeue is None else self._enqueued(dequeue)

    def _dequeue(self, pid: int, tid: int, time: int) -> Optional[int]:
        """The correlation id of the dequeue range holding ``time`` on the record's thread, else None."""
        if pid not in self.dequeue_pids or tid not in self.dequeue_tids:
            return None
        ranges = self.dequeues.get((pid, tid), [])
        index = self.dequeue_cursors[(pid, tid)](time) if ranges else -1
        if index < 0 or not ranges[index][0] <= time < ranges[index][1]:
            return None
        return ranges[index][2]

    def _own(self, time: int, tid: int) -> str:
        index = self.cursors[(tid, False)](time) if tid in self.ops else -1
        if index < 0:
            return ""
        end, parent, name = self._op(self.ops[tid][index])
        while end < time:
            if parent is None:
                return ""
            end, parent, name = self._op(parent)
        return name

    def _enqueued(self, corr_id: int) -> str:
        enqueue = self.enqueues.get(corr_id)
        if enqueue is None:
            return ""
        tid, time = enqueue
        index = self.cursors[(tid, True)](time) if tid in self.ops else -1
        if index < 0:
            return ""
        _end, parent, name = self._op(self.ops[tid][index])
        while not name.startswith(NAMING):
            if parent is None:
                return ""
            _end, parent, name = self._op(parent)
        return name


def _queue(conn, clock: FrameworkClock) -> Tuple[Dict[int, Tuple[int, int]], Dict[tuple, List[tuple]]]:
    """Enqueue ends by correlation id ((tid, end time)) and dequeue ranges by (pid, tid) ([start, end), corr id):
    the op marks in time order, an end mark paired with the last start of its thread and name (torch_npu's
    pairing; the other starts of that name are then dropped)."""
    open_marks: Dict[tuple, List[int]] = {}
    enqueues: Dict[int, Tuple[int, int]] = {}
    dequeues: Dict[tuple, List[tuple]] = {}
    rows = conn.execute(f"SELECT {clock.local_sql('time')} AS local, category, corr_id, tid, pid, name FROM op_mark"
                        " ORDER BY local, seq")
    for time, category, corr_id, tid, pid, name in rows:
        key = (category in (DEQUEUE_START, DEQUEUE_END), tid, name)
        if category in (ENQUEUE_START, DEQUEUE_START):
            open_marks.setdefault(key, []).append(time)
            continue
        starts = open_marks.get(key)
        if not starts:
            continue
        start = starts.pop()
        starts.clear()
        if category == ENQUEUE_END:
            enqueues[corr_id] = (tid, time)
        else:
            dequeues.setdefault((pid, tid), []).append((start, time, corr_id))
    return enqueues, dequeues
