"""export timeline: Chrome trace JSON files of device tasks and host ACL calls (outputs.md §2).

Files, in ``<result dir>/timeline/`` (see docs/timeline.md):

* ``task_time_{dev}.{model_name}.{model_id}.{batch_num}.json`` — the tasks of one model (process
  "Task Scheduler", one thread per stream), plus the ``svp_acl_mdl_execute`` calls that started its
  iterations (process "AscendCL") and a HostToDevice flow from each call to the first task of its
  iteration;
* ``task_time_{dev}.json`` — tasks outside any model;
* ``acl_{dev}.{model_name}.{model_id}.{batch_num}.json`` (lowest model id) or ``acl_{dev}.json`` — every
  ACL call of the collection (process "AscendCL" per pid, thread per tid).

Writing streams: a cursor ordered by time feeds events one at a time into a temporary file, after room
left for the metadata (only known when the slice is complete: overlap threads appear on the way); the
metadata then go into that room (large slices) or before a copy of the body (small ones), and the file
is checked (msprof.export.tracecheck) and renamed into place. Above ``SLICE_EVENTS`` events a timeline
is split into ``…_slice_<k>.json`` files.
"""
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Hashable, Iterator, List, Optional, Tuple

from msprof import __version__
from msprof.atomic import atomic_path
from msprof.console import log, notice
from msprof.export import safe_name
from msprof.export.tracecheck import TraceError, check_trace
from msprof.decode.acl import api_type_name
from msprof.decode.hwts import ASCEND_TASK_TYPES, TASK_TYPES
from msprof.reports import Report
from msprof.workers import process_pool, several_cores

# A timeline with more events (metadata not counted) is split into slices of at most this many.
SLICE_EVENTS = 1_000_000
# Check written files with tracecheck before they are renamed into place: every file, or (the default)
# slices of at most CHECK_MAX_EVENTS events. Re-reading a 1M-event slice costs ~1.4 s, a third of the
# export; the writer builds each event from a fixed template and puts slices on lanes where they nest,
# and the tests check every file they export. ``export timeline --check`` checks every file.
CHECK_FILES = True
CHECK_MAX_EVENTS = 250_000
# Room left at the start of each slice file for its header and metadata (about 200 bytes per thread),
# and the size from which a slice is finished in place instead of being rewritten with a copy of its
# body: the line of spaces left in such a file is then at most 0.4 % of it.
HEAD_ROOM = 1 << 16
IN_PLACE_MIN_BYTES = 1 << 24
# With at least this many ACL calls (and task data too), the acl timeline is written and checked by a
# child process while this one writes the task_time timelines (two cores: about half the wall time).
PARALLEL_MIN_EVENTS = 100_000

# ACL calls that start a model execution (a HostToDevice flow links each to its iteration).
EXECUTE_APIS = ("svp_acl_mdl_execute", "aclmdlExecute")
FLOW_CATEGORY = "HostToDevice"
TASK_PROCESS = "Task Scheduler"
ACL_PROCESS = "AscendCL"
# Synthetic ids, above what Linux hands out (pid_max <= 2^22), so they never clash with real pids/tids.
TASK_PID_BASE = 1 << 22
LANE_TID_BASE = 1 << 24

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Rows per fetch (and per write of formatted events): few enough that the row tuples and event strings
# of one batch are freed and reused by the next; with 8192 the allocator returns its arenas to the OS
# and faults them in again for every batch (0.3 s per 1M rows).
_FETCH_ROWS = 1024


def _sorted(conn, sql: str, args=()):
    """A cursor over ``sql``, whose ORDER BY sorts a whole table. SQLite sorts in runs of the cache size
    (2 MB by default), spilled to a temporary file and merged; with room for 128 MB, 1M task or ACL rows
    (~75 MB) are sorted in memory at once (0.2-1 s less per 1M rows). The sort is done by the first
    step, inside execute(), so the connection's setting can be restored right after."""
    (cache_size,) = conn.execute("PRAGMA cache_size").fetchone()
    conn.execute("PRAGMA cache_size = -131072")
    try:
        return conn.execute(sql, args)
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache_size)}")


