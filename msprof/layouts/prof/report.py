"""PROF reports: op_summary, op_statistic, task_time and api_statistic of one device, with the reference
analyser's column names, rounding and order (docs/prof-format.md §4–8; deliberate differences in
docs/prof.md), computed in SQL and streamed (msprof.tables).

The device database is opened read-only with the host database ATTACHed as ``host`` (an empty one when the
PROF_ directory has no host data, so every query is the same). One query (msprof.layouts.prof.tasks) gives
every timed device task with its launch (msprof.layouts.prof.associate), times in the reference's float
arithmetic (msprof.layouts.timebase) and its PMU record; the tables select from it: op_summary and task_time
(.op_summary), op_statistic and api_statistic (.statistics), the orders of tasks that start together (.ties).
"""
import functools
import json
import sqlite3
from typing import List, Optional, Tuple

from msprof import store
from msprof.contract import Iteration, Report, Selection
from msprof.layouts.prof import communication_rows, statistics, tasks
from msprof.layouts.prof.op_summary import any_unseen, summary_tables
from msprof.layouts.prof.families.ffts_pmu import PLATFORMS as STARS_PMU_PLATFORMS, StarsPmu
from msprof.layouts.prof.schema import HOST
from msprof.layouts.prof.ties import FirstAppearance, GeOrder
from msprof.layouts.timebase import ProfTime
from msprof.metrics import AscendMetrics, event_items
from msprof.tables import INT, TEXT, Column, Table


def _py_round(value, digits):
    return None if value is None else round(value, digits)


