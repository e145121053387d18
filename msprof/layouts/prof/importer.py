"""import of a PROF_ directory: host/ and device_N/ raw files → one database each (layouts/prof/schema.py).

Every binary stream goes through the shared decoders and stream loop (msprof.decode), in bounded chunks.
The host's task_track records are resolved against the node- and model-level calls as they are decoded
(msprof.layouts.prof.associate); event pairing and STARS pairing are ordered SQL scans. Nothing holds a
whole file or every task in memory.
"""
import time
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional

from msprof import store
from msprof.collection import ResultDir, data_files, read_result_dir, require_hwts_frequency
from msprof.console import log
from msprof.decode.api_event import LEVEL_MODEL, ApiEventDecoder
from msprof.decode.base import Blocks, Decoder, Rows, StreamCount, load_streams
from msprof.decode.blocks import Layout
from msprof.decode.compact import GRAPH_ID_MAP, NODE_BASIC_INFO, TASK_TRACK, CompactDecoder, aging_of
from msprof.decode.dicts import HashDecoder, TypeInfoDecoder
from msprof.decode.hwts import HwtsDecoder
from msprof.decode.pmu import ASCEND, PmuDecoder
from msprof.decode.slices import group_files
from msprof.decode.stars import StarsDecoder
from msprof.layouts.prof.associate import Associator, NodeContents
from msprof.layouts.prof.schema import DEVICE, HOST, HOST_LATE_INDEXES, TASK_COLUMNS
from msprof.metrics import event_ids
from msprof.store import Notices

# node_info as decoded (msprof.decode.compact.NODE_BASIC_INFO), then aging and the id of the content
NODE_INFO_LAYOUT = Layout("node_info", NODE_BASIC_INFO.layout.record_format, NODE_BASIC_INFO.layout.fields,
                          extras=["aging", "info_id"])

# model-level calls that are not executions of the model (they do not count as iterations)
NOT_EXECUTIONS = ("ModelLoad", "ModelUnload")


def import_host(result: ResultDir, target: Path, spare_cores: bool = False) -> Path:
    started = time.monotonic()
    notices = Notices()
    for message in result.warnings:
        if "dev_start.log" not in message:    # the host has no device counter
            notices.warn(message)
    files = data_files(result.path)
    grouped, unknown = group_files(files)
    for path in unknown:
        log.info("ignored %s (not a known raw file)", path.name)
    counts: Dict[str, StreamCount] = {}
    with store.build(target, HOST) as db:
        conn = db.conn
        load_streams(conn, grouped.get("type_info_dic", []), lambda item: TypeInfoDecoder(), notices, counts)
        load_streams(conn, grouped.get("hash_dic", []), lambda item: HashDecoder(), notices, counts)
        load_streams(conn, grouped.get("api_event", []), lambda item: ApiEventDecoder(), notices, counts)
        load_streams(conn, grouped.get("graph_id_map", []), lambda item: CompactDecoder(GRAPH_ID_MAP), notices,
                     counts)
        contents = NodeContents()
        load_streams(conn, grouped.get("node_basic_info", []),
                     lambda item: _NodeInfos(NODE_BASIC_INFO, aging_of(item.stem), contents), notices, counts)
        _pair_events(conn, notices)
        HOST.create_indexes(db)
        _model_executions(conn)
        names = dict(conn.execute("SELECT hash, text FROM hash_string"))
        type_names = {(level, t): name for level, t, name in conn.execute("SELECT level, type, name FROM type_name")}
        associator = Associator(conn, names, type_names, contents)
        load_streams(conn, grouped.get("task_track", []),
                     lambda item: _Resolving(CompactDecoder(TASK_TRACK, aging_of(item.stem)), associator),
                     notices, counts)
        for table, columns in HOST_LATE_INDEXES:
            db[table].create_index(columns, if_not_exists=True)
        associator.launch_counts().insert(conn)
        (orphans, no_info) = conn.execute(
            "SELECT coalesce(sum(o.ge), 0), coalesce(sum(1 - o.ge), 0) FROM launch l JOIN op o USING (op_id)"
            " WHERE o.kernel = 1 AND (o.op_type IS NULL OR l.model_id IS NULL)").fetchone()
        if orphans:
            notices.warn(f"{orphans} task(s) launched outside a node-level or model-level API: op type or model "
                         "unknown")
        if no_info:
            notices.warn(f"{no_info} task(s) launched in a node-level API without its node_basic_info: left out "
                         "of op_summary and op_statistic (as the reference does), named by their runtime type in "
                         "task_time")
        kernels = [name for (level, _t), name in type_names.items() if level == 5000]
        if grouped.get("task_track") and not any(n.startswith("KERNEL") for n in kernels):
            notices.warn("type_info_dic names no KERNEL_* runtime task type: no task_track becomes an op task")
        for kind, label in (("api_event", "API (api_event)"), ("task_track", "task_track"),
                            ("node_basic_info", "node_basic_info")):
            if not grouped.get(kind):
                notices.notice(f"no {label} data in {result.path / 'data'}: outputs that need it are skipped")
        store.record_sources(db, result.path, counts, notices, files + result.metadata_files,
                             _meta(result, "host"))
    log.info("imported %s in %.2f s", result.path, time.monotonic() - started)
    return target