def _batches(cursor):
    """Rows of ``cursor`` in lists of _FETCH_ROWS (fewer Python↔SQLite round trips than row by row)."""
    while True:
        rows = cursor.fetchmany(_FETCH_ROWS)
        if not rows:
            return
        yield rows
_NA = '"N/A"'


def clean_name(value) -> str:
    """A display name without control characters or unencodable text."""
    text = "" if value is None else str(value)
    text = text.encode("utf-8", "replace").decode("utf-8")
    return _CONTROL.sub("?", text)


def _jstr(value) -> str:
    return json.dumps(clean_name(value), ensure_ascii=False)


def _ts(ns: int) -> str:
    """µs with 3 decimals, as a JSON number, from integer ns."""
    return repr(ns / 1000)


# ---------------------------------------------------------------------------------------------------
# Threads: one per stream / host thread, with extra "(overlap)" lanes for partially overlapping data
# ---------------------------------------------------------------------------------------------------
class _Lane:
    __slots__ = ("tid", "name", "sort", "stack", "last", "horizon")

    def __init__(self, tid: int, name: str, sort: int):
        self.tid, self.name, self.sort = tid, name, sort
        self.stack: List[int] = []     # end ns of the open slices
        self.last = None               # start ns of the previous slice
        self.horizon = None            # (first lane only) latest end ns of all slices of its thread so far


class _Lanes:
    """Assigns slices (fed in start order) to threads so that slices on a thread nest properly.

    A slice that partially overlaps an open slice of its thread goes to the first "(overlap)" lane
    where it fits (a new lane if none does): nothing is dropped, nothing is moved in time."""

    def __init__(self):
        self._lanes: Dict[Hashable, List[_Lane]] = {}    # thread key -> its lanes, first lane first
        self._next_tid = LANE_TID_BASE
        self.moved = 0

    def place(self, key: Hashable, tid: int, label: str, sort: int, start: int, end: int) -> _Lane:
        """The lane of a slice of thread ``key`` (first lane: ``tid``, named "{label} {tid}"); keys: a
        stream id, (pid, tid) of a host thread, ("acl", pid, tid) of an execute call's thread."""
        lanes = self._lanes.get(key)
        if lanes is None:
            lanes = self._lanes[key] = [_Lane(tid, f"{label} {tid}", sort)]
        else:
            first = lanes[0]
            if start >= first.horizon:
                # Every earlier slice of the thread has ended (the usual case): the first lane, whose
                # open slices would all be popped below; other lanes' stacks only hold ended slices too.
                first.stack = [end]
                first.last = start
                first.horizon = end
                return first
        first = lanes[0]
        if first.horizon is None or end > first.horizon:
            first.horizon = end
        for lane in lanes:
            if lane.last is not None and start < lane.last:
                continue
            stack = lane.stack
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                lane.last = start
                if lane is not first:
                    self.moved += 1
                return lane
        n = len(lanes)
        name = f"{label} {tid}"
        lane = _Lane(self._next_tid, f"{name} (overlap{'' if n == 1 else ' %d' % n})", sort + min(n, 255))
        self._next_tid += 1
        lane.stack.append(end)
        lane.last = start
        lanes.append(lane)
        self.moved += 1
        return lane


