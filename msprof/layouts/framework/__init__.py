"""The torch_npu / MindSpore result-directory layout (framework.md; docs/framework-plan.md §1).

A framework directory (``*_ascend_pt``, ``*_ascend_ms``, told by content: msprof.layouts.framework.where) holds
a ``PROF_*``: the PROF layout makes that PROF_'s units as for any PROF_ directory (this layout contains it and
reimplements none of it), and this layout adds one unit of its own per framework directory, whose database is
``<dir>/sqlite/framework.db`` (FRAMEWORK/ records, torch ops in tree order, steps). A parent of several ranks'
directories gives each its units, in path order.
"""
import dataclasses
import functools
import itertools
from pathlib import Path
from typing import Dict, List, Optional

from msprof.console import notice
from msprof.contract import Database, Layout, Selection, SummaryFile, Target, Unit
from msprof.errors import DataError
from msprof.layouts.base import ID_LIST, data_table, out_dir
from msprof.layouts.framework import memory, opmemory, where
from msprof.layouts.framework.importer import LAYOUT, framework_sources, prof_identity, read_meta
from msprof.layouts.framework.kernels import kernel_details
from msprof.layouts.framework.operators import operator_details
from msprof.layouts.framework.opstats import FrameworkFacts, ops_table
from msprof.layouts.framework.report import NO_LEVEL, FrameworkReport
from msprof.layouts.framework.stepprof import StepProfLayout, step_units
from msprof.layouts.framework.steptime import step_trace_time
from msprof.layouts.framework.traceview import trace_view
from msprof.layouts.prof import ProfLayout, prof_root
from msprof.store import stale
from msprof.tables import EPOCH_US, INT, ROUND3, Column, Table

DB_NAME = "framework.db"
# the CANN export's statistics torch_npu copies into ASCEND_PROFILER_OUTPUT, and the levels it does so at
STATISTICS = ("op_statistic", "api_statistic")
STATISTICS_LEVELS = ("Level1", "Level2")


class FrameworkDatabase(Database):
    """A framework directory's database: its sources are its FRAMEWORK files, profiler_info and the PROF_ host's
    clock files (not a result directory's data/ and info.json)."""

    def sources(self) -> List[Path]:
        return framework_sources(self.source_dir)

    # (its links read the PROF_ databases: built after them, and again whenever one of them is)
    after_others = True

    def stale(self) -> Optional[str]:
        prof = self.build.keywords.get("prof_databases", ()) if isinstance(self.build, functools.partial) else ()
        if any(database.stale() is not None for database in prof):
            return "its PROF_ data is imported again"
        reason = stale(self.path, self.source_dir, self.sources(), self.layout)
        if reason is None and read_meta(self.path, "prof_databases") != prof_identity(prof):
            return "its PROF_ databases were built again"
        return reason