class ProfReport(Report):
    """Read-only view of one device of a PROF_ directory (its database plus the host database)."""

    def __init__(self, unit):
        super().__init__(unit)
        host = unit.databases[0].path if len(unit.databases) > 1 else None
        if host is not None and host.is_file():
            self.conn.execute("ATTACH DATABASE ? AS host", (store.readonly_uri(host),))
            self.has_host = True
            self.schemas = ("host", "main")
        else:
            self.conn.execute("ATTACH DATABASE ':memory:' AS host")
            _create_empty(self.conn)
            self.has_host = False
        self.conn.create_function("py_round", 2, _py_round, deterministic=True)
        self.without_devices = self.device_number == "host"        # (importer.import_no_device)
        self.platform = self.meta.get("platform_version", "")
        self.drv_version = int(self.meta_number("drv_version") or 0)
        self.is_stars = self.platform.isdigit() and int(self.platform) >= 5
        self.hwts_mhz = float(self.clock.get("hwts_mhz") or 0)
        self.aic_mhz = self.meta_number("aic_mhz")
        self.ai_core_num = self.meta_number("ai_core_num")
        sample = self.meta_json("sample") or {}
        slots = [e for (e,) in self.conn.execute("SELECT event_id FROM pmu_event ORDER BY slot")]
        self.has_pmu = self.count("pmu") > 0
        texts = [text for _event, text in event_items(sample)][:len(slots)]
        # (platform 5's AI Core PMU is ffts_profile's, both cores per task: ffts_pmu.StarsPmu)
        # (made for the export of every task or of an iteration: StarsPmu's block_counts)
        self.stars_pmu = (functools.partial(StarsPmu, self.conn, sample, self.aic_mhz, self.ai_core_num,
                                            self.meta_number("aiv_num"))
                          if self.platform in STARS_PMU_PLATFORMS and self._has_rows("ffts_pmu") else None)
        self.metrics = (AscendMetrics(str(sample.get("ai_core_metrics") or ""), slots, self.platform, texts)
                        if self.has_pmu and self.stars_pmu is None else None)
        self.host_cpu_mhz = None
        if self.has_host:
            host_meta = dict(self.conn.execute("SELECT key, value FROM host.meta"))
            self.host_cpu_mhz = (_json(host_meta.get("clock")) or {}).get("cpu_mhz")
        self.time = ProfTime(self.clock, self.hwts_mhz, self.host_cpu_mhz)
        # the queries' parameters: the time base's, and the device the host's launches name
        self.params = dict(self.time.params, dev=self.device_number if isinstance(self.device_number, int) else -1)

    def device_column(self, constant: bool = True) -> Column:
        """Device_id: every row's (``constant``), or the rows carry it."""
        kind = INT if isinstance(self.device_number, int) else TEXT
        return Column("Device_id", kind, constant=self.device_number) if constant else Column("Device_id", kind)

    def _has_rows(self, table: str) -> bool:
        """Whether the device database has ``table`` (not one an older msprof made) with a row in it."""
        return (self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
                is not None and self.conn.execute(f"SELECT 1 FROM [{table}] LIMIT 1").fetchone() is not None)

    # --- facts -------------------------------------------------------------------------------------
    @property
    def has_tasks(self) -> bool:
        return self.count("task") > 0

    @functools.cached_property
    def has_tensors(self) -> bool:
        """Whether the host recorded the ops' tensors (tensor_info)."""
        return self.has_host and self.conn.execute("SELECT 1 FROM host.tensor LIMIT 1").fetchone() is not None

    @functools.cached_property
    def has_ties(self) -> bool:
        """Whether two timed tasks start at the same moment (most runs: none)."""
        return self.conn.execute("SELECT 1 FROM task_key LIMIT 1").fetchone() is not None

    # the orders of tasks that start together: one each per report, so that what they work out once (from
    # every launch) serves every table and part this report writes
    @functools.cached_property
    def ge_order(self) -> GeOrder:
        return GeOrder(self)

    @functools.cached_property
    def first_appearance(self) -> FirstAppearance:
        return FirstAppearance(self, self.ge_order)

    @functools.cached_property
    def unseen_tasks(self) -> bool:
        """Whether a task may have ended before the collection began (``any_unseen``)."""
        return any_unseen(self)

    @functools.cached_property
    def communication_ops(self) -> int:
        """How many COMMUNICATION rows op_summary has (communication_rows: made once, in a TEMP table)."""
        return communication_rows.make(self)

    @property
    def has_api(self) -> bool:
        return bool(self.conn.execute("SELECT 1 FROM host.api LIMIT 1").fetchone())

    def models(self) -> List[dict]:
        return [{"model_id": m, "model_name": n, "iterations": i}
                for m, n, i in self.conn.execute("SELECT model_id, model_name, iterations FROM host.model"
                                                 " ORDER BY model_id")]

    @functools.cached_property
    def _ran(self) -> Optional[set]:
        return self.device_models()

    def device_models(self) -> Optional[set]:
        """The models whose tasks the host launched on this device, when it launched on several devices (else
        None: every model the host ran is this device's, and a host without devices reports all its models)."""
        if self.without_devices or not self.conn.execute(
                "SELECT 1 FROM host.launch_count WHERE device_id != :dev LIMIT 1", self.params).fetchone():
            return None
        return {m for (m,) in self.conn.execute("SELECT DISTINCT model_id FROM host.launch WHERE device_id = :dev"
                                                " AND model_id IS NOT NULL", self.params)}

    def iterations(self, selection: Selection = Selection()) -> List[Iteration]:
        """The recorded model executions of this device: of the models the host launched on it (with several
        devices, a model another device ran is not this one's to select: its files would be empty)."""
        ran = self._ran
        out = []
        for m in self.models():
            if selection.model_id is not None and m["model_id"] != selection.model_id:
                continue
            if ran is not None and m["model_id"] not in ran:
                continue
            for index in range(1, (m["iterations"] or 0) + 1):
                if selection.iteration_id is None or index == selection.iteration_id:
                    out.append(Iteration(m["model_id"], m["model_name"] or str(m["model_id"]), index))
        return out

    # --- the tables (msprof.layouts.prof.op_summary, .statistics) and the tasks' span (.tasks) --------------
    def op_summary(self, selection: Selection = Selection(), part: Optional[Tuple[int, int]] = None,
                   pmu: bool = True, as_file: bool = True) -> Table:
        """The op_summary rows in start order; ``part`` (k, n): only the k-th of n ranges of start times (two
        processes write one file), each range starting with the wait since the row before it. ``pmu=False``:
        without the PMU columns (show: their join and formulas are most of the cost). ``as_file=False``: an
        iteration's rows as the whole run's export has them, without the columns naming the iteration and with
        the STARS PMU of block counts (the reference's file of an iteration has none: StarsPmu)."""
        return summary_tables(self, selection, part, pmu, as_file=as_file)[0]

    def op_summary_and_task_time(self, part: Optional[Tuple[int, int]] = None) -> List[Table]:
        """op_summary (everything) and task_time, of one RowSource: task_time has every timed task, op_summary
        those it includes, both in start order. csv prints both in one pass over the tasks (a second would
        cost their host joins again); a renderer of values reads each table's own query. The same pass
        gathers op_statistic's sums per op (statistics.OpTotals: op_statistic's ``gathered``)."""
        return summary_tables(self, Selection(), part, True, task_time=True)

    def op_statistic(self, selection: Selection = Selection(), batches=None, gathered=None) -> Table:
        return statistics.op_statistic(self, selection, batches, gathered)

    def op_statistic_rows(self, selection: Selection = Selection(), gathered=None) -> List[tuple]:
        return statistics.op_statistic_rows(self, selection, gathered)

    def op_spread(self, selection: Selection = Selection()) -> dict:
        return statistics.op_spread(self, selection)

    def api_spread(self) -> dict:
        return statistics.api_spread(self)

    def api_statistic(self) -> Table:
        return statistics.api_statistic(self)

    def task_fields(self, selection: Selection) -> dict:
        """What the task query (msprof.layouts.prof.tasks) computes each field as, for a query of ``selection``."""
        return tasks.TASK_FIELDS

    def task_span(self, selection: Selection):
        """(first, last) host timestamps (as recorded) of the selected tasks and their launches, or None."""
        return tasks.task_span(self, selection)


def _json(value):
    try:
        return json.loads(value) if value is not None else None
    except ValueError:
        return None


def _create_empty(conn: sqlite3.Connection) -> None:
    for name, table in HOST.tables.items():
        names = ", ".join(f"[{c}]" for c in table.columns)
        conn.execute(f"CREATE TABLE host.[{name}] ({names})")

