"""Library entry points behind the CLI: one function per command, each one loop over the units of a path
(msprof.layouts: a JOB directory; a PROF_ device with its host), whatever their layout. Every call into a
layout goes through its msprof.contract.Layout; the writers, show and the analysis get what it returns.

Each takes a path — a result directory, a PROF_ directory, or a parent of several — and, where it writes,
``output``: a directory that receives the databases and results (``OUTPUT/<result dir name>/...``) instead
of the collection itself (which may be read-only).
"""
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from msprof import progress
from msprof.console import discard_stdout, log, notice, result_log
from msprof.contract import Database, Selection, Target, Unit
from msprof.errors import DiskSpaceError, MsprofError, OutputError, UsageError
from msprof.frame import Failures, build_databases, reading
from msprof.layouts import find_units, targets
from msprof.outputs import naming_errors, output_dir
from msprof.paths import printable
from msprof.renderers.documents import Section, Stdout, View
from msprof.workers import Later, Pool, several_cores


def import_collection(path: Path, output: Optional[Path] = None) -> List[Path]:
    """Rebuild the databases of every unit under ``path``; return their paths."""
    databases: Dict[Path, Database] = {}
    units = find_units(path, output)
    for unit in units:
        for database in unit.databases if unit.problem is None else ():
            databases.setdefault(database.path, database)
    broken = [(unit.path, unit.problem) for unit in units if unit.problem is not None]
    return build_databases(list(databases.values()), keep_going=True, broken=broken)


# --- exports ---------------------------------------------------------------------------------------------
def export_summary(path: Path, fmt: str = "csv", selection: Selection = Selection(),
                   output: Optional[Path] = None, hint: bool = False, stamp: Optional[str] = None) -> List[Path]:
    """Write the summary files of every target (a unit's summary/) under ``path``, importing first when
    needed. ``hint``: end by saying what to run next (the CLI's manner). ``stamp``: the CANN layout, a PROF_'s
    devices in one ``<kind>_<stamp>.csv`` per kind (docs/prof.md); other layouts keep their places."""
    from msprof.summary import write_summary

    selection.check()
    if stamp is not None and fmt != "csv":
        raise UsageError(f"--summary-format={fmt}: the CANN layout is written in csv only")
    written: List[Path] = []
    units = find_units(path, output)
    failures = Failures(len(units))
    for target in targets(units, stamp):
        if target.merged is not None:
            from msprof.summary import stage_summary

            written += _export_merged(target, failures, "--export=on (summary)", f"cann_summary.{fmt}.manifest",
                                      lambda k, unit, report: stage_summary(
                                          report, unit.layout.summary_files(report, selection), fmt,
                                          target.summary_dir))
            continue
        for unit in target.units:
            with failures.each(unit), reading(unit, f"export summary --format {fmt}", target) as report:
                files = unit.layout.summary_files(report, selection)
                # (what a whole-run export wrote is listed beside the database, for the next one to replace: not
                # the summary.<fmt>.list of earlier versions, which read a list as names)
                manifest = unit.out / "sqlite" / f"summary.{fmt}.manifest"
                written += write_summary(report, files, fmt, target.summary_dir, manifest, selection.everything)
    _announce(written)
    failures.done()
    if hint and written:
        _next_steps(path, output, selection, units)
    return written


def _export_merged(target: Target, failures: Failures, command: str, manifest: str, stage, check_all=False
                   ) -> List[Path]:
    """A merged target's files (msprof.merged): ``stage(k, unit, report)`` writes unit k's as temporaries, and
    they are joined and put in place only when every unit's were written (a file short of a device would pass
    for the whole PROF_)."""
    from msprof.merged import Merged

    failed = len(failures.failed)
    # (the export's log where the CANN msprof puts its own: PROF_x/mindstudio_profiler_log/)
    with result_log(target.summary_dir.parent, command, CANN_LOG), Merged(
            target.summary_dir, target.merged, target.units[0].out / "sqlite" / manifest, check_all) as merged:
        for k, unit in enumerate(target.units):
            with failures.each(unit), reading(unit, command, target) as report:
                merged.add(stage(k, unit, report))
        if len(failures.failed) > failed:
            log.error("%s: not written, as a device failed", target.summary_dir)
            return []
        return merged.commit()


def export_timeline(path: Path, selection: Selection = Selection(), check_all: bool = False,
                    output: Optional[Path] = None, hint: bool = False, stamp: Optional[str] = None) -> List[Path]:
    """Write the Chrome traces of every target (a unit's timeline/) under ``path``, importing first when
    needed. ``check_all``: validate every file before it is renamed into place, whatever its size. ``hint``:
    end by saying how to look at them. ``stamp``: the CANN layout, a PROF_'s devices in one
    ``msprof_<stamp>.json`` (docs/prof.md); other layouts keep their places."""
    from msprof.outputs import FileSet
    from msprof.trace import write_timelines

    def stage(k: int, unit: Unit, report) -> list:
        report.check(selection)
        with FileSet(target.timeline_dir) as own:
            # (unchecked here: the joined file is; the host's calls with the first device only)
            write_timelines(report, unit.layout.timelines(report, selection, cann=True, host=k == 0),
                            target.timeline_dir, None, selection, files=own)
            return own.hand_over()

    selection.check()
    written: List[Path] = []
    units = find_units(path, output)
    failures = Failures(len(units))
    for target in targets(units, stamp):
        if target.merged is not None:
            written += _export_merged(target, failures, "--export=on (timeline)", "cann_timeline.manifest", stage,
                                      check_all)
            continue
        for unit in target.units:
            with failures.each(unit), reading(unit, "export timeline", target) as report:
                report.check(selection)
                written += write_timelines(report, unit.layout.timelines(report, selection), target.timeline_dir,
                                           check_all, selection)
    _announce(written)
    failures.done()
    if hint:
        _view_hint(written)
    return written


