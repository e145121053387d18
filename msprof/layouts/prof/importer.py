"""import of a PROF_ directory: host/ and device_N/ raw files → one database each (layouts/prof/schema.py).

Every binary stream goes through the shared decoders and stream loop (msprof.decode), in bounded chunks,
wired here: the host's decoders (.host_decoders), its task_track records resolved against the node- and
model-level calls as they are decoded (.launches), event and STARS pairing as ordered SQL scans (.pairs).
Nothing holds a whole file or every task in memory.
"""
import time
from dataclasses import asdict
from pathlib import Path
from typing import Dict, Optional

from msprof import parts, store
from msprof.collection import ResultDir, data_files, read_result_dir, require_hwts_frequency
from msprof.console import log
from msprof.decode.api_event import LEVEL_MODEL, StreamIndex
from msprof.decode.base import Rows, StreamCount, load_streams
from msprof.decode.compact import GRAPH_ID_MAP, CompactDecoder
from msprof.decode.dicts import HashDecoder, TypeInfoDecoder
from msprof.decode.hwts import HwtsDecoder
from msprof.decode.pmu import ASCEND, PmuDecoder
from msprof.decode.slices import group_files
from msprof.decode.stars import StarsDecoder
from msprof.layouts.prof import families
from msprof.layouts.prof.host_decoders import ApiCalls, TensorInfos, load_node_infos, merge_scattered_tensor_infos
from msprof.layouts.prof.launches import load_launches, say_launches
from msprof.layouts.prof.pairs import pair_events, pair_stars
from msprof.layouts.prof.schema import DEVICE, HOST, HOST_LATE_INDEXES, TASK_COLUMNS, TIED_STARTS
from msprof.layouts.prof.tensors import TensorContents
from msprof.metrics import AscendMetrics, event_ids
from msprof.paths import printable
from msprof.store import Notices
from msprof.workers import several_cores

# model-level calls that are not executions of the model (they do not count as iterations)
NOT_EXECUTIONS = ("ModelLoad", "ModelUnload")
# Chips (platform_version) whose AI Core PMU is not in aicore.data: the STARS chips keep theirs in
# ffts_profile.data, and the reference reads no aicore.data on them (no op_summary PMU columns), so neither does
# msprof: a generated or mixed-up device directory gets the reference's op_summary, with a notice.
PMU_NOT_IN_AICORE_DATA = ("5", "7", "8", "11", "15", "16")
# Chips whose device tasks the reference does not take from hwts.data (its HWTS calculator is registered for chips
# 1–4 only: chip 0 times them from runtime data, the STARS chips from stars_soc.data): a hwts.data found there is
# not read either, with a notice (found by a randomised comparison with the reference on chip 0 and 7–16)
HWTS_NOT_READ = ("0", "5", "7", "8", "9", "11", "15", "16")


