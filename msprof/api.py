"""Library entry points behind the CLI: one function per command, each one loop over the units of a path
(msprof.layouts: a JOB directory; a PROF_ device with its host), whatever their layout.

Each takes a path — a result directory, a PROF_ directory, or a parent of several — and, where it writes,
``output``: a directory that receives the databases and results (``OUTPUT/<result dir name>/...``) instead
of the collection itself (which may be read-only).
"""
import contextlib
import os
import shlex
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

try:                        # (imported with the module: a command may drop privileges or lose its paths later)
    import fcntl
except ImportError:         # not POSIX: no import lock
    fcntl = None

from msprof import progress
from msprof.console import discard_stdout, log, notice, result_log
from msprof.errors import DiskSpaceError, MsprofError, OutputError, SeveralFailed, UsageError
from msprof.layouts import find_units
from msprof.layouts.base import Database, Selection, Unit, opened
from msprof.outputs import naming_errors, output_dir, remove_stale
from msprof.paths import printable
from msprof.workers import Later, process_pool, several_cores

if TYPE_CHECKING:
    from msprof.show import View


@contextlib.contextmanager
def working(unit: Unit, command: str):
    """The frame of a command on a unit: its log, and the leftovers of killed runs removed first."""
    with result_log(unit.out, command):
        for directory in {d.path.parent for d in unit.databases} | {unit.out / "summary", unit.out / "timeline"}:
            if remove_stale(directory):
                log.info("removed the temporaries of an interrupted run from %s", directory)
        yield


# --- databases -------------------------------------------------------------------------------------------
def _build(database: Database, spare_cores: bool) -> Path:
    directory = database.path.parent
    made = not os.path.exists(directory)
    with result_log(directory.parent, "import"):
        remove_stale(directory)
        try:
            with progress.step(f"importing {database.source_dir.name}"):
                path = database.build(database.path, spare_cores)
        except BaseException:
            if made:        # an import that failed (unreadable data, Ctrl-C) leaves no empty sqlite/ behind
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise
    notice(f"imported {database.source_dir} -> {path}")
    return path


def _build_or_error(database: Database, spare_cores: bool) -> Tuple[Optional[Path], Optional[MsprofError]]:
    """``_build``, with a user's error (bad data, a refused write) returned instead of raised, so that the
    other databases of the run are still built."""
    try:
        return _build(database, spare_cores), None
    except MsprofError as exc:
        return None, exc


def build_databases(databases: List[Database], keep_going: bool = False,
                    broken: Sequence[Tuple[Path, MsprofError]] = ()) -> List[Path]:
    """(Re)build databases: two at a time in two processes when there are several of some size and a second
    core (a PROF host and its device side by side). When one holds nearly all the raw data (a static graph's
    device: the host has little to say), the small ones are built first and the large one alone, which may
    then use a worker process of its own. A database that cannot be built fails the call; with
    ``keep_going``, the others are built first and the failures are said and summed up (``Failures``), with
    those of ``broken`` (result directories found unusable, with their error)."""
    if len(databases) > 1 and several_cores():
        sizes = [_raw_bytes(d) for d in databases]
        largest = max(range(len(databases)), key=sizes.__getitem__)
        if sum(sizes) - sizes[largest] > sizes[largest] // 8:
            try:
                with process_pool(2) as pool:
                    results = progress.pool_map(pool, f"importing {len(databases)} databases", _build_or_error,
                                                databases, [False] * len(databases))
            except BaseException:       # the workers are stopped (killed): what they were writing goes too
                for database in databases:
                    remove_stale(database.path.parent)
                raise
        else:
            results = [_build_or_error(d, False) if i != largest else None for i, d in enumerate(databases)]
            results[largest] = _build_or_error(databases[largest], True)
    else:
        results = [_build_or_error(database, True) for database in databases]
    # (counted by result directory: a host without devices has two databases read from it, which fail together)
    failures = Failures(len({d.source_dir for d in databases}) + len(broken) if keep_going else 1, "databases")
    for name, error in broken:
        failures.add(name, error)
    for database, (_path, error) in zip(databases, results):
        failures.add(database.source_dir, error)
    failures.done()
    return [path for path, _error in results if path is not None]


