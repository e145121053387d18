"""import: raw files of one result directory → decoders → sqlite/msprof.db (built atomically)."""
import bisect
import itertools
import math
import operator
import time
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional

from msprof import metrics, parts, progress, store
from msprof.collection import ResultDir, data_files, read_result_dir, require_hwts_frequency
from msprof.console import log
from msprof.decode import step_trace, textinfo
from msprof.decode.acl import AclDecoder
from msprof.decode.base import Rows, StreamCount, load_streams
from msprof.decode.freq import FreqDecoder
from msprof.decode.hwts import TASK_TYPES, HwtsDecoder
from msprof.decode.pmu import SVP, PmuDecoder
from msprof.decode.slices import group_files
from msprof.decode.step_trace import StepTraceDecoder
from msprof.layouts.job.schema import SCHEMA, TASK_COLUMNS
from msprof.store import Notices
from msprof.workers import several_cores
# (its tasks have no PMU record: their executions are numbered apart, hwts.Pairer)
AA_CPU = next(k for k, v in TASK_TYPES.items() if v == "AA_CPU")


class _Phases:
    """Logs the time of each import phase (shown with -v)."""

    def __init__(self):
        self.last = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        log.info("  %-30s %.2f s", name, now - self.last)
        self.last = now


class TaskPlacer:
    """Finds a task's iteration (the latest-starting one whose step-trace bounds hold the task's start —
    or end when the start is lost) and its layer ((stream, task) in that model's layer.info)."""

    def __init__(self, iterations, layers):
        self.iterations = iterations  # [(model_id, index_id, start, end)] sorted by start
        self.starts = [it[2] for it in iterations]
        # by bisect position p (iteration p - 1; p = 0: before every iteration): its end, model and index
        self.end_at = [-math.inf] + [it[3] for it in iterations]
        self.model_at = [None] + [it[0] for it in iterations]
        self.index_at = [None] + [it[1] for it in iterations]
        self.layer_in_model = {(m, s << 16 | t): lid for (m, lid, t, s, *_rest) in layers}
        by_key: Dict[tuple, Optional[tuple]] = {}
        for (m, lid, t, s, *_rest) in layers:
            by_key[(s, t)] = (m, lid) if (s, t) not in by_key else None  # ambiguous across models
        self.layer_any = {k: v for k, v in by_key.items() if v is not None}

    def place(self, stream_id, task_id, moment):
        """(model_id, index_id, layer_id) of a task at syscnt ``moment``; None where unknown."""
        model_id = index_id = None
        position = bisect.bisect_right(self.starts, moment) - 1
        for candidate in range(position, max(position - 4, -1), -1):
            m, i, it_start, it_end = self.iterations[candidate]
            if it_start <= moment <= it_end:
                model_id, index_id = m, i
                break
        if model_id is not None:
            layer_id = self.layer_in_model.get((model_id, stream_id << 16 | task_id))
            if layer_id is not None:
                return model_id, index_id, layer_id
        found = self.layer_any.get((stream_id, task_id))
        if found is None:
            return model_id, index_id, None
        if model_id is None or model_id == found[0]:
            return found[0], index_id, found[1]
        return model_id, index_id, None

    def place_columns(self, streams, tasks, moments):
        """``place`` for whole columns: (model ids, index ids, layer ids). The usual case — the latest
        iteration starting before the task holds it and the layer is that model's — is answered with
        map() over the columns; every other task goes through ``place``."""
        count = len(moments)
        positions = self._positions(moments)
        models = list(map(self.model_at.__getitem__, positions))
        indexes = list(map(self.index_at.__getitem__, positions))
        keys = map(operator.or_, map(operator.lshift, streams, itertools.repeat(16)), tasks)
        layers = list(map(self.layer_in_model.get, zip(models, keys)))
        inside = map(operator.le, moments, map(self.end_at.__getitem__, positions))
        settled = map(operator.and_, inside, map(operator.is_not, layers, itertools.repeat(None)))
        for i in itertools.compress(range(count), map(operator.not_, settled)):
            models[i], indexes[i], layers[i] = self.place(streams[i], tasks[i], moments[i])
        return models, indexes, layers

    def _positions(self, moments) -> List[int]:
        """``bisect_right(self.starts, m)`` for every moment. Moments in time order (one stream) are cut
        where an iteration starts instead: a few bisects per run rather than one per task."""
        if not all(map(operator.le, moments, itertools.islice(moments, 1, None))):
            return list(map(bisect.bisect_right, itertools.repeat(self.starts, len(moments)), moments))
        starts, positions, done = self.starts, [], 0
        first = bisect.bisect_right(starts, moments[0]) if moments else 0
        last = bisect.bisect_right(starts, moments[-1]) if moments else 0
        for position in range(first, last):      # moments before starts[position] have that position
            cut = bisect.bisect_left(moments, starts[position], done)
            positions += [position] * (cut - done)
            done = cut
        positions += [last] * (len(moments) - done)
        return positions


