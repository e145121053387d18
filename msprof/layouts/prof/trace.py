"""A PROF device's timeline, ``device_N/timeline/msprof[_model<M>][_iter<I>].json`` (docs/prof.md), as
sources for the one trace writer (msprof.trace):

* the device's tasks — process "Ascend Hardware (device N)", one thread per stream, an X slice per task
  named by its op (kernel, or task type, when no op launched it);
* the host's API calls — process "CANN (host)" (the app's pid), one thread per host thread; acl, model,
  node and runtime levels nest by time;
* a HostToDevice flow from each launch (inside its node-level call on the host thread) to the device task
  it started — for ids launched once per execution; a static graph's single launch of a task is not drawn
  to each of its thousands of executions.

Times are µs relative to the collection start, start_info's collectionTimeBegin (otherData), and a time plus
that origin is the time op_summary prints (msprof.layouts.timebase.ProfTime.origin_ns).

In the CANN layout (``cann``: docs/prof.md "The CANN layout", ecosystem-target.md §2) the timeline is what the
Ascend tools read, the reference's event for event: its sources are msprof.layouts.prof.cann_trace's, which
build on these (pids derived from the app's as the reference derives them, times on the epoch). A PROF_'s
devices share one file: the host calls are written with the first device.
"""
import itertools
import logging
from typing import Dict, Iterator, List, Optional

from msprof.decode.api_event import LEVELS, NAMED_BY_TYPE
from msprof.contract import Selection
from msprof.layouts.prof.associate import UNKNOWN_MODEL
from msprof.layouts.prof import tasks
from msprof.layouts.prof.tasks import HWTS_TASK_TYPES
from msprof.console import log
from msprof.contract import EventSource, Timeline
from msprof.events import (FLOW_CATEGORY, NA_JSON, TASK_PID_BASE, JsonNames, batches, device_number, jstr,
                           other_data, sorted_query, us_formats, us_text)

HOST_PROCESS = "CANN (host)"
LEVEL_NAMES = {level: jstr(name) for level, name in LEVELS.items()}
# Event formats, the pids written in by each source (<PID>: its own, <HOST>: the host's), so that no constant is
# printed again for every event
_TASK = (',\n{"ph":"X","pid":<PID>,"tid":%d,"ts":%U,"dur":%U,"name":%s,"args":{"Task ID":%d,"Stream ID":%d,'
         '"Task Type":%s,"OP Type":%s,"Model ID":%d,"Iteration":%s}}')
_API = ',\n{"ph":"X","pid":<PID>,"tid":%d,"ts":%U,"dur":%U,"name":%s,"args":{"level":%s,"item":%s}}'
# a task with the HostToDevice flow from its launch: one format for the three events (the flow id as text, twice)
_TASK_FLOW = _TASK + (',\n{"ph":"s","cat":"%s","name":"%s","id":%%s,"pid":<HOST>,"tid":%%d,"ts":%%U}'
                      ',\n{"ph":"f","bp":"e","cat":"%s","name":"%s","id":%%s,"pid":<PID>,"tid":%%d,"ts":%%U}'
                      ) % ((FLOW_CATEGORY,) * 4)


def _formats(template: str, pid: int, host_pid: int = 0, cann: bool = False):
    """us_formats of ``template`` with its pids written in; in the CANN layout, times as strings."""
    if cann:
        template = template.replace('"ts":%U', '"ts":"%U"')
    return us_formats(template.replace("<PID>", str(int(pid))).replace("<HOST>", str(int(host_pid))))


# The CANN layout's processes (ecosystem-target.md §2.2): name, sort index; pid = (app pid << 10) | (sort index
# << 5) | device (31: the host)
CANN_HOST, CANN_DEVICE, CANN_OVERLAP = ("CANN", 7), ("Ascend Hardware", 14), ("Overlap Analysis", 20)
# The chips whose CANN timeline has an "AI Core Freq" process (the reference's v3.3, v4.1, v1.1.1), and the
# step of its samples in µs
AI_CORE_FREQ_PLATFORMS, CANN_FREQ, FREQ_STEP_US = ("4", "5", "7"), ("AI Core Freq", 15), 1000
# A CANN flow's id is its task's key, (device << 80) | (stream << 64) | (task << 48) | (batch << 32) | context
# (ecosystem-target.md §2.5; no context): the executions of a task launched once share it
NO_CONTEXT = 0xFFFFFFFF


def cann_pid(app_pid: int, process: tuple, device: Optional[int]) -> int:
    return (int(app_pid) << 10) | (process[1] << 5) | (31 if device is None else min(int(device), 30))