# ---------------------------------------------------------------------------------------------------
# One timeline (base file name): body → slices
# ---------------------------------------------------------------------------------------------------
class _Timeline:
    """The files of one timeline (base name), written slice by slice.

    A slice's events go straight into its temporary file, after HEAD_ROOM bytes left free for the
    header and metadata (only known once the slice is complete: overlap threads appear on the way).
    A large slice whose metadata fits gets them written into that room, right-aligned behind a line of
    spaces (JSON whitespace), so its body is never copied; any other slice is rewritten with its
    metadata and a copy of the body (cheap for a small one)."""

    def __init__(self, directory: Path, base: str, other: dict, check_all: bool = False):
        self.directory, self.base, self.other = directory, base, other
        self.check_all = check_all
        self.limit = max(1, int(SLICE_EVENTS))
        self.count = 0                       # events in the current slice
        self.total = 0
        self.slice_index = 0
        self.processes: Dict[int, str] = {}
        self.threads: Dict[Tuple[int, int], Tuple[str, int]] = {}
        self.written: List[Path] = []
        directory.mkdir(parents=True, exist_ok=True)
        self._open_slice()

    def _open_slice(self) -> None:
        fd, path = tempfile.mkstemp(prefix=f".{self.base}.", suffix=".tmp", dir=self.directory)
        self._path = Path(path)
        os.lseek(fd, HEAD_ROOM, os.SEEK_SET)
        self.body = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 20)

    def reserve(self, n: int) -> None:
        """Make room for a group of n events that must share a file (a flow and its slices)."""
        if self.count and self.count + n > self.limit:
            self._flush(final=False)

    def use(self, pid: int, tid: int, process: str, lane: _Lane) -> None:
        if (pid, tid) not in self.threads:
            self.threads[(pid, tid)] = (lane.name, lane.sort)
            self.processes.setdefault(pid, process)

    def _metadata(self) -> Iterator[str]:
        for pid, name in sorted(self.processes.items()):
            yield '{"ph":"M","pid":%d,"tid":0,"name":"process_name","args":{"name":%s}}' % (pid, _jstr(name))
        for (pid, tid), (name, sort) in sorted(self.threads.items()):
            yield '{"ph":"M","pid":%d,"tid":%d,"name":"thread_name","args":{"name":%s}}' % (pid, tid, _jstr(name))
            yield '{"ph":"M","pid":%d,"tid":%d,"name":"thread_sort_index","args":{"sort_index":%d}}' % (pid, tid, sort)

    def _flush(self, final: bool) -> None:
        sliced = not final or self.slice_index > 0
        name = f"{self.base}_slice_{self.slice_index}.json" if sliced else f"{self.base}.json"
        target = self.directory / name
        other = dict(self.other)
        if sliced:
            other["slice"] = self.slice_index
        header = '{"traceEvents":['
        metadata = ",".join("\n" + line for line in self._metadata()).encode()
        self.body.write('\n],"displayTimeUnit":"ms","otherData":'
                        + json.dumps(other, ensure_ascii=False, sort_keys=True) + "}\n")
        self.body.close()
        spaces = HEAD_ROOM - len(header) - 1 - len(metadata)
        with atomic_path(target) as tmp:
            if spaces >= 0 and os.path.getsize(self._path) >= IN_PLACE_MIN_BYTES:
                # header line, a line of spaces, the metadata: exactly the room, the body follows
                with open(self._path, "r+b") as out:
                    out.write(header.encode() + b"\n" + b" " * spaces + metadata)
                os.replace(self._path, tmp)         # the slice file is the result
            else:
                with open(tmp, "wb") as out, open(self._path, "rb") as body:
                    out.write(header.encode() + metadata)
                    body.seek(HEAD_ROOM)
                    shutil.copyfileobj(body, out, 1 << 20)
                self._path.unlink()
            if CHECK_FILES and (self.check_all or self.count <= CHECK_MAX_EVENTS):
                problems = check_trace(tmp)
                if problems:
                    raise TraceError(f"internal error: {target.name} breaks the trace rules: "
                                     + "; ".join(problems[:5]))
        self.written.append(target)
        self.total += self.count
        self.slice_index += 1
        self.count = 0
        self.processes, self.threads = {}, {}
        if not final:
            self._open_slice()

    def finish(self) -> List[Path]:
        try:
            self._flush(final=True)
        finally:
            self.close()
        keep = {p.name for p in self.written}
        for stale in [self.directory / f"{self.base}.json"] + list(self.directory.glob(f"{_glob_escape(self.base)}_slice_*.json")):
            if stale.name not in keep and stale.is_file():
                stale.unlink()
        return self.written

    def close(self) -> None:
        if not self.body.closed:
            self.body.close()
        if self._path.exists():
            self._path.unlink()


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


