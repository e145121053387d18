"""The report of a framework unit: its framework database (steps, ops), read-only, and the reports of the PROF_
devices it contains (their databases are among the unit's: imported with it)."""
import functools
import heapq
from typing import Dict, List, Tuple

from msprof.contract import Iteration, Report, Selection, Unit
from msprof.layouts.framework.clock import FrameworkClock
from msprof.layouts.framework.kernels import NO_METRICS, device_ranges, launches
from msprof.layouts.framework.stepstats import StepStat, memory_sql, step_stats
from msprof.layouts.prof.report import ProfReport

# the framework's one "model" (--iteration-id N alone selects step N: README)
STEPS_MODEL = 0
STEPS_MODEL_NAME = "steps"
# the profiler level that writes neither kernel_details nor step_trace_time (target §1); Level0 when not said
NO_LEVEL = "Level_none"


def device_reports(databases: list, prof_layout) -> List[ProfReport]:
    """The reports of a framework unit's PROF_ devices (``databases``: the PROF ones, host first), open: the
    caller closes them."""
    host = next((d for d in databases if d.role == "host"), None)
    return [ProfReport(Unit(prof_layout, database.source_dir, database.path.parent.parent, database.source_dir.name,
                            ([host] if host is not None else []) + [database]))
            for database in databases if database.role == "main" and database.path.is_file()]


class FrameworkReport(Report):
    """Read-only view of one framework directory's database and of its PROF_ devices' reports."""

    def __init__(self, unit: Unit, prof_layout):
        super().__init__(unit)
        self.info = self.meta_json("profiler_info") or {}
        self.devices: List[ProfReport] = device_reports(unit.databases[:-1], prof_layout)
        for report in self.devices:
            self.on_close(report.close)

    @property
    def has_tasks(self) -> bool:
        return any(device.has_tasks for device in self.devices)

    @property
    def level(self) -> str:
        return str(self.info.get("_profiler_level") or "Level0")

    @property
    def metrics(self) -> bool:
        """Whether the run had AI Core metrics (kernel_details then keeps every op_summary column)."""
        return self.info.get("_aic_metrics") not in (None, NO_METRICS)

    def steps(self) -> List[tuple]:
        """(step, host start ns, host end ns, ops) of every step, in tree order. A torch step's ops are its op's
        subtree (numbered consecutively from it); a MindSpore step's, the op range records of its number."""
        return list(self.conn.execute(
            "SELECT s.step, s.start, s.end, coalesce((SELECT dfs_end - dfs + 1 FROM fw_op WHERE dfs = s.dfs),"
            " (SELECT count(*) FROM ms_op m WHERE m.step = s.step)) FROM fw_step s ORDER BY s.dfs"))

    def device_ranges(self) -> List[tuple]:
        """(step, device start ns, device end ns) of the steps that launched something (target §3)."""
        return self._launched[0]

    @functools.cached_property
    def _launched(self) -> Tuple[List[tuple], Dict[int, int]]:
        """The steps' device ranges and the kernels each launched: one pass over the devices' launches."""
        steps, counts = [row[:3] for row in self.steps()], {}
        if not steps:
            return [], counts
        merged = heapq.merge(*(launches(device) for device in self.devices if device.has_tasks),
                             key=lambda row: row[0])
        return device_ranges(steps, merged, counts), counts

    def step_stats(self) -> List[StepStat]:
        """Each step's kernels, lanes and memory peaks (msprof.layouts.framework.stepstats), in step order."""
        steps = [row[:3] for row in self.steps()]
        (first_op,) = self.conn.execute("SELECT min(start) FROM fw_op").fetchone()
        clock = FrameworkClock(**(self.meta_json("clock") or {}))
        ranges, kernels = self._launched
        return step_stats([d for d in self.devices if d.has_tasks], steps, ranges, kernels, first_op,
                          self.conn.execute(memory_sql(clock)))

    def has_marks(self) -> bool:
        return self.count("op_mark") > 0

    def iterations(self, selection: Selection = Selection()) -> List[Iteration]:
        if selection.model_id not in (None, STEPS_MODEL):
            return []
        return [Iteration(STEPS_MODEL, STEPS_MODEL_NAME, step) for step, *_rest in self.steps()
                if selection.iteration_id in (None, step)]
