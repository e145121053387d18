"""The PROF_ device of a framework directory, whose iterations are the framework's steps when it recorded no
model execution (eager data: docs/framework-plan.md §4). ``--iteration-id N`` then selects step N on the device
too: the tasks starting in the step's device range (kernels.device_ranges, the range kernel_details' Step Id
comes from), so that show, export and advise of step N read only that step's tasks. A device with model
executions (a static graph) keeps the PROF meaning of --model-id / --iteration-id.

The unit lists the framework database between its host and device databases, so that it is imported with the
device (its steps are needed before the framework unit's turn); the report attaches it as ``fw``.
"""
import dataclasses
import functools
import json
from typing import Dict, List, Tuple

from msprof import store
from msprof.contract import Database, Iteration, Selection, Unit
from msprof.layouts.framework.clock import FrameworkClock
from msprof.layouts.framework.kernels import device_ranges, launches
from msprof.layouts.framework.report import STEPS_MODEL, STEPS_MODEL_NAME
from msprof.layouts.framework.stepstats import StepStat, memory_sql, step_stats
from msprof.layouts.prof import ProfLayout
from msprof.layouts.prof.facts import ProfFacts
from msprof.layouts.prof.report import ProfReport
from msprof.layouts.prof.tasks import TASK_FIELDS


class StepProfLayout(ProfLayout):
    """The PROF layout, with reports that know their framework directory's steps."""

    def report(self, unit: Unit) -> ProfReport:
        return StepProfReport(unit)

    def query_tables(self, report) -> list:
        """The PROF device's tables; where the steps are its iterations, its collection row says so."""
        tables = super().query_tables(report)
        if report.has_steps:
            steps = tuple(i.index_id for i in report.iterations())
            tables[0] = dataclasses.replace(tables[0], batches=[[(report.device_number, report.platform, STEPS_MODEL,
                                                                 STEPS_MODEL_NAME, len(steps), steps)]])
        return tables

    def facts(self, report, idle: bool = False) -> ProfFacts:
        return StepProfFacts(report, idle) if report.has_steps else ProfFacts(report, idle)


class StepProfFacts(ProfFacts):
    """A framework directory's eager device: the PROF facts, and the steps (advise's step rules)."""

    def steps(self, selection: Selection = Selection()) -> list:
        return [stat for stat in self.report.step_stats() if selection.iteration_id in (None, stat.step)]


def step_units(prof_units: List[Unit], framework: Database, layout: StepProfLayout) -> List[Unit]:
    """The PROF units of a framework directory with its framework database before their device's."""
    return [unit if unit.problem is not None or len(unit.databases) < 2 else dataclasses.replace(
        unit, layout=layout, databases=unit.databases[:-1] + [framework, unit.databases[-1]]) for unit in prof_units]


class StepProfReport(ProfReport):
    """A framework directory's PROF_ device: the steps are its iterations (model STEPS_MODEL) when it recorded
    no model execution."""

    def __init__(self, unit: Unit):
        super().__init__(unit)
        framework = unit.databases[-2].path
        self.has_steps = framework.is_file() and not self.models()
        self._fields = {}           # step → its task fields (task_fields)
        if self.has_steps:
            self.conn.execute("ATTACH DATABASE ? AS fw", (store.readonly_uri(framework),))

    @property
    def step_ranges(self) -> List[tuple]:
        """(step, device start ns, device end ns) on the epoch, as kernel_details gives a kernel its step."""
        return self._launched[0]

    @functools.cached_property
    def _launched(self) -> Tuple[List[tuple], Dict[int, int]]:
        """The steps' device ranges and the kernels each launched (one pass over the launches)."""
        counts: Dict[int, int] = {}
        return (device_ranges(self._steps, launches(self), counts) if self._steps else []), counts

    @functools.cached_property
    def _steps(self) -> List[tuple]:
        return list(self.conn.execute("SELECT step, start, end FROM fw.fw_step ORDER BY dfs"))

    def step_stats(self) -> List[StepStat]:
        """This device's share of each step (msprof.layouts.framework.stepstats)."""
        (first_op,) = self.conn.execute("SELECT min(start) FROM fw.fw_op").fetchone()
        (clock,) = self.conn.execute("SELECT value FROM fw.meta WHERE key = 'clock'").fetchone() or ("{}",)
        memory = self.conn.execute(memory_sql(FrameworkClock(**json.loads(clock)), "fw"))
        ranges, kernels = self._launched
        return step_stats([self] if self.has_tasks else [], self._steps, ranges, kernels, first_op, memory)

    def iterations(self, selection: Selection = Selection()) -> List[Iteration]:
        if not self.has_steps:
            return super().iterations(selection)
        if selection.model_id not in (None, STEPS_MODEL):
            return []
        # (every step, or the one selected if it launched something: the list of all costs no pass over the tasks)
        steps = self._steps if selection.iteration_id is None else self.step_ranges
        return [Iteration(STEPS_MODEL, STEPS_MODEL_NAME, step) for step, *_range in steps
                if selection.iteration_id in (None, step)]

    def task_fields(self, selection: Selection) -> dict:
        if not self.has_steps or selection.iteration_id is None or selection.model_id not in (None, STEPS_MODEL):
            return TASK_FIELDS
        step = selection.iteration_id
        if step not in self._fields:
            self._fields[step] = self._step_fields(step)
        return self._fields[step]

    def _step_fields(self, step: int) -> dict:
        """Tasks starting in step ``step``'s device range get it as their iteration (and the steps' model), the
        others none. A task belongs to the first step (in step order, their ranges starting in that order)
        whose range holds its start, as kernel_details gives it its Step Id: so not to this one when an earlier
        step's range, reaching further, holds it too."""
        ranges = self.step_ranges
        index = next((i for i, (number, _lo, _hi) in enumerate(ranges) if number == step), None)
        if index is None:            # (no such step: no task is in it)
            return dict(TASK_FIELDS, model_id=str(STEPS_MODEL), iteration="NULL")
        _number, lo, hi = ranges[index]
        reach = max((end for _n, _start, end in ranges[:index]), default=lo - 1)
        start = self.time.on_the_epoch().relative_ns_sql(TASK_FIELDS["start_ns"])
        iteration = f"CASE WHEN ({start}) BETWEEN {lo} AND {hi} AND ({start}) > {reach} THEN {step} END"
        return dict(TASK_FIELDS, model_id=str(STEPS_MODEL), iteration=iteration)
