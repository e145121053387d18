"""The facts of one PROF device (msprof.analysis.facts), in SQL over the timed device tasks with their
launches (msprof.layouts.prof.tasks: the association op_summary and op_statistic use), with op_statistic's
scope: every task type but WRITE_BACK/INVALID, started after the collection began.

A model's recorded iterations are its executions as the association numbers them. Data without any
model execution (single ops, or a device without its host) is one model, ``single-op``, whose one
iteration is every device task.
"""
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from msprof.analysis.facts import SINGLE_OP, Facts, Layer, LayerIteration
from msprof.contract import Selection
from msprof.layouts.prof.families.ffts_pmu import PLATFORMS as STARS_PMU_PLATFORMS
from msprof.layouts.prof.family_facts import ProfFamilyFacts
from msprof.layouts.prof.statistics import NOT_IN_OP_SUMMARY, STARTED, api_durations, api_rows
from msprof.layouts.prof import tasks
from msprof.layouts.prof.tasks import HWTS_TASK_TYPES

# a STARS task's memory bound (op_summary has no such column there): the larger of its two cores' MTE2 ratios
# over the larger of their compute ratios (AI Core's cube, AI Vector Core's vector), as HWTS's mte2 / max(vec, mac)
STARS_BOUND = ("aic_mte2_ratio", "aiv_mte2_ratio", "aic_mac_ratio", "aiv_vec_ratio")
_SKIP = ", ".join(f"'{t}'" for t in NOT_IN_OP_SUMMARY)
_INCLUDED = f"task_type NOT IN ({_SKIP}) AND {STARTED}"
_HW_NAMES = " ".join(f"WHEN {k} THEN '{v}'" for k, v in HWTS_TASK_TYPES.items())
_HW_NAME = f"CASE hw_type {_HW_NAMES} ELSE CAST(hw_type AS TEXT) END"
# what the queries below read of each task (tasks.TASK_FIELDS; the selection's are always there)
_FIELDS = ("op_id", "hw_type", "task_type", "start_ns", "end_ns")


