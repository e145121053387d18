"""A JOB's timelines (outputs.md §2, docs/timeline.md), as sources for the one trace writer (msprof.trace):

* ``task_time_{dev}.{model_name}.{model_id}.{batch_num}.json`` — the tasks of one model (process "Task
  Scheduler", one thread per stream), the ``svp_acl_mdl_execute`` calls that started its iterations (process
  "AscendCL") and a HostToDevice flow from each call to the first task of its iteration;
* ``task_time_{dev}.json`` — tasks outside any model;
* ``acl_{dev}.{model_name}.{model_id}.{batch_num}.json`` (lowest model id) or ``acl_{dev}.json`` — every ACL
  call of the collection (process "AscendCL" per pid, thread per tid).

Times are integer ns relative to the collection start, computed in SQL (raw-format.md §3).
"""
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.console import log, notice
from msprof.decode.acl import api_type_name
from msprof.decode.hwts import TASK_TYPES
from msprof.contract import Selection
from msprof.layouts.where import selection_sql
from msprof.paths import safe_name
from msprof.contract import EventSource, Timeline
from msprof.events import (FLOW_CATEGORY, NA_JSON, TASK_PID_BASE, JsonNames, batches, device_number, jstr,
                           other_data, sorted_query, us_formats, us_text)

# ACL calls that start a model execution (a HostToDevice flow links each to its iteration).
EXECUTE_APIS = ("svp_acl_mdl_execute", "aclmdlExecute")
TASK_PROCESS = "Task Scheduler"
ACL_PROCESS = "AscendCL"

_X_TASK, _X_TASK_ANY = us_formats(
    ',\n{"ph":"X","pid":%d,"tid":%d,"ts":%U,"dur":%U,"name":%s,"args":{"Task Type":%s,'
    '"Stream Id":%d,"Task Id":%d,"Layer Id":%s,"Iteration":%s}}')
_X_ACL, _X_ACL_ANY = us_formats(
    ',\n{"ph":"X","pid":%d,"tid":%d,"ts":%U,"dur":%U,"name":%s,"args":{"Mode":%s,"Process Id":%d,"Thread Id":%d}}')
_X_CALL = (',\n{"ph":"X","pid":%d,"tid":%d,"ts":%s,"dur":%s,"name":%s,"args":{"Mode":%s,'
           '"Process Id":%d,"Thread Id":%d,"Iteration":%d}}')
_FLOW_S = ',\n{"ph":"s","cat":"%s","name":"%s","id":%d,"pid":%d,"tid":%d,"ts":%s}'
_FLOW_F = ',\n{"ph":"f","bp":"e","cat":"%s","name":"%s","id":%d,"pid":%d,"tid":%d,"ts":%s}'


def model_rows(report) -> Dict[int, dict]:
    """Models with tasks or a model description: id → name, batch_num (missing facts filled as reports do)."""
    models = {m["model_id"]: m for m in report.models()}
    for (model_id,) in report.conn.execute("SELECT DISTINCT model_id FROM task WHERE model_id IS NOT NULL"):
        models.setdefault(model_id, {"model_id": model_id, "model_name": f"model{model_id}", "batch_num": 1,
                                     "input_pic_num": None})
    return dict(sorted(models.items()))


def _model_base(prefix: str, report, model: dict) -> str:
    parts = [report.device_id, model["model_name"], model["model_id"], model["batch_num"] or 1]
    return f"{prefix}_" + ".".join(safe_name(p) for p in parts)


