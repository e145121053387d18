"""export summary: the one writer of summary files, for every layout (outputs.md §3).

A layout's report lists the files to write (``SummaryFile``: a name, the report table that fills it, a
weight ~ its rows, and into how many row ranges its table can be cut); each is rendered straight from SQL
into a temporary file renamed into place. When the files add up to many rows and a second core is free,
two processes share the work: the files that cannot be cut first, largest first, then the parts of a file
that can (a PROF op_summary of a million rows, cut by start time into parts that shrink towards the end),
which both write and its renderer joins. Files made by one pass
over the rows (a PROF op_summary and task_time: one query) are written together, a batch of each in turn.
A file may be made from what such a pass gathered on the way (``after``: its RowSource's taps, msprof.tables.Tap;
PROF op_statistic's sums per op): it is written once every part of that pass is, by this process, and
makes its rows itself when the pass gathered nothing (a renderer that printed values instead).
The order of the returned paths is the order of the list, either way. The files of an export replace the
earlier ones together, or none do (msprof.outputs.FileSet: workers stage theirs for this process to put in
place with its own).
"""
import contextlib
import itertools
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from msprof import progress
from msprof.contract import SummaryFile
from msprof.outputs import FileSet, naming_errors, output_dir, remove_stale, temporary
from msprof.console import log, notice
from msprof.renderers import FORMATS
from msprof.tables import part_share
from msprof.workers import Pool, several_cores

# With at least this many rows in all (and more than one core), two processes write the files.
PARALLEL_MIN_ROWS = 200_000
WORKERS = 2


def write_summary(report, files: List[SummaryFile], fmt: str, directory: Path,
                  manifest: Optional[Path] = None, whole: bool = True) -> List[Path]:
    """Write ``files`` into ``directory``; return their paths. They replace the earlier ones together, or none
    do. ``manifest``: the list of what the previous export without a selection (``whole``) wrote, whose files
    such an export does not write — their data gone (a step trace lost since), or their names changed (a JOB
    op_summary's name counts the iterations) — are removed, so that summary/ holds one run's results, not two
    mixed; a file it lists is removed only if msprof wrote it and no one changed it since (FileSet). Files
    msprof did not write, and those of selections (other names), are never touched."""
    with FileSet(directory, manifest, whole=whole) as staged:
        written = _write(report, files, fmt, directory, staged) if files else []
        staged.commit()
    for path in written:
        log.info("wrote %s", path)
    said = staged.removed_notice("file(s) an earlier export wrote that this one does not")
    if said:
        notice(said)
    return written


def stage_summary(report, files: List[SummaryFile], fmt: str, directory: Path) -> List[Tuple[str, str]]:
    """Write ``files`` as temporaries in ``directory`` and hand them over, (temporary, name) each, for another
    set to put in place (msprof.merged: a PROF_'s devices in one file per kind)."""
    with FileSet(directory) as own:
        if files:
            _write(report, files, fmt, directory, own)
        return own.hand_over()


def _write(report, files: List[SummaryFile], fmt: str, directory: Path, staged: FileSet) -> List[Path]:
    if sum(f.weight for f in files) >= PARALLEL_MIN_ROWS and several_cores() and (
            len(files) > 1 or files[0].parts > 1):
        written = _write_in_workers(report, files, fmt, directory, staged)
    else:
        written = []
        gathered: Dict[str, Optional[list]] = {}      # per file name, what its pass gathered
        with progress.step("writing summaries", sum(f.weight for f in files)) as shown:
            for f in files:
                paths, gathered[f.name] = write_file(report, f, fmt, directory, gathered.get(f.after), staged)
                written += paths
                shown.advance(f.weight)
    return written


def write_file(report, summary_file: SummaryFile, fmt: str, directory: Path, gathered: Optional[list] = None,
               files: Optional[FileSet] = None) -> Tuple[List[Path], Optional[list]]:
    """The file(s) of ``summary_file`` (``gathered``: the input it is ``after``, per part), and what their pass
    gathered (a list of one part's, or None). ``files``: the set they are staged in (without one, they are put
    in place at once)."""
    renderer = FORMATS[fmt]()
    names = [name + renderer.extension for name in summary_file.names]
    tables = _tables(report, summary_file, gathered=gathered)
    with FileSet(directory) if files is None else contextlib.nullcontext() as own:
        with contextlib.ExitStack() as stack:
            handles = [stack.enter_context((own or files).open(name, "w", encoding="utf-8", newline=""))
                       for name in names]
            renderer.write_many(tables, handles)
        if own is not None:
            own.commit()
    return [Path(directory) / name for name in names], _gathered(tables)


def _write_part(report, summary_file: SummaryFile, fmt: str, part: Tuple[int, int],
                directory: Path) -> Tuple[List[Path], Optional[list]]:
    """Rows of range ``part`` (k, n) of the files into temporaries beside them, for ``_join``; and what the
    pass gathered."""
    tables = _tables(report, summary_file, part)
    paths = [temporary(output_dir(directory), f"{name}.part{part[0]}") for name in summary_file.names]
    try:
        with contextlib.ExitStack() as stack:
            handles = []
            for path in paths:
                stack.enter_context(naming_errors(path))
                handles.append(stack.enter_context(open(path, "w", encoding="utf-8", newline="")))
            FORMATS[fmt]().write_many(tables, handles, part[0])
    except BaseException:
        for path in paths:
            path.unlink(missing_ok=True)
        raise
    return paths, _gathered(tables)


