"""import for the PROF layout: host/ and device_N/ raw files → one SQLite database per result directory.

Bounded memory: every binary stream is read with ``SliceStream`` in chunks and inserted as it is decoded;
event pairing, STARS pairing (by counter) and the host association run as ordered SQL scans or set-based
SQL, never over an in-memory copy of a file. Shared JOB machinery is used as is: ``read_result_dir``,
``data_files``, ``group_files``/``SliceStream``, ``hwts.Pairer``, the importer's ``Notices``/``count_stream``/
``write_bookkeeping`` and the store's atomic temp-file build.
"""
import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Dict, List

import sqlite_utils

from msprof import store
from msprof.atomic import atomic_path
from msprof.collection import ResultDir, data_files, read_result_dir, require_hwts_frequency
from msprof.console import log
from msprof.importer import Notices, count_stream, write_bookkeeping
from msprof.metrics import event_ids
from msprof.prof import decoders as dec
from msprof.prof import schema
from msprof.decode import hwts
from msprof.decode.slices import SliceStream, digest_file, group_files


@contextlib.contextmanager
def building(result_dir: Path, tables):
    """Like msprof.store.building, with the PROF tables: a temporary file renamed into place on success."""
    with atomic_path(store.db_path(result_dir)) as tmp:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            store.tune_for_bulk_load(conn)
            db = sqlite_utils.Database(conn)
            conn.execute("BEGIN")
            schema.create(db, tables)
            yield db
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()


def import_result_dir(result_dir: Path) -> Path:
    """Rebuild sqlite/msprof.db of a PROF host/ or device_N/ directory; return its path."""
    result = read_result_dir(result_dir)
    if result.layout == "PROF_HOST":
        return import_host(result)
    return import_device(result)


def _streams(items, layout: dec.Layout, notices: Notices):
    for item in items:
        stream = SliceStream(item.files, layout.RECORD_SIZE, layout.label, layout.looks_aligned)
        yield item, stream
        for message in stream.loss_messages():
            notices.warn(message)


def _warn_skips(notices: Notices, name: str, label: str, skips: dec.Skips) -> None:
    for reason, n in sorted(skips.counts.items()):
        notices.warn(f"{name}: {n} {label} record(s) skipped ({reason})")


def _load_binary(conn, items, layout, decode, sql_by_table, counts, notices):
    """Decode one family of host records stream by stream, inserting as it goes."""
    for item, stream in _streams(items, layout, notices):
        aging = 1 if item.stem.lower().startswith("aging") else 0
        skips = dec.Skips()
        records = 0
        for chunk in stream.chunks():
            records += len(chunk) // layout.RECORD_SIZE
            out = decode(chunk, aging, skips)
            if isinstance(out, tuple):
                for (table, sql), rows in zip(sql_by_table, out):
                    conn.executemany(sql, rows)
            else:
                conn.executemany(sql_by_table[0][1], out)
        _warn_skips(notices, stream.files[0].name, layout.label, skips)
        count_stream(counts, item, stream, records, skips.total)


class _Digests:
    """SliceStream-like bookkeeping for text streams (read whole lines across slice files)."""

    def __init__(self, files):
        self.files = files
        self.total_bytes = sum(p.stat().st_size for p in files)
        self.head_lost = self.tail_lost = 0
        self.digests = [digest_file(p) for p in files]


def _text_lines(files):
    """Lines of a text stream whose slices may cut a line in two."""
    carry = ""
    for path in files:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            for line in handle:
                if carry:
                    line, carry = carry + line, ""
                if not line.endswith(("\n", "\r")):
                    carry = line
                    continue
                yield line
    if carry:
        yield carry


def _load_text(conn, items, parse, sql, label, counts, notices):
    for item in items:
        skips = dec.Skips()
        records = 0
        batch = []
        for line in _text_lines(item.files):
            row = parse(line, skips)
            if row is not None:
                batch.append(row)
                records += 1
            if len(batch) >= 10000:
                conn.executemany(sql, batch)
                batch = []
        conn.executemany(sql, batch)
        _warn_skips(notices, item.files[0].name, label, skips)
        count_stream(counts, item, _Digests(item.files), records, skips.total)


