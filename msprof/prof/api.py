"""PROF_ entry points (called by msprof.api for every PROF_ directory, host/ and device_N/ together).

Outputs (docs/prof.md): ``device_N/summary/{op_summary,op_statistic,task_time,api_statistic}.{csv,json}``
and ``device_N/timeline/msprof.json``; databases ``host/sqlite/msprof.db`` and ``device_N/sqlite/msprof.db``.
"""
import re
from pathlib import Path
from typing import List, Optional, Tuple

from msprof import store
from msprof.atomic import atomic_open
from msprof.collection import _has_info_json
from msprof.console import notice, result_log
from msprof.errors import DataError, UsageError
from msprof.render import FORMATS
from msprof.reports import Table

_DEVICE = re.compile(r"^device_(\d+)$")


def parts(root: Path) -> Tuple[Optional[Path], List[Path]]:
    """(host dir or None, device dirs in device order) of a PROF_ directory."""
    root = Path(root)
    host = root / "host"
    host = host if host.is_dir() and not host.is_symlink() and _has_info_json(host) else None
    devices = sorted((p for p in root.iterdir() if _DEVICE.match(p.name) and p.is_dir() and not p.is_symlink()
                      and _has_info_json(p)), key=lambda p: int(_DEVICE.match(p.name).group(1)))
    return host, devices


def _import(result_dir: Path) -> Path:
    from msprof.prof.importer import import_result_dir

    with result_log(result_dir, "import"):
        database = import_result_dir(result_dir)
    notice(f"imported {result_dir} -> {database}")
    return database


def ensure_database(result_dir: Path) -> Path:
    """The directory's database, rebuilt first when missing, from another version, or its sources changed."""
    reason = store.stale_reason(result_dir)
    if reason is None:
        from msprof.store import open_readonly, read_meta
        import contextlib

        with contextlib.closing(open_readonly(store.db_path(result_dir))) as conn:
            if read_meta(conn).get("prof_role") in ("host", "device"):
                return store.db_path(result_dir)
        reason = "database not built for the PROF layout"
    notice(f"{result_dir.parent.name}/{result_dir.name}: importing ({reason})")
    return _import(result_dir)


def _ready(root: Path):
    host, devices = parts(root)
    if not devices:
        raise DataError(f"{root}: no device_N directory with an info.json* (nothing to report on)")
    if host is not None:
        ensure_database(host)
    for device in devices:
        ensure_database(device)
    return host, devices


def import_prof(root) -> List[Path]:
    host, devices = parts(root)
    return [_import(d) for d in ([host] if host else []) + devices]


def _suffix(model_id, iteration_id) -> str:
    return (f"_model{model_id}" if model_id is not None else "") + (
        f"_iter{iteration_id}" if iteration_id is not None else "")


def _check_selection(report, model_id, iteration_id) -> None:
    if model_id is None and iteration_id is None:
        return
    models = {m["model_id"]: m for m in report.models()}
    if model_id is not None and model_id not in models:
        raise UsageError(f"{report.device_dir}: no model {model_id} (msprof query lists the models)")
    if iteration_id is not None:
        counts = [m["iterations"] for k, m in models.items() if model_id is None or k == model_id]
        if not counts or not 1 <= iteration_id <= max(counts):
            raise UsageError(f"{report.device_dir}: no iteration {iteration_id}"
                             + (f" of model {model_id}" if model_id is not None else "")
                             + " (msprof query lists them)")


def export_summary(root, fmt="csv", model_id=None, iteration_id=None) -> List[Path]:
    from msprof.prof.reports import open_prof_report

    render, ext = FORMATS[fmt]
    host, devices = _ready(Path(root))
    written: List[Path] = []
    for device in devices:
        with result_log(device, f"export summary --format {fmt}"), open_prof_report(device, host) as report:
            _check_selection(report, model_id, iteration_id)
            out = device / "summary"
            suffix = _suffix(model_id, iteration_id)

            def emit(name: str, table: Table) -> None:
                path = out / f"{name}{suffix}{ext}"
                with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
                    handle.write(render(table))
                written.append(path)

            if report.has_tasks:
                emit("op_summary", report.op_summary(model_id, iteration_id))
                emit("op_statistic", report.op_statistic(model_id, iteration_id))
                if model_id is None and iteration_id is None:
                    emit("task_time", report.task_time())
            else:
                notice(f"{device.name}: no device task data: op_summary, op_statistic and task_time skipped")
            if report.has_api:
                emit("api_statistic", report.api_statistic())
            else:
                notice(f"{device.name}: no host API data: api_statistic skipped")
    return written


def export_timeline(root, model_id=None, iteration_id=None) -> List[Path]:
    from msprof.prof.reports import open_prof_report
    from msprof.prof.timeline import write_timeline

    host, devices = _ready(Path(root))
    written: List[Path] = []
    for device in devices:
        with result_log(device, "export timeline"), open_prof_report(device, host) as report:
            _check_selection(report, model_id, iteration_id)
            written.append(write_timeline(report, device / "timeline" / (
                "msprof" + _suffix(model_id, iteration_id) + ".json"), model_id, iteration_id))
    return written


def show(root, model_id=None, iteration_id=None, top=None, fmt="table", style="simple") -> None:
    from msprof.prof.reports import open_prof_report
    from msprof.show import emit_tables, top_rows

    host, devices = _ready(Path(root))
    for device in devices:
        with result_log(device, "show"), open_prof_report(device, host) as report:
            _check_selection(report, model_id, iteration_id)
            tables = []
            if report.has_tasks:
                statistic = report.op_statistic(model_id, iteration_id)
                statistic.title = f"Op statistic (device {report.device_id})"
                tables.append(top_rows(statistic, top))
                summary = report.op_summary(model_id, iteration_id)
                summary.title = f"Op summary (device {report.device_id})"
                summary.columns, summary.kinds = summary.columns[1:12], summary.kinds[1:12]
                summary.rows = [r[1:12] for r in summary.rows]
                tables.append(top_rows(summary, top))
            else:
                notice(f"{device.name}: no device task data: op tables skipped")
            if report.has_api:
                api = report.api_statistic()
                api.title = "API statistic (host)"
                tables.append(top_rows(api, top))
            emit_tables(tables, fmt, style)


def query(root) -> None:
    from msprof.prof.reports import open_prof_report
    from msprof.show import emit_tables, id_ranges

    host, devices = _ready(Path(root))
    collection = Table("Collection", ["Device", "Platform", "Model Id", "Model Name", "Iterations", "Iteration Ids"],
                       ["text"] * 6)
    data = Table("Data", ["Directory", "Data", "Records", "Bytes lost"], ["text", "text", "int", "int"])
    for device in devices:
        with open_prof_report(device, host) as report:
            models = report.models() or [{"model_id": None, "model_name": None, "iterations": 0}]
            for m in models:
                ids = list(range(1, (m["iterations"] or 0) + 1))
                collection.rows.append([report.device_id, report.platform, m["model_id"], m["model_name"],
                                        m["iterations"], id_ranges(ids)])
    for result_dir in ([host] if host else []) + devices:
        import contextlib

        with contextlib.closing(store.open_readonly(store.db_path(result_dir))) as conn:
            for kind, records, lost in conn.execute("SELECT kind, sum(records), sum(head_lost + tail_lost)"
                                                    " FROM decode_count GROUP BY kind ORDER BY kind"):
                data.rows.append([result_dir.name, kind, records, lost])
    emit_tables([collection, data], "table", "simple")