class ProfFacts(Facts):
    processor = "AI Core"
    cpu = "AI CPU"
    native_activations = "Relu, LeakyRelu, PRelu, Elu, or one fused operator from CANN's library"
    words = {"layer_word": "operator", "layers_word": "ops"}
    table_names = {"layers": "op_summary", "ops": "op_statistic", "apis": "api_statistic", "idle": "op_summary"}

    @property
    def memory_bound_source(self) -> str:
        if self.report.metrics is not None and not self.report.metrics.slot_of:
            return self.NAMING_PMU
        if self.report.is_stars and self.report.platform not in STARS_PMU_PLATFORMS:
            return "msprof does not read this STARS chip's AI Core PMU (ffts_profile.data) yet"
        if self.report.is_stars:
            return "a STARS chip keeps its AI Core PMU in ffts_profile.data, which this collection does not have"
        return "a collection with --aic-metrics PipeUtilization has it"

    def __init__(self, report, idle: bool = False):
        super().__init__(report, idle)
        self.conn = report.conn
        self._grouped: Dict[Selection, Tuple[bool, List[tuple]]] = {}     # (with idle, rows)
        self._names = {m["model_id"]: m["model_name"] or str(m["model_id"]) for m in report.models()}
        # model mode when the host placed any launch in a model execution
        self.single_op = not self.conn.execute(
            "SELECT 1 FROM host.launch WHERE model_id IS NOT NULL LIMIT 1").fetchone()
        self._families = ProfFamilyFacts(report)

    def families(self) -> ProfFamilyFacts:
        return self._families

    def _model_name(self, model_id) -> str:
        return SINGLE_OP if self.single_op else self._names.get(model_id, str(model_id))

    def _scope(self, selection: Selection) -> Tuple[str, dict]:
        """The WHERE clause over the task query's rows (msprof.layouts.prof.tasks): included, in a recorded
        iteration, selected."""
        if self.single_op:
            self.report.check(selection)            # no iteration to select: a usage error
        where, args = tasks.where(self.report, selection)
        where += f" AND {_INCLUDED}"
        if not self.single_op:
            where += " AND model_id IS NOT NULL AND iteration IS NOT NULL"
        return where, args

    @property
    def has_pmu(self) -> bool:
        if self.report.stars_pmu is not None:
            return set(STARS_BOUND).issubset(self.report.stars_pmu().columns)
        return self.report.metrics is not None and "memory_bound" in self.report.metrics.names

    @property
    def pmu_description(self) -> Optional[str]:
        metrics, stars = self.report.metrics, self.report.stars_pmu
        if stars is not None:
            stars = stars()
            return "the STARS AI Core PMU (ffts_profile.data) of " + " and ".join(
                f"{name or 'no'} metric set" for name in (stars.aic_set, stars.aiv_set))
        if metrics is None:
            return None
        if not metrics.slot_of:
            return self.UNNAMED_PMU
        text = f"the {metrics.name or 'unnamed'} metric set"
        if metrics.missing:
            text += " without its event(s) " + ", ".join(f"0x{e:x}" for e in metrics.missing)
        return text

    @property
    def has_api(self) -> bool:
        return self.report.has_api

    def _iteration_rows(self, selection: Selection) -> Iterable[Tuple[str, float]]:
        return [(self._model_name(model_id), busy) for kind, model_id, busy, *_rest in self._groups(selection)
                if kind == 0]

    def _op_rows(self, selection: Selection) -> Iterable[tuple]:
        return [(self._model_name(model_id), name, op_type, bool(cpu), count, total)
                for kind, model_id, total, name, op_type, cpu, count, _n in self._groups(selection) if kind == 1]

    def op_durations(self, selection: Selection = Selection()) -> Iterable[tuple]:
        where, args = self._scope(selection)
        return [(self._model_name(model_id), name, duration, count) for model_id, name, duration, count in
                self.conn.execute(
                    f"{self._tasks(selection, where)} SELECT g.model_id,"
                    f" coalesce(o.op_name, o.kernel_name, {_HW_NAME}), g.d, g.n FROM (SELECT model_id, op_id, hw_type,"
                    " dur / 1000.0 AS d, count(*) AS n FROM t GROUP BY model_id, op_id, hw_type, dur) g"
                    " LEFT JOIN host.op o ON o.op_id = g.op_id", args)]

    def _tasks(self, selection: Selection, where: str) -> str:
        """The CTE ``t`` of the tasks in scope (``where``: ``_scope``'s), with their duration ``dur`` (ns)."""
        return (f"WITH t AS (SELECT model_id, iteration, op_id, hw_type, start_ns, end_ns, end_ns - start_ns AS dur"
                f" FROM ({tasks.task_query(self.report, _FIELDS, within=selection)}) WHERE {where})")

    def _groups(self, selection: Selection, idle: bool = False) -> List[tuple]:
        """The busy µs and tasks of each recorded iteration (kind 0) and the count and µs of each op (kind 1), from
        one pass over the tasks: their join with the launches is most of the cost (~1.5 s a million tasks), so
        both groupings share it (SQLite materialises a CTE that is used twice). Ops are named afterwards,
        from the small op table (by HWTS task type when no launch is known). With ``idle`` (or ``with_idle``),
        an iteration's row also has ``_idle_rows``' idle µs, first start and last end: a window over every
        task, which costs a sort, but in its own pass would cost another join."""
        idle = idle or self.with_idle
        has_idle, rows = self._grouped.get(selection, (False, None))
        if rows is None or (idle and not has_idle):
            where, args = self._scope(selection)
            task_type = "coalesce(o.task_type, 'UNKNOWN')"
            if idle:
                iterations = (
                    "SELECT 0, model_id, sum(dur) / 1000.0, iteration, sum(max(0, start_ns - before)) / 1000.0,"
                    " min(start_ns) / 1000.0, max(end_ns) / 1000.0, count(*) FROM (SELECT model_id, iteration,"
                    " start_ns, end_ns, dur, max(end_ns) OVER (PARTITION BY model_id, iteration ORDER BY start_ns"
                    " ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM t) GROUP BY model_id, iteration")
            else:
                iterations = ("SELECT 0, model_id, sum(dur) / 1000.0, iteration, NULL, NULL, NULL, count(*) FROM t"
                              " GROUP BY model_id, iteration")
            rows = list(self.conn.execute(
                f"{self._tasks(selection, where)} {iterations}"
                f" UNION ALL SELECT 1, g.model_id, g.total, coalesce(o.op_name, o.kernel_name, {_HW_NAME}),"
                f" coalesce(o.op_type, {_HW_NAME}), {task_type} = 'AI_CPU' OR ({task_type} = 'UNKNOWN' AND"
                " hw_type = 1), g.n, NULL FROM (SELECT model_id, op_id, hw_type, count(*) AS n,"
                " sum(dur) / 1000.0 AS total FROM t GROUP BY model_id, op_id, hw_type) g"
                " LEFT JOIN host.op o ON o.op_id = g.op_id ORDER BY 1, 2, 4", args))
            self._grouped[selection] = (idle, rows)
        return rows

    def _iteration_counts(self) -> Iterable[Tuple[int, int, int, int]]:
        """The timed tasks of each recorded iteration (the pass above), and its tasks that lack a start or an end
        (a record lost: a query of those alone, few)."""
        if self.single_op:
            return []
        where, args = self._scope(Selection())
        query = tasks.task_query(self.report, ("task_type",), timed=False)
        untimed = dict(((model, index), n) for model, index, n in self.conn.execute(
            f"SELECT model_id, iteration, count(*) FROM ({query}) WHERE model_id IS NOT NULL AND iteration IS NOT NULL"
            f" AND task_type NOT IN ({_SKIP}) GROUP BY model_id, iteration", args))
        timed = {(row[1], row[3]): row[7] for row in self._groups(Selection()) if row[0] == 0}
        return [(model, index, timed.get((model, index), 0) + untimed.get((model, index), 0),
                 timed.get((model, index), 0)) for model, index in sorted(timed.keys() | untimed.keys())]

    def _api_rows(self) -> Iterable[tuple]:
        # api_statistic's rows: (device, level, name, total, count, …); the application calls the acl level
        return [(name, level, level == "acl", count, total)
                for _device, level, name, total, count, *_rest in api_rows(self.report)]

    def api_durations(self) -> Iterable[tuple]:
        return [(name, duration, count) for name, _level, duration, count in api_durations(self.report)]

    def layer_iterations(self, selection: Selection = Selection()) -> List[LayerIteration]:
        if self.single_op:
            self.report.check(selection)
            return [LayerIteration(None, SINGLE_OP, None)]
        return [LayerIteration(it.model_id, it.model_name, it.index_id)
                for it in self.chosen(self.report.check(selection), selection)]

    def _layers(self, iteration: LayerIteration) -> Iterator[Layer]:
        """The rows of op_summary (the file export summary writes): the same numbers."""
        table = self.report.op_summary(iteration.selection, as_file=False)
        at = {column.name: i for i, column in enumerate(table.columns)}
        bound = at.get("memory_bound")
        stars = [at[name] for name in STARS_BOUND] if bound is None and STARS_BOUND[0] in at else None
        duration, printed = at["Task Duration(us)"], [column.kind.json for column in table.columns]
        for row in table.rows():           # values rounded as the file prints them (some columns round there)
            value = None if bound is None else printed[bound](row[bound])
            if stars is not None:
                value = stars_memory_bound(*(printed[i](row[i]) for i in stars))
            yield Layer(row[at["Op Name"]] or row[at["Task Type"]], None, row[at["OP Type"]] or row[at["Task Type"]],
                        printed[duration](row[duration]), value)

    def _idle_rows(self, selection: Selection) -> Iterable[tuple]:
        return [(self._model_name(model_id), iteration, busy, idle, first, last)
                for kind, model_id, busy, iteration, idle, first, last, _n in self._groups(selection, idle=True)
                if kind == 0]

    def _loss_rows(self) -> Iterable[tuple]:
        lost = "skipped > 0 OR head_lost > 0 OR tail_lost > 0"
        return list(self.conn.execute(
            f"SELECT stream, kind, records, skipped, head_lost, tail_lost FROM host.decode_count WHERE {lost}"
            f" UNION ALL SELECT stream, kind, records, skipped, head_lost, tail_lost FROM main.decode_count"
            f" WHERE {lost}"))

    def _warnings(self) -> List[str]:
        return [m for (m,) in self.conn.execute(
            "SELECT message FROM host.notice WHERE level = 'warning'"
            " UNION ALL SELECT message FROM main.notice WHERE level = 'warning'")]


def stars_memory_bound(aic_mte2, aiv_mte2, aic_mac, aiv_vec) -> Optional[float]:
    """STARS_BOUND's value of one task's printed ratios: None for a task without a record (N/A) or without
    compute (a zero divisor, as HWTS's memory_bound is 0 then)."""
    if aic_mte2 is None:
        return None
    top = max(aic_mac, aiv_vec)
    return round(max(aic_mte2, aiv_mte2) / top, 3) if top else 0.0