# ---------------------------------------------------------------------------------------------- host
def import_host(result: ResultDir) -> Path:
    started = time.monotonic()
    notices = Notices()
    for message in result.warnings:
        if "dev_start.log" not in message:    # the host has no device counter
            notices.warn(message)
    files = data_files(result.path)
    grouped, unknown = group_files(files)
    for path in unknown:
        log.info("ignored %s (not a known raw file)", path.name)
    T = schema.HOST_TABLES
    with building(result.path, T) as db:
        conn = db.conn
        counts: Dict[str, dict] = {}
        _load_text(conn, grouped.get("type_info_dic", []), dec.parse_type_line, schema.insert_sql(T, "type_name"),
                   "type_info_dic", counts, notices)
        _load_text(conn, grouped.get("hash_dic", []), dec.parse_hash_line,
                   "INSERT OR REPLACE INTO hash_string (hash, text) VALUES (?, ?)", "hash_dic", counts, notices)
        _load_binary(conn, grouped.get("api_event", []), dec.API_EVENT, dec.decode_api_event,
                     [("api", schema.insert_sql(T, "api")), ("event", schema.insert_sql(T, "event"))],
                     counts, notices)
        _load_binary(conn, grouped.get("node_basic_info", []), dec.NODE_BASIC_INFO, dec.decode_node_basic_info,
                     [("node_info", schema.insert_sql(T, "node_info"))], counts, notices)
        _load_binary(conn, grouped.get("task_track", []), dec.TASK_TRACK, dec.decode_task_track,
                     [("task_track", schema.insert_sql(T, "task_track"))], counts, notices)
        _load_binary(conn, grouped.get("graph_id_map", []), dec.GRAPH_ID_MAP, dec.decode_graph_id_map,
                     [("graph_map", schema.insert_sql(T, "graph_map"))], counts, notices)
        for kind, label in (("api_event", "API (api_event)"), ("task_track", "task_track"),
                            ("node_basic_info", "node_basic_info")):
            if not grouped.get(kind):
                notices.notice(f"no {label} data in {result.path / 'data'}: outputs that need it are skipped")
        _pair_events(conn, notices)
        schema.create_indexes(db, schema.HOST_INDEXES)
        associate(conn, notices)
        write_bookkeeping(db, result, counts, notices, files + result.metadata_files)
        store.write_meta(db, {"prof_role": "host"})
    log.info("imported %s in %.2f s", result.path, time.monotonic() - started)
    return store.db_path(result.path)


def _pair_events(conn, notices: Notices) -> None:
    """Two events of the same (level, thread, struct type, request id, item id) make one API from the first's
    timestamp to the second's (docs/prof-format.md §3); an unpaired event is reported and ignored."""
    sql = schema.insert_sql(schema.HOST_TABLES, "api")
    cursor = conn.execute("SELECT level, struct_type, thread, request_id, item_id, ts FROM event"
                          " ORDER BY level, thread, struct_type, request_id, item_id, ts, seq")
    pending = None
    unpaired = 0
    batch = []
    for level, stype, thread, request, item, ts in cursor:
        key = (level, stype, thread, request, item)
        if pending is not None and pending[0] == key:
            batch.append((level, stype, thread, pending[1], ts, item, request, 1))
            pending = None
            if len(batch) >= 10000:
                conn.executemany(sql, batch)
                batch = []
            continue
        if pending is not None:
            unpaired += 1
        pending = (key, ts)
    if pending is not None:
        unpaired += 1
    conn.executemany(sql, batch)
    if unpaired:
        notices.warn(f"api_event: {unpaired} event record(s) without their begin/end partner ignored")


