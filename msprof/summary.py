"""export summary: the one writer of summary files, for every layout (outputs.md §3).

A layout's report lists the files to write (``SummaryFile``: a name, the report table that fills it, and a
weight ~ its rows); each is rendered straight from SQL into a temporary file renamed into place. When the
files add up to many rows and a second core is free, two processes share them, largest first, in batches
small enough to even out (the order of the returned paths is the order of the list, either way).
"""
from pathlib import Path
from typing import List, NamedTuple, Optional

from msprof.atomic import atomic_open
from msprof.console import log
from msprof.renderers import FORMATS
from msprof.workers import process_pool, several_cores

# With at least this many rows in all (and more than one core), two processes write the files.
PARALLEL_MIN_ROWS = 200_000
WORKERS = 2


class SummaryFile(NamedTuple):
    name: str            # file name without extension
    table: str           # the report method that makes its Table
    args: tuple = ()
    weight: int = 1      # about its rows


def write_summary(report, files: List[SummaryFile], fmt: str, directory: Path) -> List[Path]:
    if sum(f.weight for f in files) >= PARALLEL_MIN_ROWS and len(files) > 1 and several_cores():
        written = _write_in_workers(report.unit, files, fmt, directory)
    else:
        written = [write_file(report, f, fmt, directory) for f in files]
    for path in written:
        log.info("wrote %s", path)
    return written


def write_file(report, summary_file: SummaryFile, fmt: str, directory: Path) -> Path:
    renderer = FORMATS[fmt]()
    table = getattr(report, summary_file.table)(*summary_file.args)
    path = Path(directory) / (summary_file.name + renderer.extension)
    with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
        renderer.write(table, handle)
    return path


# --- two processes -----------------------------------------------------------------------------------------
_worker_report = None


def _open_worker_report(unit) -> None:
    global _worker_report
    _worker_report = unit.open()


def _write_batch(files: List[SummaryFile], fmt: str, directory: str) -> List[str]:
    return [str(write_file(_worker_report, f, fmt, Path(directory))) for f in files]


def _write_in_workers(unit, files: List[SummaryFile], fmt: str, directory: Path) -> List[Path]:
    order = sorted(range(len(files)), key=lambda i: -files[i].weight)
    share = max(1, sum(f.weight for f in files) // (8 * WORKERS))
    batches: List[List[int]] = []
    load: Optional[int] = None
    for i in order:                       # large files alone, small ones grouped up to ``share`` rows
        if load is None or load + files[i].weight > share:
            batches.append([])
            load = 0
        batches[-1].append(i)
        load += files[i].weight
    log.info("writing %d file(s) in %d processes", len(files), WORKERS)
    written: List[Path] = [Path()] * len(files)
    with process_pool(WORKERS, initializer=_open_worker_report, initargs=(unit,)) as pool:
        futures = [pool.submit(_write_batch, [files[i] for i in batch], fmt, str(directory)) for batch in batches]
        for batch, future in zip(batches, futures):
            for i, path in zip(batch, future.result()):
                written[i] = Path(path)
    return written
