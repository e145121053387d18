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
from typing import Dict, List, Optional, Sequence, Tuple

from msprof import progress
from msprof.console import discard_stdout, log, notice, result_log
from msprof.contract import Database, Selection, Target, Unit
from msprof.errors import MsprofError, RegressionError, UsageError
from msprof.frame import Failures, build_databases, reading
from msprof.layouts import find_units, targets
from msprof.outputs import naming_errors, output_dir
from msprof.paths import printable
from msprof.renderers.documents import Section, Stdout, View
from msprof.workers import Pool, several_cores


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
    if stamp is not None and fmt not in ("csv", "json"):
        raise UsageError(f"--summary-format={fmt}: the CANN layout is written in csv or json")
    written: List[Path] = []
    units = find_units(path, output)
    failures = Failures(len(units))
    for target in targets(units, stamp):
        if target.merged is not None:
            from msprof.summary import stage_summary

            # (json: the csv tables joined, then written as the CANN msprof's arrays: msprof.merged)
            written += _export_merged(target, failures, "--export=on (summary)", f"cann_summary.{fmt}.manifest",
                                      lambda k, unit, report: stage_summary(
                                          report, unit.layout.summary_files(report, selection), "csv",
                                          target.summary_dir), tables_as=fmt)
            continue
        for unit in target.units:
            with failures.each(unit), reading(unit, f"export summary --format {fmt}", target) as report:
                files = unit.layout.summary_files(report, report.resolve(selection))
                # (what a whole-run export wrote is listed beside the database, for the next one to replace: not
                # the summary.<fmt>.list of earlier versions, which read a list as names)
                manifest = unit.out / "sqlite" / f"summary.{fmt}.manifest"
                written += write_summary(report, files, fmt, target.summary_dir, manifest, selection.everything)
    announce(written)
    failures.done()
    if hint and written:
        _next_steps(path, output, selection, units)
    return written


def _export_merged(target: Target, failures: Failures, command: str, manifest: str, stage, check_all=False,
                   tables_as: str = "csv") -> List[Path]:
    """A merged target's files (msprof.merged): ``stage(k, unit, report)`` writes unit k's as temporaries, and
    they are joined and put in place only when every unit's were written (a file short of a device would pass
    for the whole PROF_)."""
    from msprof.merged import Merged

    failed = len(failures.failed)
    # (the export's log where the CANN msprof puts its own: PROF_x/mindstudio_profiler_log/)
    with result_log(target.summary_dir.parent, command, CANN_LOG), Merged(
            target.summary_dir, target.merged, target.units[0].out / "sqlite" / manifest, check_all,
            tables_as) as merged:
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
                chosen = report.resolve(selection)
                report.check(chosen)
                written += write_timelines(report, unit.layout.timelines(report, chosen), target.timeline_dir,
                                           check_all, chosen)
    announce(written)
    failures.done()
    if hint:
        _view_hint(written)
    return written


def analyse(path: Path, output: Optional[Path] = None) -> List[Path]:
    """import + export timeline + export summary (what ``collect --all`` runs on each pulled JOB)."""
    import_collection(path, output)
    return export_timeline(path, output=output) + export_summary(path, output=output)


# where a PROF_'s export in the CANN layout logs (docs/prof.md "The CANN layout")
CANN_LOG = "mindstudio_profiler_log"


