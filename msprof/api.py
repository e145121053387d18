"""Library entry points behind the CLI. Each takes a path: a result dir, a PROF_ dir, or a parent of several."""
import shutil
from pathlib import Path
from typing import List, Optional

from msprof import store
from msprof.collection import find_result_dirs
from msprof.console import notice, result_log
from msprof.reports import open_report


def split_layouts(path: Path):
    """(JOB result dirs, PROF_ roots) under ``path``: a PROF_ directory is analysed as one unit
    (its host/ and device_N/ result dirs together), see msprof.prof."""
    jobs, prof_roots = [], []
    for result_dir in find_result_dirs(path):
        if result_dir.parent.name.startswith("PROF_") and (result_dir.name == "host"
                                                           or result_dir.name.startswith("device_")):
            if result_dir.parent not in prof_roots:
                prof_roots.append(result_dir.parent)
        else:
            jobs.append(result_dir)
    return jobs, prof_roots


def _prof_api():
    from msprof.prof import api as prof_api

    return prof_api


def import_collection(path: Path) -> List[Path]:
    """Rebuild the database of every result directory under ``path``; return the database paths."""
    from msprof.importer import import_result_dir

    jobs, prof_roots = split_layouts(path)
    databases = [db for root in prof_roots for db in _prof_api().import_prof(root)]
    for result_dir in jobs:
        with result_log(result_dir, "import"):
            database = import_result_dir(result_dir)
        notice(f"imported {result_dir} -> {database}")
        databases.append(database)
    return databases


def ensure_database(result_dir: Path) -> Path:
    """The result dir's database, (re)built first when it is missing or its sources changed."""
    from msprof.importer import import_result_dir

    reason = store.stale_reason(result_dir)
    if reason is None:
        return store.db_path(result_dir)
    notice(f"{result_dir.name}: importing ({reason})")
    return import_result_dir(result_dir)


def export_timeline(path: Path, model_id: Optional[int] = None, iteration_id: Optional[int] = None,
                    check_all: bool = False) -> List[Path]:
    """Write Chrome traces into <result dir>/timeline/ (importing first when needed); return the files.
    ``check_all``: validate every file before it is renamed into place, whatever its size."""
    from msprof.export.timeline import write_timeline

    jobs, prof_roots = split_layouts(path)
    written = [f for root in prof_roots for f in _prof_api().export_timeline(root, model_id, iteration_id)]
    for result_dir in jobs:
        with result_log(result_dir, "export timeline"):
            ensure_database(result_dir)
            with open_report(result_dir) as report:
                written += write_timeline(report, model_id=model_id, iteration_id=iteration_id,
                                          check_all=check_all)
    _announce(written)
    return written


def export_summary(path: Path, fmt: str = "csv", model_id: Optional[int] = None,
                   iteration_id: Optional[int] = None) -> List[Path]:
    """Write op_summary/op_statistic/acl_statistic files into <result dir>/summary/; return the files."""
    from msprof.export.summary import write_summary

    jobs, prof_roots = split_layouts(path)
    written = [f for root in prof_roots for f in _prof_api().export_summary(root, fmt, model_id, iteration_id)]
    for result_dir in jobs:
        with result_log(result_dir, f"export summary --format {fmt}"):
            ensure_database(result_dir)
            with open_report(result_dir) as report:
                written += write_summary(report, fmt, model_id=model_id, iteration_id=iteration_id)
    _announce(written)
    return written


def analyse(path: Path) -> List[Path]:
    """import + export timeline + export summary (what ``collect --all`` runs on each pulled JOB)."""
    import_collection(path)
    return export_timeline(path) + export_summary(path)


def show(path: Path, model_id=None, iteration_id=None, top=None, fmt="table", style="simple") -> None:
    """Print the four tables of outputs.md §4; import and export the timeline first when missing or stale."""
    from msprof.show import print_tables
    from msprof.export.timeline import write_timeline, timeline_current

    jobs, prof_roots = split_layouts(path)
    for root in prof_roots:
        _prof_api().show(root, model_id=model_id, iteration_id=iteration_id, top=top, fmt=fmt, style=style)
    for result_dir in jobs:
        with result_log(result_dir, "show"):
            ensure_database(result_dir)
            with open_report(result_dir) as report:
                if not timeline_current(report):
                    _announce(write_timeline(report))
                print_tables(report, model_id=model_id, iteration_id=iteration_id, top=top, fmt=fmt, style=style)


def query(path: Path) -> None:
    from msprof.show import print_query

    jobs, prof_roots = split_layouts(path)
    for root in prof_roots:
        _prof_api().query(root)
    for result_dir in jobs:
        with result_log(result_dir, "query"):
            ensure_database(result_dir)
            with open_report(result_dir) as report:
                print_query(report)


def demo(output: Path) -> None:
    """Copy the bundled sample JOB into ``output`` and run import, export and show on it."""
    bundled = Path(__file__).parent / "demo_data"
    jobs = sorted(p for p in bundled.iterdir() if p.is_dir() and p.name.startswith("JOB")) if bundled.is_dir() else []
    if not jobs:
        from msprof.errors import MsprofError

        raise MsprofError(f"the bundled sample is missing from {bundled} (broken installation?)")
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        target = output / job.name
        if not target.exists():
            shutil.copytree(job, target)
        notice(f"sample JOB copied to {target}")
        analyse(target)
        show(target)


def _announce(paths: List[Path]) -> None:
    if paths:
        directories = sorted({str(p.parent) for p in paths})
        notice(f"wrote {len(paths)} file(s) in {', '.join(directories)}")
