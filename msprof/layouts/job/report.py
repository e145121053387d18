"""JOB reports: the tables of outputs.md §3–4 computed in SQL from one JOB's database and streamed
(msprof.tables); values are rounded by that SQL (times 3 decimals with SQLite's round, ratios 4 decimals
half up with exact integer arithmetic: msprof.metrics), renderers only print them."""
from typing import List, Optional

from msprof.decode.acl import API_TYPES
from msprof.decode.hwts import TASK_TYPES
from msprof.contract import Iteration, Report, Selection
from msprof.layouts.timebase import JobTime
from msprof.layouts.where import selection_sql
from msprof.metrics import MetricSet
from msprof.spread import group_spread
from msprof.tables import INT, NUMBER, Column, Table, batches

# what a narrow terminal keeps of a statistic, most important first (msprof.renderers.terminal)
AA_CORE = next(k for k, v in TASK_TYPES.items() if v == "AA_CORE")
_TYPE_NAMES = " ".join(f"WHEN {k} THEN '{v}'" for k, v in TASK_TYPES.items())


def _statistic_where(index_id: Optional[int]) -> str:
    """op_statistic's tasks: a model's timed tasks of its recorded iterations (of one, given ``index_id``)."""
    where = "t.model_id = :model AND t.index_id IS NOT NULL AND t.dur_us IS NOT NULL"
    return where + (" AND t.index_id = :index" if index_id is not None else "")
# A task's layer.info row: the one its (stream, task) found at import (raw-format.md §5.2). Not the layer id
# alone: one layer split into several tasks has a row per task under one id, and joining on the id gave each
# task every row of its layer (found by a randomised truth sweep).
LAYER_OF_TASK = ("l.model_id = t.model_id AND l.layer_id = t.layer_id AND l.stream_id = t.stream_id"
                 " AND l.task_id = t.task_id")


