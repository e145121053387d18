"""operator_memory.csv (docs/framework-target.md §8): the torch allocator's allocations, each named after the
framework op that made it, as torch_npu writes them, streamed: memory stays flat however many records there are.

An allocation is a malloc record and the records of its pointer that follow it while each has a data type not
yet in the group (at most three: malloc, free, block free), torch_npu's grouping; every malloc starts one. A
window over each pointer's records in time order gives a malloc its next two, and the mallocs come in time
order (file order for equal times), the order torch_npu sorts the groups in.

Naming reads forward only, as torch_npu's searches do (a search never moves back, so an earlier time finds
what a later one found): per thread, the last op starting at or before a time; per queue thread, the last
dequeue range starting at or before it. The task queue's pairs (enqueue end by correlation id, dequeue ranges)
go to temporary tables first.
"""
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.events import us_text
from msprof.layouts.framework.clock import FrameworkClock
from msprof.layouts.framework.memory import (BATCH, BLOCK_FREE, FREE, INNER_ALLOCATOR, KB, MALLOC, MB, NPU,
                                             OPERATOR_COLUMNS, clock_of, device_of)
from msprof.tables import TEXT, Column, Table

# ops an allocation is never named after (torch_npu leaves them out of its per-thread op lists)
UNNAMING = ("empty_tensor", "malloc_workspace")
# the prefixes of the op an enqueued allocation is named after (the first of them up the enqueuing op's parents)
NAMING = ("aten", "npu")
ENQUEUE_START, ENQUEUE_END, DEQUEUE_START, DEQUEUE_END = 0, 1, 2, 3
# a malloc and the next two records of its pointer: (data type, time, allocated, reserved, active) each
_NEXT = ", ".join(f"LEAD({column}, {k}) OVER p AS {alias}{k}" for k in (1, 2) for column, alias in (
    ("data_type", "n"), ("local", "t"), ("allocated", "a"), ("reserved", "r"), ("active", "c")))


def operator_memory(report) -> Table:
    device = device_of(report)

    def batches() -> Iterator[List[tuple]]:
        clock = clock_of(report)
        pid = _first_pid(report, clock)
        if pid is None:
            return
        namer = _Namer(report.conn, clock, pid)
        rows = report.conn.execute(_mallocs_sql(clock), (pid,))
        while True:
            chunk = rows.fetchmany(BATCH)
            if not chunk:
                return
            yield [_row(row, namer(row[1], row[6]), device) for row in chunk]

    return Table("operator_memory", "operator_memory", [Column(name, TEXT) for name in OPERATOR_COLUMNS], batches(),
                 line_end="\r\n")


def _local(clock: FrameworkClock) -> str:
    return clock.local_sql("time")


def _first_pid(report, clock: FrameworkClock) -> Optional[int]:
    """The process torch_npu writes the allocations of: the first (by its first record) with framework ops."""
    for (pid,) in report.conn.execute(
            f"SELECT pid FROM torch_memory WHERE device_type = {NPU} AND allocator = {INNER_ALLOCATOR} GROUP BY pid"
            f" ORDER BY min({_local(clock)}), min(seq)").fetchall():
        if report.conn.execute("SELECT 1 FROM fw_op o JOIN torch_op t ON t.seq = o.seq WHERE t.pid = ? LIMIT 1",
                               (pid,)).fetchone():
            return pid
    return None


def _mallocs_sql(clock: FrameworkClock) -> str:
    """The process's mallocs in time order: (size, time, allocated, reserved, active, stream ptr, tid, device
    index, then the next two records of the pointer, _NEXT)."""
    return (f"SELECT size, local, allocated, reserved, active, stream_ptr, tid, device_index, n1, t1, a1, r1, c1,"
            f" n2, t2, a2, r2, c2 FROM (SELECT seq, size, local, allocated, reserved, active, stream_ptr, tid,"
            f" device_index, data_type, {_NEXT} FROM (SELECT seq, ptr, size,"
            f" {_local(clock)} AS local, allocated, reserved, active, stream_ptr, tid, device_index, data_type"
            f" FROM torch_memory WHERE device_type = {NPU} AND allocator = {INNER_ALLOCATOR} AND pid = ?)"
            f" WINDOW p AS (PARTITION BY ptr ORDER BY local, seq)) WHERE data_type = {MALLOC} ORDER BY local, seq")


def _followers(row: tuple) -> List[tuple]:
    """The records that join the malloc's group: the next, unless a malloc; the one after, unless a malloc or
    of the next one's type."""
    first, second = row[8:13], row[13:18]
    if first[0] is None or first[0] == MALLOC:
        return []
    return [first] if second[0] is None or second[0] in (MALLOC, first[0]) else [first, second]


def _row(row: tuple, name: str, device: Optional[int]) -> tuple:
    """A group's row as torch_npu makes it: with three records the free is the second unless the second is not
    a free; with two, the second gives what its type gives, and the release totals."""
    time = row[1]
    followers = _followers(row)
    free = active = released = None
    if len(followers) == 2:
        free, active = followers if followers[0][0] == FREE else followers[::-1]
        released = free
    elif followers:
        released = followers[0]
        free, active = (released, None) if released[0] == FREE else (None, released) if released[0] == BLOCK_FREE \
            else (None, None)

    def at(record):
        return "" if record is None else us_text(record[1]) + "\t"

    def since(record):
        return "" if record is None else us_text(record[1] - time) + "\t"

    def totals(values):
        return ("", "", "") if values is None else tuple(str(v / MB) for v in values)

    return (name, str(row[0] / KB), at(row), at(free), at(active), since(free), since(active), *totals(row[2:5]),
            *totals(released[2:5] if released else None), str(row[5]), "NPU:%d" % (row[7] if device is None
                                                                               else device))