def _case(column: str, mapping: Dict, default: str) -> str:
    parts = " ".join(f"WHEN {k!r} THEN {v!r}" if isinstance(k, str) else f"WHEN {k} THEN {v!r}"
                     for k, v in mapping.items())
    return f"CASE {column} {parts} ELSE {default} END"


def associate(conn, notices: Notices) -> None:
    """host_task: every kernel task_track with the op of the node-level API enclosing it on its thread, and the
    model/iteration of the enclosing model-level API (docs/prof-format.md §3, docs/prof.md "Association")."""
    # model executions: model-level APIs, numbered per model in time order
    conn.execute(
        "INSERT INTO model_exec (seq, thread, begin, [end], model_id, iteration)"
        " SELECT seq, thread, begin, [end], item_id,"
        " row_number() OVER (PARTITION BY item_id ORDER BY begin, seq) FROM api WHERE level = ?",
        (dec.LEVEL_MODEL,))
    conn.execute(
        "INSERT INTO model (model_id, model_name, iterations)"
        " SELECT m.model_id, (SELECT coalesce(h.text, CAST(g.model_name_hash AS TEXT)) FROM graph_map g"
        "  LEFT JOIN hash_string h ON h.hash = g.model_name_hash WHERE g.graph_id = m.model_id"
        "  ORDER BY g.ts LIMIT 1), count(*) FROM model_exec m GROUP BY m.model_id")
    kernel_types = [t for (t, name) in conn.execute("SELECT type, name FROM type_name WHERE level = ?",
                                                    (dec.LEVEL_RUNTIME,)) if dec.is_kernel_task(name)]
    total_tracks = conn.execute("SELECT count(*) FROM task_track").fetchone()[0]
    if total_tracks and not kernel_types:
        notices.warn("type_info_dic names no KERNEL_* runtime task type: no task_track becomes an op task")
    ge_name = _case("ni.task_type", dec.GE_TASK_TYPES, "CAST(ni.task_type AS TEXT)")
    rts_ge = _case("rt.name", dec.RTS_TASK_TYPES, "rt.name")
    kernel_list = ",".join(str(int(t)) for t in kernel_types) or "NULL"
    conn.execute(f"""
        CREATE TEMP TABLE track_ctx AS
        SELECT t.seq, t.thread, t.ts, t.device_id, t.stream_id, t.task_id, t.batch_id, t.rts_type,
               t.kernel_hash,
               (SELECT a.seq FROM api a WHERE a.thread = t.thread AND a.level = {dec.LEVEL_NODE}
                  AND a.begin <= t.ts ORDER BY a.begin DESC, a.seq DESC LIMIT 1) AS node_seq,
               (SELECT a.seq FROM api a WHERE a.thread = t.thread AND a.level = {dec.LEVEL_MODEL}
                  AND a.begin <= t.ts ORDER BY a.begin DESC, a.seq DESC LIMIT 1) AS model_seq
        FROM task_track t WHERE t.rts_type IN ({kernel_list})""")
    conn.execute(f"""
        INSERT INTO host_task (device_id, stream_id, task_id, batch_id, thread, ts, op_name, op_type, task_type,
                               block_dim, op_flag, op_state, model_id, iteration, kernel_name, rts_type,
                               occ, cnt)
        SELECT x.device_id, x.stream_id, x.task_id, x.batch_id, x.thread, x.ts,
               CASE WHEN n.seq IS NULL THEN kn.text ELSE coalesce(nh.text, CAST(n.item_id AS TEXT)) END,
               CASE WHEN n.seq IS NULL THEN kn.text
                    WHEN ni.seq IS NULL THEN NULL ELSE coalesce(th.text, CAST(ni.op_type_hash AS TEXT)) END,
               CASE WHEN ni.seq IS NOT NULL THEN {ge_name} ELSE {rts_ge} END,
               ni.block_dim, ni.op_flag,
               CASE WHEN ni.seq IS NULL THEN NULL WHEN ni.aging THEN 'dynamic' ELSE 'static' END,
               me.model_id, me.iteration, kn.text, rt.name,
               row_number() OVER (PARTITION BY x.device_id, x.stream_id, x.task_id ORDER BY x.ts, x.seq) - 1,
               count(*) OVER (PARTITION BY x.device_id, x.stream_id, x.task_id)
        FROM track_ctx x
        LEFT JOIN api n ON n.seq = x.node_seq AND n.[end] >= x.ts
        LEFT JOIN node_info ni ON ni.seq = (SELECT i.seq FROM node_info i WHERE i.thread = n.thread
                                            AND i.ts BETWEEN n.begin AND n.[end] ORDER BY i.ts, i.seq LIMIT 1)
        LEFT JOIN model_exec me ON me.seq = x.model_seq AND me.[end] >= x.ts
        LEFT JOIN hash_string nh ON nh.hash = n.item_id
        LEFT JOIN hash_string th ON th.hash = ni.op_type_hash
        LEFT JOIN hash_string kn ON kn.hash = x.kernel_hash
        LEFT JOIN type_name rt ON rt.level = {dec.LEVEL_RUNTIME} AND rt.type = x.rts_type
        ORDER BY x.ts, x.seq""")
    conn.execute("DROP TABLE track_ctx")
    orphans = conn.execute("SELECT count(*) FROM host_task WHERE op_type IS NULL OR model_id IS NULL").fetchone()[0]
    if orphans:
        notices.warn(f"{orphans} task(s) launched outside a node-level or model-level API: op type or model unknown")


