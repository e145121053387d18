"""export summary: op_summary, op_statistic and acl_statistic files (outputs.md §3)."""
from pathlib import Path
from typing import List, Optional

from msprof.atomic import atomic_open
from msprof.console import log, notice
from msprof.export import safe_name
from msprof.render import FORMATS
from msprof.reports import Report


def op_summary_name(report: Report, iteration, ext: str) -> str:
    frequency = report.aic_mhz_at(iteration.start_syscnt)
    parts = [report.device_id, iteration.model_name, iteration.model_id, iteration.batch_num,
             iteration.input_pic_num, iteration.index_id * iteration.batch_num, None, frequency]
    # icache_miss_rate is not collected on SS928 data: always N/A
    return "op_summary_" + ".".join("N/A" if p is None else safe_name(p) for p in parts).replace("/", "_") + ext


def write_summary(report: Report, fmt: str = "csv", model_id: Optional[int] = None,
                  iteration_id: Optional[int] = None) -> List[Path]:
    render, ext = FORMATS[fmt]
    out_dir = report.result_dir / "summary"
    written: List[Path] = []

    def emit(name: str, table) -> None:
        path = out_dir / name
        with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(render(table))
        written.append(path)

    iterations = report.iterations(model_id, iteration_id)
    if model_id is not None and not iterations:
        from msprof.errors import UsageError

        raise UsageError(f"{report.result_dir}: no recorded iteration {iteration_id} of model {model_id} "
                         "(msprof query lists what is there)")
    if not report.has_tasks:
        notice(f"{report.result_dir.name}: no HWTS task data: op_summary and op_statistic skipped")
    elif not iterations:
        notice(f"{report.result_dir.name}: no step trace iterations: op_summary and op_statistic skipped")
    else:
        for iteration in iterations:
            emit(op_summary_name(report, iteration, ext), report.op_summary(iteration))
        last_by_model = {}
        for iteration in iterations:
            last_by_model[iteration.model_id] = iteration
        for mid, last in last_by_model.items():
            name = (f"op_statistic_{safe_name(report.device_id)}_{mid}_{last.index_id * last.batch_num}"
                    f"_{last.index_id}{ext}")
            emit(name, report.op_statistic(mid, iteration_id))
    if report.has_acl:
        emit(acl_statistic_name(report, iterations) + ext, report.acl_statistic())
    else:
        notice(f"{report.result_dir.name}: no ACL API data: acl_statistic skipped")
    for path in written:
        log.info("wrote %s", path)
    return written


def acl_statistic_name(report: Report, iterations) -> str:
    """ACL calls are per process: name the file after the lowest model id and its last iteration."""
    if not iterations:
        return f"acl_statistic_{safe_name(report.device_id)}"
    lowest = min(it.model_id for it in iterations)
    last = max(it.index_id for it in iterations if it.model_id == lowest)
    return f"acl_statistic_{safe_name(report.device_id)}_{lowest}_{last}"