def timelines(report, selection: Selection) -> List[Timeline]:
    models = model_rows(report)
    out: List[Timeline] = []
    label = report.unit.label
    if report.has_tasks:
        where, args = selection_sql(Selection(iteration_id=selection.iteration_id), iteration="index_id")
        counts = dict(report.conn.execute(f"SELECT model_id, count(*) FROM task WHERE {' AND '.join(where) or 1}"
                                          " GROUP BY model_id", args))
        for model in models.values():
            if selection.model_id is not None and model["model_id"] != selection.model_id:
                continue
            if model["model_id"] in counts:
                # (one iteration's file is named apart from the whole run's: neither export replaces the other)
                suffix = "" if selection.everything else f"_iter{selection.iteration_id}"
                out.append(Timeline(_model_base("task_time", report, model) + suffix,
                                    other_data(report, "task_time", model, selection.iteration_id),
                                    _TaskSources(model, selection.iteration_id), counts[model["model_id"]]))
        if selection.everything and None in counts:
            out.append(Timeline(f"task_time_{safe_name(report.device_id)}",
                                other_data(report, "task_time", None), _TaskSources(None, None), counts[None]))
    else:
        notice(f"{label}: no HWTS task data: task_time timeline skipped")
    calls = report.count("acl_api")
    if not selection.everything:
        if calls:       # (the acl file holds every call of the run: an iteration's export does not rewrite it)
            notice(f"{label}: the acl timeline covers the whole run: an export without --model-id and "
                   "--iteration-id writes it")
    elif calls:
        base = _model_base("acl", report, models[min(models)]) if models else f"acl_{safe_name(report.device_id)}"
        out.append(Timeline(base, other_data(report, "acl", None), _acl_sources, calls))
    else:
        notice(f"{label}: no ACL API data: acl timeline skipped")
    return out


class _TaskSources:
    """Picklable factory of a task_time timeline's source (a child process may rebuild the timeline)."""

    def __init__(self, model: Optional[dict], iteration_id: Optional[int]):
        self.model, self.iteration_id = model, iteration_id

    def __call__(self, report) -> List[EventSource]:
        return [JobTaskSource(report, self.model, self.iteration_id)]