# ---------------------------------------------------------------------------------------------- device
def import_device(result: ResultDir) -> Path:
    started = time.monotonic()
    notices = Notices()
    for message in result.warnings:
        notices.warn(message)
    files = data_files(result.path)
    grouped, unknown = group_files(files)
    for path in unknown:
        log.info("ignored %s (not a known raw file)", path.name)
    streams = {k: [s for s in v if s.device in (None, result.device_id)] for k, v in grouped.items()}
    if streams.get("hwts") or streams.get("stars"):
        require_hwts_frequency(result, "device task")
    T = schema.DEVICE_TABLES
    with building(result.path, T) as db:
        conn = db.conn
        counts: Dict[str, dict] = {}
        events = event_ids(result.sample)
        db["pmu_event"].insert_all([{"slot": i, "event_id": e} for i, e in enumerate(events)])
        _load_hwts(conn, streams.get("hwts", []), counts, notices)
        _load_stars(conn, streams.get("stars", []), counts, notices)
        _load_pmu(conn, streams.get("pmu", []), counts, notices)
        if not streams.get("hwts") and not streams.get("stars"):
            notices.notice(f"no device task data (hwts.data / stars_soc.data) in {result.path / 'data'}: "
                           "op_summary, op_statistic and task_time are skipped")
        if not streams.get("pmu") and result.sample.get("ai_core_metrics"):
            notices.notice(f"no aicore.data in {result.path / 'data'}: op_summary has no PMU columns")
        _number_executions(conn)
        schema.create_indexes(db, schema.DEVICE_INDEXES)
        write_bookkeeping(db, result, counts, notices, files + result.metadata_files)
        store.write_meta(db, {"prof_role": "device"})
    log.info("imported %s in %.2f s", result.path, time.monotonic() - started)
    return store.db_path(result.path)


def _load_hwts(conn, items, counts, notices):
    sql = schema.insert_sql(schema.DEVICE_TABLES, "task")
    for item, stream in _streams(items, dec.HWTS, notices):
        pairer = hwts.Pairer()
        records = 0
        for chunk in stream.chunks():
            records += len(chunk) // hwts.RECORD_SIZE
            conn.executemany(sql, (_task_row(t) for t in pairer.feed_rows(chunk)))
        conn.executemany(sql, (_task_row(t) for t in pairer.finish()))
        for message in pairer.warnings(stream.files[0].name):
            notices.warn(message)
        count_stream(counts, item, stream, records, pairer.other_logs)