def _tables(report, summary_file: SummaryFile, part: Optional[Tuple[int, int]] = None, gathered=None) -> list:
    options = {"part": part} if part else {}
    if summary_file.after:
        options["gathered"] = gathered
    return summary_file.tables(report, **options)


def _gathered(tables) -> Optional[list]:
    """What the report gathered in the pass just made over the tables' rows (msprof.tables.RowSource.gathered):
    [this part's], or None when it gathered nothing."""
    made = tables[0].source.gathered() if tables and tables[0].source is not None else None
    return None if made is None else [made]


def _join(renderer, parts: List[Path], target: Path, files: FileSet) -> Path:
    try:
        with files.open(target.name, "wb") as out:
            renderer.join(parts, out)
    finally:
        for path in parts:
            path.unlink(missing_ok=True)
    return target


# --- two processes -----------------------------------------------------------------------------------------
_worker_report = None


def _open_worker_report(unit) -> None:
    global _worker_report
    _worker_report = unit.open()


def _write_batch(jobs: List[Tuple[SummaryFile, Optional[Tuple[int, int]]]], fmt: str,
                 directory: str) -> Tuple[List[tuple], List[Tuple[str, str]]]:
    """In a worker: the batch's files and parts, and its files staged for the parent's set."""
    out = []
    with FileSet(Path(directory)) as files:
        for summary_file, part in jobs:
            if part is None:
                paths, gathered = write_file(_worker_report, summary_file, fmt, Path(directory), files=files)
            else:
                paths, gathered = _write_part(_worker_report, summary_file, fmt, part, Path(directory))
            out.append(([str(path) for path in paths], gathered))
        return out, files.hand_over()


def _write_in_workers(report, files: List[SummaryFile], fmt: str, directory: Path, staged: FileSet) -> List[Path]:
    names = {f.name for f in files}
    later = [i for i, f in enumerate(files) if f.after in names]     # written here, from what the workers gathered
    jobs, batches = _plan(files, later)
    log.info("writing %d file(s) in %d processes", len(files), WORKERS)
    results: List[List[Path]] = [[] for _ in jobs]       # per job, a path per name
    gathered: List[Optional[list]] = [None for _ in jobs]
    try:
        with Pool(WORKERS, initializer=_open_worker_report, initargs=(report.unit,)) as pool:
            futures = [pool.submit(_write_batch, [(files[jobs[j][0]], jobs[j][1]) for j in batch], fmt,
                                   str(directory)) for batch in batches]
            done = pool.results("writing summaries", futures, [sum(jobs[j][2] for j in batch) for batch in batches])
            for batch, (batch_done, theirs) in zip(batches, done):
                staged.adopt(theirs)
                for j, (paths, pass_gathered) in zip(batch, batch_done):
                    results[j] = [Path(path) for path in paths]
                    gathered[j] = pass_gathered
    except BaseException:                  # the pool is stopped: remove what its workers left
        for path in itertools.chain.from_iterable(results):
            if path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
        remove_stale(directory)
        raise
    written: List[Path] = []
    for i, f in enumerate(files):
        if i in later:
            source = next(k for k, g in enumerate(files) if g.name == f.after)
            parts = [gathered[j] for j, job in enumerate(jobs) if job[0] == source]     # (in part order)
            whole = None if None in parts else [taps for part in parts for taps in part]
            written += write_file(report, f, fmt, directory, whole, staged)[0]
            continue
        mine = [results[j] for j, job in enumerate(jobs) if job[0] == i]
        split = any(job[1] is not None for job in jobs if job[0] == i)
        if split:
            renderer = FORMATS[fmt]()
            written += [_join(renderer, [paths[k] for paths in mine], Path(directory) / (name + renderer.extension),
                              staged) for k, name in enumerate(f.names)]
        else:
            written += mine[0]
    return written


def _plan(files: List[SummaryFile], later: List[int]) -> Tuple[List[tuple], List[List[int]]]:
    """The workers' jobs — (file index, part or None, weight): each file but those written ``later``, cut
    into its parts — and the batches they go in (job indexes): the files that cannot be cut first, largest
    first; the parts of the others after them, where they even out the end (a whole file last would keep
    one process busy while the other waits); large jobs alone, small ones grouped up to a share of rows."""
    jobs = []
    for i, f in enumerate(files):
        if i in later:
            continue
        n = f.parts
        if n > 1:
            jobs += [(i, (k, n), int(f.weight * part_share(k, n))) for k in range(n)]
        else:
            jobs.append((i, None, f.weight))
    order = sorted(range(len(jobs)), key=lambda j: (jobs[j][1] is not None, -jobs[j][2]))
    share = max(1, sum(j[2] for j in jobs) // (8 * WORKERS))
    batches: List[List[int]] = []
    load: Optional[int] = None
    for j in order:
        if load is None or load + jobs[j][2] > share:
            batches.append([])
            load = 0
        batches[-1].append(j)
        load += jobs[j][2]
    return jobs, batches