class FrameworkLayout(Layout):
    name = LAYOUT
    # compare per step is not written yet (plan §5): it reads the PROF_ units; advise reads the framework ops
    has_facts = False
    has_findings = True

    def __init__(self, prof: ProfLayout):
        self.prof = prof
        self.step_prof = StepProfLayout()

    def claims(self, result_dir: Path) -> bool:
        return where.framework_root(prof_root(result_dir)) is not None

    def missing(self, path: Path) -> Optional[str]:
        return where.without_raw_data(path)

    def units(self, result_dirs: List[Path], output: Optional[Path]) -> List[Unit]:
        by_dir: Dict[Path, List[Path]] = {}
        for path in result_dirs:
            by_dir.setdefault(where.framework_root(prof_root(path)), []).append(path)
        units: List[Unit] = []
        for directory, mine in by_dir.items():
            base = out_dir(directory, output)
            # (the PROF_ under --output goes inside the framework directory's place, as it lies in the data)
            prof_units = self.prof.units(mine, base if output is not None else None)
            profs = tuple({d.path: d for unit in prof_units if unit.problem is None for d in unit.databases}.values())
            database = FrameworkDatabase(LAYOUT, "main", directory, base / "sqlite" / DB_NAME,
                                         functools.partial(_import, directory, prof_databases=profs,
                                                           prof_layout=self.prof), empty_ok=True)
            if len(where.prof_dirs(directory)) == 1:      # (with two, the framework data cannot be read: _unit)
                prof_units = step_units(prof_units, database, self.step_prof)
            units += prof_units + [self._unit(directory, base, prof_units, database)]
        return units

    def _unit(self, directory: Path, base: Path, prof_units: List[Unit], database: Database) -> Unit:
        """The framework unit: its database last, after those of its PROF_ devices (its reports read them)."""
        profs = where.prof_dirs(directory)
        theirs = {d.path: d for unit in prof_units if unit.problem is None for d in unit.databases
                  if d.path != database.path}
        problem = None
        if len(profs) > 1:
            problem = DataError(f"{directory}: {len(profs)} PROF_ directories ({', '.join(p.name for p in profs)}):"
                                " a rank's directory holds one; its framework data cannot be told which it goes with")
        return Unit(self, directory, base, directory.name, list(theirs.values()) + [database], problem=problem)

    def targets(self, units: List[Unit], stamp: Optional[str] = None) -> List[Target]:
        """Each unit's files go to its ASCEND_PROFILER_OUTPUT/, where torch_npu writes them (also with --export=on:
        the CANN layout is its PROF_'s)."""
        return [Target([unit], unit.out / where.RESULTS_DIR, unit.out / where.RESULTS_DIR) for unit in units]

    def report(self, unit: Unit) -> FrameworkReport:
        return FrameworkReport(unit, self.prof)

    # --- what the commands write and print -------------------------------------------------------------------
    def summary_files(self, report, selection: Selection) -> List[SummaryFile]:
        report.check(selection)
        label = report.unit.label
        if not selection.everything:
            notice(f"{label}: ASCEND_PROFILER_OUTPUT covers the whole run: an export without --iteration-id "
                   "writes it")
            return []
        weight = report.unit.database.path.stat().st_size
        files = [SummaryFile(name, getattr(FrameworkLayout, name), (), weight) for name in memory.memory_files(report)]
        files += [SummaryFile("operator_details", operator_details, (), weight)] if report.count("fw_op") else []
        if report.level == NO_LEVEL:
            notice(f"{label}: profiler level {NO_LEVEL}: no kernel_details nor step_trace_time, as torch_npu")
            return files
        if not report.has_tasks:
            notice(f"{label}: no device task data: kernel_details skipped")
            return files
        if report.has_marks():
            notice(f"{label}: op marks (the task queue) recorded: steps are given their launches by host time, "
                   "not yet through the queue as torch_npu does (Step Id may differ)")
        names = ("kernel_details", "step_trace_time") + (STATISTICS if report.level in STATISTICS_LEVELS else ())
        return [SummaryFile(name, getattr(FrameworkLayout, name), (), weight) for name in names] + files

    @staticmethod
    def memory_record(report) -> Table:
        return memory.memory_record(report)

    @staticmethod
    def operator_memory(report) -> Table:
        return opmemory.operator_memory(report)

    @staticmethod
    def op_statistic(report) -> Table:
        return _joined([device.op_statistic() for device in report.devices if device.has_tasks])

    @staticmethod
    def api_statistic(report) -> Table:
        return _joined([device.api_statistic() for device in report.devices if device.has_tasks])

    @staticmethod
    def kernel_details(report) -> Table:
        ranges = report.device_ranges()
        return _joined([kernel_details(device, ranges, report.metrics) for device in report.devices
                        if device.has_tasks])

    @staticmethod
    def step_trace_time(report) -> Table:
        host_starts = {step: start for step, start, _end, _ops in report.steps()}
        (first_op,) = report.conn.execute("SELECT min(start) FROM fw_op").fetchone()
        return step_trace_time([d for d in report.devices if d.has_tasks], report.device_ranges(), host_starts,
                               first_op)

    def timelines(self, report, selection: Selection, cann: bool = False, host: bool = True) -> list:
        report.check(selection)
        if not selection.everything:
            notice(f"{report.unit.label}: trace_view.json covers the whole run: an export without --iteration-id "
                   "writes it")
            return []
        return trace_view(report)

    def show_tables(self, report, selection: Selection, spread: bool = False) -> list:
        report.check(selection)      # (steps have no durations of their own to spread)
        return [self._steps(report, selection)] + ([ops_table(report.conn, selection)] if report.count("fw_op") else [])

    def query_tables(self, report) -> list:
        steps = [step for step, *_rest in report.steps()]
        collection = Table("collection", "Collection", [Column("Framework"), Column("Steps", INT),
                                                        Column("Step Ids", ID_LIST)],
                           [[(report.meta.get("framework"), len(steps), tuple(steps))]])
        data = data_table(report)
        return [collection, self._steps(report, Selection()), data]

    @staticmethod
    def _steps(report, selection: Selection) -> Table:
        """The steps: host range, device range (none for a step that launched nothing), framework ops, kernels,
        the device's time in step_trace_time's lanes and the memory peaks."""
        device = {step: (start, end) for step, start, end in report.device_ranges()}
        stats = {stat.step: stat for stat in report.step_stats()}
        rows = [(step, start, end, *device.get(step, (None, None)), ops, stats[step].kernels,
                 stats[step].computing_us, stats[step].free_us, stats[step].preparing_us, stats[step].allocated_mb,
                 stats[step].reserved_mb) for step, start, end, ops in report.steps()
                if selection.iteration_id in (None, step)]
        return Table("steps", "Steps", [Column("Step", INT), Column("Host Start(us)", EPOCH_US),
                                        Column("Host End(us)", EPOCH_US), Column("Device Start(us)", EPOCH_US),
                                        Column("Device End(us)", EPOCH_US), Column("Framework Ops", INT),
                                        Column("Kernels", INT), Column("Computing(us)", ROUND3),
                                        Column("Free(us)", ROUND3), Column("Preparing(us)", ROUND3),
                                        Column("Peak Allocated(MB)", ROUND3), Column("Peak Reserved(MB)", ROUND3)],
                     [rows])

    def facts(self, report, idle: bool = False) -> FrameworkFacts:
        return FrameworkFacts(report, idle)


def _joined(tables: List[Table]) -> Table:
    """The devices' tables as one file (the first one's header), with torch_npu's CR LF line ends."""
    return dataclasses.replace(tables[0], batches=itertools.chain.from_iterable(t.batches for t in tables),
                               line_end="\r\n")


def _import(directory: Path, target: Path, spare_cores: bool = True, prof_databases: tuple = (),
            prof_layout=None) -> Path:
    from msprof.layouts.framework.importer import import_framework

    return import_framework(directory, target, spare_cores, prof_databases, prof_layout)