class JobTaskSource(EventSource):
    """The tasks of one model (or of none), with the execute call and HostToDevice flow of each iteration."""

    noun, owner = "task", "stream (corrupt data)"

    def __init__(self, report, model: Optional[dict], iteration_id: Optional[int]):
        self.report, self.model, self.iteration_id = report, model, iteration_id
        self.time = report.time
        self.device = device_number(report)
        self.pid = TASK_PID_BASE + self.device
        self.layer_names = self._layer_names()
        self.type_names: Dict[int, str] = {}
        self.links = self._links() if model is not None else iter(())
        self.next_link = next(self.links, None)
        self.pending: Dict[int, tuple] = {}       # iteration index -> its link, until its first task
        self.backwards = self.flows = self.fetched = 0
        where, args = self._where()
        (self.tasks,) = report.conn.execute(f"SELECT count(*) FROM task WHERE {where}", args).fetchone()

    def _where(self) -> Tuple[str, dict]:
        if self.model is None:
            return "model_id IS NULL", {}
        where, args = selection_sql(Selection(self.model["model_id"], self.iteration_id), iteration="index_id")
        return " AND ".join(where), args

    def batches(self) -> Iterator[list]:
        time = self.time
        where, args = self._where()
        # Unpaired tasks (no start or no end) are the ones this query leaves out: counted as the difference,
        # since the count of all tasks reads the model index only, not every row.
        cursor = sorted_query(self.report.conn,
                              f"SELECT stream_id, task_id, task_type, index_id, layer_id,"
                              f" {time.device_ns_sql('start_syscnt')}, {time.device_ns_sql('end_syscnt')} FROM task"
                              f" WHERE {where} AND start_syscnt IS NOT NULL AND end_syscnt IS NOT NULL"
                              f" ORDER BY start_syscnt, end_syscnt DESC, seq", args)
        for rows in batches(cursor):
            self.fetched += len(rows)
            yield rows

    def start(self, row) -> int:
        return row[5]

    def _layer_names(self) -> Dict[tuple, str]:
        """(layer id, stream, task) -> JSON name for this file's model (every task of the file has that model
        id); a layer row is a task's by its (stream, task) too (report.LAYER_OF_TASK)."""
        names = {}
        model_id = None if self.model is None else self.model["model_id"]
        for layer_id, stream_id, task_id, name in self.report.conn.execute(
                "SELECT layer_id, stream_id, task_id, layer_name FROM layer WHERE model_id IS ? ORDER BY rowid",
                (model_id,)):
            if name and name.strip():      # (a name of spaces names nothing: the task type does)
                names.setdefault((layer_id, stream_id, task_id), jstr(name))
        return names

    def write(self, rows: list, out, lanes) -> Optional[list]:
        layer_names, type_names, pending = self.layer_names, self.type_names, self.pending
        place, room, fmt, pid = lanes.place, out.room, _X_TASK, self.pid
        threads = out.threads
        events: List[str] = []
        count = 0
        rows = iter(rows)
        for stream, task_id, task_type, index_id, layer_id, start, end in rows:
            if end < start:
                self.backwards += 1
                continue
            type_name = type_names.get(task_type)
            if type_name is None:
                type_name = type_names[task_type] = jstr(TASK_TYPES.get(task_type, str(task_type)))
            while self.next_link is not None and self.next_link[2] <= start:
                pending[self.next_link[1]] = self.next_link
                self.next_link = next(self.links, None)
            link = pending.get(index_id) if pending else None
            if link is not None:
                # the first task of an iteration its execute call starts is a group of four events (the call, the
                # flow's start, the task, the flow's end) that go in one file: the events before it go in first,
                # and the file then has room for the group, or is empty and takes it anyway, or is done
                out.add("".join(events), count)
                events, count, room = [], 0, out.room
                if room < 4 and not out.empty:
                    return [(stream, task_id, task_type, index_id, layer_id, start, end), *rows]
            elif count >= room:         # (the row as it came, and those after it: for the next file)
                out.add("".join(events), count)
                return [(stream, task_id, task_type, index_id, layer_id, start, end), *rows]
            lane = place(stream, stream, "Stream", stream * 256, start, end)
            if link is not None:
                del pending[index_id]
                events += self._flow(out, lanes, link)
                count += 2
                self.flows += 1
            if len(pending) > 64:         # iterations that ended without a timed task
                for key in [k for k, v in pending.items() if v[3] < start]:
                    del pending[key]
            tid = lane.tid
            if (pid, tid) not in threads:
                out.use(pid, tid, TASK_PROCESS, lane)
            name = layer_names.get((layer_id, stream, task_id)) or type_name
            layer = NA_JSON if layer_id is None else layer_id
            iteration = NA_JSON if index_id is None else index_id
            if start >= 0:
                d = end - start
                events.append(fmt % (pid, tid, start // 1000, start % 1000, d // 1000, d % 1000, name, type_name,
                                     stream, task_id, layer, iteration))
            else:
                events.append(_X_TASK_ANY % (pid, tid, us_text(start), us_text(end - start), name, type_name, stream,
                                             task_id, layer, iteration))
            count += 1
            if link is not None:
                events.append(_FLOW_F % (FLOW_CATEGORY, FLOW_CATEGORY, link[4], pid, tid, us_text(start)))
                count += 1
        out.add("".join(events), count)
        return None

    def _flow(self, out, lanes, link: tuple) -> List[str]:
        """The execute call (X) and the flow start; the task X and flow end follow (one group: 4 events)."""
        _model, index_id, it_start, _it_end, flow_id, call = link
        _seq, call_pid, call_tid, api_type, name, c_start, c_end = call
        lane = lanes.place(("acl", call_pid, call_tid), call_tid, "Thread", call_tid, c_start, c_end)
        out.use(call_pid, lane.tid, ACL_PROCESS, lane)
        s_ts = min(max(it_start, c_start), c_end)
        return [_X_CALL % (call_pid, lane.tid, us_text(c_start), us_text(c_end - c_start), jstr(name),
                           jstr(api_type_name(api_type)), call_pid, call_tid, index_id),
                _FLOW_S % (FLOW_CATEGORY, FLOW_CATEGORY, flow_id, call_pid, lane.tid, us_text(s_ts))]

    def _links(self) -> Iterator[tuple]:
        """(model_id, index_id, it_start, it_end, flow_id, call) for each iteration of this file that lies
        inside an execute call; iterations in start order, each call linked at most once (the tightest)."""
        conn, time = self.report.conn, self.time
        model_id = self.model["model_id"]
        iterations = conn.cursor().execute(
            f"SELECT model_id, index_id, {time.device_ns_sql('start_syscnt')}, {time.device_ns_sql('end_syscnt')}"
            " FROM iteration WHERE start_syscnt IS NOT NULL AND end_syscnt IS NOT NULL"
            " ORDER BY start_syscnt, model_id, index_id")
        marks = ",".join("?" for _ in EXECUTE_APIS)
        calls = conn.cursor().execute(
            f"SELECT seq, pid, tid, api_type, name, {time.host_ns_sql('start')}, {time.host_ns_sql('[end]')} FROM acl_api"
            f" WHERE name IN ({marks}) AND [end] >= start ORDER BY start, seq", EXECUTE_APIS)
        next_call = next(calls, None)
        active: List[list] = []           # [call row, used]
        for it_model, index_id, it_start, it_end in iterations:
            while next_call is not None and next_call[5] <= it_start:
                active.append([next_call, False])
                next_call = next(calls, None)
            if active:
                active = [entry for entry in active if entry[0][6] >= it_start]
            best = None
            for entry in active:
                call = entry[0]
                if not entry[1] and call[5] <= it_start and call[6] >= it_end and (best is None or call[5] > best[0][5]):
                    best = entry
            if best is None:
                continue
            best[1] = True
            if it_model != model_id or (self.iteration_id is not None and index_id != self.iteration_id):
                continue
            flow_id = (self.device << 40) | (best[0][0] & ((1 << 40) - 1))
            yield (it_model, index_id, it_start, it_end, flow_id, best[0])

    def finish(self, base: str, lanes) -> None:
        unpaired = self.tasks - self.fetched
        if unpaired:
            log.info("%s: %d unpaired task record(s) have no time and are not in the timeline", base, unpaired)
        super().finish(base, lanes)
        log.info("%s: %d HostToDevice flow(s)", base, self.flows)


