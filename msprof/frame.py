"""The frame of every command on a unit (msprof.api): its log, the leftovers of killed runs removed, its
databases made current — imported once under a per-directory lock, so that commands started together
import once, several databases two at a time in two processes — its report open, and the data-quality
line said again; ``Failures``: the errors of a run over several units, said as they happen."""
import contextlib
import functools
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from msprof import progress
from msprof.console import log, notice, result_log
from msprof.contract import Database, Target, Unit
from msprof.errors import MsprofError, SeveralFailed
from msprof.outputs import directory_lock, output_dir, remove_stale
from msprof.workers import Pool, several_cores


@contextlib.contextmanager
def working(unit: Unit, command: str, target: Optional[Target] = None):
    """The frame of a command on a unit: its log, and the leftovers of killed runs removed first (from its
    databases' directories and the output directories of ``target``, by default the unit's own)."""
    target = target or Target.of(unit)
    with result_log(unit.out, command):
        for directory in {d.path.parent for d in unit.databases} | {target.summary_dir, target.timeline_dir}:
            if remove_stale(directory):
                log.info("removed the temporaries of an interrupted run from %s", directory)
        yield


# --- databases ---------------------------------------------------------------------------------------------
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
    those of ``broken`` (result directories found unusable, with their error). A database that reads others
    (``after_others``: a framework directory's, which links its ops to its PROF_'s tasks) is built after them."""
    later = [d for d in databases if getattr(d, "after_others", False)]
    databases = [d for d in databases if not getattr(d, "after_others", False)] + later
    results = _build_all(databases[:len(databases) - len(later)]) + [_build_or_error(d, True) for d in later]
    # (counted by result directory: a host without devices has two databases read from it, which fail together)
    failures = Failures(len({d.source_dir for d in databases}) + len(broken) if keep_going else 1, "databases")
    for name, error in broken:
        failures.add(name, error)
    for database, (_path, error) in zip(databases, results):
        failures.add(database.source_dir, error)
    failures.done()
    return [path for path, _error in results if path is not None]


def _build_all(databases: List[Database]) -> list:
    if len(databases) > 1 and several_cores():
        sizes = [_raw_bytes(d) for d in databases]
        largest = max(range(len(databases)), key=sizes.__getitem__)
        if sum(sizes) - sizes[largest] > sizes[largest] // 8:
            def stopped() -> None:       # (the workers were killed: what they were writing goes too)
                for database in databases:
                    remove_stale(database.path.parent)

            # (the line counts the bytes the workers decode: the user guide says import counts bytes)
            with progress.relayed() as relay, Pool(2, on_stop=stopped) as pool:
                futures = [pool.submit(_build_or_error, database, False) for database in databases]
                results = pool.results(f"importing {len(databases)} databases", futures, sizes, relay)
        else:
            results = [_build_or_error(d, False) if i != largest else None for i, d in enumerate(databases)]
            results[largest] = _build_or_error(databases[largest], True)
    else:
        results = [_build_or_error(database, True) for database in databases]
    return results


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
            try:
                output_dir(directory)
            except MsprofError:
                continue
            stack.enter_context(directory_lock(directory, functools.partial(
                notice, f"{directory}: another msprof is importing it: waiting")))
        yield


@contextlib.contextmanager
def reading(unit: Unit, command: str, target: Optional[Target] = None):
    """The frame of a command that reads a unit: ``working``, its databases made current, the report open.
    When the import is not this run's, what it lost is said again in one line (its warnings were said when
    it ran, maybe days ago, by another command)."""
    if unit.problem is not None:
        raise unit.problem
    with working(unit, command, target):
        built = ensure_databases(unit)
        with unit.open() as report:
            quality = report.quality()
            if quality and not built:
                log.warning("%s: data quality: %s", unit.label, quality)
            yield report
