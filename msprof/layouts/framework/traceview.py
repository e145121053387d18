"""trace_view.json (docs/framework-target.md §6): the framework's events, the CANN timeline of its PROF_ devices
and the ``torch_to_npu`` flows from each op to the kernels it launched, in one trace written by the one trace
writer (msprof.trace), streamed, in the CANN layout's array form (times as µs text, as torch_npu writes them).

* ``OpSource``: one ``cpu_op`` slice per torch op, in start order, on its thread of process ``Python`` (the
  pid of the records);
* ``QueueSource``: the task queue's enqueue and dequeue slices and the ``enqueue_to_dequeue`` flow of each
  pair (a flow end whose start is missing, or the reverse, is left out: the trace must pair them);
* ``LinkSource``: a ``torch_to_npu`` flow per linked kernel (msprof.layouts.framework.links), from the op's
  start to the kernel's, its id the kernel's start in ns;
* ``FwdBwdSource``: a ``fwdbwd`` flow from a forward op to its backward op on another thread;
* ``GcSource``: the garbage collector's passes, in process ``Python GC``;
* the CANN timeline of each device (msprof.layouts.prof.cann_trace); at Level0 without the host's API calls,
  as torch_npu prunes them, and so without the HostToDevice flows that start on them.

One file whatever its size (msprof's other timelines are cut in slices of 1M events). Differences from
torch_npu's file (docs/framework-plan.md §3): metadata come first and name each process once; a
slice that partially overlaps another of its thread is on an "(overlap)" thread; at Level0 the HostToDevice
flows are left out with the calls they start on; the Python tracer's calls are not written yet.
"""
import json
from typing import Iterator, List, Optional

from msprof.contract import EventSource, Selection, Timeline
from msprof.events import batches, device_number, jstr, us_text
from msprof.layouts.framework.clock import FrameworkClock
from msprof.layouts.framework.links import DEQUEUE, ENQUEUE
from msprof.layouts.prof import cann_trace
from msprof.layouts.prof.trace import CANN_DEVICE, _host_pid, cann_pid, event_count

PYTHON = ("Python", "CPU", 0)              # torch_npu's process of the framework events: name, labels, sort
GC_NAME = "Python GC"
GC_PROCESS = (GC_NAME, "CPU", 1)           # and of the GC records
# the levels whose CANN timeline keeps the host's API calls (Level0 prunes them: target §6)
PRUNED_LEVELS = ("Level0",)
OPTIONAL_ARGS = (("Input type", "input_dtypes"), ("Input Dims", "input_shapes"), ("Call stack", "call_stack"),
                 ("Module Hierarchy", "module_hierarchy"))


def _text(value: Optional[str]) -> str:
    """A field of ``;``-joined items as torch_npu writes it in args (each item on a line)."""
    return value.replace(";", ";\r\n")


class _Framework(EventSource):
    """What the framework sources share: the report's database and the thread naming."""

    def __init__(self, report, sorts: dict):
        self.report, self.sorts = report, sorts

    def start(self, row) -> int:
        return row[0]

    def _lane(self, out, lanes, pid: int, tid: int, start: int, end: int) -> int:
        lane = lanes.place((pid, tid), tid, "Thread", self.sorts.get(tid, tid), start, end)
        if (pid, lane.tid) not in out.threads:
            out.use(pid, lane.tid, PYTHON, lane)
        return lane.tid


class OpSource(_Framework):
    noun = "framework op"

    def batches(self, window=None) -> Iterator[list]:
        strings = ", ".join(f"(SELECT text FROM fw_string WHERE id = t.{column})" for _k, column in OPTIONAL_ARGS)
        return batches(self.report.conn.execute(
            f'SELECT o.start, o."end", t.pid, o.tid, n.text, t.sequence_number, t.fwd_tid, {strings}'
            " FROM fw_op o JOIN torch_op t ON t.seq = o.seq LEFT JOIN fw_string n ON n.id = o.name ORDER BY o.dfs"))

    def write(self, rows: list, out, lanes) -> Optional[list]:
        events = []
        for start, end, pid, tid, name, sequence, fwd, *optional in rows:
            if end < start:
                self.backwards += 1
                continue
            args = {"Sequence number": sequence, "Fwd thread id": fwd}
            args.update((key, _text(value)) for (key, _c), value in zip(OPTIONAL_ARGS, optional) if value)
            events.append(',\n{"ph":"X","name":%s,"pid":%d,"tid":%d,"ts":"%s","dur":%r,"cat":"cpu_op","args":%s}' % (
                jstr(name or ""), pid, self._lane(out, lanes, pid, tid, start, end), us_text(start),
                (end - start) / 1000, json.dumps(args, ensure_ascii=False)))
        out.add("".join(events), len(events))
        return None


