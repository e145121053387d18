"""Reports: the tables of outputs.md §3–4 computed from one result directory's database.

A ``Table`` holds column names, a value kind per column and rows of raw numbers (None = N/A);
rounding and text formatting happen only in the renderers (msprof.render).
"""
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from msprof import store
from msprof.metrics import MetricSet
from msprof.decode.acl import API_TYPES
from msprof.decode.hwts import TASK_TYPES

# Column value kinds: how a renderer rounds them (outputs.md: times 3 decimals, ratios 4, counts int).
TEXT, TIME, RATIO, PERCENT, INT = "text", "time", "ratio", "percent", "int"
AA_CORE = next(k for k, v in TASK_TYPES.items() if v == "AA_CORE")
METRIC_KINDS = {"ratio": RATIO, "memory_bound": RATIO, "count": INT, "sum": INT}


@dataclass
class Table:
    title: str
    columns: List[str]
    kinds: List[str]
    rows: List[list] = field(default_factory=list)
    final: bool = False  # rows already hold 'N/A' for missing values (filled in SQL)


@dataclass
class Iteration:
    model_id: int
    model_name: str
    index_id: int
    batch_num: int
    input_pic_num: Optional[int]
    start_syscnt: int
    end_syscnt: int


class Report:
    """Read-only view of one result directory's database."""

    def __init__(self, result_dir: Path):
        self.result_dir = Path(result_dir)
        self.conn = store.open_readonly(store.db_path(result_dir))
        # No mmap of the database: it made the reading process's RSS grow with the database (150 MB for
        # export summary at 1M tasks, 34 MB without) and, on this VM, page faults cost more CPU than the
        # read() calls they save (10.5 s user CPU without mmap, 12.7-13.7 s with it).
        self.meta = store.read_meta(self.conn)
        self.device_id = self.meta.get("device_id", "0")
        self.clock = json.loads(self.meta.get("clock", "{}"))
        self.hwts_mhz = _float(self.meta.get("hwts_mhz"))
        self.aic_mhz = _float(self.meta.get("aic_mhz"))
        slots = [e for (e,) in self.conn.execute("SELECT event_id FROM pmu_event ORDER BY slot")]
        self.has_pmu = self._count("pmu") > 0
        self.metric_set = MetricSet(slots) if self.has_pmu else MetricSet([])

    def close(self):
        self.conn.close()

    def _count(self, table: str) -> int:
        return self.conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]

    @property
    def has_acl(self) -> bool:
        return self._count("acl_api") > 0

    @property
    def has_tasks(self) -> bool:
        return self._count("task") > 0

    # --- selection -------------------------------------------------------------------------------------
    def models(self) -> List[dict]:
        cursor = self.conn.execute("SELECT model_id, model_name, batch_num, input_pic_num FROM model ORDER BY model_id")
        return [dict(zip(("model_id", "model_name", "batch_num", "input_pic_num"), r)) for r in cursor]

    def iterations(self, model_id: Optional[int] = None, index_id: Optional[int] = None) -> List[Iteration]:
        sql = ("SELECT i.model_id, coalesce(m.model_name, 'model' || i.model_id), i.index_id, coalesce(m.batch_num, 1),"
               " m.input_pic_num, i.start_syscnt, i.end_syscnt FROM iteration i LEFT JOIN model m USING (model_id)")
        where, args = [], []
        if model_id is not None:
            where.append("i.model_id = ?")
            args.append(model_id)
        if index_id is not None:
            where.append("i.index_id = ?")
            args.append(index_id)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY i.model_id, i.index_id"
        return [Iteration(*row) for row in self.conn.execute(sql, args)]

    # --- op_summary (outputs.md §3.1) -----------------------------------------------------------------
    def op_summary(self, iteration: Iteration) -> Table:
        """Rows in execution order, then the total row (Layer Id '-'). All formulas and rounding in SQL."""
        metric_names = self.metric_set.names if self.has_pmu else []
        columns = ["Layer Id", "Ori Layer Name", "Layer Name", "Layer Type", "Time(us)", "Time Ratio"] + metric_names
        kinds = [TEXT, TEXT, TEXT, TEXT, TIME, PERCENT] + [METRIC_KINDS[k] for k in self.metric_set.kinds()]
        core = f"t.task_type = {AA_CORE}"
        per_task = [f"CASE WHEN {core} THEN {expr} END" for expr in self.metric_set.sql("p.c{}", "p.total_cycles")]
        totals = self.metric_set.sql(f"sum(CASE WHEN {core} THEN p.c{{}} END)",
                                     f"sum(CASE WHEN {core} THEN p.total_cycles END)")
        tasks = (" FROM task t"
                 " LEFT JOIN pmu p ON p.stream_id = t.stream_id AND p.task_id = t.task_id AND p.exec_n = t.exec_n"
                 " WHERE t.model_id = :model AND t.index_id = :index")
        source = tasks.replace(" FROM task t", " FROM task t LEFT JOIN layer l ON l.model_id = t.model_id"
                               " AND l.layer_id = t.layer_id")
        args = {"model": iteration.model_id, "index": iteration.index_id}
        total_select = ", ".join(_na(e) for e in ["'-'", "'-'", "'-'", "'-'", "round(coalesce(sum(t.dur_us), 0), 3)",
                                                  "CASE WHEN count(*) THEN 100.0 END"]
                                 + (totals if metric_names else []))
        total_row = list(self.conn.execute(f"SELECT sum(t.dur_us), {total_select}{tasks}", args).fetchone())
        args["total"] = total_row.pop(0)
        select = ", ".join(_na(e) for e in [
            "t.layer_id", "l.ori_layer_name", "l.layer_name", "l.layer_type", "round(t.dur_us, 3)",
            "round(t.dur_us * 100.0 / :total, 4)"] + (per_task if metric_names else []))
        rows = self.conn.execute(f"SELECT {select}{source} ORDER BY t.at_syscnt, t.seq", args).fetchall()
        rows.append(total_row)
        return Table("AA Core metrics", columns, kinds, rows, final=True)

    # --- op_statistic (outputs.md §3.2) ---------------------------------------------------------------
    def op_statistic(self, model_id: int, index_id: Optional[int] = None) -> Table:
        columns = ["Task ID", "Stream ID", "OP Name", "Task Type", "Total Time Ratio(%)", "Total Time(us)", "Count",
                   "Avg(us)", "Max(us)", "Min(us)"]
        kinds = [INT, INT, TEXT, TEXT, PERCENT, TIME, INT, TIME, TIME, TIME]
        where = "t.model_id = :model AND t.index_id IS NOT NULL AND t.dur_us IS NOT NULL"
        if index_id is not None:
            where += " AND t.index_id = :index"
        type_names = " ".join(f"WHEN {k} THEN '{v}'" for k, v in TASK_TYPES.items())
        rows = self.conn.execute(
            "SELECT t.task_id, t.stream_id, coalesce(max(l.layer_name), 'N/A'),"
            f" CASE t.task_type {type_names} ELSE t.task_type END,"
            " round(sum(t.dur_us) * 100.0 / sum(sum(t.dur_us)) OVER (), 4), round(sum(t.dur_us), 3), count(*),"
            " round(avg(t.dur_us), 3), round(max(t.dur_us), 3), round(min(t.dur_us), 3) FROM task t"
            " LEFT JOIN layer l ON l.model_id = t.model_id AND l.layer_id = t.layer_id"
            f" WHERE {where} GROUP BY t.stream_id, t.task_id, t.task_type"
            " ORDER BY sum(t.dur_us) DESC, t.stream_id, t.task_id", {"model": model_id, "index": index_id})
        return Table("Op statistic", columns, kinds, [list(r) for r in rows])

    # --- acl_statistic (outputs.md §3.3) --------------------------------------------------------------
    def acl_statistic(self) -> Table:
        columns = ["Process ID", "Thread ID", "Type", "Name", "Total Time Ratio(%)", "Total Time(us)", "Count",
                   "Avg(us)", "Max(us)", "Min(us)"]
        kinds = [INT, INT, TEXT, TEXT, PERCENT, TIME, INT, TIME, TIME, TIME]
        type_names = " ".join(f"WHEN {k} THEN '{v}'" for k, v in API_TYPES.items())
        scale = self._host_us_scale()
        rows = self.conn.execute(
            f"SELECT pid, tid, CASE api_type {type_names} ELSE CAST(api_type AS TEXT) END, name,"
            " round(sum([end] - start) * 100.0 / sum(sum([end] - start)) OVER (), 4),"
            " round(sum([end] - start) * :scale, 3), count(*), round(avg([end] - start) * :scale, 3),"
            " round(max([end] - start) * :scale, 3), round(min([end] - start) * :scale, 3)"
            " FROM acl_api GROUP BY pid, tid, api_type, name"
            " ORDER BY sum([end] - start) DESC, pid, tid, api_type, name", {"scale": scale})
        return Table("ACL statistic", columns, kinds, [list(r) for r in rows])

    def _host_us_scale(self) -> float:
        """µs per host timestamp unit: ns normally, CPU ticks when CPU[0].Frequency is set."""
        cpu_mhz = self.clock.get("cpu_mhz")
        return 1.0 / cpu_mhz if cpu_mhz else 0.001

    # --- frequency (outputs.md §4) --------------------------------------------------------------------
    def frequency(self) -> Table:
        table = Table("Frequency", ["Clock", "Time(us)", "MHz"], [TEXT, TIME, TEXT])
        table.rows.append(["AA Core", None, _plain_number(self.aic_mhz)])
        table.rows.append(["HWTS", None, _plain_number(self.hwts_mhz)])
        for syscnt, mhz in self.conn.execute("SELECT syscnt, mhz FROM freq_change ORDER BY syscnt, seq"):
            table.rows.append(["AA Core change", self.device_time_us(syscnt), _plain_number(mhz)])
        return table

    def aic_mhz_at(self, syscnt: int) -> Optional[float]:
        row = self.conn.execute("SELECT mhz FROM freq_change WHERE syscnt <= ? ORDER BY syscnt DESC, seq DESC LIMIT 1",
                                (syscnt,)).fetchone()
        return float(row[0]) if row else self.aic_mhz

    # --- time -----------------------------------------------------------------------------------------
    def device_time_us(self, syscnt: int) -> float:
        """µs relative to the collection start (timeline ``ts``)."""
        c = self.clock
        ns = (syscnt - c["dev_cntvct"]) * 1000.0 / c["hwts_mhz"] + c["host_mono_ns"]
        return (ns - c["clock_monotonic_raw_ns"]) / 1000.0

    def host_time_us(self, value: int) -> float:
        c = self.clock
        ns = value * 1000.0 / c["cpu_mhz"] if c.get("cpu_mhz") else float(value)
        return (ns - c["clock_monotonic_raw_ns"]) / 1000.0

    def notices(self) -> List[Tuple[str, str]]:
        return list(self.conn.execute("SELECT level, message FROM notice ORDER BY seq"))


@contextlib.contextmanager
def open_report(result_dir: Path) -> Iterator[Report]:
    report = Report(result_dir)
    try:
        yield report
    finally:
        report.close()


def _na(expression: str) -> str:
    return f"coalesce({expression}, 'N/A')"


def _float(value) -> Optional[float]:
    try:
        return float(json.loads(value)) if value not in (None, "null") else None
    except (TypeError, ValueError):
        return None


def _plain_number(value):
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value
