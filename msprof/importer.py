"""import: raw files of one result directory → decoders → sqlite/msprof.db (built atomically)."""
import bisect
import contextlib
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional

from msprof import metrics
from msprof.collection import ResultDir, data_files, read_result_dir, require_hwts_frequency
from msprof.console import log, notice
from msprof.raw import acl, freq, hwts, pmu, step_trace, textinfo
from msprof.raw.slices import SliceStream, digest_file, group_files
from msprof.schema import bulk_sql, insert_sql
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
    """Finds a task's iteration (its start — or end when the start is lost — lies within the
    iteration's step-trace bounds) and its layer ((stream, task) in that model's layer.info)."""

    def __init__(self, iterations, layers):
        self.iterations = iterations  # [(model_id, index_id, start, end)] sorted by start
        self.starts = [it[2] for it in iterations]
        self.last = None
        self.layer_in_model = {(m, s << 16 | t): lid for (m, lid, t, s, *_rest) in layers}
        by_key: Dict[tuple, Optional[tuple]] = {}
        for (m, lid, t, s, *_rest) in layers:
            by_key[(s, t)] = (m, lid) if (s, t) not in by_key else None  # ambiguous across models
        self.layer_any = {k: v for k, v in by_key.items() if v is not None}

    def place(self, stream_id, task_id, moment):
        """(model_id, index_id, layer_id) of a task at syscnt ``moment``; None where unknown."""
        last = self.last
        if last is not None and last[2] <= moment <= last[3]:  # tasks come in time order: usually a hit
            model_id, index_id = last[0], last[1]
        else:
            model_id = index_id = None
            position = bisect.bisect_right(self.starts, moment) - 1
            for candidate in range(position, max(position - 4, -1), -1):
                m, i, it_start, it_end = self.iterations[candidate]
                if it_start <= moment <= it_end:
                    model_id, index_id = m, i
                    self.last = self.iterations[candidate]
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

    with store.building(result.path) as db:
        conn = db.conn
        counts: Dict[str, dict] = {}
        models, layers = _load_model_files(db, text_files, notices)
        events = metrics.event_ids(result.sample)
        db["pmu_event"].insert_all([{"slot": i, "event_id": e, "name": metrics.event_name(e)}
                                    for i, e in enumerate(events)])
        iterations = _load_step_trace(conn, device_streams.get("step_trace", []), counts, notices)
        db["iteration"].insert_all([dict(zip(("model_id", "index_id", "start_syscnt", "end_syscnt"), it))
                                    for it in iterations])
        _load_simple(conn, device_streams.get("freq", []), freq, "freq_change", counts, notices)
        phase = _Phases()
        side_streams = (device_streams.get("pmu", []), grouped.get("acl", []))
        side_bytes = sum(p.stat().st_size for streams in side_streams for item in streams for p in item.files)
        if side_bytes >= PARALLEL_MIN_BYTES and (os.cpu_count() or 1) > 1:
            with _side_load_in_worker(store.db_path(result.path), side_streams) as finished:
                _load_hwts(conn, device_streams.get("hwts", []), TaskPlacer(iterations, layers), result, counts,
                           notices)
                phase("HWTS decode + pair + load")
                part, side_counts, side_notices = finished()
                phase("waiting for PMU + ACL worker")
                notices.replay(side_notices)
                counts.update(side_counts)
                _merge_part(conn, part)
                phase("merge PMU + ACL")
        else:
            _load_hwts(conn, device_streams.get("hwts", []), TaskPlacer(iterations, layers), result, counts, notices)
            _load_side(conn, side_streams, counts, notices)
            phase("HWTS, PMU, ACL decode + load")
        for kind, label in (("pmu", "AA Core PMU"), ("acl", "ACL API"), ("step_trace", "step trace"),
                            ("hwts", "HWTS task log")):
            if not grouped.get(kind):
                notices.notice(f"no {label} data in {result.path / 'data'}: outputs that need it are skipped")
        if not layers and grouped.get("hwts"):
            notices.warn(f"no layer.info in {result.path / 'data'}: tasks are named by task type")
        store.create_indexes(db)
        phase("indexes")
        if result.aic_mhz:  # a task with one HWTS side lost is timed by its PMU cycles instead
            conn.execute("UPDATE task SET dur_us = (SELECT p.total_cycles / ? FROM pmu p WHERE p.stream_id ="
                         " task.stream_id AND p.task_id = task.task_id AND p.exec_n = task.exec_n)"
                         " WHERE dur_us IS NULL", (result.aic_mhz,))
        write_bookkeeping(db, result, counts, notices, files + result.metadata_files)
    total_records = sum(c["records"] for c in counts.values())
    log.info("imported %s: %d records in %.2f s", result.path, total_records, time.monotonic() - started)
    return store.db_path(result.path)