def import_result_dir(result_dir: Path, target: Optional[Path] = None, spare_cores: bool = True) -> Path:
    """Rebuild the database of one JOB result directory (``target``, default <JOB>/sqlite/msprof.db); return
    its path. ``spare_cores``: the PMU and ACL loads may go to a worker process."""
    started = time.monotonic()
    result = read_result_dir(result_dir)
    target = Path(target) if target else store.db_path(result.path)
    notices = Notices()
    for message in result.warnings:
        notices.warn(message)
    files = data_files(result.path)
    text_files = [p for p in files if textinfo.NET_INFO.match(p.name) or textinfo.LAYER_INFO.match(p.name)]
    grouped, unknown = group_files([p for p in files if p not in text_files])
    for path in unknown:
        log.info("ignored %s (not a known raw file)", path.name)
    device_streams = {k: [s for s in v if s.device in (None, result.device_id)] for k, v in grouped.items()}
    if any(device_streams.get(k) for k in ("hwts", "pmu", "step_trace")):
        require_hwts_frequency(result, "device")

    phase = _Phases()
    # the worker loads PMU, then ACL: the PMU merge overlaps the ACL load, and the merge left at the end is
    # the cheaper one (ACL has no index)
    side = {"pmu": ("pmu", load_pmu, device_streams.get("pmu", [])),
            "acl": ("acl_api", load_acl, grouped.get("acl", []))}
    counts: Dict[str, StreamCount] = {}
    with store.build(target, SCHEMA) as db, parts.SideLoads(target, SCHEMA, side, spare_cores and several_cores()) as workers:
        conn = db.conn
        models, layers = _load_model_files(db, text_files, notices)
        events = metrics.event_ids(result.sample, SVP.counters, notices, bool(device_streams.get("pmu")))
        db["pmu_event"].insert_all([{"slot": i, "event_id": e, "name": metrics.event_name(e)}
                                    for i, e in enumerate(events)])
        iterations, untimed = _load_tasks(db, device_streams, layers, result.clock.hwts_mhz, notices, counts)
        progress.phase("indexing tasks")
        SCHEMA.create_indexes(db, ["task", "layer"])  # while the worker may still be busy
        phase("model, step trace, HWTS + index")
        progress.phase("merging PMU and ACL")
        for name in side:
            workers.merge(db, name, counts, notices)
            phase(f"{name} load / merge")
        for kind, label in (("pmu", "AA Core PMU"), ("acl", "ACL API"), ("step_trace", "step trace"),
                            ("hwts", "HWTS task log")):
            if not grouped.get(kind):
                notices.notice(f"no {label} data in {result.path / 'data'}: outputs that need it are skipped")
        if grouped.get("hwts"):
            _say_models_without_layers(models, layers, iterations, result.path / "data", notices)
        if untimed and result.aic_mhz:  # a task with one HWTS side lost is timed by its PMU cycles instead
            conn.execute("UPDATE task SET dur_us = (SELECT p.total_cycles / ? FROM pmu p WHERE p.stream_id ="
                         " task.stream_id AND p.task_id = task.task_id AND p.exec_n = task.exec_n)"
                         " WHERE dur_us IS NULL", (result.aic_mhz,))
        progress.phase("recording the raw files' digests")
        store.record_sources(db, result.path, counts, notices, files + result.metadata_files, _meta(result))
        phase("bookkeeping")
    total_records = sum(c.records for c in counts.values())
    log.info("imported %s: %d records in %.2f s", result.path, total_records, time.monotonic() - started)
    return target


