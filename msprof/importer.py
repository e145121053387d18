"""import: raw files of one result directory → decoders → sqlite/msprof.db (built atomically)."""
import bisect
import itertools
import math
import operator
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional

from msprof import metrics
from msprof.collection import ResultDir, data_files, read_result_dir, require_hwts_frequency
from msprof.console import log, notice
from msprof.decode import acl, freq, hwts, pmu, step_trace, textinfo
from msprof.decode.slices import SliceStream, digest_file, group_files
from msprof.schema import insert_sql
from msprof.workers import process_pool, several_cores
from msprof import store


class Notices:
    """Warnings met while importing: logged once each and kept in the database's notice table.
    A worker process collects them silently (echo=False); the parent replays them."""

    def __init__(self, echo: bool = True):
        self.items: List[tuple] = []
        self.echo = echo

    def warn(self, message: str) -> None:
        if self.echo:
            log.warning(message)
        self.items.append(("warning", message))

    def notice(self, message: str) -> None:
        if self.echo:
            notice(message)
        self.items.append(("notice", message))

    def replay(self, items) -> None:
        for level, message in items:
            (self.warn if level == "warning" else self.notice)(message)


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


def import_result_dir(result_dir: Path) -> Path:
    """Rebuild sqlite/msprof.db of one result directory; return its path."""
    started = time.monotonic()
    result = read_result_dir(result_dir)
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
    side = {"pmu": device_streams.get("pmu", []), "acl": grouped.get("acl", [])}
    with _SideLoads(store.db_path(result.path), side) as workers, store.building(result.path) as db:
        conn = db.conn
        counts: Dict[str, dict] = {}
        models, layers = _load_model_files(db, text_files, notices)
        events = metrics.event_ids(result.sample)
        db["pmu_event"].insert_all([{"slot": i, "event_id": e, "name": metrics.event_name(e)}
                                    for i, e in enumerate(events)])
        iterations = _load_step_trace(conn, device_streams.get("step_trace", []), counts, notices)
        db["iteration"].insert_all([dict(zip(("model_id", "index_id", "start_syscnt", "end_syscnt"), it))
                                    for it in iterations])
        _load_simple(conn, device_streams.get("freq", []), freq, "frequency", counts, notices,
                     lambda c, rows: store.insert_rows(c, "freq_change", rows))
        untimed = _load_hwts(conn, device_streams.get("hwts", []), TaskPlacer(iterations, layers), result, counts,
                             notices)
        store.create_indexes(db, ["task", "layer"])  # while the workers may still be busy
        phase("model, step trace, HWTS + index")
        for family in workers.order:
            if family in workers.families:
                part, side_counts, side_notices = workers.result(family)
                phase(f"waiting for the {family} worker")
                notices.replay(side_notices)
                counts.update(side_counts)
                _merge_part(db, part, SIDE_TABLES[family])
                phase(f"merge {family}")
            else:
                SIDE_LOADERS[family](conn, side[family], counts, notices)
                store.create_indexes(db, [SIDE_TABLES[family]])
                phase(f"{family} decode + load + index")
        for kind, label in (("pmu", "AA Core PMU"), ("acl", "ACL API"), ("step_trace", "step trace"),
                            ("hwts", "HWTS task log")):
            if not grouped.get(kind):
                notices.notice(f"no {label} data in {result.path / 'data'}: outputs that need it are skipped")
        if not layers and grouped.get("hwts"):
            notices.warn(f"no layer.info in {result.path / 'data'}: tasks are named by task type")
        if untimed and result.aic_mhz:  # a task with one HWTS side lost is timed by its PMU cycles instead
            conn.execute("UPDATE task SET dur_us = (SELECT p.total_cycles / ? FROM pmu p WHERE p.stream_id ="
                         " task.stream_id AND p.task_id = task.task_id AND p.exec_n = task.exec_n)"
                         " WHERE dur_us IS NULL", (result.aic_mhz,))
        write_bookkeeping(db, result, counts, notices, files + result.metadata_files)
        phase("bookkeeping")
    total_records = sum(c["records"] for c in counts.values())
    log.info("imported %s: %d records in %.2f s", result.path, total_records, time.monotonic() - started)
    return store.db_path(result.path)


# PMU and ACL streams each at least this large are loaded by a worker process (into part databases merged
# afterwards) while this one loads HWTS; below it a process costs more than it saves.
PARALLEL_MIN_BYTES = 16 << 20


def _load_acl(conn, stream_files, counts, notices):
    _load_simple(conn, stream_files, acl, "ACL", counts, notices, acl.LAYOUT.insert)