class AclSource(EventSource):
    """Every ACL call of the collection (process "AscendCL" per pid, thread per tid)."""

    noun, owner = "ACL call", "thread"

    def __init__(self, report):
        self.report = report
        self.time = report.time
        self.names = JsonNames()
        self.modes: Dict[int, str] = {}
        self.backwards = 0

    def batches(self) -> Iterator[list]:
        time = self.time
        cursor = sorted_query(self.report.conn, f"SELECT pid, tid, api_type, name, {time.host_ns_sql('start')},"
                                                f" {time.host_ns_sql('[end]')} FROM acl_api ORDER BY start, [end] DESC,"
                                                " seq")
        return batches(cursor)

    def start(self, row) -> int:
        return row[4]

    def write(self, rows: list, out, lanes) -> Optional[list]:
        names, modes = self.names, self.modes
        place, room, fmt = lanes.place, out.room, _X_ACL
        threads = out.threads
        events: List[str] = []
        count = 0
        rows = iter(rows)
        for pid, tid, api_type, name, start, end in rows:
            if end < start:
                self.backwards += 1
                continue
            if count >= room:           # (the row as it came, and those after it: for the next file)
                out.add("".join(events), count)
                return [(pid, tid, api_type, name, start, end), *rows]
            jname = names[name]
            mode = modes.get(api_type)
            if mode is None:
                mode = modes[api_type] = jstr(api_type_name(api_type))
            lane = place((pid, tid), tid, "Thread", tid, start, end)
            lane_tid = lane.tid
            if (pid, lane_tid) not in threads:
                out.use(pid, lane_tid, ACL_PROCESS, lane)
            if start >= 0:
                d = end - start
                events.append(fmt % (pid, lane_tid, start // 1000, start % 1000, d // 1000, d % 1000, jname, mode,
                                     pid, tid))
            else:
                events.append(_X_ACL_ANY % (pid, lane_tid, us_text(start), us_text(end - start), jname, mode, pid,
                                            tid))
            count += 1
        out.add("".join(events), count)
        return None


def _acl_sources(report) -> List[EventSource]:
    return [AclSource(report)]