class _NodeInfos(CompactDecoder):
    """node_basic_info records, each with the id of its content (op type, GE task type, block dim, flag,
    aging): ops repeat, so the association fetches (time, id) pairs instead of five columns each."""

    def __init__(self, family, aging: int, contents: "NodeContents"):
        super().__init__(family, aging)
        self.contents = contents

    def decode(self, chunk, tally):
        [out] = super().decode(chunk, tally)
        width = NODE_INFO_LAYOUT.width
        blocks = []
        for block in out.blocks:
            n = len(block) // (width + 1)
            fields = [block[k:n * width:width] for k in range(width)]
            keys = zip(fields[3], fields[4], fields[5], fields[6], block[n * width:])
            blocks.append(block + tuple(map(self.contents.__getitem__, keys)))
        return [Blocks(NODE_INFO_LAYOUT, blocks)]


class _Resolving(Decoder):
    """task_track records, resolved into ``launch`` rows as they are decoded."""

    def __init__(self, decoder: CompactDecoder, associator: Associator):
        self.decoder, self.associator = decoder, associator
        self.kind, self.label, self.record_size = decoder.kind, decoder.label, decoder.record_size
        self.looks_aligned = decoder.looks_aligned

    def decode(self, chunk, tally):
        blocks = [block for out in self.decoder.decode(chunk, tally) for block in out.blocks]
        return self.associator.rows(blocks)


def _pair_events(conn, notices: Notices) -> None:
    """Two events of the same (level, thread, struct type, request id, item id) make one API from the first's
    timestamp to the second's (docs/prof-format.md §3); an unpaired event is reported and ignored."""
    cursor = conn.execute("SELECT level, struct_type, thread, request_id, item_id, ts FROM event"
                          " ORDER BY level, thread, struct_type, request_id, item_id, ts, seq")
    columns = ("level", "struct_type", "thread", "begin", "end", "item_id", "request_id", "from_events")
    pending = None
    unpaired = 0
    batch = []
    for level, stype, thread, request, item, ts in cursor:
        key = (level, stype, thread, request, item)
        if pending is not None and pending[0] == key:
            batch.append((level, stype, thread, pending[1], ts, item, request, 1))
            pending = None
            continue
        if pending is not None:
            unpaired += 1
        pending = (key, ts)
    if pending is not None:
        unpaired += 1
    Rows("api", columns, batch).insert(conn)
    if unpaired:
        notices.warn(f"api_event: {unpaired} event record(s) without their begin/end partner ignored")


def _model_executions(conn) -> None:
    """model_exec: the model-level calls that execute a model, numbered per model in time order (from 1);
    model: each model's name (graph_id_map) and number of executions."""
    skip = ",".join(f"'{name}'" for name in NOT_EXECUTIONS)
    conn.execute(
        "INSERT INTO model_exec (seq, model_id, iteration)"
        " SELECT a.seq, a.item_id, row_number() OVER (PARTITION BY a.item_id ORDER BY a.begin, a.seq) FROM api a"
        f" LEFT JOIN type_name t ON t.level = a.level AND t.type = a.struct_type WHERE a.level = {LEVEL_MODEL}"
        f" AND coalesce(t.name, '') NOT IN ({skip})")
    conn.execute(
        "INSERT INTO model (model_id, model_name, iterations)"
        " SELECT m.model_id, (SELECT coalesce(h.text, CAST(g.model_name_hash AS TEXT)) FROM graph_map g"
        "  LEFT JOIN hash_string h ON h.hash = g.model_name_hash WHERE g.graph_id = m.model_id"
        "  ORDER BY g.ts LIMIT 1), count(*) FROM model_exec m GROUP BY m.model_id")