def cann_process(process: tuple, device: Optional[int]) -> tuple:
    """A process as trace.Writer names it in the CANN layout: (name, labels, sort index)."""
    return process[0], "CPU" if device is None else f"NPU {device}", process[1]


# The host calls' sort spills to a temporary file beyond this: sorting in runs of this size is as fast as in
# memory, and memory stays flat with the number of calls (docs/performance.md, "Sorts")
SORT_CACHE_MB = 32
# node-level calls remembered per host thread for the flows of tasks still to come (the oldest are dropped)
REMEMBERED_CALLS = 1 << 16


def timelines(report, selection: Selection) -> List[Timeline]:
    """The device's timeline (the CANN layout's: msprof.layouts.prof.cann_trace.timelines)."""
    if not report.has_tasks and not report.has_api:
        return []
    suffix = (f"_model{selection.model_id}" if selection.model_id is not None else "") + (
        f"_iter{selection.iteration_id}" if selection.iteration_id is not None else "")
    # the selected model, as a JOB's task_time names its own (a PROF_ model has no batch number)
    model = next(({**m, "batch_num": None} for m in report.models() if m["model_id"] == selection.model_id), None)
    return [Timeline("msprof" + suffix, other_data(report, "msprof", model, selection.iteration_id),
                     _Sources(selection), event_count(report), _split)]


def event_count(report) -> int:
    """About how many events the device's timeline holds: every task and host call, and a flow (two events) per
    launch of this device, which is at most one per task (a static graph's few launches draw few; per-launch
    runs one per task: 1.5M events for 250k tasks, enough to be written in two halves by two processes)."""
    conn = report.conn
    (launches,) = conn.execute("SELECT count(*) FROM host.launch WHERE device_id = :dev", report.params).fetchone()
    tasks = report.count("task")
    return tasks + conn.execute("SELECT count(*) FROM host.api").fetchone()[0] + 2 * min(launches, tasks)


def _time(report, cann: bool):
    """The report's conversions, on the epoch in the CANN layout."""
    return report.time.on_the_epoch() if cann else report.time