def import_host(result: ResultDir, target: Path, spare_cores: bool = False) -> Path:
    started = time.monotonic()
    notices = Notices()
    for message in result.warnings:
        if "dev_start.log" not in message:    # the host has no device counter
            notices.warn(message)
    files = data_files(result.path)
    grouped, unknown = group_files(files)
    counts: Dict[str, StreamCount] = {}
    # The node infos (and their index) are loaded by a worker while this process loads and indexes the API calls:
    # both must be in before the association, the host's critical path. With a second core, whether or not the
    # device is imported beside it: the device's import ends first, and a core sat idle until the association.
    side = {"node_info": ("node_info", load_node_infos, grouped.get("node_basic_info", []))}
    with store.build(target, HOST) as db, parts.SideLoads(target, HOST, side, several_cores()) as workers:
        conn = db.conn
        load_streams(conn, grouped.get("type_info_dic", []), lambda item: TypeInfoDecoder(), notices, counts)
        load_streams(conn, grouped.get("hash_dic", []), lambda item: HashDecoder(), notices, counts)
        index = StreamIndex()          # (the aging files' records, then the unaging's, numbered on)
        load_streams(conn, grouped.get("api_event", []), lambda item: ApiCalls(index), notices, counts)
        load_streams(conn, grouped.get("graph_id_map", []), lambda item: CompactDecoder(GRAPH_ID_MAP), notices,
                     counts)
        tensors = TensorContents()
        load_streams(conn, grouped.get("tensor_info", []), lambda item: TensorInfos(tensors), notices, counts)
        _, claimed = families.load_families(conn, "host", unknown, None, notices, counts)
        say_unread(unknown, claimed, result.path, notices)
        pair_events(conn, notices)
        HOST.create_indexes(db)
        merge_scattered_tensor_infos(conn, tensors)
        _model_executions(conn)
        names = dict(conn.execute("SELECT hash, text FROM hash_string"))
        type_names = {(level, t): name for level, t, name in conn.execute("SELECT level, type, name FROM type_name")}
        contents = workers.merge(db, "node_info", counts, notices)
        associator, checks = load_launches(conn, grouped.get("task_track", []), (names, type_names, contents),
                                            notices, counts, workers.attached())
        for table, columns in HOST_LATE_INDEXES:
            db[table].create_index(columns, if_not_exists=True)
        for rows in associator.launch_counts():
            rows.insert(conn)
        dictionary = "hash_dic" if grouped.get("hash_dic") else f"hash_dic (none in {result.path / 'data'})"
        say_launches(checks, len(associator.ops.unnamed), dictionary, notices)
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
    files = data_files(result.path, empty_ok=True)
    grouped, unknown = group_files(files)
    streams = {k: [s for s in v if s.device in (None, result.device_id)] for k, v in grouped.items()}
    unread_pmu = streams.get("pmu") and result.platform_version in PMU_NOT_IN_AICORE_DATA
    if unread_pmu:
        streams["pmu"] = []
    unread_hwts = streams.get("hwts") and result.platform_version in HWTS_NOT_READ
    if unread_hwts:
        streams["hwts"] = []
    has_tasks = bool(streams.get("hwts") or streams.get("stars"))
    if has_tasks:
        require_hwts_frequency(result, "device task")
    counts: Dict[str, StreamCount] = {}
    side = {"pmu": ("pmu", _load_pmu, streams.get("pmu", []))}
    with store.build(target, DEVICE) as db, parts.SideLoads(target, DEVICE, side, spare_cores) as workers:
        conn = db.conn
        events = event_ids(result.sample, ASCEND.counters, notices, bool(streams.get("pmu")))
        db["pmu_event"].insert_all([{"slot": i, "event_id": e} for i, e in enumerate(events)])
        metric_set = str(result.sample.get("ai_core_metrics") or "")
        missing = AscendMetrics(metric_set, events, str(result.info.get("platform_version", ""))).missing
        if missing and events and streams.get("pmu"):      # (no events at all: event_ids said so)
            notices.warn(f"sample.json's ai_core_profiling_events lack {', '.join(f'0x{e:x}' for e in missing)} of "
                         f"the {metric_set} metric set: op_summary has its raw PMU counters, by event id, instead "
                         "of the set's columns")
        load_streams(conn, streams.get("hwts", []),
                     lambda item: HwtsDecoder(lambda piece: [Rows("task", TASK_COLUMNS, _task_rows(piece))]),
                     notices, counts)
        load_streams(conn, streams.get("stars", []), lambda item: StarsDecoder(), notices, counts)
        pair_stars(conn, notices)
        DEVICE.create_indexes(db, ["task"])      # while the worker may still be busy
        # (ts_track is a kind of the shared names: the step trace family's stream, read here)
        found, claimed = families.load_families(conn, "device", unknown + _files_of(grouped.get("step_trace", [])),
                                                result.device_id, notices, counts,
                                                lambda family: require_hwts_frequency(result, family),
                                                families.made_on(result.platform_version))
        say_unread(unknown, claimed, result.path, notices)
        _task_keys(conn)
        workers.merge(db, "pmu", counts, notices)
        _say_not_read(result, notices, unread_hwts, unread_pmu, has_tasks,
                      not streams.get("pmu") and "ffts_pmu" not in found)
        DEVICE.create_indexes(db)
        store.record_sources(db, result.path, counts, notices, files + result.metadata_files,
                             _meta(result, "device"))
    log.info("imported %s in %.2f s", result.path, time.monotonic() - started)
    return target


def _say_not_read(result: ResultDir, notices: Notices, unread_hwts, unread_pmu, has_tasks: bool, no_pmu: bool
                  ) -> None:
    """The notices of a device's data not read, and of what op_summary goes without."""
    if unread_hwts:
        notices.notice(f"hwts.data of platform {result.platform_version} not read, as the reference does not "
                       "read it on this chip (its task log is elsewhere)")
    if not has_tasks:
        notices.notice(f"no device task data (hwts.data / stars_soc.data) in {result.path / 'data'}: "
                       "op_summary, op_statistic and task_time are skipped")
    if unread_pmu:
        notices.notice(f"aicore.data of platform {result.platform_version} (a STARS chip, whose PMU is in "
                       "ffts_profile.data) not read, as the reference does not read it: op_summary has no PMU "
                       "columns")
    elif no_pmu and result.sample.get("ai_core_metrics") and has_tasks:
        notices.notice(f"no aicore.data in {result.path / 'data'}: op_summary has no PMU columns")