def _load_tasks(db, streams: dict, layers: list, mhz: float, notices: Notices, counts: Dict[str, StreamCount]):
    """The step trace (its iterations paired), the frequency changes and the HWTS tasks (placed in their
    iteration and layer); returns the iterations and how many tasks have one time only."""
    conn = db.conn
    steps = load_streams(conn, streams.get("step_trace", []), lambda item: StepTraceDecoder(), notices, counts)
    iterations, unpaired = step_trace.iterations([row for d in steps for row in d.rows])
    if unpaired:
        notices.warn(f"step trace: {unpaired} iteration mark(s) without their start/end pair ignored")
    db["iteration"].insert_all([dict(zip(("model_id", "index_id", "start_syscnt", "end_syscnt"), it))
                                for it in iterations])
    load_streams(conn, streams.get("freq", []), lambda item: FreqDecoder(), notices, counts)
    placer = TaskPlacer(iterations, layers)
    tasks = load_streams(conn, streams.get("hwts", []),
                         lambda item: HwtsDecoder(lambda piece: [Rows("task", TASK_COLUMNS,
                                                                      _task_rows(piece, placer, mhz))],
                                                  apart=AA_CPU),
                         notices, counts)
    return iterations, sum(d.unpaired for d in tasks)


def load_pmu(conn, streams, counts, notices):
    load_streams(conn, streams, lambda item: PmuDecoder(SVP), notices, counts)


def load_acl(conn, streams, counts, notices):
    load_streams(conn, streams, lambda item: AclDecoder(), notices, counts)


def _meta(result: ResultDir) -> dict:
    return {"layout": "JOB", "device_id": result.device_id, "platform_version": result.platform_version,
            "pid": result.pid, "clock": asdict(result.clock), "aic_mhz": result.aic_mhz,
            "hwts_mhz": result.clock.hwts_mhz, "ai_core_num": result.ai_core_num, "sample": result.sample,
            "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _load_model_files(db, text_files, notices):
    models, layers = [], []
    bad = {path: textinfo.BadLines(path) for path in text_files}
    for path in text_files:
        if textinfo.NET_INFO.match(path.name):
            values = textinfo.read_net_info(path, bad[path])
            missing = textinfo.missing_keys(values)
            if missing:
                notices.warn(f"{path.name}: no {', '.join(missing)} (is the file cut short?): defaults used")
            models.append(textinfo.model_row(path, values, bad[path]))
    known = {m["model_id"] for m in models}
    for path in text_files:
        match = textinfo.LAYER_INFO.match(path.name)
        if match:
            model_id = textinfo._int(match.group("id"), textinfo.INT64)
            if model_id is None:
                notices.warn(f"{path.name}: the model id in its name is not a number in range: ignored")
                continue
            if model_id not in known:
                notices.warn(f"{path.name}: no matching net.info; model {model_id} gets defaults")
                models.append({"model_id": model_id, "model_name": match.group("name"), "batch_num": 1,
                               "input_pic_num": None, "layer_num": None})
                known.add(model_id)
            layers.extend(textinfo.read_layer_info(path, model_id, bad[path]))
    for lines in bad.values():
        if lines.warning():
            notices.warn(lines.warning())
    db["model"].insert_all(models, pk="model_id", replace=True)
    Rows("layer", ("model_id", "layer_id", "task_id", "stream_id", "layer_type", "layer_name", "ori_layer_name"),
         layers).insert(db.conn)
    return models, layers


def _say_models_without_layers(models: List[dict], layers: List[tuple], iterations: List[tuple], data: Path,
                               notices: Notices) -> None:
    """Which models (described by a net.info, or run: step trace) have no layer.info: their layer names and
    types are N/A. One warning when no model has one, else one per model without."""
    if not layers:
        notices.warn(f"no layer.info in {data}: layer names and types are N/A in the summaries (the timeline names "
                     "tasks by their task type)")
        return
    names = {m["model_id"]: m["model_name"] for m in models}
    described = {row[0] for row in layers}
    for model_id in sorted((set(names) | {it[0] for it in iterations}) - described):
        notices.warn(f"model {model_id} ({names.get(model_id) or f'model{model_id}'}): no layer.info in {data}: its "
                     "layer names and types are N/A in the summaries (the timeline names its tasks by their task type)")


def _task_rows(piece, placer: TaskPlacer, mhz: float):
    """Rows of the task table from a piece of pairing output (hwts.Piece): the task is placed (iteration,
    layer) by its start, or its end when the start is lost; timed only when it has both."""
    complete, data = piece
    if complete:
        streams, tasks, types, starts, ends, exec_n = data
        durations = map(operator.truediv, map(operator.sub, ends, starts), itertools.repeat(mhz))
        return list(zip(streams, tasks, types, starts, ends, starts, exec_n, durations,
                        *placer.place_columns(streams, tasks, starts)))
    rows = []
    for stream_id, task_id, task_type, start, end, n in data:
        if start is None or end is None:
            at, dur = (end if start is None else start), None
        else:
            at, dur = start, (end - start) / mhz
        rows.append((stream_id, task_id, task_type, start, end, at, n, dur) + placer.place(stream_id, task_id, at))
    return rows
