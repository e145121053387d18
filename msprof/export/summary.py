"""export summary: op_summary, op_statistic and acl_statistic files (outputs.md §3).

Each file is one job ``(kind, model_id, index_id)`` turned into a report table and rendered. A large
result directory (PARALLEL_MIN_TASKS) has its jobs shared by two processes: every op_summary file is
independent, and on a 1M-task JOB the export is ~90% SQL and CSV formatting, which one core does alone.
"""
from pathlib import Path
from typing import List, Optional, Tuple

from msprof.atomic import atomic_open
from msprof.console import log, notice
from msprof.export import safe_name
from msprof.render import FORMATS
from msprof.reports import Report
from msprof.workers import process_pool, several_cores

# With at least this many tasks (and more than one core), two processes write the files.
PARALLEL_MIN_TASKS = 200_000
WORKERS = 2

Job = Tuple[str, Optional[int], Optional[int]]   # (table kind, model id, iteration id)


def op_summary_name(report: Report, iteration, ext: str) -> str:
    frequency = report.aic_mhz_at(iteration.start_syscnt)
    parts = [report.device_id, iteration.model_name, iteration.model_id, iteration.batch_num,
             iteration.input_pic_num, iteration.index_id * iteration.batch_num, None, frequency]
    # icache_miss_rate is not collected on SS928 data: always N/A
    return "op_summary_" + ".".join("N/A" if p is None else safe_name(p) for p in parts).replace("/", "_") + ext


def write_summary(report: Report, fmt: str = "csv", model_id: Optional[int] = None,
                  iteration_id: Optional[int] = None) -> List[Path]:
    jobs = _jobs(report, model_id, iteration_id)
    tasks = report._count("task") if len(jobs) > 1 else 0
    if tasks >= PARALLEL_MIN_TASKS and several_cores():
        written = _write_in_workers(report.result_dir, fmt, jobs, tasks)
    else:
        written = [write_job(report, fmt, job) for job in jobs]
    for path in written:
        log.info("wrote %s", path)
    return written


def _jobs(report: Report, model_id: Optional[int], iteration_id: Optional[int]) -> List[Job]:
    """The files an export writes, in order; notices for the tables that have no data."""
    iterations = report.iterations(model_id, iteration_id)
    if model_id is not None and not iterations:
        from msprof.errors import UsageError

        raise UsageError(f"{report.result_dir}: no recorded iteration {iteration_id} of model {model_id} "
                         "(msprof query lists what is there)")
    jobs: List[Job] = []
    if not report.has_tasks:
        notice(f"{report.result_dir.name}: no HWTS task data: op_summary and op_statistic skipped")
    elif not iterations:
        notice(f"{report.result_dir.name}: no step trace iterations: op_summary and op_statistic skipped")
    else:
        jobs += [("op_summary", it.model_id, it.index_id) for it in iterations]
        jobs += [("op_statistic", mid, iteration_id) for mid in dict.fromkeys(it.model_id for it in iterations)]
    if report.has_acl:
        jobs.append(("acl_statistic", model_id, iteration_id))
    else:
        notice(f"{report.result_dir.name}: no ACL API data: acl_statistic skipped")
    return jobs


def write_job(report: Report, fmt: str, job: Job) -> Path:
    """Write the file of one job; return its path."""
    render, ext = FORMATS[fmt]
    kind, model_id, index_id = job
    if kind == "op_summary":
        iteration = report.iterations(model_id, index_id)[0]
        name, table = op_summary_name(report, iteration, ext), report.op_summary(iteration)
    elif kind == "op_statistic":
        last = report.iterations(model_id, index_id)[-1]
        name = (f"op_statistic_{safe_name(report.device_id)}_{model_id}_{last.index_id * last.batch_num}"
                f"_{last.index_id}{ext}")
        table = report.op_statistic(model_id, index_id)
    else:
        name, table = acl_statistic_name(report, report.iterations(model_id, index_id)) + ext, report.acl_statistic()
    path = report.result_dir / "summary" / name
    with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(render(table))
    return path


def acl_statistic_name(report: Report, iterations) -> str:
    """ACL calls are per process: name the file after the lowest model id and its last iteration."""
    if not iterations:
        return f"acl_statistic_{safe_name(report.device_id)}"
    lowest = min(it.model_id for it in iterations)
    last = max(it.index_id for it in iterations if it.model_id == lowest)
    return f"acl_statistic_{safe_name(report.device_id)}_{lowest}_{last}"


# --- two processes -------------------------------------------------------------------------------------
_worker_report: Optional[Report] = None


def _open_worker_report(result_dir: str) -> None:
    global _worker_report
    _worker_report = Report(Path(result_dir))


def _write_batch(fmt: str, jobs: List[Job]) -> List[str]:
    return [str(write_job(_worker_report, fmt, job)) for job in jobs]


def _write_in_workers(result_dir: Path, fmt: str, jobs: List[Job], tasks: int) -> List[Path]:
    """Share the jobs between WORKERS processes in batches (small enough to even out, large enough that
    dispatch costs nothing); the statistics tables, each a scan of a whole table, are batches of their own."""
    per_file = [j for j in jobs if j[0] == "op_summary"]
    others = [[j] for j in jobs if j[0] != "op_summary"]
    size = max(1, len(per_file) // (8 * WORKERS))
    batches = others + [per_file[i:i + size] for i in range(0, len(per_file), size)]
    log.info("writing %d file(s) of %d tasks in %d processes", len(jobs), tasks, WORKERS)
    with process_pool(WORKERS, initializer=_open_worker_report, initargs=(str(result_dir),)) as pool:
        futures = [pool.submit(_write_batch, fmt, batch) for batch in batches]
        by_job = {}
        for batch, future in zip(batches, futures):
            by_job.update(zip(batch, future.result()))
    return [Path(by_job[job]) for job in jobs]