def _load_pmu(conn, stream_files, counts, notices):
    for item, stream in _streams(stream_files, pmu, "AA Core PMU", notices, pmu.looks_aligned):
        numberer = pmu.Numberer()
        records = 0
        for chunk in stream.chunks():
            pmu.LAYOUT.insert(conn, numberer.feed(chunk))
            records += len(chunk) // pmu.RECORD_SIZE
        if numberer.skipped:
            notices.warn(f"{stream.files[0].name}: {numberer.skipped} PMU record(s) with a bad magic or type skipped")
        count_stream(counts, item, stream, records, numberer.skipped)


SIDE_LOADERS = {"pmu": _load_pmu, "acl": _load_acl}
SIDE_TABLES = {"pmu": "pmu", "acl": "acl_api"}
SIDE_ORDER = ("pmu", "acl")


def _side_worker(part_path: str, family: str, stream_files):
    """In a worker process: one family into a part database (table, then its indexes); returns
    (counts, notices)."""
    import sqlite3

    import sqlite_utils

    conn = sqlite3.connect(part_path, isolation_level=None)
    try:
        store.tune_for_bulk_load(conn)
        conn.execute("BEGIN")
        db = sqlite_utils.Database(conn)
        table = SIDE_TABLES[family]
        store.create_schema(db, [table])
        counts: Dict[str, dict] = {}
        notices = Notices(echo=False)
        SIDE_LOADERS[family](conn, stream_files, counts, notices)
        store.create_indexes(db, [table])
        if conn.in_transaction:
            conn.execute("COMMIT")
        return counts, notices.items
    finally:
        conn.close()


class _SideLoads:
    """Loads the large side families (PMU, ACL) in one worker process when there is more than one core;
    ``result(family)`` waits for one and returns (part database path, counts, notices).

    One worker, not one per family: two cores then run two processes, so the HWTS load is not slowed by a
    third. The worker loads PMU, then ACL; the main process merges in that ``order``, so the PMU merge
    overlaps the ACL load and the merge left at the end is the cheaper one (ACL has no index)."""

    def __init__(self, target: Path, side):
        self.target = target
        sizes = {f: sum(p.stat().st_size for item in streams for p in item.files) for f, streams in side.items()}
        parallel = several_cores()
        self.order = [f for f in SIDE_ORDER if f in side]
        self.families = [f for f in self.order if parallel and sizes[f] >= PARALLEL_MIN_BYTES]
        self.side = side
        self.futures = {}
        self.executor = None

    def _part(self, family: str) -> Path:
        return self.target.parent / f".part-{os.getpid()}-{family}.db"

    def __enter__(self):
        if self.families:
            self.executor = process_pool(1)
            for family in self.families:
                part = self._part(family)
                if part.exists():
                    part.unlink()
                self.futures[family] = self.executor.submit(_side_worker, str(part), family, self.side[family])
        return self

    def result(self, family: str):
        counts, notice_items = self.futures[family].result()
        return self._part(family), counts, notice_items

    def __exit__(self, *exc):
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
        for family in self.families:
            if self._part(family).exists():
                self._part(family).unlink()
        return False


def _merge_part(db, part: Path, table: str) -> None:
    """Copy a worker's table (and its indexes) in. ``INSERT INTO t SELECT * FROM part.t`` between
    identically declared tables is SQLite's transfer optimisation: pages of records copied as they are,
    index b-trees included, instead of rows decoded and inserted one by one."""
    conn = db.conn
    store.create_indexes(db, [table])
    conn.execute("ATTACH DATABASE ? AS part", (str(part),))
    conn.execute(f"INSERT INTO main.[{table}] SELECT * FROM part.[{table}]")
    if conn.in_transaction:  # DETACH is refused inside a transaction
        conn.execute("COMMIT")
    conn.execute("DETACH DATABASE part")
    conn.execute("BEGIN")


def _load_model_files(db, text_files, notices):
    models, layers = [], []
    for path in text_files:
        if textinfo.NET_INFO.match(path.name):
            models.append(textinfo.model_row(path, textinfo.read_net_info(path)))
    known = {m["model_id"] for m in models}
    for path in text_files:
        match = textinfo.LAYER_INFO.match(path.name)
        if match:
            model_id = int(match.group("id"))
            if model_id not in known:
                notices.warn(f"{path.name}: no matching net.info; model {model_id} gets defaults")
                models.append({"model_id": model_id, "model_name": match.group("name"), "batch_num": 1,
                               "input_pic_num": None, "layer_num": None})
                known.add(model_id)
            layers.extend(textinfo.read_layer_info(path, model_id))
    db["model"].insert_all(models)
    db.conn.executemany(insert_sql("layer"), layers)
    return models, layers