class Failures:
    """The errors of a run over several result directories (or databases): with more than one, each that
    fails (bad data, a refused write, a selection it lacks) is said as it happens and the others are still
    done; ``done`` then fails the run with the highest exit code, naming them. With one, its error is raised
    as it is."""

    def __init__(self, count: int, noun: str = "result directories"):
        self.count, self.noun = count, noun
        self.failed: List[Tuple[int, str]] = []      # (exit code, name)

    def add(self, name, error: Optional[MsprofError], label: str = "") -> None:
        """``label``: another name the message may already give it by (a unit's label)."""
        if error is None or any(known == str(name) for _code, known in self.failed):
            return
        if self.count == 1:
            raise error
        named = str(name) in error.message or (label and label in error.message)
        log.error("%s", error.message if named else f"{name}: {error.message}")
        self.failed.append((error.exit_code, str(name)))

    @contextlib.contextmanager
    def each(self, unit: Unit):
        """The frame of one unit's work: its user's error is said and kept (with several units)."""
        try:
            yield
        except MsprofError as exc:
            self.add(unit.path, exc, unit.label)

    def done(self) -> None:
        if self.failed:
            names = ", ".join(name for _code, name in self.failed)
            others = "; the others were done" if len(self.failed) < self.count else ""
            raise SeveralFailed(f"{len(self.failed)} of {self.count} {self.noun} failed (see above): {names}{others}",
                                max(code for code, _name in self.failed))


def _raw_bytes(database: Database) -> int:
    """About the size of a database's raw files (what cannot be read is said when its import opens it)."""
    try:
        sources = database.sources()
    except (OSError, MsprofError):
        return 0
    total = 0
    for path in sources:
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def ensure_databases(unit: Unit) -> List[Path]:
    """Build the unit's databases that are missing or whose raw files changed; return those built. Two
    commands started together on one fresh collection (``export summary & export timeline``, or two devices of
    one PROF_, which share its host database) import each database once: the second waits for the first, then
    finds it current."""
    if not any(database.stale() is not None for database in unit.databases):
        return []
    with _importing(unit.databases):
        stale = []
        said = set()
        for database in unit.databases:
            reason = database.stale()
            if reason is not None:
                stale.append(database)
                if database.source_dir in said:     # (a host without devices: two databases of one directory)
                    continue
                said.add(database.source_dir)
                # (a PROF_ device's unit imports its host's data too: "PROF_x/device_0: importing its host data")
                part = "" if database.source_dir == unit.path else f" its {database.source_dir.name} data"
                notice(f"{unit.label}: importing{part} ({reason})")
        return build_databases(stale) if stale else []


@contextlib.contextmanager
def _importing(databases: Sequence[Database]):
    """Exclusive locks, one msprof at a time, on the directories that hold the databases' sqlite/ (a JOB, a
    PROF_ host/ or device_N/, or their places under --output; made if missing), taken in one order so two
    commands cannot wait on each other: flock, released by the kernel if the holder dies. Where one cannot be
    taken (a directory that cannot be made, a file system without locks) it is done without, as before."""
    with contextlib.ExitStack() as stack:
        for directory in sorted({database.path.parent.parent for database in databases}):
            fd = _lock(directory)
            if fd is not None:
                stack.callback(os.close, fd)          # (the lock goes with it)
        yield


