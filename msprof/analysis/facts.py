"""The facts compare and advise read from one unit, whatever its layout.

A layout's ``facts(report)`` (msprof.layouts.job.facts, msprof.layouts.prof.facts) subclasses ``Facts`` and
implements a few primitives, each one SQL aggregate over the unit's database that yields small rows
(per iteration, per op, per API name — never one row per task, except ``layers`` of one iteration, which
is streamed). ``Facts`` turns them into the layout-neutral answers below, so merging and averaging are
written once.

Scope: "recorded iterations" are the model executions the data places tasks in (JOB: step-trace
iterations; PROF: model executions found by the association). Tasks outside any iteration are left out,
as op_summary leaves them out. PROF data without any model execution is one model, ``single-op``, whose
one iteration is every device task.
"""
from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from msprof.console import notice
from msprof.contract import Selection

SINGLE_OP = "single-op"


@dataclass
class TypeTime:
    """One op/layer type: time and task count per iteration (summed over the models that run it)."""

    type: str
    us_per_iteration: float
    count_per_iteration: float


@dataclass
class OpAverage:
    """One op/layer name of one model: its type, executions and average duration."""

    model_name: str
    name: str
    type: str
    count: int
    avg_us: float


@dataclass
class OpTime:
    """The tasks of one op/layer name in one model's recorded iterations."""

    model_name: str
    name: str
    type: str
    cpu: bool                 # ran on the AA CPU / AI CPU
    count: int
    total_us: float
    iterations: int           # recorded iterations of the model (in the same scope)


@dataclass
class ApiTime:
    """The calls of one ACL/API name."""

    name: str
    level: str                # JOB: ACL type (ACL_MODEL, …); PROF: acl, model, node, runtime
    top: bool                 # called by the application itself (JOB: every ACL call; PROF: the acl level)
    count: int
    total_us: float

    @property
    def avg_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0


@dataclass
class LayerIteration:
    """One recorded iteration whose layers are read in execution order (``model_id`` None: single-op)."""

    model_id: Optional[int]
    model_name: str
    index_id: Optional[int]

    @property
    def selection(self) -> Selection:
        return Selection(self.model_id, self.index_id)


@dataclass
class Layer:
    """One task of an iteration, in execution order."""

    name: str
    ori_name: Optional[str]          # the original layers (JOB, ';'-joined); None when not reported
    type: str
    us: float
    memory_bound: Optional[float]    # None without PMU data (or N/A for this task)


@dataclass
class Idle:
    """Device busy time and idle gaps between consecutive tasks, totals over a model's iterations."""

    model_name: str
    iterations: int
    busy_us: float
    idle_us: float


@dataclass
class Gap:
    """The device idle between the end of one recorded iteration and the start of the next (any model's)."""

    model_name: str
    index_id: Optional[int]      # the iteration the gap follows
    gap_us: float


@dataclass
class Between:
    """The device's time from the first recorded iteration's first task to the last one's last task: how much
    of it lies between iterations (no iteration running), and the gaps, largest first."""

    iterations: int
    elapsed_us: float
    idle_us: float
    gaps: List[Gap]


@dataclass
class Loss:
    """A raw stream whose records were skipped or whose bytes were lost at import (decode_count)."""

    stream: str
    kind: str
    records: int
    skipped: int
    head_lost: int            # bytes
    tail_lost: int            # bytes


