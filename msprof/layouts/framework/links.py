"""Framework ops linked to the device tasks they launched (docs/framework-target.md §3; docs/framework-plan.md
§2), made once at import:

* ``fw_queue``: the task queue's ranges (op marks paired as torch_npu pairs them: an end with the latest start
  of its thread and name, the older starts of that name discarded), enqueues and dequeues in the order their
  ends were recorded, each enqueue with the op it falls in;
* ``fw_link``: every launched kernel of the PROF_ devices (the first execution of a launch: a static graph's
  task launched once links its first run only) with its launch time, its *self* op and its step. Without op
  marks the self op is the deepest op holding the launch time (from the top, the child that started last
  before it, while it has not ended); with them, the op holding the enqueue whose dequeue range holds it;
* ``fw_op_device``: per op, the kernels' durations summed over its self links and over its subtree's
  (``total``), all kernels and AI Core ones, in torch_npu's float sums and order (``operator_details``).

Each is one pass: ops in tree order against launches in time order, holding the current path of the tree.
"""
import heapq
import itertools
from array import array
from typing import Dict, Iterator, List, Optional

from msprof.decode.base import insert_rows
from msprof.layouts.framework.clock import FrameworkClock
from msprof.layouts.framework.kernels import _holding
from msprof.layouts.prof import tasks
from msprof.layouts.timebase import ProfTime
from msprof.store import Notices

ENQUEUE_START, ENQUEUE_END, DEQUEUE_START, DEQUEUE_END = 0, 1, 2, 3
ENQUEUE, DEQUEUE = 0, 1
QUEUE_COLUMNS = ("seq", "kind", "corr_id", "tid", "pid", "name", "start", "end", "op")
LINK_COLUMNS = ("seq", "device", "launch", "start", "dur", "task_type", "kernel", "stream", "op", "step", "corr_id")
DEVICE_COLUMNS = ("dfs", "self_us", "total_us", "self_ai_us", "total_ai_us", "kernels")
AI_CORE = "AI_CORE"
BATCH = 10_000


def kernel_rows(prof) -> Iterator[tuple]:
    """(launch ns, kernel start ns, duration ns, task type, name, stream) of a PROF device's launched kernels on the
    epoch, by launch then start: each launch's first execution. The start is the CANN timeline's (its flows'
    ends), the duration the one its ``dur`` prints."""
    time = prof.time.on_the_epoch()
    query = tasks.task_query(prof, ("track_ts", "start_ns", "end_ns", "exec_n", "task_type", "op_name", "stream_id"),
                             selected=False)
    sql = (f"SELECT {time.host_ns_sql('track_ts')} AS launch, {ProfTime.epoch_ns_sql('start_ns')} AS start,"
           f" end_ns - start_ns, task_type, op_name, stream_id FROM ({query}) WHERE track_ts IS NOT NULL AND exec_n = 0"
           " AND end_ns >= start_ns ORDER BY launch, start")
    return prof.conn.execute(sql, prof.params)


# --- the task queue ---------------------------------------------------------------------------------------
def pair_marks(conn, clock: FrameworkClock, notices: Notices) -> int:
    """fw_queue's ranges, numbered in the order their ends were recorded (kind, corr id, thread, pid, name,
    start, end); the ranges made. Only the starts not yet ended are held."""
    time = clock.local_sql("time")
    opened: Dict[tuple, list] = {}
    ranges: List[tuple] = []
    made = unmatched = 0
    for when, category, corr, tid, pid, name in conn.execute(
            f"SELECT {time} AS t, category, corr_id, tid, pid, name FROM op_mark ORDER BY t, seq"):
        if category in (ENQUEUE_START, DEQUEUE_START):
            opened.setdefault((category, tid, name), []).append(when)
            continue
        starts = opened.get((category - 1, tid, name))
        if not starts:
            unmatched += 1
            continue
        kind = ENQUEUE if category == ENQUEUE_END else DEQUEUE
        ranges.append((made, kind, corr, tid, pid, name, starts.pop(), when, None))
        made += 1
        starts.clear()
        if len(ranges) >= BATCH:
            insert_rows(conn, "fw_queue", QUEUE_COLUMNS, ranges)
            ranges = []
    insert_rows(conn, "fw_queue", QUEUE_COLUMNS, ranges)
    if unmatched:
        notices.warn(f"{unmatched} op mark end(s) with no start of their thread and name: not paired")
    return made