class QueueSource(_Framework):
    noun = "task queue range"

    def batches(self, window=None) -> Iterator[list]:
        return batches(self.report.conn.execute(
            "SELECT q.start, q.\"end\", q.pid, q.tid, q.kind, q.corr_id, n.text, EXISTS (SELECT 1 FROM fw_queue p"
            " WHERE p.kind = 1 - q.kind AND p.corr_id = q.corr_id) FROM fw_queue q LEFT JOIN fw_string n"
            " ON n.id = q.name ORDER BY q.start, q.seq"))

    def write(self, rows: list, out, lanes) -> Optional[list]:
        events = []
        for start, end, pid, tid, kind, corr, name, paired in rows:
            if end < start:
                self.backwards += 1
                continue
            lane = self._lane(out, lanes, pid, tid, start, end)
            title = f"Dequeue@{name or ''}" if kind == DEQUEUE else f"Enqueue@{name or ''}" if paired else "Enqueue"
            events.append(',\n{"ph":"X","name":%s,"pid":%d,"tid":%d,"ts":"%s","dur":%r,"cat":"%s","args":'
                          '{"correlation_id":%d}}' % (jstr(title), pid, lane, us_text(start), (end - start) / 1000,
                                                      "dequeue" if kind == DEQUEUE else "enqueue", corr))
            if paired:
                events.append(',\n{"ph":"%s","bp":"e","name":"enqueue_to_dequeue","id":%d,"pid":%d,"tid":%d,'
                              '"ts":"%s","cat":"async_task_queue"}' % ("s" if kind == ENQUEUE else "f", corr, pid,
                                                                        lane, us_text(start)))
        out.add("".join(events), len(events))
        return None


class LinkSource(_Framework):
    noun = "torch_to_npu flow"

    def __init__(self, report, device_pids: dict):
        super().__init__(report, {})
        self.device_pids = device_pids

    def batches(self, window=None) -> Iterator[list]:
        return batches(self.report.conn.execute(
            "SELECT o.start, t.pid, o.tid, l.start, l.device, l.stream FROM fw_link l JOIN fw_op o ON o.dfs = l.op"
            " JOIN torch_op t ON t.seq = o.seq ORDER BY o.start, o.dfs, l.start"))

    def write(self, rows: list, out, lanes) -> Optional[list]:
        events = []
        for start, pid, tid, kernel, device, stream in rows:
            events.append(',\n{"ph":"s","bp":"e","name":"torch_to_npu","id":%d,"pid":%d,"tid":%d,"ts":"%s",'
                          '"cat":"async_npu"}' % (kernel, pid, tid, us_text(start)))
            events.append(',\n{"ph":"f","bp":"e","name":"torch_to_npu","id":%d,"pid":%d,"tid":%d,"ts":"%s",'
                          '"cat":"async_npu"}' % (kernel, self.device_pids[device], stream, us_text(kernel)))
        out.add("".join(events), len(events))
        return None


class FwdBwdSource(_Framework):
    """A ``fwdbwd`` flow per autograd sequence number: from its latest forward op (forward thread id 0) to its
    latest backward op, when the two run on different threads (the first of equal starts, as torch_npu keeps
    it); one whose backward starts before its forward is left out and counted (a flow cannot end before it
    starts)."""

    noun = "fwdbwd flow"

    def batches(self, window=None) -> Iterator[list]:
        latest = ("SELECT t.sequence_number AS n, t.fwd_tid != 0 AS backward, o.start, t.pid, o.tid, row_number()"
                  " OVER (PARTITION BY t.sequence_number, t.fwd_tid != 0 ORDER BY o.start DESC, t.seq) AS r"
                  " FROM fw_op o JOIN torch_op t ON t.seq = o.seq WHERE t.sequence_number >= 0")
        return batches(self.report.conn.execute(
            f"SELECT f.start, f.pid, f.tid, b.start, b.pid, b.tid, f.n FROM ({latest}) f JOIN ({latest}) b"
            " ON b.n = f.n AND b.backward AND b.r = 1 WHERE NOT f.backward AND f.r = 1 AND f.tid != b.tid"
            " ORDER BY f.start, f.n"))

    def write(self, rows: list, out, lanes) -> Optional[list]:
        events = []
        for start, pid, tid, end, end_pid, end_tid, number in rows:
            if end < start:
                self.backwards += 1
                continue
            events += [',\n{"ph":"%s","bp":"e","name":"fwdbwd","id":%d,"pid":%d,"tid":%d,"ts":"%s","cat":"fwdbwd"}'
                       % (ph, number, p, t, us_text(when)) for ph, p, t, when in (("s", pid, tid, start),
                                                                                 ("f", end_pid, end_tid, end))]
        out.add("".join(events), len(events))
        return None