class Facts:
    """Layout-neutral facts of one open unit (``report``). Subclasses set the class attributes and
    implement the primitives (``_iteration_rows`` … ``_warnings``)."""

    processor = ""                 # the accelerator, for messages: "AA Core" / "AI Core"
    cpu = ""                       # where unsupported ops fall back: "AA CPU" / "AI CPU"
    native_activations = ""        # what decomposed activations should be replaced by
    table_names = {}               # fact → the output table a user finds it in (evidence "table")
    words = {"layer_word": "layer", "layers_word": "layers"}     # what messages call a layer (an op on Ascend)

    def __init__(self, report, idle: bool = False):
        # ``idle``: the idle facts will be asked for too (advise); a layout may then work them out in the pass
        # that gives the others
        self.report = report
        self.with_idle = idle
        self.label = report.unit.label
        self.path = report.unit.path
        # compare and advise ask for these several times: each is one SQL aggregate over the tasks
        self._iterations: Dict[Selection, Dict[str, List[float]]] = {}
        self._op_times: Dict[Selection, List[OpTime]] = {}
        self._layer_lists: Dict[tuple, List[Layer]] = {}
        self._idle: Dict[Selection, list] = {}     # (host_bound and device_idle read the same rows)
        self._counts: Optional[Dict[Tuple[int, int], Tuple[int, int]]] = None
        self._said: set = set()           # the models whose default iteration was said

    # --- what the data holds ------------------------------------------------------------------------
    # how a collection gets the PMU data that give a memory-bound value (said when they are missing)
    memory_bound_source = ""
    # PMU records whose counters no event id names (sample.json missing, or without its events)
    UNNAMED_PMU = "records whose events sample.json does not name"
    NAMING_PMU = "it needs sample.json's ai_core_profiling_events to name the counters"

    @property
    def has_pmu(self) -> bool:
        """Whether layers carry a memory-bound value."""
        raise NotImplementedError

    @property
    def pmu_description(self) -> Optional[str]:
        """What PMU data there are, in words ("the Memory metric set"), when it is known; None without PMU data."""
        return None

    @property
    def has_api(self) -> bool:
        raise NotImplementedError

    def families(self):
        """The data families' facts (msprof.analysis.family_rules.FamilyFacts); None: the layout has none."""
        return None

    # --- primitives (per layout, SQL) ------------------------------------------------------------------
    def _iteration_rows(self, selection: Selection) -> Iterable[Tuple[str, float]]:
        """(model name, busy µs) of each recorded iteration, in model then iteration order."""
        raise NotImplementedError

    def _op_rows(self, selection: Selection) -> Iterable[Tuple[str, str, str, bool, int, float]]:
        """(model name, op name, op type, cpu, task count, total µs) over the recorded iterations; a key
        may repeat (the rows are summed)."""
        raise NotImplementedError

    def _api_rows(self) -> Iterable[Tuple[str, str, bool, int, float]]:
        """(name, level, top, count, total µs); a name may repeat (the rows are summed)."""
        raise NotImplementedError

    def op_durations(self, selection: Selection = Selection()) -> Iterable[Tuple[str, str, float, int]]:
        """``_op_rows``' tasks counted by duration: (model name, op name, µs, tasks); compare --spread's."""
        raise NotImplementedError

    def api_durations(self) -> Iterable[Tuple[str, float, int]]:
        """``_api_rows``' calls counted by duration: (name, µs, calls); compare --spread's."""
        raise NotImplementedError

    def steps(self, selection: Selection = Selection()) -> list:
        """The selected steps' StepStat (msprof.layouts.framework.stepstats) where the iterations are a
        framework's steps (advise's step rules); none elsewhere."""
        return []

    def layer_iterations(self, selection: Selection = Selection()) -> List[LayerIteration]:
        """The iterations whose layers advise reads: the selected one, else the last recorded iteration
        of each model (the one ``show`` prints)."""
        raise NotImplementedError

    def _layers(self, iteration: LayerIteration) -> Iterator[Layer]:
        """The tasks of one iteration in execution order (its op_summary rows)."""
        raise NotImplementedError

    def _idle_rows(self, selection: Selection) -> Iterable[Tuple[str, int, float, float, float, float]]:
        """(model name, iteration id, busy µs, idle µs, first start µs, last end µs) per recorded iteration:
        idle = time in the iteration's span when no task ran (a task's wait for the latest end among the tasks
        started before it); the start and end on the device's clock, from any origin."""
        raise NotImplementedError

    def _loss_rows(self) -> Iterable[tuple]:
        """Loss fields of the streams with something skipped or lost."""
        raise NotImplementedError

    def _warnings(self) -> List[str]:
        """The import's warnings (the database's notice table)."""
        raise NotImplementedError

    def _iteration_counts(self) -> Iterable[Tuple[int, int, int, int]]:
        """(model id, iteration id, device tasks, timed device tasks) of each recorded iteration with tasks, in
        model then iteration order; nothing where a layout cannot count them (the last recorded iteration is
        then the default, and loss is counted against the tasks present)."""
        return []

    def iteration_counts(self) -> Dict[Tuple[int, int], Tuple[int, int]]:
        """``_iteration_counts`` by (model id, iteration id), read once."""
        if self._counts is None:
            self._counts = {(model, index): (tasks, timed) for model, index, tasks, timed in self._iteration_counts()}
        return self._counts

    def expected_tasks(self) -> Dict[int, int]:
        """Per model id, the tasks an iteration of it holds: as many as its fullest recorded iteration."""
        expected: Dict[int, int] = {}
        for (model, _index), (tasks, _timed) in self.iteration_counts().items():
            expected[model] = max(expected.get(model, 0), tasks)
        return expected

    def untimed(self) -> Tuple[int, int]:
        """(device tasks lost, device tasks expected). Lost: a task with its start or an end lost (both layouts
        keep an unpaired task log record as a task row with the other side NULL), and, where the iterations
        are counted, each task a recorded iteration lacks against its model's fullest one (the end of a run
        cut off leaves iterations without their tasks)."""
        untimed, tasks = self.report.conn.execute(
            "SELECT coalesce(sum(start_syscnt IS NULL OR end_syscnt IS NULL), 0), count(*) FROM task").fetchone()
        counts = self.iteration_counts()
        if not counts:
            return untimed, tasks
        expected = self.expected_tasks()
        outside = tasks - sum(present for present, _timed in counts.values())
        wanted = outside + sum(expected.get(it.model_id, 0) for it in self.report.iterations())
        return untimed + max(0, wanted - tasks), max(wanted, tasks)

    def cut_off(self) -> Dict[int, int]:
        """Per model id whose run's end was cut off, its last complete iteration: the iterations after it lack
        tasks, and the per-iteration figures leave them out (said once)."""
        expected = self.expected_tasks()
        last: Dict[int, int] = {}
        complete: Dict[int, int] = {}
        for (model, index), (tasks, timed) in self.iteration_counts().items():
            last[model] = max(last.get(model, index), index)
            if timed == tasks == expected[model]:
                complete[model] = max(complete.get(model, index), index)
        cut = {model: index for model, index in complete.items() if index < last[model]}
        for model, index in cut.items():
            if ("cut", model) not in self._said:
                self._said.add(("cut", model))
                notice(f"{self.label}: model {model}: the iterations after {index}, the last complete one, lack "
                       "tasks (the end of the run cut off): the figures per iteration leave them out")
        return cut

    def chosen(self, iterations: list, selection: Selection) -> list:
        """Of ``iterations`` (model then iteration order), those whose layers advise reads: the selected one;
        by default, per model, the last complete one (every task of its fullest iteration there and timed),
        else the fullest, said when it is not the last recorded (the end of a run cut off)."""
        last: Dict[int, object] = {}
        for it in iterations:
            last[it.model_id] = it
        counts = self.iteration_counts()
        if not selection.everything or not counts:
            return list(last.values())
        expected = self.expected_tasks()
        picked = {}
        for it in iterations:           # (ties go to the later iteration)
            tasks, timed = counts.get((it.model_id, it.index_id), (0, 0))
            rank = (timed == tasks == expected.get(it.model_id), timed)
            if it.model_id not in picked or rank >= picked[it.model_id][0]:
                picked[it.model_id] = (rank, it)
        for model, ((complete, _timed), it) in picked.items():
            if it is not last[model] and model not in self._said:
                self._said.add(model)
                tasks, timed = counts.get((model, last[model].index_id), (0, 0))
                notice(f"{self.label}: {it.model_name}: iteration {last[model].index_id}, the last recorded, has "
                       f"{timed} of its {expected[model]} task(s) timed: the layer findings read iteration "
                       f"{it.index_id}, {'the last complete' if complete else 'the fullest'} one")
        return [it for _rank, it in picked.values()]

    # --- answers -----------------------------------------------------------------------------------
    def layers(self, iteration: LayerIteration) -> Iterable[Layer]:
        """The layers of one iteration in execution order. A model's iteration is kept (its layers are the
        network's, a few thousand at most, and reading them filters every task of a PROF device); the
        single-op iteration, every task of the collection, is streamed again for each reader."""
        if iteration.model_id is None:
            return self._layers(iteration)
        key = (iteration.model_id, iteration.index_id)
        if key not in self._layer_lists:
            self._layer_lists[key] = list(self._layers(iteration))
        return self._layer_lists[key]

    def model_iterations(self, selection: Selection = Selection()) -> Dict[str, List[float]]:
        """Per model name: the busy µs (sum of its device task durations) of each recorded iteration.
        Models are keyed by name: two model ids of one name are one model."""
        if selection not in self._iterations:
            models: Dict[str, List[float]] = OrderedDict()
            for name, busy in self._iteration_rows(selection):
                models.setdefault(name, []).append(busy)
            self._iterations[selection] = models
        return self._iterations[selection]

    def op_times(self, selection: Selection = Selection()) -> List[OpTime]:
        """Per model and op name: type, CPU or not, count and total µs, with the model's iteration count."""
        if selection not in self._op_times:
            self._op_times[selection] = self._merged_op_times(selection)
        return self._op_times[selection]

    def _merged_op_times(self, selection: Selection) -> List[OpTime]:
        iterations = {name: len(times) for name, times in self.model_iterations(selection).items()}
        merged: Dict[Tuple[str, str], OpTime] = OrderedDict()
        for model, name, op_type, cpu, count, total in self._op_rows(selection):
            op = merged.get((model, name))
            if op is None:
                merged[(model, name)] = OpTime(model, name, op_type, cpu, count, total, iterations.get(model, 1))
            else:
                op.count += count
                op.total_us += total
                op.cpu = op.cpu or cpu
        return list(merged.values())

    def op_types(self, selection: Selection = Selection()) -> List[TypeTime]:
        """Per op/layer type: time and count per iteration — each model's total over its recorded
        iterations divided by their number, summed over the models."""
        types: Dict[str, TypeTime] = OrderedDict()
        for op in self.op_times(selection):
            row = types.setdefault(op.type, TypeTime(op.type, 0.0, 0.0))
            row.us_per_iteration += op.total_us / op.iterations
            row.count_per_iteration += op.count / op.iterations
        return list(types.values())

    def ops(self, selection: Selection = Selection()) -> List[OpAverage]:
        """Per model and op/layer name: type, executions, average µs (two models' ops of one name are two ops:
        averaged together, a change of one would hide behind the other)."""
        return [OpAverage(op.model_name, op.name, op.type, op.count, op.total_us / op.count)
                for op in self.op_times(selection) if op.count]

    def cpu_ops(self, selection: Selection = Selection()) -> List[OpTime]:
        """The ops that ran on the AA CPU / AI CPU, per model."""
        return [op for op in self.op_times(selection) if op.cpu]

    def apis(self) -> List[ApiTime]:
        """Per ACL/API name: level, count and total µs (empty without API data)."""
        names: Dict[str, ApiTime] = OrderedDict()
        for name, level, top, count, total in self._api_rows():
            api = names.get(name)
            if api is None:
                names[name] = ApiTime(name, level, top, count, total)
            else:
                api.count += count
                api.total_us += total
                api.top = api.top or top
        return list(names.values())

    def _idle_per_iteration(self, selection: Selection) -> list:
        """``_idle_rows`` (a window function over every task: seconds at 1M tasks), once per selection."""
        if selection not in self._idle:
            self._idle[selection] = list(self._idle_rows(selection))
        return self._idle[selection]

    def idle(self, selection: Selection = Selection()) -> List[Idle]:
        """Per model: iterations, busy and idle µs summed over them."""
        models: Dict[str, Idle] = OrderedDict()
        for name, _index, busy, idle, _start, _end in self._idle_per_iteration(selection):
            row = models.setdefault(name, Idle(name, 0, 0.0, 0.0))
            row.iterations += 1
            row.busy_us += busy
            row.idle_us += idle or 0.0
        return list(models.values())

    def between(self, selection: Selection = Selection()) -> Between:
        """The device idle between recorded iterations (of every model: one model's gap may hold another's
        iteration, which is not idle), from the iterations' spans merged in time order. Where executions went
        unrecorded (``interval`` k > 1, or lost step-trace marks: a model's iteration ids are not consecutive),
        the device may have been running them in a gap: only the gaps between two consecutive executions of
        one model count then, against the time from the first's start to the second's."""
        rows = [(start, end, name, index) for name, index, _busy, _idle, start, end
                in self._idle_per_iteration(selection) if start is not None and end is not None]
        spans = sorted(rows, key=lambda row: row[:2])
        ids: Dict[str, List[int]] = {}
        for _start, _end, name, index in spans:
            ids.setdefault(name, []).append(index)
        complete = all(None not in v and sorted(v) == list(range(min(v), min(v) + len(v))) for v in ids.values())
        gaps: List[Gap] = []
        if not spans:
            return Between(0, 0.0, 0.0, gaps)
        windows = 0.0
        begin, reach, (name, index) = spans[0][0], spans[0][1], spans[0][2:]
        for start, end, next_name, next_index in spans[1:]:
            if start > reach and (complete or (next_name == name and next_index == index + 1)):
                gaps.append(Gap(name, index, start - reach))
                windows += start - begin
            if end >= reach:
                begin, reach, name, index = start, end, next_name, next_index
        gaps.sort(key=lambda gap: -gap.gap_us)
        elapsed = reach - spans[0][0] if complete else windows
        return Between(len(spans), elapsed, sum(gap.gap_us for gap in gaps), gaps)

    def data_loss(self) -> Tuple[List[Loss], List[str]]:
        """Streams with records skipped or bytes lost, and the import's warnings."""
        return [Loss(*row) for row in self._loss_rows()], self._warnings()