def _lock(directory: Path) -> Optional[int]:
    """The open directory, locked (None: no lock could be had)."""
    if fcntl is None:
        return None
    try:
        output_dir(directory)
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (OSError, MsprofError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            notice(f"{directory}: another msprof is importing it: waiting")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
    except BaseException:           # (Ctrl-C while waiting)
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def reading(unit: Unit, command: str):
    """The frame of a command that reads a unit: ``working``, its databases made current, the report open.
    When the import is not this run's, what it lost is said again in one line (its warnings were said when
    it ran, maybe days ago, by another command)."""
    if unit.problem is not None:
        raise unit.problem
    with working(unit, command):
        built = ensure_databases(unit)
        with opened(unit) as report:
            quality = report.quality()
            if quality and not built:
                log.warning("%s: data quality: %s", unit.label, quality)
            yield report


def import_collection(path: Path, output: Optional[Path] = None) -> List[Path]:
    """Rebuild the databases of every unit under ``path``; return their paths."""
    databases: Dict[Path, Database] = {}
    units = find_units(path, output)
    for unit in units:
        for database in unit.databases:
            databases.setdefault(database.path, database)
    broken = [(unit.path, unit.problem) for unit in units if unit.problem is not None]
    return build_databases(list(databases.values()), keep_going=True, broken=broken)


# --- exports ---------------------------------------------------------------------------------------------
def export_summary(path: Path, fmt: str = "csv", selection: Selection = Selection(),
                   output: Optional[Path] = None, hint: bool = False) -> List[Path]:
    """Write the summary files of every unit into <unit>/summary/ (importing first when needed).
    ``hint``: end by saying what to run next (the CLI's manner)."""
    from msprof.summary import write_summary

    selection.check()
    written: List[Path] = []
    units = find_units(path, output)
    failures = Failures(len(units))
    for unit in units:
        with failures.each(unit), reading(unit, f"export summary --format {fmt}") as report:
            files = unit.layout.summary_files(report, selection)
            # (what a whole-run export wrote is listed beside the database, for the next one to replace)
            manifest = unit.out / "sqlite" / f"summary.{fmt}.list" if selection.everything else None
            written += write_summary(report, files, fmt, unit.out / "summary", manifest)
    _announce(written)
    failures.done()
    if hint and written:
        _next_steps(path, output, selection, units)
    return written


def export_timeline(path: Path, selection: Selection = Selection(), check_all: bool = False,
                    output: Optional[Path] = None, hint: bool = False) -> List[Path]:
    """Write the Chrome traces of every unit into <unit>/timeline/ (importing first when needed).
    ``check_all``: validate every file before it is renamed into place, whatever its size. ``hint``: end
    by saying how to look at them."""
    from msprof.trace import write_timelines

    selection.check()
    written: List[Path] = []
    units = find_units(path, output)
    failures = Failures(len(units))
    for unit in units:
        with failures.each(unit), reading(unit, "export timeline") as report:
            written += write_timelines(report, selection, check_all)
    _announce(written)
    failures.done()
    if hint:
        _view_hint(written)
    return written


def analyse(path: Path, output: Optional[Path] = None) -> List[Path]:
    """import + export timeline + export summary (what ``collect --all`` runs on each pulled JOB)."""
    import_collection(path, output)
    return export_timeline(path, output=output) + export_summary(path, output=output)


# --- terminal ----------------------------------------------------------------------------------------------
def show(path: Path, selection: Selection = Selection(), view: Optional["View"] = None,
         output: Optional[Path] = None) -> None:
    """Print each unit's tables (outputs.md §4) as ``view`` says (msprof.show); import and export the
    timeline first when missing or stale."""
    from msprof.show import View, print_sections, selected
    from msprof.trace import timelines_current, write_timelines

    selection.check()
    view = view or View()

    def sections(unit: Unit, report):
        report.check(selection)              # (the selection, --table and --sort before the timeline is written)
        tables = selected(unit.layout.show_tables(report, selection), view, unit.label, len(units) > 1)
        timelines = unit.layout.timelines(report, Selection())
        if not timelines_current(report, timelines):
            try:
                _announce(write_timelines(report, timelines=timelines))
            except (OutputError, DiskSpaceError) as exc:  # the tables need no write: they are still shown
                log.warning("timeline not written: %s", exc.message)
        for table in tables:      # a table a worker makes (workers.Later) starts now, not beside the timeline's
            if isinstance(table.batches, Later):
                table.batches.start()
        return tables

    units = find_units(path, output)
    failures = Failures(len(units))
    print_sections(_sections(units, "show", sections, failures), view, len(units) > 1)
    failures.done()


def query(path: Path, view: Optional["View"] = None, output: Optional[Path] = None) -> None:
    """Devices, models, iteration ids and the data present (the values --model-id/--iteration-id take)."""
    from msprof.show import View, print_sections, selected

    units = find_units(path, output)
    view = view or View()

    def tables(unit: Unit, report):
        return selected(unit.layout.query_tables(report) + [report.notice_table()], view, unit.label,
                        len(units) > 1)

    failures = Failures(len(units))
    print_sections(_sections(units, "query", tables, failures), view, len(units) > 1)
    failures.done()


def _sections(units: List[Unit], command: str, tables, failures: "Failures"):
    """One msprof.show.Section per unit (``tables(unit, report)``: the tables it prints), made while its
    report is open (its rows stream from it); a unit that fails is left out (``failures``)."""
    from msprof.show import Section

    for unit in units:
        with failures.each(unit), reading(unit, command) as report:
            yield Section(printable(unit.label), printable(os.path.abspath(unit.path)), unit.layout.name, tables(unit, report),
                          report.quality())


# --- answers (msprof.analysis) ------------------------------------------------------------------------------
def compare(base: Path, new: Path, fmt: Optional[str] = "table", top: Optional[int] = 20,
            fail_if_slower: Optional[float] = None, output: Optional[Path] = None, wide: bool = False) -> dict:
    """Compare two collections (each one result directory, or a parent holding exactly one) per model, op
    type, op and API; print the comparison (``fmt`` None: not) and return its document (what ``--format json``
    prints). ``fail_if_slower``: raise RegressionError (exit 9) when a model both have grew by more than that %."""
    from msprof.analysis.compare import check_gate, compare_sides, print_comparison, read_side
    from msprof.analysis.facts import single_unit

    # (nan compares false with every growth: a gate of nan would pass everything)
    if fail_if_slower is not None and not 0 <= fail_if_slower < float("inf"):
        raise UsageError(f"--fail-if-slower {fail_if_slower}: not a percentage (a finite number, 0 or more)")
    units = [single_unit(path, output) for path in (base, new)]
    if output is not None and _share_a_database(*units):
        # two collections of one name would be imported into one DIR/<name>/, the second over the first (and
        # compared with itself): each side in a directory of its own
        units = [single_unit(path, Path(output) / side) for path, side in ((base, "base"), (new, "new"))]
    for unit in units:
        with reading(unit, "compare"):        # imported when needed; what an import lost, said again
            pass
    if several_cores():         # the two sides' aggregates side by side (a PROF side of 1M tasks: ~5 s)
        with process_pool(2) as pool:
            sides = progress.pool_map(pool, "comparing", read_side, units)
    else:
        with progress.step("comparing", 2) as shown:
            sides = []
            for unit in units:
                sides.append(read_side(unit))
                shown.advance()
    document = compare_sides(*sides)
    try:
        if fmt is not None:
            print_comparison(document, fmt, top, wide)
    except BrokenPipeError:
        # the reader had enough (``| head``), but a CI job's gate must still say and exit 9
        discard_stdout()
        check_gate(document, fail_if_slower)
        raise
    check_gate(document, fail_if_slower)
    return document


def _share_a_database(one, other) -> bool:
    """Whether two units of different raw data would have a database in one place."""
    mine = {db.path: db.source_dir.resolve() for db in one.databases}
    return any(db.path in mine and mine[db.path] != db.source_dir.resolve() for db in other.databases)


def advise(path: Path, fmt: Optional[str] = "table", selection: Selection = Selection(),
           output: Optional[Path] = None) -> List[dict]:
    """Findings of the advise rules on one collection (a result directory, or a parent holding exactly
    one); print them (``fmt`` None: not) and return them (what ``--format json`` prints under "findings")."""
    from msprof.analysis.advise import find, print_findings
    from msprof.analysis.facts import single_unit

    selection.check()
    unit = single_unit(path, output)
    with reading(unit, "advise") as report:
        findings = find(unit.layout.facts(report, idle=True), selection)
    if fmt is not None:
        print_findings(findings, fmt, unit.label)
    return findings


def demo(output: Path, kind: str = "JOB") -> None:
    """Copy the bundled sample of ``kind`` ("JOB" or "PROF_") into ``output`` and run import, export and
    show on it."""
    bundled = Path(__file__).parent / "demo_data"
    jobs = sorted(p for p in bundled.iterdir() if p.is_dir() and p.name.startswith(kind)) if bundled.is_dir() else []
    if not jobs:
        from msprof.errors import MsprofError

        raise MsprofError(f"the bundled sample is missing from {bundled} (broken installation?)")
    output = output_dir(Path(output))
    for job in jobs:
        target = output / job.name
        if not target.exists():
            with naming_errors(target):
                shutil.copytree(job, target)
        notice(f"sample {kind.rstrip('_')} copied to {target}")
        written = analyse(target)
        show(target)
        _view_hint([p for p in written if p.parent.name == "timeline"])
        _next_steps(target, None)


def _view_hint(timelines: List[Path]) -> None:
    """How to look at Chrome traces: the first (largest task timeline first) and how many more."""
    if not timelines:
        return
    first = max(timelines, key=lambda p: (p.name.startswith("task_time"), p.stat().st_size))
    more = f" (and the {len(timelines) - 1} other file(s) beside it)" if len(timelines) > 1 else ""
    notice(f"view: open {shlex.quote(str(first))}{more} in https://ui.perfetto.dev or chrome://tracing")


def _next_steps(path: Path, output: Optional[Path], selection: Selection = Selection(),
                units: Sequence[Unit] = ()) -> None:
    def where(path: Path) -> str:
        text = f"-dir {shlex.quote(str(path))}" + (f" --output {shlex.quote(str(output))}" if output else "")
        if not selection.everything:         # (what was just exported: the same iteration)
            text += f" --model-id {selection.model_id} --iteration-id {selection.iteration_id}"
        return text

    notice(f"next: msprof show {where(path)}   (the tables in the terminal)")
    if len(units) > 1:      # advise reads one result directory (a device) at a time
        notice(f"      msprof advise {where(units[0].path)}   (where the time goes and what to do about it; one "
               f"result directory at a time, {len(units)} here)")
    else:
        notice(f"      msprof advise {where(path)}   (where the time goes and what to do about it)")


def _announce(paths: List[Path]) -> None:
    if paths:
        directories = sorted({str(p.parent) for p in paths})
        notice(f"wrote {len(paths)} file(s) in {', '.join(directories)}")
    log.debug("%d file(s) written", len(paths))