# PMU and ACL streams are loaded in a second process (into a part database merged afterwards) when
# they hold at least this much: below it, starting a process costs more than it saves.
PARALLEL_MIN_BYTES = 32 << 20


def _load_side(conn, side_streams, counts, notices):
    pmu_streams, acl_streams = side_streams
    _load_pmu(conn, pmu_streams, counts, notices)
    _load_simple(conn, acl_streams, acl, "acl_api", counts, notices)


def _side_worker(part_path: str, side_streams):
    """In a child process: PMU + ACL into a part database; returns (counts, notices)."""
    import sqlite3

    import sqlite_utils

    conn = sqlite3.connect(part_path, isolation_level=None)
    try:
        store.tune_for_bulk_load(conn)
        conn.execute("BEGIN")
        db = sqlite_utils.Database(conn)
        for table in ("pmu", "acl_api"):
            columns, pk = store.TABLES[table]
            db[table].create(columns, pk=pk)
        counts: Dict[str, dict] = {}
        notices = Notices(echo=False)
        _load_side(conn, side_streams, counts, notices)
        if conn.in_transaction:
            conn.execute("COMMIT")
        return counts, notices.items
    finally:
        conn.close()


@contextlib.contextmanager
def _side_load_in_worker(target: Path, side_streams):
    """Run _side_worker in a child process while the block loads HWTS; yield a function that waits
    for the child and returns (part database path, counts, notices)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    part = target.parent / f".part-{os.getpid()}.db"
    if part.exists():
        part.unlink()
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    executor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context(method))
    try:
        future = executor.submit(_side_worker, str(part), side_streams)

        def finished():
            counts, notice_items = future.result()
            return part, counts, notice_items

        yield finished
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        if part.exists():
            part.unlink()


def _merge_part(conn, part: Path) -> None:
    conn.execute("ATTACH DATABASE ? AS part", (str(part),))
    for table in ("pmu", "acl_api"):
        columns = ", ".join(f"[{c}]" for c in store.TABLES[table][0] if c != "seq")
        conn.execute(f"INSERT INTO main.[{table}] ({columns}) SELECT {columns} FROM part.[{table}] ORDER BY seq")
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


def _load_simple(conn, stream_files, module, table, counts, notices):
    """Families whose decoder maps a chunk to rows with no state across chunks (ACL, frequency)."""
    sql = bulk_sql(table)
    label = {"acl_api": "ACL", "freq_change": "frequency"}[table]
    for item, stream in _streams(stream_files, module, label, notices, getattr(module, "looks_aligned", None)):
        local: dict = {}
        records = 0
        for chunk in stream.chunks():
            store.bulk_insert(conn, sql, module.decode(chunk, local))
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


def _load_hwts(conn, stream_files, placer, result: ResultDir, counts, notices):
    task_sql = bulk_sql("task")
    mhz = result.clock.hwts_mhz

    def task_rows(finished):
        place = placer.place
        for stream_id, task_id, task_type, start, end, n in finished:
            if start is None or end is None:
                at, dur = (end if start is None else start), None
            else:
                at, dur = start, (end - start) / mhz
            yield (stream_id, task_id, task_type, start, end, at, n, dur) + place(stream_id, task_id, at)

    for item, stream in _streams(stream_files, hwts, "HWTS", notices, hwts.looks_aligned):
        pairer = hwts.Pairer()
        records = 0
        for chunk in stream.chunks():
            records += len(chunk) // hwts.RECORD_SIZE
            store.bulk_insert(conn, task_sql, task_rows(pairer.feed(hwts.LAYOUT.iter_unpack(chunk))))
        store.bulk_insert(conn, task_sql, task_rows(pairer.finish()))
        for message in pairer.warnings(stream.files[0].name):
            notices.warn(message)
        count_stream(counts, item, stream, records, pairer.other_logs)


def _load_pmu(conn, stream_files, counts, notices):
    sql = bulk_sql("pmu")
    for item, stream in _streams(stream_files, pmu, "AA Core PMU", notices, pmu.looks_aligned):
        numberer = pmu.Numberer()
        records = 0
        for chunk in stream.chunks():
            store.bulk_insert(conn, sql, numberer.feed(chunk))
            records += len(chunk) // pmu.RECORD_SIZE
        if numberer.skipped:
            notices.warn(f"{stream.files[0].name}: {numberer.skipped} PMU record(s) with a bad magic or type skipped")
        count_stream(counts, item, stream, records, numberer.skipped)


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