class _Forward:
    """Rows by a start time (the first column), read forward: ``(t)`` is the last row starting at or before the
    latest time asked so far (None before the first)."""

    def __init__(self, rows):
        self.rows, self.current = rows, None
        self.pending = rows.fetchone()

    def __call__(self, t: int) -> Optional[tuple]:
        while self.pending is not None and self.pending[0] <= t:
            self.current, self.pending = self.pending, self.rows.fetchone()
        return self.current


class _Namer:
    """The op an allocation is named after (target §8): through the task queue when its thread dequeues and it
    lies in a dequeue range, else the last op of its own thread at or before it that has not ended."""

    def __init__(self, conn, clock: FrameworkClock, pid: int):
        self.conn, self.pid = conn, pid
        _queue_tables(conn, clock)
        self.dequeue_pids = {p for (p,) in conn.execute("SELECT DISTINCT pid FROM temp.fw_dequeue")}
        self.dequeue_tids = {t for (t,) in conn.execute("SELECT DISTINCT tid FROM temp.fw_dequeue")}
        self.ops: Dict[Tuple[int, bool], _Forward] = {}
        self.dequeues: Dict[Tuple[int, int], _Forward] = {}

    def __call__(self, time: int, tid: int) -> str:
        corr = self._dequeue(tid, time)
        return self._own(time, tid) if corr is None else self._enqueued(corr)

    def _thread_ops(self, tid: int, enqueue: bool) -> _Forward:
        key = (tid, enqueue)
        if key not in self.ops:
            self.ops[key] = _Forward(self.conn.execute(
                "SELECT o.start, o.dfs FROM fw_op o JOIN torch_op t ON t.seq = o.seq JOIN fw_string s ON"
                " s.id = o.name WHERE o.tid = ? AND t.pid = ? AND s.text NOT IN (?, ?) ORDER BY o.start, o.dfs",
                (tid, self.pid) + UNNAMING))
        return self.ops[key]

    def _op(self, dfs: int) -> Tuple[int, Optional[int], str]:
        return self.conn.execute("SELECT o.end, o.parent, s.text FROM fw_op o JOIN fw_string s ON s.id = o.name"
                                 " WHERE o.dfs = ?", (dfs,)).fetchone()

    def _dequeue(self, tid: int, time: int) -> Optional[int]:
        """The correlation id of the dequeue range holding ``time`` on the record's thread, else None."""
        if self.pid not in self.dequeue_pids or tid not in self.dequeue_tids:
            return None
        key = (self.pid, tid)
        if key not in self.dequeues:
            self.dequeues[key] = _Forward(self.conn.execute(
                "SELECT start, end, corr FROM temp.fw_dequeue WHERE pid = ? AND tid = ? ORDER BY start, n", key))
        found = self.dequeues[key](time)
        return found[2] if found is not None and found[0] <= time < found[1] else None

    def _own(self, time: int, tid: int) -> str:
        found = self._thread_ops(tid, False)(time)
        if found is None:
            return ""
        end, parent, name = self._op(found[1])
        while end < time:
            if parent is None:
                return ""
            end, parent, name = self._op(parent)
        return name

    def _enqueued(self, corr_id: int) -> str:
        enqueue = self.conn.execute("SELECT tid, time FROM temp.fw_enqueue WHERE corr = ?", (corr_id,)).fetchone()
        if enqueue is None:
            return ""
        found = self._thread_ops(enqueue[0], True)(enqueue[1])
        if found is None:
            return ""
        _end, parent, name = self._op(found[1])
        while not name.startswith(NAMING):
            if parent is None:
                return ""
            _end, parent, name = self._op(parent)
        return name


def _queue_tables(conn, clock: FrameworkClock) -> None:
    """temp.fw_enqueue (correlation id → the enqueuing thread and the enqueue's end; the last of an id kept)
    and temp.fw_dequeue (the dequeue ranges [start, end) by thread): the op marks in time order, an end mark
    paired with the last start of its thread and name, the other starts of that name then dropped (torch_npu's
    pairing)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS fw_enqueue (corr INTEGER PRIMARY KEY, tid INTEGER, time INTEGER)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS fw_dequeue (n INTEGER PRIMARY KEY, pid INTEGER, tid INTEGER,"
                 " start INTEGER, end INTEGER, corr INTEGER)")
    conn.execute("DELETE FROM temp.fw_enqueue")
    conn.execute("DELETE FROM temp.fw_dequeue")
    open_marks: Dict[tuple, List[int]] = {}
    enqueues, dequeues = [], []
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
            enqueues.append((corr_id, tid, time))
        else:
            dequeues.append((pid, tid, start, time, corr_id))
        if len(enqueues) + len(dequeues) >= BATCH:
            _flush(conn, enqueues, dequeues)
    _flush(conn, enqueues, dequeues)
    conn.execute("CREATE INDEX IF NOT EXISTS temp.fw_dequeue_thread ON fw_dequeue (pid, tid, start)")


def _flush(conn, enqueues: list, dequeues: list) -> None:
    conn.executemany("INSERT OR REPLACE INTO temp.fw_enqueue VALUES (?, ?, ?)", enqueues)
    conn.executemany("INSERT INTO temp.fw_dequeue (pid, tid, start, end, corr) VALUES (?, ?, ?, ?, ?)", dequeues)
    enqueues.clear()
    dequeues.clear()