def _split(report, cann: bool = False):
    """The middle of the device's tasks: (its start counter, its start in relative ns — what the host calls
    are compared with). The task source splits at the counter, the host source at the time."""
    (count,) = report.conn.execute("SELECT count(*) FROM task WHERE start_syscnt IS NOT NULL").fetchone()
    row = report.conn.execute("SELECT start_syscnt FROM task WHERE start_syscnt IS NOT NULL ORDER BY start_syscnt"
                              " LIMIT 1 OFFSET ?", (count // 2,)).fetchone()
    if row is None:
        return None
    # (the task source's conversion, in the same float operations)
    time = _time(report, cann)
    return row[0], time.relative_ns(time.device_ns(row[0]))


class _Sources:
    """Picklable factory of the timeline's sources: the tasks drive; the host calls are merged in."""

    def __init__(self, selection: Selection):
        self.selection = selection

    def __call__(self, report) -> List[EventSource]:
        host = HostSource(report, self.selection)
        return [ProfTaskSource(report, self.selection, host), host]


def _host_pid(report) -> int:
    pid = report.meta_number("pid")
    return int(pid) if pid and 0 < pid < TASK_PID_BASE else 1


class HostSource(EventSource):
    """The host's API calls, in start order (enclosing calls first)."""

    noun, owner = "host API call", "thread"
    overlap_level = logging.INFO          # calls of a thread overlapping is normal host data

    def __init__(self, report, selection: Selection, cann: bool = False, written: bool = True):
        self.report, self.selection, self.cann = report, selection, cann
        # (not ``written``: its calls are another device's, met only for the flows' lanes and the metadata)
        self.written = written
        self.time = _time(report, cann)
        self.pid = cann_pid(_host_pid(report), CANN_HOST, None) if cann else _host_pid(report)
        self.process = cann_process(CANN_HOST, None) if cann else HOST_PROCESS
        self.formats = _formats(_API, self.pid, cann=cann)
        self.types = {(level, t): name for level, t, name in report.conn.execute(
            "SELECT level, type, name FROM host.type_name")}
        self.strings = dict(report.conn.execute("SELECT hash, text FROM host.hash_string"))
        self.texts = _CallTexts(self)               # (level, struct type, item) → JSON texts of the event
        self.calls: Dict[tuple, tuple] = {}         # (thread, begin) of a node-level call → (lane tid, slice)
        self.backwards = 0
        self.columns = "level, thread, struct_type, item_id, {begin}, {end}"     # (of host.api, in a batch's rows)

    def batches(self, window=None) -> Iterator[list]:
        where, args = "1", ()
        if not self.selection.everything:         # the calls around the selected tasks only
            span = self.report.task_span(self.selection)
            if span is None:
                return iter(())
            where, args = "[end] >= ? AND begin <= ?", span
        begin, end = self.time.host_ns_sql("begin"), self.time.host_ns_sql("[end]")
        if window is not None:                    # the calls beginning before / from the split time
            side, (_syscnt, split_ns) = window
            where += f" AND {begin} {'<' if side == 0 else '>='} {int(split_ns)}"
        return batches(sorted_query(self.report.conn,
                                    f"SELECT {self.columns.format(begin=begin, end=end)} FROM host.api"
                                    f" WHERE {where} ORDER BY begin, [end] DESC, level DESC, seq", args,
                                    SORT_CACHE_MB))

    def start(self, row) -> int:
        return row[4]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        texts, calls = self.texts, self.calls
        place, room, pid = lanes.place, out.room, self.pid
        fmt, fmt_any = self.formats
        threads, index = out.threads, out.slice_index
        events: List[str] = []
        count = 0
        pending = iter(rows)
        for level, thread, struct_type, item, start, end in pending:
            if end < start:
                self.backwards += 1
                continue
            if count >= room:           # (the row as it came, and those after it: for the next file)
                out.add("".join(events), count)
                return [(level, thread, struct_type, item, start, end), *pending]
            lane = place(thread, thread, "Thread", thread, start, end)
            tid = lane.tid
            if (pid, tid) not in threads:
                out.use(pid, tid, self.process, lane)
            if level == 10000:
                calls[(thread, start)] = (tid, index)
                if len(calls) > REMEMBERED_CALLS:
                    self._forget()
            if not self.written:
                continue
            name, level_text, item_text = texts[(level, struct_type, item)]
            if start >= 0:
                d = end - start
                events.append(fmt % (tid, start // 1000, start % 1000, d // 1000, d % 1000, name, level_text,
                                     item_text))
            else:
                events.append(fmt_any % (tid, us_text(start), us_text(end - start), name, level_text, item_text))
            count += 1
        out.add("".join(events), count)
        return None

    def remember(self, thread: int, begin: int, tid: int, index: int) -> None:
        """A node-level call, on lane ``tid`` in file ``index``, for the flows of the tasks it launched."""
        self.calls[(thread, begin)] = (tid, index)
        if len(self.calls) > REMEMBERED_CALLS:
            self._forget()

    def _forget(self) -> None:
        for key in list(itertools.islice(self.calls, REMEMBERED_CALLS // 2)):
            del self.calls[key]

    def lane_of_call(self, thread: int, begin: int, index: int):
        """The lane of the node-level call of ``thread`` that began at ``begin``, when it is in file ``index``
        (a flow must share its file with both of its slices); else None."""
        found = self.calls.get((thread, begin))
        return found[0] if found is not None and found[1] == index else None



class _CallTexts(dict):
    """(level, struct type, item id) → the JSON texts of a call's name, level and item: acl, model, node and
    runtime calls are named by their type, other levels by their item (hash_dic)."""

    LIMIT = 100_000

    def __init__(self, host: HostSource):
        super().__init__()
        self.host = host

    def __missing__(self, key) -> tuple:
        level, struct_type, item = key
        text = self.host.strings.get(item)
        item_name = jstr(text if text is not None else str(item))
        if level in NAMED_BY_TYPE:
            name = self.host.types.get((level, struct_type))
            name = name if name is not None else str(struct_type)
        else:
            name = text if text is not None else str(item)
        value = (jstr(name), LEVEL_NAMES.get(level) or jstr(str(level)), item_name)
        if len(self) < self.LIMIT:
            self[key] = value
        return value


# a task's name: its op's, its kernel's, else its task type's
TASK_NAME_SQL = ("coalesce(op_name, kernel_name, CASE hw_type %s ELSE 'task' END)"
                 % " ".join(f"WHEN {k} THEN '{v}'" for k, v in HWTS_TASK_TYPES.items()))


def window_span(window) -> str:
    """The condition on t.start_syscnt of a half of a split timeline: the tasks starting before (0) or from (1)
    the split counter ("": no window)."""
    if window is None:
        return ""
    side, (split_syscnt, _ns) = window
    return f"AND t.start_syscnt {'<' if side == 0 else '>='} {int(split_syscnt)}"


class ProfTaskSource(EventSource):
    """The device's tasks in start order, with the HostToDevice flow of each launched once per execution."""

    noun, owner = "task", "stream (corrupt data)"

    FIELDS = ("stream_id", "task_id", "op_name", "kernel_name", "hw_type", "task_type", "op_type", "model_id",
              "iteration", "start_ns", "end_ns", "thread", "launches", "exec_n", "track_ts", "call_begin")

    def __init__(self, report, selection: Selection, host: HostSource):
        self.report, self.selection, self.host = report, selection, host
        self.device = device_number(report)
        self.time, cann = host.time, host.cann
        self.pid = cann_pid(_host_pid(report), CANN_DEVICE, self.device) if cann else TASK_PID_BASE + self.device
        self.formats = _formats(_TASK, self.pid, cann=cann) + _formats(_TASK_FLOW, self.pid, host.pid, cann)
        self.names = JsonNames()
        self.flow_ids = itertools.count(1)
        self.process = (cann_process(CANN_DEVICE, self.device) if cann
                        else f"Ascend Hardware (device {report.device_id})")
        self.stream_sort = 1 if cann else 256
        self.backwards = self.flows = 0

    def batches(self, window=None) -> Iterator[list]:
        report = self.report
        conditions, args = tasks.where(report, self.selection)
        span = window_span(window)
        time = self.time
        sql = (f"SELECT stream_id, task_id, {TASK_NAME_SQL},"
               f" task_type, op_type, coalesce(model_id, {UNKNOWN_MODEL}), iteration,"
               f" {time.relative_ns_sql('start_ns')}, {time.relative_ns_sql('end_ns')}, thread,"
               f" CASE WHEN launches != 1 OR exec_n = 0 THEN {time.host_ns_sql('track_ts')}"
               " END,"
               f" {time.host_ns_sql('call_begin')}"
               f" FROM ({tasks.task_query(report, self.FIELDS, span=span, within=self.selection)}) WHERE {conditions}")
        return batches(report.conn.execute(sql, args))

    def start(self, row) -> int:
        return row[7]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        names, host = self.names, self.host
        place, room, pid = lanes.place, out.room, self.pid
        fmt, fmt_any, fmt_flow, fmt_flow_any = self.formats
        threads, index = out.threads, out.slice_index
        events: List[str] = []
        count = 0
        pending = iter(rows)
        for stream, task_id, name, task_type, op_type, model_id, iteration, start, end, thread, track, call in pending:
            if end < start:
                self.backwards += 1
                continue
            if count >= room:           # (the row as it came, and those after it: for the next file)
                out.add("".join(events), count)
                return [(stream, task_id, name, task_type, op_type, model_id, iteration, start, end, thread, track,
                         call), *pending]
            lane = place(stream, stream, "Stream", stream * self.stream_sort, start, end)
            tid = lane.tid
            if (pid, tid) not in threads:
                out.use(pid, tid, self.process, lane)
            d = end - start
            count += 1
            host_tid = None
            # the flow shares the file with its node-level call (written into this file) and the task
            if track is not None and call is not None and track <= start and count + 2 <= room:
                host_tid = host.lane_of_call(thread, call, index)
            jname, jtype = names[name], names[task_type]
            jop = NA_JSON if op_type is None else names[op_type]
            it = NA_JSON if iteration is None else iteration
            # (one tuple per event in the usual cases, times >= 0: a tuple concatenation costs as much as it saves)
            if host_tid is None and start >= 0:
                events.append(fmt % (tid, start // 1000, start % 1000, d // 1000, d % 1000, jname, task_id, stream,
                                     jtype, jop, model_id, it))
                continue
            if host_tid is None:
                events.append(fmt_any % (tid, us_text(start), us_text(d), jname, task_id, stream, jtype, jop,
                                         model_id, it))
                continue
            flow_id = str((self.device << 40) | next(self.flow_ids))
            if track >= 0:
                events.append(fmt_flow % (tid, start // 1000, start % 1000, d // 1000, d % 1000, jname, task_id,
                                          stream, jtype, jop, model_id, it, flow_id, host_tid, track // 1000,
                                          track % 1000, flow_id, tid, start // 1000, start % 1000))
            else:
                events.append(fmt_flow_any % (tid, us_text(start), us_text(d), jname, task_id, stream, jtype, jop,
                                              model_id, it, flow_id, host_tid, us_text(track), flow_id, tid,
                                              us_text(start)))
            count += 2
            self.flows += 1
        out.add("".join(events), count)
        return None

    def finish(self, base: str, lanes) -> None:
        super().finish(base, lanes)
        log.info("%s: %d HostToDevice flow(s)", base, self.flows)
