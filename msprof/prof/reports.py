"""PROF reports: op_summary, op_statistic, api_statistic and task_time of one device, with the column names,
rounding and order of the reference analyser's files (docs/prof-format.md §4–8; deliberate differences in
docs/prof.md).

A ``ProfReport`` opens ``device_N/sqlite/msprof.db`` read-only and ATTACHes ``host/sqlite/msprof.db`` as
``host``. Values are rounded here, the way the reference rounds them (the JOB renderers would round
differently), so every cell leaves this module final: numbers, or text for times since the epoch (µs with 3
decimals need more digits than a float has), or None for N/A.
"""
import contextlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from msprof import store
from msprof.prof import decoders as dec
from msprof.prof.metrics import AscendMetrics
from msprof.reports import INT, TEXT, Table

UNKNOWN_MODEL = 4294967295
NOT_IN_OP_SUMMARY = ("WRITE_BACK", "INVALID")
OP_SUMMARY_BASE = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
                   "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Num"]
OP_SUMMARY_TENSOR = ["HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                     "Output Data Types", "Output Formats"]
OP_STATISTIC = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                "Max Time(us)", "Ratio(%)"]
API_STATISTIC = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]
TASK_TIME = ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)", "task_start(us)",
             "task_stop(us)"]
# pre-rounded numbers: renderers leave them as they are
NUMBER = "number"


def _json(value, default=None):
    try:
        return json.loads(value) if value is not None else default
    except ValueError:
        return default