def analyse(path: Path, output: Optional[Path] = None) -> List[Path]:
    """import + export timeline + export summary (what ``collect --all`` runs on each pulled JOB)."""
    import_collection(path, output)
    return export_timeline(path, output=output) + export_summary(path, output=output)


# --- the CANN msprof's syntax (docs/cli-reference.md "The CANN syntax") ---------------------------------------
# the rules of the CANN msprof's --analyze (both of HCCL data)
ANALYZE_RULES = ("communication", "communication_matrix")
# where a PROF_'s export in the CANN layout logs (docs/prof.md "The CANN layout")
CANN_LOG = "mindstudio_profiler_log"


def cann_export(path: Path, selection: Selection = Selection(), fmt: str = "csv") -> List[Path]:
    """``msprof --export=on --output=PATH``: every collection under ``path`` exported where the Ascend tools
    read it — a PROF_'s devices in one time-stamped file per kind in PROF_x/mindstudio_profiler_output/ (the
    CANN layout), a JOB's files in their usual places."""
    path = _whole_prof(path)
    stamp = time.strftime("%Y%m%d%H%M%S")
    # (the timeline first: torch_npu reads it as soon as it sees the first csv file)
    return export_timeline(path, selection, stamp=stamp) + export_summary(path, fmt, selection, stamp=stamp)


def _whole_prof(path: Path) -> Path:
    """A PROF_'s ``host`` or ``device_N`` directory as --output means the whole PROF_: its files hold every
    device (the CANN msprof exports that device alone)."""
    from msprof.layouts.prof import has_info_json, prof_root

    root = prof_root(Path(path)) if has_info_json(Path(path)) else None
    if root is None:
        return path
    notice(f"{printable(path)}: exporting the whole {printable(root.name)}, whose files hold every device")
    return root


def cann_analyze(path: Path, rules: Sequence[str] = ANALYZE_RULES) -> List[Path]:
    """``msprof --analyze=on --output=PATH``: the communication analyses of every PROF_ under ``path``, from
    HCCL data. msprof does not analyse HCCL data yet: it says so for each PROF_ and writes nothing (without
    HCCL data the CANN msprof writes nothing either, and succeeds)."""
    unknown = [rule for rule in rules if rule not in ANALYZE_RULES]
    if unknown:
        raise UsageError(f"--rule={','.join(unknown)}: unknown rule; the rules are {', '.join(ANALYZE_RULES)}")
    roots = {target.summary_dir.parent: None for target in targets(find_units(path), time.strftime("%Y%m%d%H%M%S"))
             if target.merged is not None}
    if not roots:
        raise UsageError(f"{printable(path)}: --analyze=on analyses PROF_ directories, and there is none here")
    for root in roots:
        hccl = [p for p in root.glob("*/data/*hccl*") if p.is_file()]
        if hccl:
            log.warning("%s: msprof does not analyse communication (HCCL) data yet: nothing written", printable(root))
        else:
            notice(f"{printable(root)}: no communication (HCCL) data, nothing to analyse")
    return []


# --- terminal ----------------------------------------------------------------------------------------------
def show(path: Path, selection: Selection = Selection(), view: Optional[View] = None,
         output: Optional[Path] = None) -> None:
    """Print each unit's tables (outputs.md §4) as ``view`` says (msprof.show); import first, and write the
    unit's timelines first when they are missing or stale (``_timelines_first``)."""
    from msprof.show import print_sections, selected

    selection.check()
    view = view or View()
    units = find_units(path, output)
    target_of = {id(unit): target for target in targets(units) for unit in target.units}

    def sections(unit: Unit, report):
        report.check(selection)              # (the selection, --table and --sort before the timeline is written)
        tables = selected(unit.layout.show_tables(report, selection), view, unit.label, len(units) > 1)
        _timelines_first(unit, report, target_of[id(unit)])
        for table in tables:      # a table a worker makes (workers.Later) starts now, not beside the timeline's
            if isinstance(table.batches, Later):
                table.batches.start()
        return tables

    failures = Failures(len(units))
    print_sections(_sections(units, "show", sections, failures), view, len(units) > 1)
    failures.done()


