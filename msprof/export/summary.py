"""export summary: op_summary, op_statistic and acl_statistic files (outputs.md §3).

Each file is one ``Job`` turned into a report table and rendered. A large result directory
(PARALLEL_MIN_TASKS) has its jobs shared by two processes: every op_summary file is independent, and on a
1M-task JOB the export is ~90% SQL and CSV formatting, which one core does alone.
"""
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

from msprof.atomic import atomic_open
from msprof.console import log, notice
from msprof.export import safe_name
from msprof.render import FORMATS
from msprof.reports import Iteration, Report
from msprof.workers import process_pool, several_cores

# With at least this many tasks (and more than one core), two processes write the files.
PARALLEL_MIN_TASKS = 200_000
WORKERS = 2

class Job(NamedTuple):
    """One file: its table kind and the iterations it is named after (op_summary: its iteration;
    op_statistic: the model's selected iterations; acl_statistic: all selected iterations)."""
    kind: str
    iterations: Tuple[Iteration, ...]
    iteration_id: Optional[int] = None   # op_statistic restricted to this iteration


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
        jobs += [Job("op_summary", (it,)) for it in iterations]
        jobs += [Job("op_statistic", tuple(it for it in iterations if it.model_id == mid), iteration_id)
                 for mid in dict.fromkeys(it.model_id for it in iterations)]
    if report.has_acl:
        jobs.append(Job("acl_statistic", tuple(iterations)))
    else:
        notice(f"{report.result_dir.name}: no ACL API data: acl_statistic skipped")
    return jobs


def write_job(report: Report, fmt: str, job: Job) -> Path:
    """Write the file of one job; return its path."""
    render, ext = FORMATS[fmt]
    if job.kind == "op_summary":
        (iteration,) = job.iterations
        name, table = op_summary_name(report, iteration, ext), report.op_summary(iteration)
    elif job.kind == "op_statistic":
        last = job.iterations[-1]
        name = (f"op_statistic_{safe_name(report.device_id)}_{last.model_id}_{last.index_id * last.batch_num}"
                f"_{last.index_id}{ext}")
        table = report.op_statistic(last.model_id, job.iteration_id)
    else:
        name, table = acl_statistic_name(report, job.iterations) + ext, report.acl_statistic()
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
    per_file = [i for i, job in enumerate(jobs) if job.kind == "op_summary"]
    others = [[i] for i, job in enumerate(jobs) if job.kind != "op_summary"]
    size = max(1, len(per_file) // (8 * WORKERS))
    batches = others + [per_file[i:i + size] for i in range(0, len(per_file), size)]   # job positions
    log.info("writing %d file(s) of %d tasks in %d processes", len(jobs), tasks, WORKERS)
    written: List[Path] = [Path()] * len(jobs)
    with process_pool(WORKERS, initializer=_open_worker_report, initargs=(str(result_dir),)) as pool:
        futures = [pool.submit(_write_batch, fmt, [jobs[i] for i in batch]) for batch in batches]
        for batch, future in zip(batches, futures):
            for i, path in zip(batch, future.result()):
                written[i] = Path(path)
    return written
