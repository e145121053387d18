"""The torch_npu / MindSpore result-directory layout (framework.md; docs/framework-plan.md §1).

A framework directory (``*_ascend_pt``, ``*_ascend_ms``, told by content: msprof.layouts.framework.where) holds
a ``PROF_*``: the PROF layout makes that PROF_'s units as for any PROF_ directory (this layout contains it and
reimplements none of it), and this layout adds one unit of its own per framework directory, whose database is
``<dir>/sqlite/framework.db`` (FRAMEWORK/ records, torch ops in tree order, steps). A parent of several ranks'
directories gives each its units, in path order.
"""
import functools
from pathlib import Path
from typing import Dict, List, Optional

from msprof.console import notice
from msprof.contract import Database, Layout, Selection, SummaryFile, Unit
from msprof.errors import DataError
from msprof.layouts.base import id_ranges, out_dir
from msprof.layouts.framework import where
from msprof.layouts.framework.importer import LAYOUT, framework_sources
from msprof.layouts.framework.report import FrameworkReport
from msprof.layouts.prof import ProfLayout, prof_root
from msprof.store import stale
from msprof.tables import EPOCH_US, INT, TEXT, Column, Table

DB_NAME = "framework.db"


class FrameworkDatabase(Database):
    """A framework directory's database: its sources are its FRAMEWORK files, profiler_info and the PROF_ host's
    clock files (not a result directory's data/ and info.json)."""

    def sources(self) -> List[Path]:
        return framework_sources(self.source_dir)

    def stale(self) -> Optional[str]:
        return stale(self.path, self.source_dir, self.sources(), self.layout)


class FrameworkLayout(Layout):
    name = LAYOUT
    # compare and advise per step and per framework op are not written yet (plan §5): they read the PROF_ units
    has_facts = False

    def __init__(self, prof: ProfLayout):
        self.prof = prof

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
            units += self.prof.units(mine, base if output is not None else None)
            units.append(self._unit(directory, base))
        return units

    def _unit(self, directory: Path, base: Path) -> Unit:
        profs = where.prof_dirs(directory)
        database = FrameworkDatabase(LAYOUT, "main", directory, base / "sqlite" / DB_NAME,
                                     functools.partial(_import, directory), empty_ok=True)
        problem = None
        if len(profs) > 1:
            problem = DataError(f"{directory}: {len(profs)} PROF_ directories ({', '.join(p.name for p in profs)}):"
                                " a rank's directory holds one; its framework data cannot be told which it goes with")
        return Unit(self, directory, base, directory.name, [database], problem=problem)

    def report(self, unit: Unit) -> FrameworkReport:
        return FrameworkReport(unit)

    # --- what the commands write and print -------------------------------------------------------------------
    def summary_files(self, report, selection: Selection) -> List[SummaryFile]:
        report.check(selection)
        notice(f"{report.unit.label}: the framework's ASCEND_PROFILER_OUTPUT files are not written yet")
        return []

    def timelines(self, report, selection: Selection, cann: bool = False, host: bool = True) -> list:
        notice(f"{report.unit.label}: the framework's trace_view.json is not written yet")
        return []

    def show_tables(self, report, selection: Selection) -> list:
        report.check(selection)
        return [self._steps(report, selection)]

    def query_tables(self, report) -> list:
        steps = [step for step, *_rest in report.steps()]
        collection = Table("collection", "Collection", [Column("Framework"), Column("Steps", INT),
                                                        Column("Step Ids")],
                           [[(report.meta.get("layout"), len(steps), id_ranges(steps))]])
        data = Table("data", "Data", [Column("Data", TEXT), Column("Records", INT), Column("Bytes lost", INT)],
                     [list(report.conn.execute("SELECT kind, sum(records), sum(head_lost + tail_lost) FROM decode_count"
                                               " GROUP BY kind ORDER BY kind"))])
        return [collection, self._steps(report, Selection()), data]

    @staticmethod
    def _steps(report, selection: Selection) -> Table:
        rows = [row for row in report.steps() if selection.iteration_id in (None, row[0])]
        return Table("steps", "Steps (host)", [Column("Step", INT), Column("Host Start(us)", EPOCH_US),
                                               Column("Host End(us)", EPOCH_US), Column("Framework Ops", INT)],
                     [rows], keep=("Step", "Host Start(us)", "Host End(us)", "Framework Ops"))

    def facts(self, report, idle: bool = False):
        raise NotImplementedError("compare and advise do not read framework units yet (has_facts)")


def _import(directory: Path, target: Path, spare_cores: bool = True) -> Path:
    from msprof.layouts.framework.importer import import_framework

    return import_framework(directory, target, spare_cores)