# ---------------------------------------------------------------------------------------------- device
def import_device(result: ResultDir, target: Path, spare_cores: bool = False) -> Path:
    """``spare_cores``: aicore.data may be loaded by a worker process while this one loads the task logs."""
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
    counts: Dict[str, StreamCount] = {}
    side = {"pmu": ("pmu", _load_pmu, streams.get("pmu", []))}
    with store.build(target, DEVICE) as db, store.SideLoads(target, DEVICE, side, spare_cores) as workers:
        conn = db.conn
        events = event_ids(result.sample, ASCEND.counters, notices)
        db["pmu_event"].insert_all([{"slot": i, "event_id": e} for i, e in enumerate(events)])
        load_streams(conn, streams.get("hwts", []),
                     lambda item: HwtsDecoder(lambda piece: [Rows("task", TASK_COLUMNS, _task_rows(piece))]),
                     notices, counts)
        load_streams(conn, streams.get("stars", []), lambda item: StarsDecoder(), notices, counts)
        _pair_stars(conn, notices)
        DEVICE.create_indexes(db, ["task"])      # while the worker may still be busy
        workers.merge(db, "pmu", counts, notices)
        if not streams.get("hwts") and not streams.get("stars"):
            notices.notice(f"no device task data (hwts.data / stars_soc.data) in {result.path / 'data'}: "
                           "op_summary, op_statistic and task_time are skipped")
        if not streams.get("pmu") and result.sample.get("ai_core_metrics"):
            notices.notice(f"no aicore.data in {result.path / 'data'}: op_summary has no PMU columns")
        DEVICE.create_indexes(db)
        store.record_sources(db, result.path, counts, notices, files + result.metadata_files,
                             _meta(result, "device"))
    log.info("imported %s in %.2f s", result.path, time.monotonic() - started)
    return target


def _load_pmu(conn, streams, counts, notices) -> None:
    load_streams(conn, streams, lambda item: PmuDecoder(ASCEND), notices, counts)


def _task_rows(piece) -> list:
    """Every paired execution; an HWTS end without its start (or a start never ended) is a row with the
    other time NULL, reported by the pairer and never given an invented time."""
    complete, data = piece
    return list(zip(*data)) if complete else data


def _pair_stars(conn, notices: Notices) -> None:
    """STARS start/end logs paired per (stream, task) in counter order (what the reference does); an end
    before any start and a start whose end never came are reported, not timed."""
    if not conn.execute("SELECT 1 FROM stars_log LIMIT 1").fetchone():
        return
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
        batch.append((stream_id, task_id, started[1], started[0], syscnt, n))
        if len(batch) >= 10000:
            Rows("task", TASK_COLUMNS, batch).insert(conn)
            batch = []
    Rows("task", TASK_COLUMNS, batch).insert(conn)
    orphan_starts += len(pending)
    if orphan_ends:
        notices.warn(f"stars_soc: {orphan_ends} task end(s) without a start dropped (no start time invented)")
    if orphan_starts:
        notices.warn(f"stars_soc: {orphan_starts} task start(s) never ended dropped (no end time invented)")


def _meta(result: ResultDir, role: str) -> dict:
    return {"layout": "PROF", "prof_role": role, "device_id": result.device_id,
            "platform_version": result.platform_version, "drv_version": result.drv_version, "pid": result.pid,
            "clock": asdict(result.clock),
            "aic_mhz": result.aic_mhz, "hwts_mhz": result.clock.hwts_mhz, "ai_core_num": result.ai_core_num,
            "sample": result.sample, "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def import_result_dir(result_dir: Path, role: str, target: Optional[Path] = None, spare_cores: bool = False) -> Path:
    """Rebuild the database of a PROF host/ (``role`` "host") or device_N/ directory (``target``, default its
    sqlite/msprof.db). ``spare_cores``: the device import may use a worker process."""
    result = read_result_dir(result_dir)
    target = Path(target) if target else store.db_path(result.path)
    return (import_host if role == "host" else import_device)(result, target, spare_cores)