def _task_row(finished):
    stream_id, task_id, task_type, start, end, n = finished
    return (stream_id, task_id, task_type, start, end, n, None)


def _number_executions(conn) -> None:
    """task.occ: rank of a timed execution among the executions of its (stream, task), by start (what the
    n-th launch of that id on the host is matched to)."""
    conn.execute("CREATE TEMP TABLE task_occ (seq INTEGER PRIMARY KEY, occ INTEGER)")
    conn.execute("INSERT INTO task_occ SELECT seq, row_number() OVER (PARTITION BY stream_id, task_id"
                 " ORDER BY start_syscnt, seq) - 1 FROM task WHERE start_syscnt IS NOT NULL"
                 " AND end_syscnt IS NOT NULL")
    conn.execute("UPDATE task SET occ = (SELECT o.occ FROM task_occ o WHERE o.seq = task.seq)")
    conn.execute("DROP TABLE task_occ")


def _load_stars(conn, items, counts, notices):
    """ACSQ start/end logs: stored, then paired per (stream, task) in counter order like the reference
    (an end before any start and a start whose end never came are reported, not timed)."""
    log_sql = schema.insert_sql(schema.DEVICE_TABLES, "stars_log")
    any_rows = False
    for item, stream in _streams(items, dec.STARS, notices):
        skips = dec.Skips()
        records = 0
        for chunk in stream.chunks():
            records += len(chunk) // dec.STARS.RECORD_SIZE
            rows = dec.decode_stars(chunk, skips)
            any_rows = any_rows or bool(rows)
            conn.executemany(log_sql, rows)
        for reason, n in sorted(skips.counts.items()):
            if reason != "other log type":
                notices.warn(f"{stream.files[0].name}: {n} stars_soc record(s) skipped ({reason})")
        count_stream(counts, item, stream, records, skips.total)
    if not any_rows:
        return
    conn.execute("CREATE INDEX stars_log_order ON stars_log (syscnt, seq)")
    task_sql = schema.insert_sql(schema.DEVICE_TABLES, "task")
    pending: Dict[tuple, tuple] = {}
    executions: Dict[tuple, int] = {}
    orphan_starts = orphan_ends = 0
    batch: List[tuple] = []
    for stream_id, task_id, sqe, log_type, syscnt in conn.execute(
            "SELECT stream_id, task_id, sqe_type, log_type, syscnt FROM stars_log ORDER BY syscnt, seq"):
        key = (stream_id, task_id)
        if log_type == 0:
            if key in pending:
                orphan_starts += 1
            pending[key] = (syscnt, sqe)
            continue
        started = pending.pop(key, None)
        if started is None:
            orphan_ends += 1
            continue
        n = executions.get(key, 0)
        executions[key] = n + 1
        batch.append((stream_id, task_id, started[1], started[0], syscnt, n, None))
        if len(batch) >= 10000:
            conn.executemany(task_sql, batch)
            batch = []
    conn.executemany(task_sql, batch)
    orphan_starts += len(pending)
    if orphan_ends:
        notices.warn(f"stars_soc: {orphan_ends} task end(s) without a start dropped (no start time invented)")
    if orphan_starts:
        notices.warn(f"stars_soc: {orphan_starts} task start(s) never ended dropped (no end time invented)")


def _load_pmu(conn, items, counts, notices):
    sql = schema.insert_sql(schema.DEVICE_TABLES, "pmu")
    for item, stream in _streams(items, dec.AICORE, notices):
        numberer = dec.PmuNumberer()
        records = 0
        for chunk in stream.chunks():
            records += len(chunk) // dec.AICORE.RECORD_SIZE
            conn.executemany(sql, numberer.feed(chunk))
        _warn_skips(notices, stream.files[0].name, "aicore PMU", numberer.skips)
        count_stream(counts, item, stream, records, numberer.skips.total)