class ProfReport:
    """Read-only view of one device of a PROF_ directory (its database plus the host database)."""

    def __init__(self, device_dir: Path, host_dir: Optional[Path]):
        self.device_dir = Path(device_dir)
        self.result_dir = self.device_dir
        self.conn = store.open_readonly(store.db_path(device_dir))
        self.meta = store.read_meta(self.conn)
        self.has_host = False
        if host_dir is not None and store.db_path(host_dir).is_file():
            uri = f"file:{store.db_path(host_dir)}?mode=ro"
            self.conn.execute("ATTACH DATABASE ? AS host", (uri,))
            self.has_host = True
        self.device_id = self.meta.get("device_id", "0")
        self.platform = self.meta.get("platform_version", "")
        self.is_stars = self.platform.isdigit() and int(self.platform) >= 5
        clock = _json(self.meta.get("clock"), {})
        self.hwts_mhz = float(clock.get("hwts_mhz") or 0)
        self.dev_cnt = clock.get("dev_cntvct", 0) / 1e9
        self.host_mon = clock.get("host_mono_ns", 0) / 1e9
        self.offset_us = float(clock.get("collection_begin_us") or 0) - float(
            clock.get("clock_monotonic_raw_ns") or 0) / 1000
        self.begin_us = float(clock.get("collection_begin_us") or 0)
        self.host_cpu_mhz = None
        self.aic_mhz = _json(self.meta.get("aic_mhz"))
        self.ai_core_num = _json(self.meta.get("ai_core_num"))
        sample = _json(self.meta.get("sample"), {}) or {}
        slots = [e for (e,) in self.conn.execute("SELECT event_id FROM pmu_event ORDER BY slot")]
        self.has_pmu = self.conn.execute("SELECT count(*) FROM pmu").fetchone()[0] > 0
        self.metrics = AscendMetrics(str(sample.get("ai_core_metrics") or ""), slots, self.platform) \
            if self.has_pmu else None
        if self.has_host:
            host_meta = dict(self.conn.execute("SELECT key, value FROM host.meta"))
            host_clock = _json(host_meta.get("clock"), {}) or {}
            self.host_cpu_mhz = host_clock.get("cpu_mhz")

    def close(self):
        self.conn.close()

    # --- time (docs/prof-format.md §4) ------------------------------------------------------------
    def syscnt_ns(self, syscnt: int) -> float:
        return float(syscnt - self.dev_cnt * 1e9) / (self.hwts_mhz * 1e6) * 1e9 + self.host_mon * 1e9

    def local_text(self, t_ns: float) -> str:
        """µs since the epoch with 3 decimals (the reference prints a TAB after it; msprof does not)."""
        return str((Decimal(repr(t_ns)) / Decimal(1000) + Decimal(repr(self.offset_us))).quantize(Decimal("0.000")))

    def local_us(self, t_ns: float) -> float:
        return t_ns / 1000 + self.offset_us

    def host_ns(self, value: int) -> float:
        """Host timestamp → ns (ticks of CPU[0].Frequency MHz when that is set)."""
        return value * 1000.0 / self.host_cpu_mhz if self.host_cpu_mhz else float(value)

    def host_duration_us(self, delta: int) -> float:
        return delta / self.host_cpu_mhz if self.host_cpu_mhz else delta / 1000

    # --- selection ----------------------------------------------------------------------------------
    @property
    def has_tasks(self) -> bool:
        return self.conn.execute("SELECT count(*) FROM task").fetchone()[0] > 0

    @property
    def has_api(self) -> bool:
        return self.has_host and self.conn.execute("SELECT count(*) FROM host.api").fetchone()[0] > 0

    def models(self) -> List[dict]:
        if not self.has_host:
            return []
        return [{"model_id": m, "model_name": n, "iterations": i}
                for m, n, i in self.conn.execute("SELECT model_id, model_name, iterations FROM host.model"
                                                 " ORDER BY model_id")]

    def tasks(self, model_id: Optional[int] = None, iteration: Optional[int] = None) -> Iterator[dict]:
        """Device tasks with both times, in start order, each with its host task (or None fields) and PMU."""
        pmu_cols = ", ".join(f"p.c{i}" for i in range(8))
        host_cols = ("h.op_name, h.op_type, h.task_type, h.block_dim, h.op_flag, h.op_state, h.model_id,"
                     " h.iteration, h.kernel_name, h.thread, h.ts") if self.has_host else ", ".join(["NULL"] * 11)
        host_join = ""
        if self.has_host:
            # one launch of the id: every execution gets it (static graph); else the n-th takes the n-th
            host_join = (" LEFT JOIN host.host_task h ON h.device_id = ? AND h.stream_id = t.stream_id"
                         " AND h.task_id = t.task_id AND (h.occ = t.occ OR (h.cnt = 1 AND h.occ = 0))")
        where, args = [], []
        if not self.has_host and (model_id is not None or iteration is not None):
            return
        if self.has_host:
            args.append(int(self.device_id) if str(self.device_id).isdigit() else -1)
        if model_id is not None:
            where.append("h.model_id = ?")
            args.append(model_id)
        if iteration is not None:
            where.append("h.iteration = ?")
            args.append(iteration)
        sql = (f"SELECT t.seq, t.stream_id, t.task_id, t.task_type, t.start_syscnt, t.end_syscnt, {host_cols},"
               f" p.total_cycles, {pmu_cols} FROM task t" + host_join +
               " LEFT JOIN pmu p ON p.stream_id = t.stream_id AND p.task_id = t.task_id AND p.exec_n = t.exec_n"
               + " WHERE " + " AND ".join(["t.occ IS NOT NULL"] + where) + " ORDER BY t.start_syscnt, t.seq")
        names = ("seq", "stream_id", "task_id", "hw_type", "start", "end", "op_name", "op_type", "task_type",
                 "block_dim", "op_flag", "op_state", "model_id", "iteration", "kernel_name", "thread", "track_ts",
                 "cycles")
        for row in self.conn.execute(sql, args):
            task = dict(zip(names, row))
            task["counters"] = row[len(names):]
            task["start_ns"] = self.syscnt_ns(task["start"])
            task["end_ns"] = self.syscnt_ns(task["end"])
            task["dur_ns"] = task["end_ns"] - task["start_ns"]
            yield task

    def _in_collection(self, task) -> bool:
        """The reference keeps a task that starts after the collection began, or spans that instant."""
        start = self.local_us(task["start_ns"])
        return start > self.begin_us or (start < self.begin_us < self.local_us(task["end_ns"]))

    # --- op_summary ---------------------------------------------------------------------------------
    def op_summary(self, model_id=None, iteration=None) -> Table:
        columns = list(OP_SUMMARY_BASE)
        if self.is_stars:
            columns.append("Mix Block Num")
        columns += OP_SUMMARY_TENSOR
        if self.is_stars:
            columns.append("Context ID")
        pmu_names = self.metrics.names if self.metrics else []
        columns += pmu_names
        table = Table("op_summary", columns, [TEXT] * len(columns))
        prev = None
        for task in self.tasks(model_id, iteration):
            task_type = task["task_type"] or "UNKNOWN"
            if task_type in NOT_IN_OP_SUMMARY or not self._in_collection(task):
                continue
            if prev is None:
                wait = 0
            else:
                wait = round(max(task["start_ns"] - prev["start_ns"] - prev["dur_ns"], 0) / 1000, 3)
            prev = task
            block_dim = task["block_dim"]
            model = task["model_id"] if task["model_id"] is not None else UNKNOWN_MODEL
            row = [self.device_id, model, task["task_id"], task["stream_id"], task["op_name"], task["op_type"],
                   task["op_state"], task_type, self.local_text(task["start_ns"]), round(task["dur_ns"] / 1000, 3),
                   wait, None if block_dim is None else block_dim & 0xFFFF]
            if self.is_stars:
                row.append(None if block_dim is None else (block_dim & 0xFFFF) * (block_dim >> 16 & 0xFFFF))
            row.append(None if task["op_flag"] is None else ("YES" if task["op_flag"] else "NO"))
            row += [None] * 6
            if self.is_stars:
                row.append(None)
            if pmu_names:
                if task["cycles"] is None:
                    row += [None] * len(pmu_names)
                else:
                    row += self.metrics.values(task["cycles"], task["counters"], float(self.aic_mhz or 0),
                                               None if block_dim is None else block_dim & 0xFFFF,
                                               self.ai_core_num, task["dur_ns"])
            table.rows.append(row)
        return table

    # --- op_statistic -------------------------------------------------------------------------------
    def op_statistic(self, model_id=None, iteration=None) -> Table:
        groups: Dict[tuple, list] = {}
        for task in self.tasks(model_id, iteration):
            if task["op_type"] is None or task["task_type"] in NOT_IN_OP_SUMMARY:
                continue
            if self.local_us(task["start_ns"]) <= self.begin_us:
                continue
            g = groups.setdefault((task["op_type"], task["task_type"]), [0, 0.0, None, None])
            d = task["dur_ns"]
            g[0] += 1
            g[1] += d
            g[2] = d if g[2] is None else min(g[2], d)
            g[3] = d if g[3] is None else max(g[3], d)
        grand = sum(g[1] for g in groups.values())
        rows = []
        for (op_type, task_type), (count, total, low, high) in groups.items():
            ratio = round(round(total / grand * 100, 6), 3) if grand else 0
            rows.append([self.device_id, op_type, task_type, count, round(round(total, 6) / 1000, 3),
                         round(round(low, 6) / 1000, 3), round(round(total / count, 6) / 1000, 3),
                         round(round(high, 6) / 1000, 3), ratio])
        rows.sort(key=lambda r: (-r[8], -r[4], r[1], r[2]))
        return Table("op_statistic", OP_STATISTIC, [TEXT, TEXT, TEXT, INT] + [NUMBER] * 5, rows)

    # --- task_time ----------------------------------------------------------------------------------
    def task_time(self) -> Table:
        rows = []
        for task in self.tasks():
            kernel = task["kernel_name"] or task["op_name"]
            kind = task["task_type"] or dec.HWTS_TASK_TYPES.get(task["hw_type"], str(task["hw_type"]))
            rows.append([self.device_id, kernel, kind, task["stream_id"], task["task_id"],
                         round(task["dur_ns"] / 1000, 3), self.local_text(task["start_ns"]),
                         self.local_text(task["start_ns"] + task["dur_ns"])])
        rows.sort(key=lambda r: r[6])
        return Table("task_time", TASK_TIME, [TEXT] * 5 + [NUMBER, TEXT, TEXT], rows)

    # --- api_statistic ------------------------------------------------------------------------------
    def _api_names_sql(self) -> str:
        return (
            "SELECT CASE WHEN a.level IN (20000, 15000, 10000, 5000)"
            " THEN coalesce(tn.name, CAST(a.struct_type AS TEXT))"
            " ELSE coalesce(hs.text, CAST(a.item_id AS TEXT)) END AS api_name, a.level, a.[end] - a.begin"
            " FROM host.api a LEFT JOIN host.type_name tn ON tn.level = a.level AND tn.type = a.struct_type"
            " LEFT JOIN host.hash_string hs ON hs.hash = a.item_id WHERE a.from_events = 0")

    def api_statistic(self) -> Table:
        table = Table("api_statistic", API_STATISTIC, [TEXT, TEXT, TEXT, NUMBER, INT] + [NUMBER] * 4)
        if not self.has_host:
            return table
        groups: Dict[tuple, list] = {}
        for name, level, delta in self.conn.execute(self._api_names_sql()):
            d = self.host_duration_us(delta)
            g = groups.setdefault((name, level), [0.0, 0, d, d, 0.0])
            g[0] += d
            g[1] += 1
            g[2] = min(g[2], d)
            g[3] = max(g[3], d)
        averages = {k: round(round(g[0], 3) / g[1], 3) for k, g in groups.items()}
        for name, level, delta in self.conn.execute(self._api_names_sql()):
            d = self.host_duration_us(delta)
            groups[(name, level)][4] += round((d - averages[(name, level)]) ** 2, 3)
        for (name, level) in sorted(groups, key=lambda k: (k[0], dec.LEVELS.get(k[1], str(k[1])))):
            total, count, low, high, squares = groups[(name, level)]
            table.rows.append([self.device_id, dec.LEVELS.get(level, str(level)), name, round(total, 3), count,
                               averages[(name, level)], round(low, 3), round(high, 3), round(squares / count, 3)])
        return table

    def notices(self):
        rows = list(self.conn.execute("SELECT level, message FROM notice ORDER BY seq"))
        if self.has_host:
            rows += list(self.conn.execute("SELECT level, message FROM host.notice ORDER BY seq"))
        return rows


@contextlib.contextmanager
def open_prof_report(device_dir: Path, host_dir: Optional[Path]) -> Iterator[ProfReport]:
    report = ProfReport(device_dir, host_dir)
    try:
        yield report
    finally:
        report.close()
