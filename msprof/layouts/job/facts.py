"""The facts of one JOB (msprof.analysis.facts), in SQL over its database: the task table (one row per
timed HWTS task execution, placed in its step-trace iteration and layer), layer, model and acl_api."""
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from msprof.analysis.facts import Facts, Layer, LayerIteration
from msprof.decode.acl import API_TYPES
from msprof.decode.hwts import TASK_TYPES
from msprof.contract import Selection
from msprof.layouts.where import selection_sql

AA_CPU = next(k for k, v in TASK_TYPES.items() if v == "AA_CPU")

# the tasks of recorded iterations (op_summary's), timed (a task with a lost HWTS side is timed by its cycles)
_RECORDED = "t.model_id IS NOT NULL AND t.index_id IS NOT NULL AND t.dur_us IS NOT NULL"


class JobFacts(Facts):
    processor = "AA Core"
    cpu = "AA CPU"
    native_activations = "SS928: Relu, LeakyRelu, PRelu, Elu, Srelu"
    table_names = {"layers": "op_summary", "ops": "op_statistic", "apis": "acl_statistic", "idle": "task"}

    @property
    def _unnamed_pmu(self) -> bool:
        """PMU records whose counters no event id names (sample.json missing or without its events)."""
        return self.report.has_pmu and not self.report.metric_set.slot_of

    @property
    def pmu_description(self) -> Optional[str]:
        return self.UNNAMED_PMU if self._unnamed_pmu else None

    @property
    def memory_bound_source(self) -> str:
        if self._unnamed_pmu:
            return self.NAMING_PMU
        # (the other AA core metric sets write no PMU file: docs/collect.md)
        return "a collection with --aac-metrics ArithmeticUtilization (the default) has it"

    def __init__(self, report, idle: bool = False):
        super().__init__(report, idle)
        self.conn = report.conn
        self._names = {m["model_id"]: m["model_name"] for m in report.models()}

    def _model_name(self, model_id: int) -> str:
        return self._names.get(model_id) or f"model{model_id}"     # as JobReport.iterations names it

    def _where(self, selection: Selection) -> Tuple[str, dict]:
        where, args = selection_sql(selection, "t.model_id", "t.index_id")
        if selection.everything:        # (a run whose end was cut off: its last, incomplete, iterations left out)
            for n, (model, index) in enumerate(sorted(self.cut_off().items())):
                where.append(f"NOT (t.model_id = :cut_model{n} AND t.index_id > :cut_index{n})")
                args.update({f"cut_model{n}": model, f"cut_index{n}": index})
        return " AND ".join([_RECORDED] + where), args

    @property
    def has_pmu(self) -> bool:
        return self.report.has_pmu and "Memory Bound" in self.report.metric_set.names

    @property
    def has_api(self) -> bool:
        return self.report.has_acl

    def _iteration_rows(self, selection: Selection) -> Iterable[Tuple[str, float]]:
        where, args = self._where(selection)
        cursor = self.conn.execute(f"SELECT t.model_id, sum(t.dur_us) FROM task t WHERE {where}"
                                   " GROUP BY t.model_id, t.index_id ORDER BY t.model_id, t.index_id", args)
        return [(self._model_name(model_id), busy) for model_id, busy in cursor]

    def _op_rows(self, selection: Selection) -> Iterable[tuple]:
        return self._named_ops(selection, "count(*), sum(t.dur_us)")

    def op_durations(self, selection: Selection = Selection()) -> Iterable[tuple]:
        for model, name, _kind, _cpu, duration, count in self._named_ops(selection, "t.dur_us, count(*)",
                                                                         ", t.dur_us"):
            yield model, name, duration, count

    def _named_ops(self, selection: Selection, values: str, by: str = "") -> Iterator[tuple]:
        """(model name, op name, op type, cpu, *values) of the recorded tasks grouped by op (and ``by``)."""
        # grouped by integer ids (a cheap sort of the tasks), named from the small layer table afterwards
        where, args = self._where(selection)
        # (a layer row is a task's by its (stream, task) too: report.LAYER_OF_TASK)
        layers: Dict[tuple, tuple] = {(m, i, st, tk): (name, kind) for m, i, st, tk, name, kind in self.conn.execute(
            "SELECT model_id, layer_id, stream_id, task_id, layer_name, layer_type FROM layer")}
        cursor = self.conn.execute(
            f"SELECT t.model_id, t.layer_id, t.stream_id, t.task_id, t.task_type, {values} FROM task t"
            f" WHERE {where} GROUP BY t.model_id, t.layer_id, t.stream_id, t.task_id, t.task_type{by}", args)
        for model_id, layer_id, stream_id, task_id, task_type, *rest in cursor:
            fallback = TASK_TYPES.get(task_type, str(task_type))      # a task missing from layer.info
            name, kind = layers.get((model_id, layer_id, stream_id, task_id), (None, None))
            # (a name of spaces names nothing, as in the timeline)
            yield (self._model_name(model_id), name if name and name.strip() else fallback,
                   kind if kind and kind.strip() else fallback, task_type == AA_CPU, *rest)

    def _api_rows(self) -> Iterable[tuple]:
        scale = self.report.time.host_us_per_unit
        for name, api_type, count, total in self.conn.execute(
                "SELECT name, min(api_type), count(*), sum([end] - start) FROM acl_api GROUP BY name"):
            yield name, API_TYPES.get(api_type, str(api_type)), True, count, total * scale

    def api_durations(self) -> Iterable[tuple]:
        scale = self.report.time.host_us_per_unit
        return [(name, delta * scale, count) for name, delta, count in self.conn.execute(
            "SELECT name, [end] - start AS d, count(*) FROM acl_api GROUP BY name, d")]

    def layer_iterations(self, selection: Selection = Selection()) -> List[LayerIteration]:
        return [LayerIteration(it.model_id, it.model_name, it.index_id)
                for it in self.chosen(self.report.check(selection), selection)]

    def _iteration_counts(self) -> Iterable[Tuple[int, int, int, int]]:
        return self.conn.execute(
            "SELECT model_id, index_id, count(*), sum(start_syscnt IS NOT NULL AND end_syscnt IS NOT NULL) FROM task"
            " WHERE model_id IS NOT NULL AND index_id IS NOT NULL GROUP BY model_id, index_id")

    def _layers(self, iteration: LayerIteration) -> Iterator[Layer]:
        """The rows of op_summary (what ``show`` prints for that iteration): the same numbers."""
        [it] = self.report.iterations(iteration.selection)
        table = self.report.op_summary(it)
        at = {column.name: i for i, column in enumerate(table.columns)}
        bound = at.get("Memory Bound")
        for row in table.rows():
            yield Layer(row[at["Layer Name"]] or "N/A", row[at["Ori Layer Name"]],
                        row[at["Layer Type"]] or "", row[at["Time(us)"]] or 0.0,
                        None if bound is None else row[bound])

    def _idle_rows(self, selection: Selection) -> Iterable[tuple]:
        where, args = self._where(selection)
        args["mhz"] = self.report.hwts_mhz or 1.0
        cursor = self.conn.execute(
            "SELECT model_id, index_id, sum(dur_us), sum(max(0, start_syscnt - before)) / :mhz,"
            " min(start_syscnt) / :mhz, max(end_syscnt) / :mhz FROM ("
            " SELECT t.model_id, t.index_id, t.dur_us, t.start_syscnt, t.end_syscnt, max(t.end_syscnt) OVER"
            "  (PARTITION BY t.model_id, t.index_id ORDER BY t.start_syscnt, t.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1"
            f"  PRECEDING) AS before FROM task t WHERE {where} AND t.start_syscnt IS NOT NULL"
            "  AND t.end_syscnt IS NOT NULL)"
            " GROUP BY model_id, index_id ORDER BY model_id, index_id", args)
        return [(self._model_name(model_id), *rest) for model_id, *rest in cursor]

    def _loss_rows(self) -> Iterable[tuple]:
        return list(self.conn.execute("SELECT stream, kind, records, skipped, head_lost, tail_lost FROM decode_count"
                                      " WHERE skipped > 0 OR head_lost > 0 OR tail_lost > 0 ORDER BY stream"))

    def _warnings(self) -> List[str]:
        return [m for (m,) in self.conn.execute("SELECT message FROM notice WHERE level = 'warning' ORDER BY seq")]