class JobReport(Report):
    """Read-only view of one JOB's database."""

    def __init__(self, unit):
        super().__init__(unit)
        self.hwts_mhz = self.meta_number("hwts_mhz")
        self.aic_mhz = self.meta_number("aic_mhz")
        self.time = JobTime(self.clock, self.hwts_mhz)
        slots = [e for (e,) in self.conn.execute("SELECT event_id FROM pmu_event ORDER BY slot")]
        self.has_pmu = self.count("pmu") > 0
        self.metric_set = MetricSet(slots) if self.has_pmu else MetricSet([])

    @property
    def has_acl(self) -> bool:
        return self.count("acl_api") > 0

    @property
    def has_tasks(self) -> bool:
        return self.count("task") > 0

    # --- selection -------------------------------------------------------------------------------------
    def models(self) -> List[dict]:
        cursor = self.conn.execute("SELECT model_id, model_name, batch_num, input_pic_num FROM model ORDER BY model_id")
        return [dict(zip(("model_id", "model_name", "batch_num", "input_pic_num"), r)) for r in cursor]

    def iterations(self, selection: Selection = Selection()) -> List[Iteration]:
        sql = ("SELECT i.model_id, coalesce(m.model_name, 'model' || i.model_id), i.index_id, coalesce(m.batch_num, 1),"
               " m.input_pic_num, i.start_syscnt, i.end_syscnt FROM iteration i LEFT JOIN model m USING (model_id)")
        where, args = selection_sql(selection, "i.model_id", "i.index_id")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY i.model_id, i.index_id"
        return [Iteration(*row) for row in self.conn.execute(sql, args)]

    # --- op_summary (outputs.md §3.1) -----------------------------------------------------------------
    def op_summary(self, iteration: Iteration) -> Table:
        """Rows in execution order, then the total row (Layer Id '-'). All formulas and rounding in SQL."""
        metric_names = self.metric_set.names if self.has_pmu else []
        columns = [Column("Layer Id", INT), Column("Ori Layer Name"), Column("Layer Name"), Column("Layer Type"),
                   Column("Time(us)", NUMBER), Column("Time Ratio", NUMBER)]
        columns += [Column(name, INT if kind in ("count", "sum") else NUMBER)
                    for name, kind in zip(metric_names, self.metric_set.kinds())]
        core = f"t.task_type = {AA_CORE}"
        per_task = [f"CASE WHEN {core} THEN {expr} END" for expr in self.metric_set.sql("p.c{}", "p.total_cycles")]
        totals = self.metric_set.sql(f"sum(CASE WHEN {core} THEN p.c{{}} END)",
                                     f"sum(CASE WHEN {core} THEN p.total_cycles END)")
        tasks = (" FROM task t"
                 " LEFT JOIN pmu p ON p.stream_id = t.stream_id AND p.task_id = t.task_id AND p.exec_n = t.exec_n"
                 " WHERE t.model_id = :model AND t.index_id = :index")
        source = tasks.replace(" FROM task t", f" FROM task t LEFT JOIN layer l ON {LAYER_OF_TASK}")
        args = {"model": iteration.model_id, "index": iteration.index_id}
        total_select = ", ".join(["'-'", "'-'", "'-'", "'-'", "round(coalesce(sum(t.dur_us), 0), 3)",
                                  "CASE WHEN count(*) THEN 100.0 END"] + (totals if metric_names else []))
        total_row = list(self.conn.execute(f"SELECT sum(t.dur_us), {total_select}{tasks}", args).fetchone())
        args["total"] = total_row.pop(0)
        select = ", ".join(["t.layer_id", "l.ori_layer_name", "l.layer_name", "l.layer_type", "round(t.dur_us, 3)",
                            "round(t.dur_us * 100.0 / :total, 4)"] + (per_task if metric_names else []))
        cursor = self.conn.execute(f"SELECT {select}{source} ORDER BY t.at_syscnt, t.seq", args)
        title = f"AA Core metrics: {iteration.model_name} (model {iteration.model_id}), iteration {iteration.index_id}"
        return Table("op_summary", title, columns, batches(cursor), tuple(total_row),
                     context={"model_id": iteration.model_id, "model_name": iteration.model_name,
                              "iteration_id": iteration.index_id},
                     sort="Time(us)")

    # --- op_statistic (outputs.md §3.2) ---------------------------------------------------------------
    def op_statistic(self, model_id: int, index_id: Optional[int] = None) -> Table:
        columns = [Column("Task ID", INT), Column("Stream ID", INT), Column("OP Name"), Column("Task Type")] + [
            Column(name, INT if name == "Count" else NUMBER)
            for name in ("Total Time Ratio(%)", "Total Time(us)", "Count", "Avg(us)", "Max(us)", "Min(us)")]
        where = _statistic_where(index_id)
        cursor = self.conn.execute(
            "SELECT t.task_id, t.stream_id, max(l.layer_name),"
            f" CASE t.task_type {_TYPE_NAMES} ELSE t.task_type END,"
            " round(sum(t.dur_us) * 100.0 / sum(sum(t.dur_us)) OVER (), 4), round(sum(t.dur_us), 3), count(*),"
            " round(avg(t.dur_us), 3), round(max(t.dur_us), 3), round(min(t.dur_us), 3) FROM task t"
            f" LEFT JOIN layer l ON {LAYER_OF_TASK}"
            f" WHERE {where} GROUP BY t.stream_id, t.task_id, t.task_type"
            " ORDER BY sum(t.dur_us) DESC, t.stream_id, t.task_id", {"model": model_id, "index": index_id})
        name = next((m["model_name"] for m in self.models() if m["model_id"] == model_id), f"model{model_id}")
        return Table("op_statistic", f"Op statistic: {name} (model {model_id})", columns, batches(cursor),
                     context={"model_id": model_id, "model_name": name, "iteration_id": index_id},
                     sort="Total Time(us)")

    def op_spread(self, model_id: int, index_id: Optional[int] = None) -> dict:
        """(task id, stream id, task type) → (median, sample std dev) of the µs of op_statistic's row (show)."""
        source = (f"SELECT t.task_id AS k0, t.stream_id AS k1, CASE t.task_type {_TYPE_NAMES} ELSE t.task_type END"
                  f" AS k2, t.dur_us AS d FROM task t WHERE {_statistic_where(index_id)}")
        return group_spread(self.conn, source, {"model": model_id, "index": index_id}, 3)

    def acl_spread(self) -> dict:
        """(pid, tid, name) → (median, sample std dev) of the µs of acl_statistic's row (show)."""
        return group_spread(self.conn, "SELECT pid AS k0, tid AS k1, name AS k2, [end] - start AS d FROM acl_api", {},
                            3, self.time.host_us_per_unit)

    # --- acl_statistic (outputs.md §3.3) --------------------------------------------------------------
    def acl_statistic(self) -> Table:
        columns = [Column("Process ID", INT), Column("Thread ID", INT), Column("Type"), Column("Name")] + [
            Column(name, INT if name == "Count" else NUMBER)
            for name in ("Total Time Ratio(%)", "Total Time(us)", "Count", "Avg(us)", "Max(us)", "Min(us)")]
        type_names = " ".join(f"WHEN {k} THEN '{v}'" for k, v in API_TYPES.items())
        scale = self.time.host_us_per_unit
        cursor = self.conn.execute(
            f"SELECT pid, tid, CASE api_type {type_names} ELSE CAST(api_type AS TEXT) END, name,"
            " round(sum([end] - start) * 100.0 / sum(sum([end] - start)) OVER (), 4),"
            " round(sum([end] - start) * :scale, 3), count(*), round(avg([end] - start) * :scale, 3),"
            " round(max([end] - start) * :scale, 3), round(min([end] - start) * :scale, 3)"
            " FROM acl_api GROUP BY pid, tid, api_type, name"
            " ORDER BY sum([end] - start) DESC, pid, tid, api_type, name", {"scale": scale})
        return Table("acl_statistic", "ACL statistic", columns, batches(cursor), sort="Total Time(us)")

    # --- frequency (outputs.md §4) --------------------------------------------------------------------
    def frequency(self) -> Table:
        rows = [("AA Core", None, _plain_number(self.aic_mhz)), ("HWTS", None, _plain_number(self.hwts_mhz))]
        for syscnt, mhz in self.conn.execute("SELECT syscnt, mhz FROM freq_change ORDER BY syscnt, seq"):
            # (3 decimals, as every time msprof prints: 500.04166650390624 was the float itself)
            rows.append(("AA Core change", round(self.time.device_us(syscnt), 3), _plain_number(mhz)))
        return Table("frequency", "Frequency", [Column("Clock"), Column("Time(us)", NUMBER), Column("MHz", NUMBER)],
                     [rows], facts=True)

    def aic_mhz_at(self, syscnt: int) -> Optional[float]:
        row = self.conn.execute("SELECT mhz FROM freq_change WHERE syscnt <= ? ORDER BY syscnt DESC, seq DESC LIMIT 1",
                                (syscnt,)).fetchone()
        return float(row[0]) if row else self.aic_mhz


def _plain_number(value):
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value