def _timelines_first(unit: Unit, report, target: Target) -> None:
    """show writes the unit's whole-run timelines before it prints, when they are missing or older than the
    database, so that they are there to open beside the tables. A write that fails is a warning: the tables
    need no write and are still shown."""
    from msprof.trace import timelines_current, write_timelines

    timelines = unit.layout.timelines(report, Selection())
    if not timelines_current(report, target.timeline_dir):
        try:
            _announce(write_timelines(report, timelines, target.timeline_dir))
        except (OutputError, DiskSpaceError) as exc:
            log.warning("timeline not written: %s", exc.message)


def query(path: Path, view: Optional[View] = None, output: Optional[Path] = None) -> None:
    """Devices, models, iteration ids and the data present (the values --model-id/--iteration-id take)."""
    from msprof.show import print_sections, selected

    units = find_units(path, output)
    view = view or View()

    def tables(unit: Unit, report):
        return selected(unit.layout.query_tables(report) + [report.notice_table()], view, unit.label,
                        len(units) > 1)

    failures = Failures(len(units))
    print_sections(_sections(units, "query", tables, failures), view, len(units) > 1)
    failures.done()


def _sections(units: List[Unit], command: str, tables, failures: Failures):
    """One Section per unit (``tables(unit, report)``: the tables it prints), made while its report is open
    (its rows stream from it); a unit that fails is left out (``failures``)."""
    for unit in units:
        with failures.each(unit), reading(unit, command) as report:
            yield Section(printable(unit.label), printable(os.path.abspath(unit.path)), unit.layout.name,
                          tables(unit, report),
                          report.quality())


# --- answers (msprof.analysis) ------------------------------------------------------------------------------
def compare(base: Path, new: Path, fmt: Optional[str] = "table", top: Optional[int] = 20,
            fail_if_slower: Optional[float] = None, output: Optional[Path] = None, wide: bool = False) -> dict:
    """Compare two collections (each one result directory, or a parent holding exactly one) per model, op
    type, op and API; print the comparison (``fmt`` None: not) and return its document (what ``--format json``
    prints). ``fail_if_slower``: raise RegressionError (exit 9) when a model both have grew by more than that %."""
    from msprof.analysis.compare import check_gate, compare_sides, comparison

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
        with Pool(2) as pool:
            sides = pool.each("comparing", _read_side, units)
    else:
        with progress.step("comparing", 2) as shown:
            sides = []
            for unit in units:
                sides.append(_read_side(unit))
                shown.advance()
    document = compare_sides(*sides)
    try:
        if fmt is not None:
            _renderer(fmt, wide).comparison(comparison(document, top), Stdout())
    except BrokenPipeError:
        # the reader had enough (``| head``), but a CI job's gate must still say and exit 9
        discard_stdout()
        check_gate(document, fail_if_slower)
        raise
    check_gate(document, fail_if_slower)
    return document


def _read_side(unit: Unit):
    """What compare reads of one (imported) unit: its msprof.analysis.compare.Side (a worker may run this)."""
    from msprof.analysis.compare import Side

    with unit.open() as report:
        return Side.read(unit.layout.facts(report))


def _share_a_database(one, other) -> bool:
    """Whether two units of different raw data would have a database in one place."""
    mine = {db.path: db.source_dir.resolve() for db in one.databases}
    return any(db.path in mine and mine[db.path] != db.source_dir.resolve() for db in other.databases)


def advise(path: Path, fmt: Optional[str] = "table", selection: Selection = Selection(),
           output: Optional[Path] = None) -> List[dict]:
    """Findings of the advise rules on one collection (a result directory, or a parent holding exactly
    one); print them (``fmt`` None: not) and return them (what ``--format json`` prints under "findings")."""
    from msprof.analysis.advise import find, findings_document

    selection.check()
    unit = single_unit(path, output)
    with reading(unit, "advise") as report:
        findings = find(unit.layout.facts(report, idle=True), selection)
    if fmt is not None:
        _renderer(fmt).findings(findings_document(findings, unit.label), Stdout())
    return findings


def _renderer(fmt: str, wide: bool = False):
    """The renderer of a format, for stdout (the terminal's width, unless ``wide``)."""
    from msprof.renderers import FORMATS
    from msprof.renderers.terminal import terminal_width

    return FORMATS[fmt](width=terminal_width(wide))


def single_unit(path: Path, output: Optional[Path] = None) -> Unit:
    """The one unit compare and advise analyse: ``path`` is a JOB directory, a PROF_ directory with one
    device (or a PROF_ device directory), or a parent holding exactly one of them; several is a usage
    error listing them (the user names one)."""
    units = find_units(path, output)
    if len(units) != 1:
        # one line, as every message (a name from the data cannot add a line)
        listed = ", ".join(str(unit.path) for unit in units)
        raise UsageError(f"{path} holds {len(units)} result directories; name one of them: {listed}")
    return units[0]


def demo(output: Path, kind: str = "JOB") -> None:
    """Copy the bundled sample of ``kind`` ("JOB" or "PROF_") into ``output`` and run import, export and
    show on it."""
    bundled = Path(__file__).parent / "demo_data"
    jobs = sorted(p for p in bundled.iterdir() if p.is_dir() and p.name.startswith(kind)) if bundled.is_dir() else []
    if not jobs:
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