# --- terminal ----------------------------------------------------------------------------------------------
def show(path: Path, selection: Selection = Selection(), view: Optional[View] = None,
         output: Optional[Path] = None) -> None:
    """Print each unit's tables (outputs.md §4) as ``view`` says (msprof.show), importing first when needed.
    A reading command: it writes nothing but the databases it reads (a cache)."""
    from msprof.show import print_sections, selected

    selection.check()
    view = view or View()
    units = find_units(path, output)

    def sections(unit: Unit, report):
        chosen = report.resolve(selection)
        report.check(chosen)
        tables = selected(unit.layout.show_tables(report, chosen, view.spread), view, unit.label, len(units) > 1)
        for table in tables:      # a table a worker makes (workers.Later) starts now, beside the others' rows
            if hasattr(table.batches, "start"):
                table.batches.start()
        return tables

    failures = Failures(len(units))
    print_sections(_sections(units, "show", sections, failures), view, len(units) > 1)
    failures.done()


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
def compare(base: Path, new: Path, fmt: Optional[str] = "table", top: Optional[int] = None,
            fail_if_slower: Optional[float] = None, output: Optional[Path] = None, wide: bool = False,
            tables: Sequence[str] = (), spread: bool = False) -> dict:
    """Compare two collections per model, op type, op and API: each one result directory (or a parent holding
    exactly one), or two PROF_ directories of several devices, compared device by device. Print the comparison
    (``fmt`` None: not; ``top``: the ops with the N largest changes, None: the format's default, 20 in the
    terminal and all for scripts, 0: all; ``tables``: only these sections) and return its whole document
    (what ``--format json`` prints without --top or --table: with several devices, {"comparisons": [one
    document per device]}). ``fail_if_slower``: raise RegressionError (exit 9) when a model both have grew by
    more than that %. ``spread``: the median and std dev of the durations too (msprof.analysis.compare.SPREAD)."""
    from msprof.analysis.compare import compare_sides, comparison

    # (nan compares false with every growth: a gate of nan would pass everything)
    if fail_if_slower is not None and not 0 <= fail_if_slower < float("inf"):
        raise UsageError(f"--fail-if-slower {fail_if_slower}: not a percentage (a finite number, 0 or more)")
    found = [find_units(path, output) for path in (base, new)]
    if output is not None and any(_share_a_database(one, other) for one in found[0] for other in found[1]):
        # two collections of one name would be imported into one DIR/<name>/, the second over the first (and
        # compared with itself): each side in a directory of its own
        found = [find_units(path, Path(output) / side) for path, side in ((base, "base"), (new, "new"))]
    sides = [_with_facts(units) for units in found]
    pairs = _paired(base, new, *sides)
    documents = []
    for pair in pairs:
        for unit in pair:
            with reading(unit, "compare"):        # imported when needed; what an import lost, said again
                pass
        title = f"{printable(pair[0].label)} → {printable(pair[1].label)}"
        documents.append((title, compare_sides(*_read_sides(pair, spread))))
    _framework_ops(found, documents)
    try:
        if fmt is not None:
            renderer = _renderer(fmt, wide)
            limit = renderer.default_top if top is None else (top or None)
            renderer.comparisons([(title, comparison(doc, limit, tables, spread)) for title, doc in documents],
                                 Stdout())
    except BrokenPipeError:
        # the reader had enough (``| head``), but a CI job's gate must still say and exit 9
        discard_stdout()
        _gate(documents, fail_if_slower)
        raise
    _gate(documents, fail_if_slower)
    return documents[0][1] if len(documents) == 1 else {"comparisons": [doc for _title, doc in documents]}


def _framework_ops(found: List[List[Unit]], documents: list) -> None:
    """Two torch_npu directories (a framework unit each side): their framework ops, compared, in every
    document."""
    from msprof.analysis.compare import framework_op_rows

    units = [[unit for unit in side if unit.layout.has_findings and not unit.layout.has_facts] for side in found]
    if not all(len(side) == 1 for side in units):
        return
    ops = []
    for (unit,) in units:
        with reading(unit, "compare") as report:
            ops.append(unit.layout.facts(report).framework_ops(Selection()))
    for _title, document in documents:
        document["framework_ops"] = framework_op_rows(*ops)


def _with_facts(units: List[Unit]) -> List[Unit]:
    """The units compare and advise read: those of layouts with facts (a torch_npu directory's PROF_ devices,
    not its framework unit, whose facts are not written yet)."""
    return [unit for unit in units if unit.layout.has_facts]


def _paired(base: Path, new: Path, base_units: List[Unit], new_units: List[Unit]) -> List[Tuple[Unit, Unit]]:
    """The units compare compares: the one of each side, or the devices of two PROF_ directories by name
    (device_0 with device_0); a device one side lacks is said and left out. Anything else that holds several
    is a usage error listing them (the user names one)."""
    if len(base_units) == 1 and len(new_units) == 1:
        return [(base_units[0], new_units[0])]
    devices = [_devices(units) for units in (base_units, new_units)]
    if None in devices:
        path, units = (base, base_units) if _devices(base_units) is None else (new, new_units)
        raise _name_one(path, units)
    common = [name for name in devices[0] if name in devices[1]]
    for side, mine, theirs in (("base", *devices), ("new", *devices[::-1])):
        alone = [mine[name].label for name in mine if name not in theirs]
        if alone:
            notice(f"not compared, in {side} only: {', '.join(map(printable, alone))}")
    if not common:
        raise UsageError(f"{base} and {new} have no device in common (devices are compared by name: device_N)")
    if len(common) > 1:
        notice(f"comparing {len(common)} devices, each on its own: {', '.join(common)}")
    return [(devices[0][name], devices[1][name]) for name in common]


def _devices(units: List[Unit]) -> Optional[Dict[str, Unit]]:
    """The devices of one PROF_ directory by name, or None when ``units`` are anything else."""
    roots = {unit.path.parent for unit in units}
    if len(roots) != 1 or any(unit.layout.name != "PROF" or not unit.path.name.startswith("device_")
                              for unit in units):
        return None
    return {unit.path.name: unit for unit in units}