# ---------------------------------------------------------------------------------------------------
# SQL time expressions: integer ns relative to the collection start (raw-format.md §3)
# ---------------------------------------------------------------------------------------------------
class _Clock:
    def __init__(self, report: Report):
        c = report.clock
        self.hwts_mhz = c.get("hwts_mhz") or report.hwts_mhz
        self.dev_cntvct = int(c.get("dev_cntvct") or 0)
        self.dev_offset = int(c.get("host_mono_ns") or 0) - int(c.get("clock_monotonic_raw_ns") or 0)
        self.mono = int(c.get("clock_monotonic_raw_ns") or 0)
        self.cpu_mhz = c.get("cpu_mhz")
        self.begin_us = c.get("collection_begin_us") or 0

    def device(self, column: str) -> str:
        factor = 1000.0 / float(self.hwts_mhz)
        return f"CAST(round(({column} - {self.dev_cntvct}) * {factor!r} + {self.dev_offset}) AS INTEGER)"

    def host(self, column: str) -> str:
        if self.cpu_mhz:
            return f"CAST(round({column} * {1000.0 / float(self.cpu_mhz)!r} - {self.mono}) AS INTEGER)"
        return f"({column} - {self.mono})"


# ---------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------
def timeline_dir(report: Report) -> Path:
    return report.result_dir / "timeline"


def _device_number(report: Report) -> int:
    try:
        return max(0, min(int(report.device_id), 4095))
    except (TypeError, ValueError):
        return 0


def _model_rows(report: Report) -> Dict[int, dict]:
    """Models with tasks or a model description: id → name, batch_num (missing facts filled as reports do)."""
    models = {m["model_id"]: m for m in report.models()}
    for (model_id,) in report.conn.execute("SELECT DISTINCT model_id FROM task WHERE model_id IS NOT NULL"):
        models.setdefault(model_id, {"model_id": model_id, "model_name": f"model{model_id}", "batch_num": 1,
                                     "input_pic_num": None})
    return dict(sorted(models.items()))


def _model_base(prefix: str, report: Report, model: dict) -> str:
    parts = [report.device_id, model["model_name"], model["model_id"], model["batch_num"] or 1]
    return f"{prefix}_" + ".".join(safe_name(p) for p in parts)


def expected_bases(report: Report) -> List[str]:
    """Base names (without .json / _slice_k.json) an unfiltered export writes."""
    bases = []
    models = _model_rows(report)
    with_tasks = {m for (m,) in report.conn.execute("SELECT DISTINCT model_id FROM task WHERE model_id IS NOT NULL")}
    for model_id, model in models.items():
        if model_id in with_tasks:
            bases.append(_model_base("task_time", report, model))
    if report.conn.execute("SELECT 1 FROM task WHERE model_id IS NULL LIMIT 1").fetchone():
        bases.append(f"task_time_{safe_name(report.device_id)}")
    if report.has_acl:
        bases.append(_acl_base(report, models))
    return bases


def _acl_base(report: Report, models: Dict[int, dict]) -> str:
    if models:
        return _model_base("acl", report, models[min(models)])
    return f"acl_{safe_name(report.device_id)}"