def enqueue_ops(conn) -> None:
    """Each enqueue's op (fw_queue.op; none outside every op): the last open op at its start, ops closed when the
    time passes their end (target §3's tree, ops before enqueues at one time)."""
    ops = conn.execute('SELECT dfs, start, "end" FROM fw_op ORDER BY dfs')
    stack: List[tuple] = []
    pending = next(ops, None)
    owners: List[tuple] = []
    # (the ORDER BY sorts every enqueue before the first row: the updates below do not disturb the reading)
    for seq, start in conn.execute(f"SELECT seq, start FROM fw_queue WHERE kind = {ENQUEUE} ORDER BY start, seq"):
        while pending is not None and pending[1] <= start:
            while stack and pending[1] > stack[-1][2]:
                stack.pop()
            stack.append(pending)
            pending = next(ops, None)
        while stack and start > stack[-1][2]:
            stack.pop()
        if stack:
            owners.append((stack[-1][0], seq))
        if len(owners) >= BATCH:
            conn.executemany("UPDATE fw_queue SET op = ? WHERE seq = ?", owners)
            owners = []
    conn.executemany("UPDATE fw_queue SET op = ? WHERE seq = ?", owners)


class _Dequeues:
    """The dequeue range holding a launch (launches asked in time order): torch_npu's one pass over the
    dequeues in their recorded order, which stops at the first that starts after the launch."""

    def __init__(self, conn):
        self.rows = conn.execute(f'SELECT corr_id, start, "end" FROM fw_queue WHERE kind = {DEQUEUE} ORDER BY seq')
        self.current = next(self.rows, None)

    def corr(self, t: int) -> Optional[int]:
        while self.current is not None:
            corr, start, end = self.current
            if start > t:
                return None
            if t <= end:
                return corr
            self.current = next(self.rows, None)
        return None


# --- launches to ops --------------------------------------------------------------------------------------
class _Path:
    """The tree's current path at a time: at each depth, the op that started last under the op above it (ops
    fed in tree order up to the time)."""

    def __init__(self, conn):
        self.ops = conn.execute('SELECT dfs, start, "end", depth FROM fw_op ORDER BY dfs')
        self.pending = next(self.ops, None)
        self.path: List[tuple] = []

    def deepest(self, t: int) -> Optional[int]:
        """The deepest op holding ``t`` from the top (each level's last started child, while it has not
        ended): torch_npu's match from the root."""
        while self.pending is not None and self.pending[1] <= t:
            del self.path[self.pending[3]:]
            self.path.append(self.pending)
            self.pending = next(self.ops, None)
        found = None
        for op in self.path:
            if op[2] <= t:
                break
            found = op[0]
        return found