def _read_sides(units: Tuple[Unit, Unit], spread: bool = False) -> list:
    """The two sides' msprof.analysis.compare.Side, side by side with a second core (a large side takes
    seconds)."""
    if several_cores():
        with Pool(2) as pool:
            return pool.each("comparing", _read_side, list(units), [spread] * 2)
    with progress.step("comparing", 2) as shown:
        sides = []
        for unit in units:
            sides.append(_read_side(unit, spread))
            shown.advance()
    return sides


def _gate(documents: List[Tuple[str, dict]], fail_if_slower: Optional[float]) -> None:
    """--fail-if-slower over every compared pair: one error naming each device that failed it."""
    from msprof.analysis.compare import check_gate

    failed = []
    for title, document in documents:
        try:
            check_gate(document, fail_if_slower)
        except RegressionError as exc:
            if len(documents) == 1:
                raise
            failed.append(f"{title}: {exc.message}")
    if failed:
        raise RegressionError("; ".join(failed))


def _read_side(unit: Unit, spread: bool = False):
    """What compare reads of one (imported) unit: its msprof.analysis.compare.Side (a worker may run this)."""
    from msprof.analysis.compare import Side

    with unit.open() as report:
        return Side.read(unit.layout.facts(report), spread)


def _share_a_database(one, other) -> bool:
    """Whether two units of different raw data would have a database in one place."""
    mine = {db.path: db.source_dir.resolve() for db in one.databases}
    return any(db.path in mine and mine[db.path] != db.source_dir.resolve() for db in other.databases)


def advise(path: Path, fmt: Optional[str] = "table", selection: Selection = Selection(),
           output: Optional[Path] = None) -> List[dict]:
    """Findings of the advise rules on each result directory under ``path`` (each device of a PROF_); print
    them (``fmt`` None: not) and return them (what ``--format json`` prints under "findings": with several
    result directories each finding names its own, "result_dir")."""
    from msprof.analysis.advise import find, findings_document

    selection.check()
    # (and a torch_npu directory's framework unit: its ops)
    units = [unit for unit in find_units(path, output) if unit.layout.has_facts or unit.layout.has_findings]
    if len(units) > 1:
        notice(f"advising on {len(units)} result directories, each on its own: "
               f"{', '.join(printable(unit.label) for unit in units)}")
    failures = Failures(len(units))
    documents = []
    for unit in units:
        with failures.each(unit), reading(unit, "advise") as report:
            findings = find(unit.layout.facts(report, idle=True), report.resolve(selection))
            if len(units) > 1:
                findings = [dict(finding, result_dir=unit.label) for finding in findings]
            documents.append(findings_document(findings, unit.label))
    if fmt is not None and documents:
        _renderer(fmt).all_findings(documents, Stdout())
    failures.done()
    return [finding for document in documents for finding in document.findings]


def _renderer(fmt: str, wide: bool = False):
    """The renderer of a format, for stdout (the terminal's width, unless ``wide``)."""
    from msprof.renderers import FORMATS
    from msprof.renderers.terminal import terminal_width

    return FORMATS[fmt](width=terminal_width(wide))


def single_unit(path: Path, output: Optional[Path] = None) -> Unit:
    """The one unit under ``path`` (a JOB directory, a PROF_ directory with one device or a PROF_ device
    directory, or a parent holding exactly one of them); several is a usage error listing them."""
    units = find_units(path, output)
    if len(units) != 1:
        raise _name_one(path, units)
    return units[0]


def _name_one(path: Path, units: List[Unit]) -> UsageError:
    # one line, as every message (a name from the data cannot add a line)
    listed = ", ".join(str(unit.path) for unit in units)
    return UsageError(f"{path} holds {len(units)} result directories; name one of them: {listed}")


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
        if selection.model_id is not None:         # (what was just exported: the same iteration)
            text += f" --model-id {selection.model_id}"
        if selection.iteration_id is not None:
            text += f" --iteration-id {selection.iteration_id}"
        return text

    notice(f"next: msprof show {where(path)}   (the tables in the terminal)")
    if len(units) > 1:      # advise reads one result directory (a device) at a time
        notice(f"      msprof advise {where(units[0].path)}   (where the time goes and what to do about it; one "
               f"result directory at a time, {len(units)} here)")
    else:
        notice(f"      msprof advise {where(path)}   (where the time goes and what to do about it)")


def announce(paths: List[Path]) -> None:
    if paths:
        directories = sorted({str(p.parent) for p in paths})
        notice(f"wrote {len(paths)} file(s) in {', '.join(directories)}")
    log.debug("%d file(s) written", len(paths))