def write_timeline(report: Report, model_id: Optional[int] = None, iteration_id: Optional[int] = None,
                   check_all: bool = False) -> List[Path]:
    """Write the timeline files of one result directory; return the paths written. ``check_all``: check
    every file with tracecheck, not only those up to CHECK_MAX_EVENTS events."""
    out_dir = timeline_dir(report)
    models = _model_rows(report)
    written: List[Path] = []
    if model_id is not None or iteration_id is not None:
        iterations = report.iterations(model_id, iteration_id)
        if not iterations:
            from msprof.errors import UsageError

            raise UsageError(f"{report.result_dir}: no recorded iteration {iteration_id} of model {model_id} "
                             "(msprof query lists what is there)")
    has_tasks, acl_calls = report.has_tasks, report._count("acl_api")
    clock = _Clock(report) if has_tasks or acl_calls else None
    executor = acl_child = None
    if has_tasks and acl_calls >= PARALLEL_MIN_EVENTS and several_cores():
        executor = process_pool(1)
        acl_child = executor.submit(_acl_in_child, str(report.result_dir), str(out_dir), _acl_base(report, models),
                                    SLICE_EVENTS, CHECK_FILES, CHECK_MAX_EVENTS, check_all)
    try:
        if has_tasks:
            selected = [m for m in models.values() if model_id is None or m["model_id"] == model_id]
            for model in selected:
                written += _TaskWriter(report, clock, out_dir, model, iteration_id, check_all).run()
            if model_id is None and iteration_id is None:
                written += _TaskWriter(report, clock, out_dir, None, None, check_all).run()
        else:
            notice(f"{report.result_dir.name}: no HWTS task data: task_time timeline skipped")
        if acl_child is not None:
            paths, messages = acl_child.result()
            for level, message in messages:
                log.log(level, "%s", message)
            written += [Path(p) for p in paths]
        elif acl_calls:
            written += _write_acl(report, clock, out_dir, _acl_base(report, models), check_all=check_all)
        else:
            notice(f"{report.result_dir.name}: no ACL API data: acl timeline skipped")
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
    for path in written:
        log.info("wrote %s", path)
    return written


def timeline_current(report: Report) -> bool:
    """True when every timeline file of a full export exists and is newer than the database."""
    from msprof import store

    try:
        db_mtime = store.db_path(report.result_dir).stat().st_mtime_ns
    except OSError:
        return False
    directory = timeline_dir(report)
    for base in expected_bases(report):
        candidates = [directory / f"{base}.json", directory / f"{base}_slice_0.json"]
        mtimes = [p.stat().st_mtime_ns for p in candidates if p.is_file()]
        if not mtimes or max(mtimes) < db_mtime:
            return False
        path = candidates[0] if candidates[0].is_file() else candidates[1]
        if _other_data(path).get("iteration") is not None:
            return False          # a --model-id/--iteration-id export holds one iteration only
    return True