def _streams(stream_files, module, label, notices, looks_aligned=None):
    for stream_files_item in stream_files:
        stream = SliceStream(stream_files_item.files, module.RECORD_SIZE, label, looks_aligned)
        yield stream_files_item, stream
        for message in stream.loss_messages():
            notices.warn(message)


def count_stream(counts, stream_files_item, stream, records, skipped):
    counts[stream_files_item.stem + (f".{stream_files_item.device}" if stream_files_item.device else "")] = {
        "kind": stream_files_item.kind, "files": len(stream.files), "bytes": stream.total_bytes,
        "records": records, "skipped": skipped, "head_lost": stream.head_lost, "tail_lost": stream.tail_lost,
        "digests": stream.digests}


def _load_simple(conn, stream_files, module, label, counts, notices, insert):
    """Families whose decoder maps a chunk to rows with no state across chunks (ACL, frequency);
    ``insert(conn, decoded)`` stores what ``module.decode`` returns."""
    for item, stream in _streams(stream_files, module, label, notices, getattr(module, "looks_aligned", None)):
        local: dict = {}
        records = 0
        for chunk in stream.chunks():
            insert(conn, module.decode(chunk, local))
            records += len(chunk) // module.RECORD_SIZE
        skipped = local.get("skipped", 0)
        if skipped:
            notices.warn(f"{stream.files[0].name}: {skipped} {label} record(s) with a bad magic or tag skipped")
        count_stream(counts, item, stream, records, skipped)


def _load_step_trace(conn, stream_files, counts, notices):
    rows_all = []
    for item, stream in _streams(stream_files, step_trace, "step trace", notices):
        local: dict = {}
        records = 0
        for chunk in stream.chunks():
            rows = step_trace.decode(chunk, local)
            rows_all.extend(rows)
            records += len(chunk) // step_trace.RECORD_SIZE
        count_stream(counts, item, stream, records, local.get("skipped", 0))
    conn.executemany(insert_sql("step_trace", skip_seq=True), rows_all)
    iterations, unpaired = step_trace.iterations(rows_all)
    if unpaired:
        notices.warn(f"step trace: {unpaired} iteration mark(s) without their start/end pair ignored")
    return iterations


def _load_hwts(conn, stream_files, placer, result: ResultDir, counts, notices) -> int:
    """Pair and load every HWTS stream; returns how many tasks lack a start or an end."""
    mhz = result.clock.hwts_mhz
    unpaired = 0
    for item, stream in _streams(stream_files, hwts, "HWTS", notices, hwts.looks_aligned):
        pairer = hwts.Pairer()
        records = 0
        for chunk in stream.chunks():
            records += len(chunk) // hwts.RECORD_SIZE
            for piece in pairer.feed(chunk):
                store.insert_rows(conn, "task", _task_rows(piece, placer, mhz))
        store.insert_rows(conn, "task", _task_rows((False, pairer.finish()), placer, mhz))
        for message in pairer.warnings(stream.files[0].name):
            notices.warn(message)
        count_stream(counts, item, stream, records, pairer.other_logs)
        unpaired += pairer.unmatched_ends + pairer.unended_starts
    return unpaired


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


def write_bookkeeping(db, result: ResultDir, counts, notices, all_files):
    """Record every source file (size, mtime, hash: what freshness checks compare) and the counts."""
    digests = {}
    for name, count in counts.items():
        for digest in count.pop("digests"):
            digests[digest.path] = (digest, count["kind"])
        db["decode_count"].insert(dict(count, stream=name))
    for path in all_files:
        if path not in digests:
            digests[path] = (digest_file(path), "data" if path.parent.name == "data" else "metadata")
    db["source_file"].insert_all([{"path": os.path.relpath(d.path, result.path), "kind": kind, "size": d.size,
                                   "mtime_ns": d.mtime_ns, "sha256": d.sha256} for d, kind in digests.values()],
                                 replace=True)
    db["notice"].insert_all([{"level": level, "message": message} for level, message in notices.items])
    clock = asdict(result.clock)
    meta = store.base_meta()
    meta.update({"layout": result.layout, "device_id": result.device_id,
                 "platform_version": result.platform_version, "pid": result.pid, "clock": clock,
                 "aic_mhz": result.aic_mhz, "hwts_mhz": result.clock.hwts_mhz, "ai_core_num": result.ai_core_num,
                 "sample": result.sample, "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "bytes_lost": sum(c["head_lost"] + c["tail_lost"] for c in counts.values()),
                 "complete": "1"})
    store.write_meta(db, meta)