def import_no_device(result: ResultDir, target: Path, spare_cores: bool = False) -> Path:
    """The device database of a PROF_ with a host and no device_N: no tasks, the host's clock, Device_id "host"."""
    notices = Notices()
    notices.notice(f"no device_N directory in {result.path.parent}: only the host's data are reported (API "
                   "statistic and calls)")
    with store.build(target, DEVICE) as db:
        store.record_sources(db, result.path, {}, notices, data_files(result.path) + result.metadata_files,
                             dict(_meta(result, "device"), device_id="host"))
    return target


def _files_of(streams) -> list:
    return [path for item in streams for path in item.files]


def say_unread(unknown, claimed, directory: Path, notices) -> None:
    """Name the raw files no decoder read (by their stem: a collection's kinds of data msprof does not analyse,
    said without -v: issue 37) and list each with -v."""
    taken = set(claimed)
    unread = [path for path in unknown if path not in taken]
    for path in unread:
        log.info("ignored %s (not a known raw file)", path.name)
    stems: Dict[str, int] = {}
    for path in unread:
        stem = path.name.split(".slice_")[0].rstrip("0123456789").rstrip(".")
        stems[stem] = stems.get(stem, 0) + 1
    if stems:
        named = ", ".join(f"{printable(stem)} ({n} file{'s' if n > 1 else ''})" for stem, n in sorted(stems.items()))
        notices.notice(f"{directory / 'data'}: not analysed by msprof: {named}")


def _load_pmu(conn, streams, counts, notices) -> None:
    load_streams(conn, streams, lambda item: PmuDecoder(ASCEND), notices, counts)


def _task_rows(piece) -> list:
    """Every paired execution; an HWTS end without its start (or a start never ended) is a row with the
    other time NULL, reported by the pairer and never given an invented time."""
    complete, data = piece
    return list(zip(*data)) if complete else data


def _task_keys(conn) -> None:
    """``task_key``, when two timed tasks start together (schema.py)."""
    if conn.execute(f"{TIED_STARTS} LIMIT 1").fetchone() is not None:
        conn.execute("INSERT INTO task_key (stream_id, task_id, first_start, tied) SELECT stream_id, task_id,"
                     " min(start_syscnt), 0 FROM task WHERE start_syscnt IS NOT NULL GROUP BY stream_id, task_id"
                     " ORDER BY min(start_syscnt), min(seq)")
        # (the few tied tasks found through the start index: a lookup for every task in the GROUP BY cost a
        # third more)
        conn.execute("UPDATE task_key SET tied = 1 WHERE (stream_id, task_id) IN (SELECT stream_id, task_id FROM"
                     f" task WHERE start_syscnt IN ({TIED_STARTS}))")


def _meta(result: ResultDir, role: str) -> dict:
    return {"layout": "PROF", "prof_role": role, "device_id": result.device_id,
            "platform_version": result.platform_version, "drv_version": result.drv_version, "pid": result.pid,
            "clock": asdict(result.clock),
            "aic_mhz": result.aic_mhz, "hwts_mhz": result.clock.hwts_mhz, "ai_core_num": result.ai_core_num,
            "aiv_num": _aiv_num(result), "sample": result.sample, "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _aiv_num(result: ResultDir) -> Optional[int]:
    """info.json's AI Vector Core count (STARS PMU times), when it is a plausible one."""
    info = result.info.get("DeviceInfo") if isinstance(result.info, dict) else None
    value = info[0].get("aiv_num") if isinstance(info, list) and info and isinstance(info[0], dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 20 else None


def import_result_dir(result_dir: Path, role: str, target: Optional[Path] = None, spare_cores: bool = False) -> Path:
    """Rebuild the database of a PROF host/ (``role`` "host") or device_N/ directory (``target``, default its
    sqlite/msprof.db), or the empty device database of a host without devices (``role`` "none").
    ``spare_cores``: the device import may use a worker process."""
    result = read_result_dir(result_dir)
    target = Path(target) if target else store.db_path(result.path)
    return {"host": import_host, "none": import_no_device}.get(role, import_device)(result, target, spare_cores)