def _other_data(path: Path) -> dict:
    """otherData of a timeline file, from its last line (cheap: no need to read the events)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            tail = handle.read().decode("utf-8", "replace").rstrip().rsplit("\n", 1)[-1]
        return json.loads('{"traceEvents":[' + tail).get("otherData") or {}
    except (OSError, ValueError, AttributeError):
        return {}


def _other(report: Report, clock: "_Clock", kind: str, model: Optional[dict], iteration_id=None) -> dict:
    begin = clock.begin_us if clock else 0
    return {
        "collectionTimeBegin": int(begin) if float(begin).is_integer() else begin,
        "deviceId": report.device_id,
        "file": kind,
        "model": None if model is None else {"modelId": model["model_id"], "modelName": model["model_name"],
                                              "batchNum": model["batch_num"]},
        "iteration": iteration_id,
        "msprofVersion": __version__,
        "timeUnit": "us",
    }


# ---------------------------------------------------------------------------------------------------
# task_time files
# ---------------------------------------------------------------------------------------------------
_X_TASK = (',\n{"ph":"X","pid":%d,"tid":%d,"ts":%r,"dur":%r,"name":%s,"args":{"Task Type":%s,'
           '"Stream Id":%d,"Task Id":%d,"Layer Id":%s,"Iteration":%s}}')
_X_ACL = (',\n{"ph":"X","pid":%d,"tid":%d,"ts":%r,"dur":%r,"name":%s,"args":{"Mode":%s,'
          '"Process Id":%d,"Thread Id":%d}}')
_X_CALL = (',\n{"ph":"X","pid":%d,"tid":%d,"ts":%r,"dur":%r,"name":%s,"args":{"Mode":%s,'
           '"Process Id":%d,"Thread Id":%d,"Iteration":%d}}')
_FLOW_S = ',\n{"ph":"s","cat":"%s","name":"%s","id":%d,"pid":%d,"tid":%d,"ts":%r}'
_FLOW_F = ',\n{"ph":"f","bp":"e","cat":"%s","name":"%s","id":%d,"pid":%d,"tid":%d,"ts":%r}'


class _TaskWriter:
    def __init__(self, report: Report, clock: _Clock, out_dir: Path, model: Optional[dict],
                 iteration_id: Optional[int], check_all: bool = False):
        self.report, self.clock, self.out_dir = report, clock, out_dir
        self.model, self.iteration_id, self.check_all = model, iteration_id, check_all
        ascend = str(report.meta.get("layout", "")).startswith("PROF")
        self.task_types = ASCEND_TASK_TYPES if ascend else TASK_TYPES
        self.device = _device_number(report)
        self.pid = TASK_PID_BASE + self.device

    def _where(self, alias: str = "") -> Tuple[str, list]:
        a = alias
        if self.model is None:
            return f"{a}model_id IS NULL", []
        if self.iteration_id is None:
            return f"{a}model_id = ?", [self.model["model_id"]]
        return f"{a}model_id = ? AND {a}index_id = ?", [self.model["model_id"], self.iteration_id]

    def run(self) -> List[Path]:
        conn = self.report.conn
        where, args = self._where()
        if not conn.execute(f"SELECT 1 FROM task WHERE {where} LIMIT 1", args).fetchone():
            return []
        if self.model is None:
            base = f"task_time_{safe_name(self.report.device_id)}"
        else:
            base = _model_base("task_time", self.report, self.model)
        timeline = _Timeline(self.out_dir, base, _other(self.report, self.clock, "task_time", self.model,
                                                        self.iteration_id), self.check_all)
        try:
            stats = self._write(timeline)
            written = timeline.finish()
        except BaseException:
            timeline.close()
            raise
        unpaired, backwards, moved, flows = stats
        if unpaired:
            log.info("%s: %d unpaired task record(s) have no time and are not in the timeline", base, unpaired)
        if backwards:
            log.warning("%s: %d task(s) end before they start (corrupt data): left out of the timeline",
                        base, backwards)
        if moved:
            log.warning("%s: %d task(s) partially overlap another task of their stream (corrupt data): "
                        "shown on '(overlap)' threads", base, moved)
        log.info("%s: %d event(s), %d HostToDevice flow(s), %d file(s)", base, timeline.total, flows, len(written))
        return written

    def _layer_names(self) -> Dict[int, str]:
        """Layer id -> JSON name for this file's model (every task of the file has that model id)."""
        names = {}
        model_id = None if self.model is None else self.model["model_id"]
        for layer_id, name in self.report.conn.execute(
                "SELECT layer_id, layer_name FROM layer WHERE model_id IS ? ORDER BY rowid", (model_id,)):
            if name not in (None, ""):
                names.setdefault(layer_id, _jstr(name))
        return names

    def _write(self, timeline: _Timeline):
        conn, clock = self.report.conn, self.clock
        where, args = self._where()
        # Unpaired tasks (no start or no end) are the ones the query below leaves out: counted as the
        # difference, since the count of all tasks reads the model index only, not every row.
        (tasks,) = conn.execute(f"SELECT count(*) FROM task WHERE {where}", args).fetchone()
        cursor = _sorted(conn, f"SELECT stream_id, task_id, task_type, index_id, layer_id,"
                               f" {clock.device('start_syscnt')}, {clock.device('end_syscnt')} FROM task"
                               f" WHERE {where} AND start_syscnt IS NOT NULL AND end_syscnt IS NOT NULL"
                               f" ORDER BY start_syscnt, end_syscnt DESC, seq", args)
        layer_names = self._layer_names()
        type_names: Dict[int, str] = {}
        lanes = _Lanes()
        pid = self.pid
        links = self._links() if self.model is not None else iter(())
        next_link = next(links, None)
        pending: Dict[int, tuple] = {}       # iteration index -> its link, until its first task
        place, limit, fmt, types = lanes.place, timeline.limit, _X_TASK, self.task_types
        backwards = flows = fetched = 0
        for rows in _batches(cursor):
            fetched += len(rows)
            out: List[str] = []
            count, threads = timeline.count, timeline.threads
            for stream, task_id, task_type, index_id, layer_id, start, end in rows:
                if end < start:
                    backwards += 1
                    continue
                type_name = type_names.get(task_type)
                if type_name is None:
                    type_name = type_names[task_type] = _jstr(types.get(task_type, str(task_type)))
                lane = place(stream, stream, "Stream", stream * 256, start, end)
                while next_link is not None and next_link[2] <= start:
                    pending[next_link[1]] = next_link
                    next_link = next(links, None)
                link = pending.pop(index_id, None) if pending else None
                if link is not None or count >= limit:
                    timeline.body.write("".join(out))
                    out = []
                    timeline.count = count
                    if link is not None:
                        self._flow(timeline, lanes, link, start)
                        flows += 1
                    else:
                        timeline.reserve(1)
                    count, threads = timeline.count, timeline.threads
                if len(pending) > 64:         # iterations that ended without a timed task
                    for key in [k for k, v in pending.items() if v[3] < start]:
                        del pending[key]
                tid = lane.tid
                if (pid, tid) not in threads:
                    timeline.use(pid, tid, TASK_PROCESS, lane)
                name = layer_names.get(layer_id) or type_name
                out.append(fmt % (pid, tid, start / 1000, (end - start) / 1000, name, type_name, stream, task_id,
                                  _NA if layer_id is None else layer_id, _NA if index_id is None else index_id))
                count += 1
                if link is not None:
                    out.append(_FLOW_F % (FLOW_CATEGORY, FLOW_CATEGORY, link[4], pid, tid, start / 1000))
                    count += 1
            timeline.body.write("".join(out))
            timeline.count = count
        return tasks - fetched, backwards, lanes.moved, flows

    def _flow(self, timeline: _Timeline, lanes: _Lanes, link: tuple, task_start: int) -> None:
        """The execute call (X) and the flow start; the task X and flow end follow (one group: 4 events)."""
        timeline.reserve(4)
        _model, index_id, it_start, _it_end, flow_id, call = link
        _seq, call_pid, call_tid, api_type, name, c_start, c_end = call
        lane = lanes.place(("acl", call_pid, call_tid), call_tid, "Thread", call_tid, c_start, c_end)
        timeline.use(call_pid, lane.tid, ACL_PROCESS, lane)
        write = timeline.body.write
        write(_X_CALL % (call_pid, lane.tid, c_start / 1000, (c_end - c_start) / 1000, _jstr(name),
                         _jstr(api_type_name(api_type)), call_pid, call_tid, index_id))
        s_ts = min(max(it_start, c_start), c_end)
        write(_FLOW_S % (FLOW_CATEGORY, FLOW_CATEGORY, flow_id, call_pid, lane.tid, s_ts / 1000))
        timeline.count += 2

    def _links(self) -> Iterator[tuple]:
        """(model_id, index_id, it_start, it_end, flow_id, call) for each iteration of this file that lies
        inside an execute call; iterations in start order, each call linked at most once (the tightest)."""
        conn, clock = self.report.conn, self.clock
        model_id = self.model["model_id"]
        iterations = conn.cursor().execute(
            f"SELECT model_id, index_id, {clock.device('start_syscnt')}, {clock.device('end_syscnt')}"
            " FROM iteration WHERE start_syscnt IS NOT NULL AND end_syscnt IS NOT NULL"
            " ORDER BY start_syscnt, model_id, index_id")
        marks = ",".join("?" for _ in EXECUTE_APIS)
        calls = conn.cursor().execute(
            f"SELECT seq, pid, tid, api_type, name, {clock.host('start')}, {clock.host('[end]')} FROM acl_api"
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


# ---------------------------------------------------------------------------------------------------
# acl file
# ---------------------------------------------------------------------------------------------------
def _acl_in_child(result_dir: str, out_dir: str, base: str, slice_events: int, check_files: bool,
                  check_max_events: int, check_all: bool):
    """The acl timeline, written in a child process: (paths written, [(log level, message)])."""
    global SLICE_EVENTS, CHECK_FILES, CHECK_MAX_EVENTS
    from msprof.reports import open_report

    SLICE_EVENTS, CHECK_FILES, CHECK_MAX_EVENTS = slice_events, check_files, check_max_events
    messages: List[Tuple[int, str]] = []
    with open_report(Path(result_dir)) as report:
        written = _write_acl(report, _Clock(report), Path(out_dir), base, messages, check_all)
    return [str(p) for p in written], messages


def _write_acl(report: Report, clock: _Clock, out_dir: Path, base: str,
               messages: Optional[List[Tuple[int, str]]] = None, check_all: bool = False) -> List[Path]:
    """The acl timeline; warnings are logged, or appended to ``messages`` (level, text) when given."""

    def warn(text: str) -> None:
        if messages is None:
            log.warning("%s", text)
        else:
            messages.append((logging.WARNING, text))

    timeline = _Timeline(out_dir, base, _other(report, clock, "acl", None), check_all)
    lanes = _Lanes()
    backwards = 0
    try:
        cursor = _sorted(report.conn, f"SELECT pid, tid, api_type, name, {clock.host('start')},"
                                      f" {clock.host('[end]')} FROM acl_api ORDER BY start, [end] DESC, seq")
        names: Dict[str, str] = {}
        modes: Dict[int, str] = {}
        place, limit, fmt = lanes.place, timeline.limit, _X_ACL
        for rows in _batches(cursor):
            out: List[str] = []
            count, threads = timeline.count, timeline.threads
            for pid, tid, api_type, name, start, end in rows:
                if end < start:
                    backwards += 1
                    continue
                jname = names.get(name)
                if jname is None:
                    jname = _jstr(name)
                    if len(names) < 100000:
                        names[name] = jname
                mode = modes.get(api_type)
                if mode is None:
                    mode = modes[api_type] = _jstr(api_type_name(api_type))
                lane = place((pid, tid), tid, "Thread", tid, start, end)
                if count >= limit:
                    timeline.body.write("".join(out))
                    out = []
                    timeline.count = count
                    timeline.reserve(1)
                    count, threads = timeline.count, timeline.threads
                lane_tid = lane.tid
                if (pid, lane_tid) not in threads:
                    timeline.use(pid, lane_tid, ACL_PROCESS, lane)
                out.append(fmt % (pid, lane_tid, start / 1000, (end - start) / 1000, jname, mode, pid, tid))
                count += 1
            timeline.body.write("".join(out))
            timeline.count = count
        written = timeline.finish()
    except BaseException:
        timeline.close()
        raise
    if backwards:
        warn(f"{base}: {backwards} ACL call(s) end before they start (corrupt data): left out of the timeline")
    if lanes.moved:
        warn(f"{base}: {lanes.moved} ACL call(s) partially overlap another call of their thread: shown on "
             "'(overlap)' threads")
    return written
