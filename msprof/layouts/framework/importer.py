"""import of a framework directory's own data: FRAMEWORK/ files and profiler_info → ``sqlite/framework.db``
(schema msprof.layouts.framework.schema.FRAMEWORK), through the store's atomic build and bookkeeping. The
PROF_ inside is the PROF layout's: its databases are built as for any PROF_ directory."""
import time
from pathlib import Path
from typing import Dict, List, Optional

from msprof import store
from msprof.collection import _read_json
from msprof.console import log
from msprof.decode.base import StreamCount, load_streams
from msprof.decode.framework import decoder_for, streams
from msprof.decode.framework.stream import Strings
from msprof.layouts.framework import where
from msprof.layouts.framework.clock import read_clock
from msprof.layouts.framework.links import derive_links
from msprof.layouts.framework.operators import host_children
from msprof.layouts.framework.ops import derive_ms_steps, derive_ops
from msprof.layouts.framework.report import device_reports
from msprof.layouts.framework.schema import FRAMEWORK
from msprof.store import Notices

LAYOUT = "FRAMEWORK"
MS_OPS = "ms_op_range"


def framework_sources(directory: Path) -> List[Path]:
    """The files a framework database is made from (what its freshness is checked against): the FRAMEWORK files
    of known families, profiler_info*.json, and the PROF_ host's clock files."""
    found, _unknown = streams(directory / where.FRAMEWORK_DIR)
    files = [path for item in found for path in item.files] + where.info_files(directory)[:1]
    host = _prof_host(directory)
    if host is not None:
        files += [host / name for name in ("start_info", "host_start.log", "info.json") if (host / name).is_file()]
    return files


def prof_identity(databases) -> str:
    """The PROF_ databases the links were made from (path, size, mtime): the framework database is stale when
    one was built again (hashing them would cost as much as reading them)."""
    import json
    import os

    found = []
    for database in databases:
        try:
            info = os.stat(database.path)
        except OSError:
            continue
        found.append([str(database.path), info.st_size, info.st_mtime_ns])
    return json.dumps(found)


def read_meta(path: Path, key: str) -> Optional[str]:
    """One meta value of a built database (None when unreadable: the import that follows says why)."""
    import contextlib
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(store.readonly_uri(path), uri=True)) as conn:
            return store.read_meta(conn).get(key)
    except sqlite3.Error:
        return None


def _prof_host(directory: Path) -> Optional[Path]:
    profs = where.prof_dirs(directory)
    return profs[0] / "host" if profs and (profs[0] / "host").is_dir() else None


def read_info(directory: Path, notices: Notices) -> dict:
    """profiler_info*.json (the first by name; said when there are several), {} without one."""
    infos = where.info_files(directory)
    if len(infos) > 1:
        notices.warn(f"{directory}: {len(infos)} profiler_info files ({', '.join(p.name for p in infos)}): one "
                     f"rank's directory holds one; {infos[0].name} is read")
    if not infos:
        notices.warn(f"{directory}: no profiler_info*.json: the profiler level and clock settings are unknown "
                     "(times taken as monotonic ns)")
        return {}
    info = _read_json(infos[0])
    match = where.INFO.match(infos[0].name)
    rank = info.get("rank_id")
    if match.group(1) is not None and isinstance(rank, int) and rank != int(match.group(1)):
        notices.warn(f"{infos[0]}: rank_id {rank} but the file is named for rank {match.group(1)}: the name's "
                     "rank is used")
    return info


def import_framework(directory: Path, target: Path, spare_cores: bool = False, prof_databases: tuple = (),
                     prof_layout=None) -> Path:
    """``prof_databases``: those of the directory's PROF_ (host first), built before this one: the framework
    ops are linked to their kernels (msprof.layouts.framework.links)."""
    started = time.monotonic()
    directory = Path(directory)
    notices = Notices()
    info = read_info(directory, notices)
    found, unknown = streams(directory / where.FRAMEWORK_DIR)
    found = _one_per_family(found, notices)
    for path in unknown:
        notices.notice(f"{path}: not a FRAMEWORK file msprof reads: left out")
    sources = framework_sources(directory)        # (what freshness is checked against, as read below)
    mindspore = any(item.kind == MS_OPS for item in found)
    clock, warnings = read_clock(info, _prof_host(directory), [], counters=mindspore)
    for message in warnings:
        notices.warn(message)
    counts: Dict[str, StreamCount] = {}
    with store.build(target, FRAMEWORK) as db:
        strings = Strings()
        load_streams(db.conn, found, lambda item: decoder_for(item.kind, strings), notices, counts)
        FRAMEWORK.create_indexes(db)
        derive_ops(db.conn, clock, notices)
        if mindspore:
            derive_ms_steps(db.conn, clock)
        host_children(db.conn)
        _link(db.conn, clock, prof_databases, prof_layout, notices)
        if not mindspore and not any(item.kind == "torch_op_range" for item in found):
            notices.notice(f"{directory / where.FRAMEWORK_DIR}: no torch.op_range nor MindSpore op_range (CPU "
                           "activity off): no framework ops nor steps")
        store.record_sources(db, directory, counts, notices, sources, {
            "layout": LAYOUT, "framework": "MindSpore" if mindspore else "torch_npu", "clock": clock.as_json(),
            "profiler_info": _info_meta(info), "rank": str(info.get("rank_id", "")),
            "prof_databases": prof_identity(prof_databases)})
    log.info("imported %s in %.2f s", directory, time.monotonic() - started)
    return target


def _link(conn, clock, prof_databases: tuple, prof_layout, notices: Notices) -> None:
    devices = device_reports(list(prof_databases), prof_layout) if prof_layout is not None else []
    try:
        derive_links(conn, clock, [d for d in devices if d.has_tasks], notices)
    finally:
        for device in devices:
            device.close()


def _one_per_family(found: list, notices: Notices) -> list:
    """The first file (by name) of each family; a second is said and left out, as torch_npu reads one."""
    kept, seen = [], {}
    for item in found:
        if item.kind in seen:
            notices.warn(f"{item.files[0]}: a second {item.kind} file (after {seen[item.kind]}): not read")
            continue
        seen[item.kind] = item.files[0].name
        kept.append(item)
    return kept


def _info_meta(info: dict) -> str:
    """The settings of profiler_info the reports need (level, metrics, activities), as JSON."""
    import json

    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    experimental = config.get("experimental_config") if isinstance(config.get("experimental_config"), dict) else {}
    common = config.get("common_config") if isinstance(config.get("common_config"), dict) else {}
    keep = {key: experimental.get(key) for key in ("_profiler_level", "_aic_metrics") if key in experimental}
    # (MindSpore says them in profiler_parameters: target §9)
    ms = info.get("profiler_parameters") if isinstance(info.get("profiler_parameters"), dict) else {}
    for ours, theirs in (("_profiler_level", "profiler_level"), ("_aic_metrics", "aic_metrics")):
        if isinstance(ms.get(theirs), str):
            keep[ours] = ms[theirs]
    keep["activities"] = [a for a in common.get("activities") or [] if isinstance(a, str)][:8] \
        if isinstance(common.get("activities"), list) else []
    return json.dumps(keep, sort_keys=True)
