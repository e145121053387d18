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
Ascend tools read: a JSON array (no otherData), ``ts`` the absolute µs as a string (op_summary's text), the
processes "CANN" and "Ascend Hardware" with their labels and sort indexes, pids derived from the app's as the
reference derives them, host calls named by their layer (``AscendCL@aclmdlExecute``), and an "Overlap
Analysis" process per device (the union of its tasks, "Computing", and the gaps between, "Free"). A PROF_'s
devices share one file: the host calls are written with the first device only.
"""
import functools
import itertools
import logging
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Dict, Iterator, List, NamedTuple, Optional

from msprof.decode.api_event import LEVELS, NAMED_BY_TYPE
from msprof.contract import Selection
from msprof.layouts.prof.associate import UNKNOWN_MODEL
from msprof.layouts.prof import tasks
from msprof.layouts.prof.tasks import HWTS_TASK_TYPES
from msprof.console import log
from msprof.contract import EventSource, Timeline
from msprof.events import (FETCH_ROWS, FLOW_CATEGORY, NA_JSON, TASK_PID_BASE, JsonNames, batches, device_number, jstr,
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
    """us_formats of ``template`` with its pids written in; in the CANN layout, times as strings and the
    args' names of the reference."""
    if cann:
        template = template.replace('"ts":%U', '"ts":"%U"').replace('"id":%s', '"id":"%s"')
        for ours, theirs in _CANN_ARGS:
            template = template.replace(ours, theirs)
    return us_formats(template.replace("<PID>", str(int(pid))).replace("<HOST>", str(int(host_pid))))


# the CANN layout's names of the device tasks' args (ecosystem-target.md §2.4)
_CANN_ARGS = (('"Task ID"', '"Task Id"'), ('"Stream ID"', '"Physic Stream Id"'), ('"Model ID"', '"Model Id"'))
# The CANN layout's processes (ecosystem-target.md §2.2): name, sort index; pid = (app pid << 10) | (sort index
# << 5) | device (31: the host)
CANN_HOST, CANN_DEVICE, CANN_OVERLAP = ("CANN", 7), ("Ascend Hardware", 14), ("Overlap Analysis", 20)
# the reference's names of the API levels (its LEVEL_MAP); other levels: their name capitalised
CANN_LAYERS = {"acl": "AscendCL"}
_OVERLAP = ',\n{"ph":"X","pid":<PID>,"tid":%d,"ts":%U,"dur":%U,"name":%s}'
OVERLAP_THREADS = {0: "Computing", 3: "Free"}
# The chips whose CANN timeline has an "AI Core Freq" process (the reference's v3.3, v4.1, v1.1.1), and the
# step of its samples in µs
AI_CORE_FREQ_PLATFORMS, CANN_FREQ, FREQ_STEP_US = ("4", "5", "7"), ("AI Core Freq", 15), 1000
# A CANN flow's id is its task's key, (device << 80) | (stream << 64) | (task << 48) | (batch << 32) | context
# (ecosystem-target.md §2.5; batch 0, no context): the executions of a task launched once share it
NO_CONTEXT = 0xFFFFFFFF
_FREQ = ',\n{"name":"AI Core Freq","ts":"%s","pid":<PID>,"tid":0,"args":{"MHz":%s},"ph":"C"}'


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


def timelines(report, selection: Selection, cann: bool = False, host: bool = True) -> List[Timeline]:
    """``cann``: the CANN layout's timeline; ``host``: with the host's calls (a PROF_'s first device)."""
    if not report.has_tasks and not report.has_api:
        return []
    suffix = (f"_model{selection.model_id}" if selection.model_id is not None else "") + (
        f"_iter{selection.iteration_id}" if selection.iteration_id is not None else "")
    # about: every task and host call, and a flow (two events) per launch of this device, which is at most one
    # per task (a static graph's few launches draw few; per-launch runs one per task: 1.5M events for 250k
    # tasks, enough to be written in two halves by two processes)
    conn = report.conn
    (launches,) = conn.execute("SELECT count(*) FROM host.launch WHERE device_id = :dev", report.params).fetchone()
    tasks = report.count("task")
    events = tasks + conn.execute("SELECT count(*) FROM host.api").fetchone()[0] + 2 * min(launches, tasks)
    # the selected model, as a JOB's task_time names its own (a PROF_ model has no batch number)
    model = next(({**m, "batch_num": None} for m in report.models() if m["model_id"] == selection.model_id), None)
    if cann:
        return [Timeline("msprof", None, _Sources(selection, True, host), events + tasks,
                         functools.partial(_split, cann=True))]
    return [Timeline("msprof" + suffix, other_data(report, "msprof", model, selection.iteration_id),
                     _Sources(selection), events, _split)]


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

    def __init__(self, selection: Selection, cann: bool = False, host: bool = True):
        self.selection, self.cann, self.host = selection, cann, host

    def __call__(self, report) -> List[EventSource]:
        host = HostSource(report, self.selection, self.cann, self.host)
        sources = [ProfTaskSource(report, self.selection, host), host]
        if self.cann and report.has_tasks:
            sources.append(OverlapSource(report, self.selection))
        if self.cann and report.platform in AI_CORE_FREQ_PLATFORMS and report.aic_mhz:
            sources.append(FreqSource(report))
        return sources


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
                                    f"SELECT level, thread, struct_type, item_id, {begin}, {end} FROM host.api"
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
                    for key in list(itertools.islice(calls, REMEMBERED_CALLS // 2)):
                        del calls[key]
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
        if self.host.cann:                 # (by layer: torch_npu's Level0 export prunes by these prefixes)
            layer = LEVELS.get(level, str(level))
            name = f"{CANN_LAYERS.get(layer, layer.capitalize())}@{name}"
        value = (jstr(name), LEVEL_NAMES.get(level) or jstr(str(level)), item_name)
        if len(self) < self.LIMIT:
            self[key] = value
        return value


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
        # (the reference draws a flow to every execution of a task a static graph launched once: msprof's own
        # timeline draws it to the first only, which a viewer shows less cluttered)
        self.every_execution = int(cann)
        self.backwards = self.flows = 0

    def batches(self, window=None) -> Iterator[list]:
        report = self.report
        conditions, args = tasks.where(report, self.selection)
        span = ""
        if window is not None:                    # the tasks starting before / from the split counter
            side, (split_syscnt, _ns) = window
            span = f"AND t.start_syscnt {'<' if side == 0 else '>='} {int(split_syscnt)}"
        types = " ".join(f"WHEN {k} THEN '{v}'" for k, v in HWTS_TASK_TYPES.items())
        time = self.time
        sql = (f"SELECT stream_id, task_id, coalesce(op_name, kernel_name, CASE hw_type {types} ELSE 'task' END),"
               f" task_type, op_type, coalesce(model_id, {UNKNOWN_MODEL}), iteration,"
               f" {time.relative_ns_sql('start_ns')}, {time.relative_ns_sql('end_ns')}, thread,"
               f" CASE WHEN {self.every_execution} OR launches != 1 OR exec_n = 0 THEN {time.host_ns_sql('track_ts')}"
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
            flow_id = (str((self.device << 40) | next(self.flow_ids)) if not self.every_execution else
                       str((self.device << 80) | (stream << 64) | (task_id << 48) | NO_CONTEXT))
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


class _Thread(NamedTuple):
    """A thread as trace.Writer names it (a Lane's name and sort index)."""

    name: str
    sort: int


class OverlapSource(EventSource):
    """The CANN layout's "Overlap Analysis" of a device (ecosystem-target.md §2.7): the union of its tasks'
    intervals, merged where they touch or overlap ("Computing", tid 0), and the gaps between them ("Free", tid
    3), in start order: one pass over the tasks, one section in memory."""

    noun, owner = "overlap section", "section kind"

    def __init__(self, report, selection: Selection):
        self.report, self.selection = report, selection
        device = device_number(report)
        self.pid = cann_pid(_host_pid(report), CANN_OVERLAP, device)
        self.process = cann_process(CANN_OVERLAP, device)
        self.formats = _formats(_OVERLAP, self.pid, cann=True)
        self.lanes = {tid: _Thread(name, tid) for tid, name in OVERLAP_THREADS.items()}

    def batches(self, window=None) -> Iterator[list]:
        conditions, args = tasks.where(self.report, self.selection)
        span = ""
        if window is not None:                    # (each half its own sections: one may be cut at the split)
            side, (split_syscnt, _ns) = window
            span = f"AND t.start_syscnt {'<' if side == 0 else '>='} {int(split_syscnt)}"
        time = _time(self.report, True)
        query = tasks.task_query(self.report, ("start_ns", "end_ns", "model_id", "iteration"), span=span,
                                 within=self.selection)
        sql = (f"SELECT {time.relative_ns_sql('start_ns')}, {time.relative_ns_sql('end_ns')} FROM ({query})"
               f" WHERE {conditions}")
        sections = self._sections(self.report.conn.execute(sql, args))
        return iter(lambda: list(itertools.islice(sections, FETCH_ROWS)), [])

    @staticmethod
    def _sections(rows) -> Iterator[tuple]:
        """(tid, start, end) of each section, in start order, from the tasks' (start, end) in start order."""
        first = end = None
        for start, stop in rows:
            if stop < start:
                continue
            if first is None:
                first, end = start, stop
            elif start <= end:
                end = max(end, stop)
            else:
                yield 0, first, end
                yield 3, end, start
                first, end = start, stop
        if first is not None:
            yield 0, first, end

    def start(self, row) -> int:
        return row[1]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        fmt, _fmt_any = self.formats
        events = []
        for k, (tid, start, end) in enumerate(rows):
            if len(events) >= out.room:
                out.add("".join(events), len(events))
                return rows[k:]
            if (self.pid, tid) not in out.threads:
                out.use(self.pid, tid, self.process, self.lanes[tid])
            d = end - start
            events.append(fmt % (tid, start // 1000, start % 1000, d // 1000, d % 1000, jstr(OVERLAP_THREADS[tid])))
        out.add("".join(events), len(events))
        return None


class FreqSource(EventSource):
    """The CANN layout's "AI Core Freq" of a device (ecosystem-target.md §2.6): msprof reads no frequency log,
    so, as the reference without one, info.json's aic_frequency from the device's sync instant, repeated every
    FREQ_STEP_US (the reference's filling, its float texts) and once more at collectionTimeEnd (as written)."""

    noun, owner = "frequency sample", "process"

    def __init__(self, report):
        device = device_number(report)
        self.report = report
        self.pid = cann_pid(_host_pid(report), CANN_FREQ, device)
        self.process = cann_process(CANN_FREQ, device)
        self.format = _FREQ.replace("<PID>", str(self.pid))
        self.mhz = repr(float(report.aic_mhz) * 1e6 / 1e6)       # (Hz, then MHz: the reference's floats)

    def batches(self, window=None) -> Iterator[list]:
        if window is not None and window[0] == 1:     # (a handful of events: the first half has them)
            return iter(())
        return iter([self._samples()])

    def _samples(self) -> list:
        """(epoch ns, ts text) of each sample."""
        time, clock = self.report.time, self.report.clock
        ns = time.device_ns(int(clock.get("dev_cntvct") or 0))
        first = (Decimal(repr(ns)) / 1000 + Decimal(repr(time.offset_us))).quantize(Decimal("0.001"), ROUND_HALF_EVEN)
        texts = [str(first)]
        end = clock.get("collection_end") or str(first + 1)
        begin, stop = float(texts[0]), float(end)
        if stop - begin > FREQ_STEP_US:
            filled = min(int((stop - begin) // FREQ_STEP_US), int((stop - 1 - begin) // FREQ_STEP_US))
            texts += [str(begin + k * FREQ_STEP_US) for k in range(1, filled + 1)]
        return [(int(Decimal(text) * 1000), text) for text in texts + [end]]

    def start(self, row) -> int:
        return row[0]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        out.use(self.pid, 0, self.process, None)        # (a handful of events: beyond the file's room, if need be)
        out.add("".join(self.format % (text, self.mhz) for _ns, text in rows), len(rows))
        return None