def derive_links(conn, clock: FrameworkClock, devices: list, notices: Notices) -> None:
    """Fill fw_queue, fw_link and fw_op_device from fw_op, op_mark and the kernels of ``devices`` (PROF device
    reports with tasks)."""
    marks = pair_marks(conn, clock, notices) > 0
    if marks:
        enqueue_ops(conn)
    steps = conn.execute("SELECT step, start, \"end\" FROM fw_step ORDER BY start, dfs").fetchall()
    starts = [s[1] for s in steps]
    reach = list(itertools.accumulate((s[2] for s in steps), max))
    path, dequeues = _Path(conn), _Dequeues(conn)
    links, seq = [], 0
    for launch, start, dur, task_type, kernel, stream, device in _merged(devices):
        corr = op = step = None
        if marks:           # (the op and its step: through the enqueue of the correlation id, below)
            corr = dequeues.corr(launch)
        else:
            op = path.deepest(launch)
            index = _holding(steps, starts, reach, launch)
            step = steps[index][0] if index is not None else None
        links.append((seq, device, launch, start, dur / 1000, task_type, kernel, stream, op, step, corr))
        seq += 1
        if len(links) >= BATCH:
            insert_rows(conn, "fw_link", LINK_COLUMNS, links)
            links = []
    insert_rows(conn, "fw_link", LINK_COLUMNS, links)
    if marks:
        conn.execute(f"UPDATE fw_link SET op = (SELECT q.op FROM fw_queue q WHERE q.kind = {ENQUEUE} AND q.corr_id ="
                     " fw_link.corr_id ORDER BY q.seq LIMIT 1) WHERE corr_id IS NOT NULL")
        conn.execute("UPDATE fw_link SET step = (SELECT o.step FROM fw_op o WHERE o.dfs = fw_link.op)"
                     " WHERE op IS NOT NULL")
    (unlinked,) = conn.execute("SELECT count(*) FROM fw_link WHERE op IS NULL").fetchone()
    if unlinked:
        notices.notice(f"{unlinked} of {seq} launched kernels fall in no framework op"
                       f"{' dequeue range' if marks else ''}: linked to none")
    _device_sums(conn, marks)


def _merged(devices: list) -> Iterator[tuple]:
    """The kernels of every device, by launch time (then start)."""
    def rows(device):
        number = device.device_number
        for row in kernel_rows(device):
            yield row + (number,)
    return heapq.merge(*(rows(d) for d in devices), key=lambda r: (r[0], r[1]))


def _device_sums(conn, marks: bool) -> None:
    """fw_op_device: the sums torch_npu prints (target §5), added in its order: by the time that placed the
    kernel — the launch, or with op marks its enqueue's start — then the launch and the kernel's start; a kernel
    adds to its self op and every op above it. That time lies in the op's range, so an op whose end it has
    passed has all its kernels: its sums are written then, and only the open ops' are held."""
    parents = array("q", (-1 if p is None else p for (p,) in conn.execute("SELECT parent FROM fw_op ORDER BY dfs")))
    ends = array("q", (e for (e,) in conn.execute('SELECT "end" FROM fw_op ORDER BY dfs')))
    sums: Dict[int, list] = {}
    done: List[int] = []           # (end, dfs) of the ops in ``sums``: a heap
    # (with marks, a kernel's place is its enqueue's: the first enqueue of its corr id)
    placed = ("(SELECT q.start FROM fw_queue q WHERE q.kind = 0 AND q.corr_id = l.corr_id ORDER BY q.seq LIMIT 1)"
              if marks else "launch")
    order = ", (SELECT min(q.seq) FROM fw_queue q WHERE q.kind = 0 AND q.corr_id = l.corr_id)" if marks else ""
    rows = conn.execute(f"SELECT {placed} AS placed, op, dur, task_type = '{AI_CORE}' FROM fw_link l"
                        f" WHERE op IS NOT NULL ORDER BY placed{order}, launch, start")
    written: List[tuple] = []
    for when, op, dur, ai_core in rows:
        while done and done[0][0] < when:
            _end, dfs = heapq.heappop(done)
            written.append(_device_row(dfs, sums.pop(dfs)))
        node, own = op, True
        while node >= 0:
            entry = sums.get(node)
            if entry is None:
                entry = sums[node] = [0, 0, 0, 0, 0]
                heapq.heappush(done, (ends[node], node))
            if own:
                entry[0] += dur
                entry[2] += dur if ai_core else 0
                entry[4] += 1
            entry[1] += dur
            entry[3] += dur if ai_core else 0
            node, own = parents[node], False
        if len(written) >= BATCH:
            insert_rows(conn, "fw_op_device", DEVICE_COLUMNS, written)
            written = []
    written += [_device_row(dfs, entry) for dfs, entry in sums.items()]
    insert_rows(conn, "fw_op_device", DEVICE_COLUMNS, written)


def _device_row(dfs: int, entry: list) -> tuple:
    """An op's sums as stored: a sum no kernel reached (the integer 0) is NULL, printed ``0`` as torch_npu's."""
    return (dfs, *(None if value.__class__ is int else value for value in entry[:4]), entry[4])