class GcSource(_Framework):
    """The garbage collector's passes (``GC`` slices) in process ``Python GC``, whose pid is torch_npu's
    (record pid << 10 | 1 << 5 | the PROF_'s first device, -1 without one), on the thread of the record's pid."""

    noun = "GC record"

    def __init__(self, report, device: int):
        super().__init__(report, {})
        self.device = device
        clock = FrameworkClock(**(report.meta_json("clock") or {}))
        self.times = f'{clock.local_sql("start")}, {clock.local_sql("end")}'

    def batches(self, window=None) -> Iterator[list]:
        return batches(self.report.conn.execute(f"SELECT {self.times}, pid FROM gc_record ORDER BY 1, seq"))

    def write(self, rows: list, out, lanes) -> Optional[list]:
        events = []
        for start, end, tid in rows:
            if end < start:
                self.backwards += 1
                continue
            pid = tid << 10 | GC_PROCESS[2] << 5 | self.device
            lane = lanes.place((pid, tid), tid, GC_NAME, tid, start, end)
            if (pid, lane.tid) not in out.threads:      # (its thread is named "Python GC", as torch_npu names it)
                out.use(pid, lane.tid, GC_PROCESS, cann_trace._Thread(GC_NAME, tid) if lane.tid == tid else lane)
            events.append(',\n{"ph":"X","name":"GC","pid":%d,"tid":%d,"ts":"%s","dur":%r,"cat":"GC","args":{}}' % (
                pid, lane.tid, us_text(start), (end - start) / 1000))
        out.add("".join(events), len(events))
        return None


class _Sources:
    """Picklable factory of the trace's sources: each device's CANN timeline (its tasks drive), then the
    framework's."""

    def __init__(self, level: str):
        self.level = level

    def __call__(self, report) -> List[EventSource]:
        made: List[EventSource] = []
        pids = {}
        for i, device in enumerate(d for d in report.devices if d.has_tasks or d.has_api):
            cann = cann_trace._Sources(Selection(), host=i == 0)(device)
            # (the host calls' source stays with the tasks' for their flows; pruned, it writes nothing)
            made += [s for s in cann if self.level not in PRUNED_LEVELS or not isinstance(s, cann_trace.CannHostSource)]
            pids[device.device_number] = cann_pid(_host_pid(device), CANN_DEVICE, device_number(device))
        sorts = thread_sorts(report.conn)
        first = min(pids) if pids else -1          # (the PROF_'s first device: the GC records' pid)
        return made + [OpSource(report, sorts), QueueSource(report, sorts), LinkSource(report, pids),
                       FwdBwdSource(report, {}), GcSource(report, first)]


def thread_sorts(conn) -> dict:
    """The sort index of a thread that dequeues and enqueues nothing: after every other (torch_npu's largest
    tid + 1); the others sort by their tid."""
    dequeues = {t for (t,) in conn.execute("SELECT DISTINCT tid FROM fw_queue WHERE kind = 1 AND tid NOT IN"
                                          " (SELECT tid FROM fw_queue WHERE kind = 0)")}
    if not dequeues:
        return {}
    (largest,) = conn.execute("SELECT max(t) FROM (SELECT max(tid) AS t FROM torch_op UNION ALL"
                              " SELECT max(tid) FROM fw_queue)").fetchone()
    return {tid: largest + 1 for tid in dequeues}


def trace_view(report) -> List[Timeline]:
    """The trace_view timeline of a framework unit (none without framework ops nor device data)."""
    framework = report.count("fw_op") + 2 * (report.count("fw_queue") + report.count("fw_link")) + report.count(
        "gc_record")
    cann = sum(event_count(d) + d.count("task") for d in report.devices if d.has_tasks or d.has_api)
    if not framework and not cann:
        return []
    # (one file, as torch_npu writes it: the tools read trace_view.json by its name)
    return [Timeline("trace_view", None, _Sources(report.level), framework + cann, whole=True)]
