"""PROF reports: op_summary, op_statistic, task_time and api_statistic of one device, with the reference
analyser's column names, rounding and order (docs/prof-format.md §4–8; deliberate differences in
docs/prof.md), computed in SQL and streamed (msprof.tables).

The device database is opened read-only with the host database ATTACHed as ``host`` (an empty one when the
PROF_ directory has no host data, so every query is the same). One query, ``_tasks``, gives every timed
device task with its launch (msprof.layouts.prof.associate), times in the reference's float arithmetic and
its PMU record; the tables select from it.
"""
import functools
import sqlite3
from itertools import repeat
from operator import itemgetter, sub, truediv
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from msprof import store
from msprof.decode.api_event import LEVELS, NAMED_BY_TYPE
from msprof.layouts.base import Iteration, Report, Selection
from msprof.layouts.prof.associate import UNKNOWN_MODEL
from msprof.layouts.prof.schema import HOST
from msprof.layouts.prof.tensors import COLUMNS as TENSOR_COLUMNS
from msprof.layouts.timebase import ProfTime
from msprof.layouts.where import selection_sql
from msprof.metrics import AscendMetrics, aicore_time_sql, counter_ratios, event_items, py_round_sql
from msprof.tables import (EPOCH_US, INT, NA, NUMBER, ROUND3, SQLITE_ROUND3, TEXT, Column, Running, Source, Table, Tap,
                           Ties, part_cut)

# From this driver version on, the reference keys host and device tasks by batch id too ("all data export"),
# except on these chips (its ChipManager's blacklist)
ALL_EXPORT_DRIVER = 0x072211
ALL_EXPORT_EXCEPT = ("0", "2", "11")
NOT_IN_OP_SUMMARY = ("WRITE_BACK", "INVALID")
_NOT_IN_OP_SUMMARY_SQL = ", ".join(f"'{t}'" for t in NOT_IN_OP_SUMMARY)
# op_statistic's tasks (and compare/advise's): those starting after the collection began, a task's start in
# monotonic ns against the beginning's (``_begin_mono_ns``) — not their epoch µs in floats, which cannot hold
# a fraction of a µs at 1.7e15
STARTED = "start_ns > :begin_mono_ns"
# tasks left out as unseen, read a page at a time (ProfReport._unseen)
UNSEEN_PAGE = 4096
HWTS_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK"}
# task_time's kernel_type of a device task no launch names: the reference's name of its type number (its
# TaskTimeViewer.get_device_task_type, sqe_type_map): the chip family's SQE type, "Other" for any other number
# and, on chip v2 (platform "1"), for every number
_HW_SQE = ["AI_CORE", "AI_CPU", "AIV_SQE", "PLACE_HOLDER_SQE", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE",
           "NOTIFY_RECORD_SQE", "NOTIFY_WAIT_SQE", "WRITE_VALUE_SQE", "SDMA_SQE", "MAX_SQE"]
_STARS_SQE = _HW_SQE[:9] + ["VQ6_SQE", "TOF_SQE", "SDMA_SQE", "VPC_SQE", "JPEGE_SQE", "JPEGD_SQE", "DSA_SQE",
                            "ROCCE_SQE", "PCIE_DMA_SQE", "HOST_CPU_SQE", "CDQM_SQE", "C_CORE_SQE"]
_V6_SQE = {0: "AI_CORE", 1: "AIV_SQE", 2: "FUSION", 3: "PLACE_HOLDER_SQE", 4: "AICPU_H", 5: "AICPU_D",
           6: "NOTIFY_RECORD_SQE", 7: "NOTIFY_WAIT_SQE", 8: "WRITE_VALUE_SQE", 9: "UBDMA", 10: "ASYNCDMA",
           11: "SDMA_SQE", 12: "VPC_SQE", 13: "JPEGE_SQE", 14: "JPEGD_SQE", 15: "CMO_SQE", 16: "CCU_SQE",
           20: "CONDITION_SQE", 21: "END_SQE"}
SQE_TYPES = {"1": {}, "15": _V6_SQE, "16": _V6_SQE, **{p: dict(enumerate(_STARS_SQE)) for p in ("5", "7", "8", "11")}}
DEFAULT_SQE_TYPES = dict(enumerate(_HW_SQE))
TASK_TIME_FIELDS = ("kernel_name", "op_name", "task_type", "hw_type", "stream_id", "task_id", "start_ns", "end_ns",
                    "ge", "exec_n", "launches")


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
        self.metrics = (AscendMetrics(str(sample.get("ai_core_metrics") or ""), slots, self.platform, texts)
                        if self.has_pmu else None)
        self.host_cpu_mhz = None
        if self.has_host:
            host_meta = dict(self.conn.execute("SELECT key, value FROM host.meta"))
            self.host_cpu_mhz = (_json(host_meta.get("clock")) or {}).get("cpu_mhz")
        self.time = ProfTime(self.clock, self.hwts_mhz, self.host_cpu_mhz)
        # the queries' parameters: the time base's, and the device the host's launches name
        self.params = dict(self.time.params, dev=self.device_number if isinstance(self.device_number, int) else -1)

    def _device_column(self, constant: bool = True) -> Column:
        """Device_id: every row's (``constant``), or the rows carry it."""
        kind = INT if isinstance(self.device_number, int) else TEXT
        return Column("Device_id", kind, constant=self.device_number) if constant else Column("Device_id", kind)

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
    def _ge_order(self) -> "_GeOrder":
        return _GeOrder(self)

    @functools.cached_property
    def _first_appearance(self) -> "_FirstAppearance":
        return _FirstAppearance(self, self._ge_order)

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

    # --- the tasks -------------------------------------------------------------------------------------
    # What a query of the tasks can ask for (SQL over the task t, its launch count lc, launch h and op o).
    # A subquery that is not flattened copies every column it carries into each row it hands on: each
    # table asks only for what it uses.
    TASK_FIELDS = {
        "seq": "t.seq", "stream_id": "t.stream_id", "task_id": "t.task_id", "hw_type": "t.task_type",
        "exec_n": "t.exec_n", "start_syscnt": "t.start_syscnt", "op_id": "o.op_id", "op_name": "o.op_name",
        "op_type": "o.op_type", "task_type": "coalesce(o.task_type, 'UNKNOWN')", "block_dim": "o.block_dim",
        "op_flag": "o.op_flag", "op_state": "o.op_state", "kernel_name": "o.kernel_name", "ge": "o.ge",
        "model_id": "CASE WHEN o.op_id IS NOT NULL THEN h.model_id END",
        "iteration": ("CASE WHEN o.op_id IS NULL THEN NULL WHEN h.iteration IS NULL AND lc.launches = 1"
                      " THEN t.exec_n + 1 ELSE h.iteration END"),
        "thread": "h.thread", "track_ts": "h.ts", "launch_seq": "h.seq", "call_begin": "h.call_begin",
        "launches": "lc.launches",
        **{field: f"tn.{field}" for _title, field in TENSOR_COLUMNS},
        "start_ns": ProfTime.device_ns_sql("t.start_syscnt"),
        "end_ns": ProfTime.device_ns_sql("t.end_syscnt"),
    }
    SELECTED = ("model_id", "iteration")       # what a --model-id/--iteration-id selection filters on

    def _tasks(self, fields, pmu: bool = False, span: str = "", order: str = "", inner=(), selected: bool = True,
               counters: Optional[List[int]] = None, within: Selection = Selection()) -> str:
        """Timed device tasks in start order (``order`` "DESC": backwards) with ``fields`` (TASK_FIELDS): their
        host launch and op (when an op task launched them) and times as the reference computes them; with
        ``pmu``, also their PMU record (total_cycles, c0…c7, each counter's ratio to the cycles ``r0``…``r7``)
        and aicore time before its rounding (``aicore_raw``), and the columns ``inner`` (SQL over the PMU
        record ``p``; ``counters``: only these counters c<slot>, by default all). ``span``: a condition on
        t.start_syscnt. ``selected``: also what a selection filters on (SELECTED). ``within``: only the tasks of
        this selection (its parameters are ``_where``'s): the query that wraps this one filters on the same
        fields, but only after the rows are made; this filter comes before their PMU join and columns."""
        columns = [f"{self.TASK_FIELDS[f]} AS {f}" for f in dict.fromkeys(tuple(fields) + (
            self.SELECTED if selected else ()))]
        join = ""
        if any(self.TASK_FIELDS[f].startswith("tn.") for f in fields):
            join = "LEFT JOIN host.tensor tn ON tn.tensor_id = h.tensor_id"
        if pmu:
            # the reference takes a single op's block count (for its AI Core time) only from the launches at or
            # after the collection's beginning on the host's clock (pmu_calculator: against warm-up's wrapped
            # ids); a single op launched before it is timed with 0 blocks, its AI Core time 0
            block = ("CASE WHEN h.model_id IS NULL AND h.ts < :host_begin THEN 0 ELSE (o.block_dim & 65535) END"
                     if self.params["host_begin"] is not None else "(o.block_dim & 65535)")
            aicore = aicore_time_sql("p.total_cycles", block, self.aic_mhz, self.ai_core_num)
            columns += [self._pmu_columns(counters),
                        f"CASE WHEN p.seq IS NULL THEN NULL ELSE {aicore} END AS aicore_raw"]
            columns += counter_ratios("p.") + list(inner)
            join += " LEFT JOIN pmu p ON p.stream_id = t.stream_id AND p.task_id = t.task_id AND p.exec_n = t.exec_n"
        return f"""
            SELECT {", ".join(columns)}
            FROM task t
            LEFT JOIN host.launch_count lc ON lc.device_id = :dev AND lc.stream_id = t.stream_id
                                           AND lc.task_id = t.task_id
            LEFT JOIN host.launch h ON h.device_id = :dev AND h.stream_id = t.stream_id AND h.task_id = t.task_id
                                    AND h.occ = CASE WHEN lc.launches = 1 THEN 0 ELSE t.exec_n END
            LEFT JOIN host.op o ON o.op_id = h.op_id
            {join}
            WHERE t.start_syscnt IS NOT NULL AND t.end_syscnt IS NOT NULL {span} {self._within(within)}
            ORDER BY t.start_syscnt {order}, t.seq {order} LIMIT -1 OFFSET 0"""

    def task_span(self, selection: Selection):
        """(first, last) host timestamps (as recorded) of the selected tasks and their launches, or None."""
        where, args = self._where(selection)
        tasks = self._tasks(("start_ns", "end_ns", "call_begin"), within=selection)
        lo, hi, call = self.conn.execute(f"SELECT min(start_ns), max(end_ns), min(call_begin) FROM ({tasks})"
                                         f" WHERE {where}", args).fetchone()
        if lo is None:
            return self._execution_span(selection) if self.without_devices else None
        if self.host_cpu_mhz:           # host timestamps are ticks
            lo, hi = lo * self.host_cpu_mhz / 1000, hi * self.host_cpu_mhz / 1000
        if call is not None:
            lo = min(lo, call)
        return int(lo) - 1, int(hi) + 1

    def _execution_span(self, selection: Selection):
        """A host without devices: (first, last) host timestamps of the selected model executions' calls."""
        where, args = self._where(selection)        # (model_id and iteration: model_exec's columns)
        lo, hi = self.conn.execute("SELECT min(a.begin), max(a.[end]) FROM host.model_exec m JOIN host.api a"
                                   f" ON a.seq = m.seq WHERE {where}", args).fetchone()
        return None if lo is None else (int(lo) - 1, int(hi) + 1)

    def _within(self, selection: Selection) -> str:
        """SQL over the joined task rows: ``AND`` the conditions of ``_where(selection)``."""
        where, _args = selection_sql(selection, self.TASK_FIELDS["model_id"], self.TASK_FIELDS["iteration"])
        return " ".join(f"AND {condition}" for condition in where)

    def _pmu_columns(self, counters: Optional[List[int]] = None) -> str:
        return ", ".join(["p.total_cycles"] + [f"p.c{i}" for i in (range(8) if counters is None else counters)])

    def _where(self, selection: Selection) -> Tuple[str, dict]:
        where, args = selection_sql(selection)
        return (" AND ".join(where) or "1"), dict(self.params, **args)

    # --- op_summary (docs/prof-format.md §5) and task_time (§8) -------------------------------------------
    def op_summary(self, selection: Selection = Selection(), part: Optional[Tuple[int, int]] = None,
                   pmu: bool = True) -> Table:
        """The op_summary rows in start order; ``part`` (k, n): only the k-th of n ranges of start times (two
        processes write one file), each range starting with the wait since the row before it. ``pmu=False``:
        without the PMU columns (show: their join and formulas are most of the cost)."""
        return self._summary_tables(selection, part, pmu)[0]

    def op_summary_and_task_time(self, part: Optional[Tuple[int, int]] = None) -> List[Table]:
        """op_summary (everything) and task_time, of one Source: task_time has every timed task, op_summary
        those it includes, both in start order. csv prints both in one pass over the tasks (a second would
        cost their host joins again); a renderer of values reads each table's own query. The same pass
        gathers op_statistic's sums per op (``_OpTotals``: op_statistic's ``gathered``)."""
        return self._summary_tables(Selection(), part, True, task_time=True)

    def _summary_tables(self, selection: Selection, part: Optional[Tuple[int, int]], pmu: bool,
                        task_time: bool = False) -> List[Table]:
        """op_summary (and task_time, with op_statistic's sums gathered) over one Source: the timed tasks in
        start order with their launch and op, their times as the reference computes them (``start_ns``,
        ``dur``, epoch ns ``e_start``/``e_stop``) and, with ``pmu``, their PMU record and metrics
        (msprof.metrics.AscendMetrics)."""
        where, args = self._where(selection)
        metrics = self.metrics if pmu else None
        ties = self.has_ties
        fields = ("seq", "start_syscnt", "op_id", "ge", "model_id", "task_id", "stream_id", "op_name", "op_type",
                  "op_state", "task_type", "block_dim", "op_flag", "start_ns", "end_ns")
        fields += TASK_TIME_FIELDS if task_time else ()
        fields += tuple(field for _title, field in TENSOR_COLUMNS) if self.has_tensors else ()
        span, previous = "", None
        ge_order = self._ge_order
        if part is not None:
            args["lo"], args["hi"] = self._part_bounds(*part)
            span = "AND t.start_syscnt >= :lo AND t.start_syscnt < :hi"
            previous = self._last_before(where, args, ge_order)
        derived = [f"{py_round_sql('aicore_raw', 2)} AS aicore2"] if metrics else []
        derived += ["end_ns - start_ns AS dur", f"{ProfTime.epoch_ns_sql('start_ns')} AS e_start",
                    f"{ProfTime.epoch_ns_sql('(start_ns + (end_ns - start_ns))')} AS e_stop"]
        if metrics:
            derived += metrics.outer("(end_ns - start_ns)", self.aic_mhz, self.ai_core_num)
        tasks = self._tasks(fields, metrics is not None, span, inner=metrics.inner("p.") if metrics else (),
                            selected=not selection.everything, counters=metrics.counters() if metrics else None,
                            within=selection)
        source = Source(self.conn, f"SELECT *, {', '.join(derived)} FROM ({tasks}) LIMIT -1 OFFSET 0", args,
                        order="start_syscnt", taps=[_OpTotals()] if task_time else [])

        ops = "SELECT {} FROM host.op"
        task_types = f"{ops.format('task_type')} UNION ALL SELECT 'UNKNOWN'"
        columns = [self._device_column(),
                   Column("Model ID", INT, sql=f"coalesce(model_id, {UNKNOWN_MODEL})", nullable=False),
                   Column("Task ID", INT, sql="task_id", nullable=False),
                   Column("Stream ID", INT, sql="stream_id", nullable=False),
                   Column("Op Name", sql="op_name", domain=ops.format("op_name")),
                   Column("OP Type", sql="op_type", domain=ops.format("op_type")),
                   Column("OP State", sql="op_state", domain=ops.format("op_state")),
                   Column("Task Type", sql="task_type", domain=task_types, nullable=False),
                   Column("Task Start Time(us)", EPOCH_US, sql="e_start", nullable=False),
                   Column("Task Duration(us)", ROUND3, sql="dur / 1000.0", nullable=False),
                   Column("Task Wait Time(us)", ROUND3),
                   Column("Block Num", INT, sql="block_dim & 65535")]
        if self.is_stars:
            columns.append(Column("Mix Block Num", INT, sql="(block_dim & 65535) * (block_dim >> 16 & 65535)"))
        columns.append(Column("HF32 Eligible", sql="CASE WHEN op_flag THEN 'YES' WHEN op_flag IS NOT NULL THEN 'NO' END",
                              domain="SELECT 'YES' UNION ALL SELECT 'NO'"))
        if self.has_tensors:
            columns += [Column(title, sql=field, domain=f"SELECT {field} FROM host.tensor")
                        for title, field in TENSOR_COLUMNS]
        else:     # (N/A in every row: not fetched, nor printed one by one)
            columns += [Column(title, constant=None) for title, _field in TENSOR_COLUMNS]
        if self.is_stars:
            columns.append(Column("Context ID", constant=None))
        if metrics:
            kinds = {"python": ROUND3, "sqlite": SQLITE_ROUND3, "int": INT}
            columns += [Column(name, kinds[printed], sql=expr, null_when="total_cycles IS NULL")
                        for name, printed, expr in metrics.column_sql("aicore2", self.aic_mhz)]
        # (when the first task started at or after the beginning, every task was seen: no row pays for the test)
        unseen = functools.partial(self._unseen, where, args, span) if self._unseen_tasks else lambda: iter(())
        tables = [Table("op_summary", "op_summary", columns, source=source, where=self._included(where),
                        running=_Wait(previous, unseen), ties=ge_order if ties else None)]
        if task_time:
            tables.append(Table("task_time", "task_time", self._task_time_columns(), source=source,
                                where=self._seen() if self._unseen_tasks else "",
                                ties=self._first_appearance if ties else None))
        return tables

    def _unseen(self, where: str, args: dict, span: str) -> Iterator[tuple]:
        """(start, duration) of the tasks op_summary would have but that ended before the collection began
        (``_seen``), in start order (of ``span``, a part's range): the reference counts the wait from them too.
        Found in the index of starts (those starting before a ms after the beginning: few), a page at a time:
        a statement left running would keep the connection from dropping the printing plan's function."""
        time = self.time
        args = dict(args, pre=time.syscnt_at(time.params["begin_mono_ns"], 1e6) + 1, after=-(1 << 63), after_seq=-1)
        tasks = self._tasks(("seq", "start_syscnt", "op_id", "ge", "task_type", "start_ns", "end_ns"), False,
                            f"{span} AND t.start_syscnt < :pre AND (t.start_syscnt > :after OR"
                            " (t.start_syscnt = :after AND t.seq > :after_seq))")
        seen = self._seen_of_ns()
        sql = (f"SELECT start_syscnt, seq, start_ns, end_ns - start_ns FROM ({tasks})"
               f" WHERE {self._eligible(where)} AND NOT {seen} LIMIT {UNSEEN_PAGE}")
        while True:
            page = self.conn.execute(sql, args).fetchall()
            for row in page:
                yield row[2:]
            if len(page) < UNSEEN_PAGE:
                return
            args["after"], args["after_seq"] = page[-1][:2]

    def _last_before(self, where: str, args: dict, ge_order: "_GeOrder") -> Optional[tuple]:
        """(start, duration) of op_summary's row before the first of a part (whose wait is from it): the last
        task op_summary would have (seen or not: ``_unseen``) starting before :lo — of those starting at that
        same moment, the last in the reference's order. None when the table keeps no row before :lo (its first
        row then waits 0)."""
        before = self._tasks(("seq", "start_syscnt", "op_id", "ge", "task_type", "start_ns", "end_ns")
                             + _GeOrder.inputs,
                             False, "AND t.start_syscnt < :lo", "DESC")
        kept = f"SELECT 1 FROM ({before}) WHERE {self._eligible(where)} AND {self._seen_of_ns()} LIMIT 1"
        if self._unseen_tasks and self.conn.execute(kept, args).fetchone() is None:
            return None
        group: Dict[int, tuple] = {}
        moment = None
        for seq, start, start_ns, duration, *tie in self.conn.execute(
                f"SELECT seq, start_syscnt, start_ns, end_ns - start_ns, {', '.join(_GeOrder.inputs)} FROM ({before})"
                f" WHERE {self._eligible(where)}", args):
            if moment is not None and start != moment:
                break
            moment = start
            group[seq] = ((start_ns, duration), tuple(tie))
        if not group:
            return None
        if len(group) == 1:               # no tie: no order to work out (nor launches to look up)
            return next(iter(group.values()))[0]
        seqs = sorted(group)
        rank = dict(zip(seqs, ge_order.ranks([group[seq][1] for seq in seqs])))
        return group[max(seqs, key=lambda seq: (rank[seq], seq))][0]

    def _relaunched(self) -> bool:
        """Whether the host launched a (stream, task) of this device more than once (a per-launch run, or ids
        reused): its executions then belong to different launches."""
        return self.conn.execute("SELECT 1 FROM host.launch_count WHERE device_id = :dev AND launches > 1 LIMIT 1",
                                 self.params).fetchone() is not None

    def _included(self, where: str) -> str:
        """Which timed tasks op_summary has (of the selection ``where``): the eligible ones the collection saw
        (``_seen``)."""
        return f"{self._eligible(where)} AND {self._seen()}" if self._unseen_tasks else self._eligible(where)

    @functools.cached_property
    def _unseen_tasks(self) -> bool:
        """Whether a task may have ended before the collection began: unless the first to start did so at or
        after the beginning (then every task did)."""
        tasks = self._tasks(("seq", "start_syscnt", "start_ns"), selected=False)
        row = self.conn.execute(f"SELECT {ProfTime.epoch_ns_sql('start_ns')} >= :begin_ns FROM ({tasks}) LIMIT 1",
                                self.params).fetchone()
        return row is not None and not row[0]

    @staticmethod
    def _eligible(where: str) -> str:
        """The tasks an op task launched (the reference joins its GE task list) but WRITE_BACK and INVALID
        ones: those the reference counts op_summary's waits over, before it leaves out the unseen."""
        return f"{where} AND ge = 1 AND task_type NOT IN ({_NOT_IN_OP_SUMMARY_SQL})"

    @staticmethod
    def _seen(start: str = "e_start", stop: str = "e_stop") -> str:
        """Tasks starting at or after the collection began, or ending at or after it (op_summary and task_time,
        docs/prof-format.md §5). The reference compares the printed start with start_info's text and the
        printed stop likewise, as strings: "X.000<TAB>" comes after "X", so a task starting at the very
        microsecond the collection began is kept, as is one ending then; in integer ns since the epoch that
        is a comparison with the beginning rounded up to a ns (``begin_ns``)."""
        return f"({start} >= :begin_ns OR {stop} >= :begin_ns)"

    def _seen_of_ns(self) -> str:
        """``_seen`` over a task query's own start_ns and end_ns (the summaries' source has them as epoch ns)."""
        return self._seen(ProfTime.epoch_ns_sql("start_ns"), ProfTime.epoch_ns_sql("(start_ns + (end_ns - start_ns))"))

    def _part_bounds(self, k: int, n: int) -> Tuple[int, int]:
        """Start counters splitting the timed tasks into the n ranges of msprof.tables.part_cut: range k."""
        (count,) = self.conn.execute("SELECT count(*) FROM task WHERE start_syscnt IS NOT NULL").fetchone()

        def cut(i: int) -> int:
            if i <= 0:
                return -(1 << 63)
            if i >= n:
                return (1 << 63) - 1
            row = self.conn.execute("SELECT start_syscnt FROM task WHERE start_syscnt IS NOT NULL"
                                    " ORDER BY start_syscnt LIMIT 1 OFFSET ?", (int(count * part_cut(i, n)),)).fetchone()
            return row[0] if row else (1 << 63) - 1

        return cut(k), cut(k + 1)

    # --- op_statistic (docs/prof-format.md §6) -----------------------------------------------------------
    def op_statistic(self, selection: Selection = Selection(), batches=None, gathered=None) -> Table:
        """``batches``: its rows as ``op_statistic_rows`` makes them, when they are made elsewhere (show: by a
        worker process); ``gathered``: the sums op_summary's pass gathered (msprof.summary), when it did."""
        columns = [self._device_column(False), Column("OP Type"), Column("Core Type"), Column("Count", INT)] + [
            Column(name, NUMBER) for name in ("Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
                                              "Ratio(%)")]
        return Table("op_statistic", "op_statistic", columns,
                     [self.op_statistic_rows(selection, gathered)] if batches is None else batches)

    def op_statistic_rows(self, selection: Selection = Selection(), gathered=None) -> List[tuple]:
        """``gathered``: per part of op_summary's pass (in order), what its taps gathered (``_OpTotals``: the sums
        per op of every task, which only a pass over everything has); without it, a query of their own."""
        if gathered is not None and selection.everything:
            ops = _OpTotals.merged([taps[0] for taps in gathered])
            names = {op_id: (op_type, task_type) for op_id, op_type, task_type in self.conn.execute(
                "SELECT op_id, op_type, coalesce(task_type, 'UNKNOWN') FROM host.op")}
            return self._op_statistic_of(names[op_id] + tuple(ops[op_id]) for op_id in sorted(ops))
        where, args = self._where(selection)
        # grouped by op id (an integer: a cheap sort), then by (op type, task type) here: a few rows. The
        # reference keeps durations in an INTEGER column, so whole ns are integers there and its average
        # sum/count of a group of them is an integer division (``fractional``: the group's other durations)
        # every GE task counts in the total the ratios divide; its report then drops the rows of op type "N/A"
        # and of WRITE_BACK and INVALID tasks
        filtered = "op_type IS NOT NULL AND ge = 1"
        timed = STARTED
        if selection.everything and not self._relaunched():
            # every execution of a (stream, task) is its one launch's (a static graph): the tasks are summed up
            # per (stream, task) on their own, and only those sums meet the host tables (0.27 s instead of
            # 0.46 s for 250k tasks)
            ns = "(" + ProfTime.device_ns_sql("t.{0}") + ")"
            sql = (f"SELECT o.op_type, coalesce(o.task_type, 'UNKNOWN') AS task_type, sum(g.n), sum(g.s), min(g.lo),"
                   " max(g.hi), sum(g.fr) FROM ("
                   "  SELECT stream_id, task_id, count(*) AS n, sum(d) AS s, min(d) AS lo, max(d) AS hi,"
                   "   sum(d != CAST(d AS INTEGER)) AS fr"
                   f"  FROM (SELECT t.stream_id, t.task_id, {ns.format('end_syscnt')} - {ns.format('start_syscnt')}"
                   f"   AS d, {ns.format('start_syscnt')} AS start_ns FROM task t WHERE t.start_syscnt IS NOT NULL"
                   f"   AND t.end_syscnt IS NOT NULL) WHERE {timed} GROUP BY stream_id, task_id) g"
                   " JOIN host.launch h ON h.device_id = :dev AND h.stream_id = g.stream_id AND h.task_id = g.task_id"
                   "  AND h.occ = 0"
                   f" JOIN host.op o ON o.op_id = h.op_id AND o.kernel = 1 WHERE {filtered} GROUP BY o.op_id")
        else:
            sql = (f"SELECT op_type, task_type, count(*), sum(d), min(d), max(d), sum(d != CAST(d AS INTEGER)) FROM"
                   f" (SELECT op_id, op_type, task_type, end_ns - start_ns AS d, start_ns FROM"
                   f" ({self._tasks(('op_id', 'ge', 'op_type', 'task_type', 'start_ns', 'end_ns'), within=selection)})"
                   f" WHERE {where}"
                   f" AND {filtered} AND {timed}) GROUP BY op_id")
        return self._op_statistic_of(self.conn.execute(sql, args))

    def _op_statistic_of(self, per_op) -> List[tuple]:
        """op_statistic's rows from the sums of each op (op type, task type, count, total, min and max duration,
        fractional durations), in op id order."""
        merged: Dict[tuple, list] = {}
        for op_type, task_type, *sums in per_op:
            _add_sums(merged, (op_type, task_type), sums)
        # (the reference's GROUP BY order)
        groups = sorted((key + tuple(sums) for key, sums in merged.items()), key=lambda g: (g[0], g[1]))
        grand = sum(g[3] for g in groups)
        rows = []
        for op_type, task_type, count, total, low, high, fractional in groups:
            if op_type == NA or task_type in NOT_IN_OP_SUMMARY:
                continue
            ratio = round(round(total / grand * 100, 6), 3) if grand else 0.0       # (a float, as the reference's)
            average = total / count if fractional else _truncated_division(int(total), count)
            rows.append((self.device_number, op_type, task_type, count, _us(total), _us(low), _us(average),
                         _us(high), ratio, round(total, 6), round(total / grand * 100, 6) if grand else 0.0))
        # its report: rows by ratio (6 decimals) descending, then read back by total time descending
        rows.sort(key=lambda r: -r[10])
        rows.sort(key=lambda r: -r[9])
        return [r[:9] for r in rows]

    # --- task_time (docs/prof-format.md §8): written with op_summary (op_summary_and_task_time) ------------
    def _task_time_columns(self) -> List[Column]:
        """task_time's columns over a row of TASK_TIME_FIELDS (and ``dur``, ``e_start``, ``e_stop``: the stop
        time as the reference has it, start + duration in floats)."""
        sqe = SQE_TYPES.get(self.platform, DEFAULT_SQE_TYPES)
        type_names = " ".join(f"WHEN {k} THEN '{v}'" for k, v in sqe.items())
        hw_names = " UNION ALL ".join(f"SELECT '{v}'" for v in list(sqe.values()) + ["Other"])
        return [self._device_column(),
                # the launch's kernel name, N/A when hash_dic does not name it (the reference's text "N/A" for an
                # unknown hash is a name: no fall back to the op's); the op's name only for an empty one
                Column("kernel_name", sql="CASE WHEN kernel_name IS NULL THEN 'N/A' WHEN kernel_name = '' THEN"
                                          " coalesce(op_name, 'N/A') ELSE kernel_name END", nullable=False,
                       domain="SELECT kernel_name FROM host.op UNION ALL SELECT op_name FROM host.op"
                              " UNION ALL SELECT 'N/A'"),
                # a GE task's type names every run; a launch no GE task has (no node_basic_info) names only the
                # run paired with it, the reference pairing host and device tasks one to one in order
                Column("kernel_type", sql="CASE WHEN task_type != 'UNKNOWN' AND (ge OR exec_n < launches)"
                                          " THEN task_type ELSE "
                                          + (f"CASE hw_type {type_names} ELSE 'Other' END" if sqe else "'Other'")
                                          + " END", nullable=False,
                       domain=f"SELECT task_type FROM host.op UNION ALL {hw_names}"),
                Column("stream_id", INT, sql="stream_id", nullable=False),
                Column("task_id", INT, sql="task_id", nullable=False),
                Column("task_time(us)", ROUND3, sql="dur / 1000.0", nullable=False),
                Column("task_start(us)", EPOCH_US, sql="e_start", nullable=False),
                Column("task_stop(us)", EPOCH_US, sql="e_stop", nullable=False)]

    # --- api_statistic (docs/prof-format.md §7) -------------------------------------------------------------
    def api_statistic(self) -> Table:
        columns = [self._device_column(False), Column("Level"), Column("API Name")] + [
            Column(name, INT if name == "Count" else NUMBER)
            for name in ("Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")]
        return Table("api_statistic", "api_statistic", columns, [self._api_rows()])

    def _api_rows(self) -> list:
        """Per (name, level): the reference's sums and variance of µs durations (docs/prof-format.md §7).

        The reference keeps every call's duration and sums floats in record order; msprof sums the distinct
        durations and their counts as integers (ticks; squares in thousandths, each rounded to 3 decimals
        first): the import counted the calls by (level, key, duration) as it decoded them (``api_duration``),
        so Python here reads a few thousand groups, twice (the variance needs the average). The two agree
        wherever a result is not within a hair of a half (the reference's float error is far smaller than the
        3rd decimal); a group whose exact total or variance is that close to a tie (14.0625 rounds either way)
        is summed again as the reference sums it: its calls in record order, with Python's sum().

        The levels named by their struct type are counted by it, not by item id (a node-level call's item is
        its op: a thousand ops would give a thousand times the rows for one name)."""
        typed = f"level IN ({', '.join(map(str, sorted(NAMED_BY_TYPE)))})"
        named = (f"CASE WHEN g.{typed} THEN coalesce(tn.name, CAST(g.k AS TEXT))"
                 " ELSE coalesce(hs.text, CAST(g.k AS TEXT)) END")
        read = (f"SELECT {named}, g.level, g.k, g.d, g.n FROM host.api_duration g"
                " LEFT JOIN host.type_name tn ON tn.level = g.level AND tn.type = g.k"
                " LEFT JOIN host.hash_string hs ON hs.hash = g.k")
        conn = self.conn
        to_us = self.time.host_us
        sums: Dict[tuple, list] = {}           # (name, level) → [count, ticks, min, max, raw keys]
        for name, level, k, delta, n in conn.execute(read):
            group = sums.get((name, level))
            if group is None:
                sums[(name, level)] = [n, delta * n, delta, delta, {k}]
            else:
                group[0] += n
                group[1] += delta * n
                group[2] = min(group[2], delta)
                group[3] = max(group[3], delta)
                group[4].add(k)
        averages = {k: round(round(to_us(g[1]), 3) / g[0], 3) for k, g in sums.items()}
        squares = dict.fromkeys(sums, 0)
        for name, level, _k, delta, n in conn.execute(read):
            squares[(name, level)] += round(round((to_us(delta) - averages[(name, level)]) ** 2, 3) * 1000) * n
        rows = []
        for (name, level) in sorted(sums, key=lambda k: (k[0], LEVELS.get(k[1], str(k[1])))):
            count, ticks, low, high, keys = sums[(name, level)]
            total, average = round(to_us(ticks), 3), averages[(name, level)]
            square_sum = squares[(name, level)]            # thousandths
            if _near_half(to_us(ticks) * 1000) or _near_half(square_sum / count):
                total, average, variance = self._reference_sums(level, sorted(keys), count)
            else:
                variance = round(square_sum / 1000 / count, 3)
            rows.append((self.device_number, LEVELS.get(level, str(level)), name, total, count, average,
                         round(to_us(low), 3), round(to_us(high), 3), variance))
        return rows

    def _reference_sums(self, level: int, keys: List[int], count: int) -> Tuple[float, float, float]:
        """(total, average, variance) of one API's calls summed as the reference sums them: every call's µs in
        record order, by Python's sum() (streamed from SQLite, one call at a time)."""
        key = "struct_type" if level in NAMED_BY_TYPE else "item_id"
        sql = (f"SELECT [end] - begin FROM host.api WHERE from_events = 0 AND level = ? AND {key} IN"
               f" ({', '.join('?' * len(keys))}) ORDER BY seq")
        to_us = self.time.host_us
        total = round(sum(map(to_us, map(itemgetter(0), self.conn.execute(sql, (level, *keys))))), 3)
        average = round(total / count, 3)
        squares = sum(round((to_us(d) - average) ** 2, 3) for (d,) in self.conn.execute(sql, (level, *keys)))
        return total, average, round(squares / count, 3)


def _near_half(thousandths: float) -> bool:
    """Whether a value in thousandths is within a hair of a half: its 3-decimal rounding depends on the last bits
    of the reference's float sums."""
    return abs(thousandths - int(thousandths) - 0.5) < 1e-6


# --- tasks that start at the same moment (docs/prof-format.md §5 and §8, "Ties") ----------------------------
class _GeOrder(Ties):
    """op_summary: tasks that start together come in the order of the GE task list the reference joins them
    to — launches thread by thread, each thread's in time order. Threads in the order the reference meets
    them: its API calls as recorded (not empty, not at time 0), then its event pairs, then threads with
    launches only (worked out when the first tie is met: most runs have none)."""

    LAST = 1 << 62
    # a task's launch (its thread, time and record), looked up for the tasks that tie only: as columns of the
    # summary's query they cost every row (1.5 s of a 1M-task export summary)
    inputs = ("seq",)
    LAUNCH = ("thread", "track_ts", "launch_seq")

    def __init__(self, report: "ProfReport"):
        self.report = report
        self.threads: Optional[Dict[int, int]] = None

    # a thread's place: its first API call (not empty, not at time 0), else its first event, else its first
    # launch; looked up in seq (rowid) order, which stops at the first found
    _FIRST = ("SELECT coalesce((SELECT seq FROM host.api WHERE thread = :t AND from_events = 0 AND begin > 0"
              " AND begin != [end] ORDER BY seq LIMIT 1),"
              " (1 << 40) + (SELECT seq FROM host.api WHERE thread = :t AND from_events = 1 ORDER BY seq LIMIT 1),"
              " (1 << 50) + (SELECT seq FROM host.launch WHERE thread = :t ORDER BY seq LIMIT 1))")
    FEW_THREADS = 16

    def thread_ranks(self) -> Dict[int, int]:
        """The ranks of the threads that launched tasks, 0 first (only their order among themselves matters:
        tied tasks are ordered by their launches' threads)."""
        if self.threads is None:
            conn = self.report.conn
            threads = [thread for (thread,) in conn.execute("SELECT DISTINCT thread FROM host.launch")]
            launching = set(threads)
            if len(threads) <= self.FEW_THREADS:
                # (a GROUP BY over every host call sorts them all: 1 s at 1M tasks; a lookup for each of a few
                # threads usually stops at the first calls)
                first = {t: conn.execute(self._FIRST, {"t": t}).fetchone()[0] for t in threads}
                ordered = sorted(threads, key=lambda t: (first[t], t))
            else:
                ordered = [thread for (thread,) in conn.execute(
                    "SELECT thread FROM (SELECT thread, min(seq) AS first FROM host.api WHERE from_events = 0"
                    "  AND begin > 0 AND begin != [end] GROUP BY thread"
                    " UNION ALL SELECT thread, (1 << 40) + min(seq) FROM host.api WHERE from_events = 1 GROUP BY thread"
                    " UNION ALL SELECT thread, (1 << 50) + min(seq) FROM host.launch GROUP BY thread)"
                    " GROUP BY thread ORDER BY min(first), thread") if thread in launching]
            self.threads = {thread: rank for rank, thread in enumerate(ordered)}
        return self.threads

    def ranks(self, rows: List[tuple]) -> List[tuple]:
        threads = self.thread_ranks()
        last, unknown = self.LAST, (None, 0, 0)
        seqs = ",".join(str(int(seq)) for (seq,) in rows)
        tasks = self.report._tasks(("seq",) + self.LAUNCH, False, f"AND t.seq IN ({seqs})")
        launches = {seq: launch for seq, *launch in self.report.conn.execute(
            f"SELECT seq, {', '.join(self.LAUNCH)} FROM ({tasks})", self.report.params)}
        return [(threads.get(thread, last), ts or 0, launch or 0)
                for thread, ts, launch in (launches.get(seq, unknown) for (seq,) in rows)]


class _FirstAppearance(Ties):
    """task_time: tasks that start together come in the order their (stream, task) first appears in the
    reference's task list, which is sorted by start from the order of a Python set of those keys (host
    launches' keys by time, then the device's): emulated with the same set."""

    inputs = ("stream_id", "task_id")

    def __init__(self, report: "ProfReport", ge_order: "_GeOrder"):
        self.report, self.ge_order = report, ge_order
        self.rank: Optional[Dict[tuple, tuple]] = None

    def ranks(self, rows: List[tuple]) -> List[tuple]:
        if self.rank is None:
            self.rank = self._ranks()
        rank, unknown = self.rank, (_GeOrder.LAST, _GeOrder.LAST)
        return [rank.get(key, unknown) for key in rows]

    def _ranks(self) -> Dict[tuple, tuple]:
        conn, report = self.report.conn, self.report
        batched = (report.drv_version >= ALL_EXPORT_DRIVER
                   and report.platform not in ALL_EXPORT_EXCEPT)          # keys carry the batch id too

        # The reference's set of keys: host launches' keys by time (those of one moment in the GE task list's
        # thread order), then the device tasks' keys by first start — its ``host.keys() | device.keys()``. Its
        # order depends on every key, and on how the set was sized: ``host.keys() | ()`` makes the set from the
        # same left operand (| sizes it from the dict's length on Python 3.10+, not on 3.9), and adding the
        # device's keys one by one, as | does, is the same whatever their repeats (adding a key again changes
        # nothing): they are streamed in, not gathered into a dict first. Memory is a key per distinct
        # (stream, task[, batch]) — up to 65536 a stream. Only the keys of tasks that tie keep a rank (a run where
        # nothing ties keeps none).
        host: Dict[tuple, None] = {}
        for keys in _key_batches(self._host_keys(batched), batched):
            host.update(zip(keys, repeat(None)))
        keys = host.keys() | ()
        del host
        for device in _key_batches(conn.execute("SELECT stream_id, task_id, 0 FROM task_key ORDER BY rank"), batched):
            keys.update(device)
        first = {(stream, task): start for stream, task, start in conn.execute(
            "SELECT stream_id, task_id, first_start FROM task_key WHERE tied = 1")}
        # the tied tasks' keys in the set's order (a key with batches: its first)
        found = (filter({(stream, task, _CONTEXT) for stream, task in first}.__contains__, keys) if not batched
                 else (k for k in keys if k[:2] in first))
        place: Dict[tuple, int] = {}
        for i, k in enumerate(found):
            place.setdefault(k[:2], i)
        return {k: (start, place.get(k, _GeOrder.LAST)) for k, start in first.items()}

    def _host_keys(self, batched: bool) -> Iterable[tuple]:
        """The (stream, task, batch) of the device's launches in the order they first appear in the reference's
        host task list: by time, a moment's launches in their threads' order (``_GeOrder``), then in record
        order; a key may come again later (its first place is the one that counts). Without ``batched``, the
        batch is 0."""
        conn, params = self.report.conn, self.report.params
        threads = self.ge_order.thread_ranks()
        group = "stream_id, task_id, batch_id" if batched else "stream_id, task_id"
        keys = group if batched else "stream_id, task_id, 0"
        # (bounds over every device's launches: a scan of the table, where the device's rows are read through
        # an index at three times the cost)
        low, high, whole, last = conn.execute(
            "SELECT min(ts), max(ts), count(ts) = count(*), (SELECT max(seq) FROM host.launch) FROM host.launch"
        ).fetchone()
        seq_bits, rank_bits = (last or 0).bit_length(), (len(threads) - 1).bit_length() if threads else 0
        if whole and low is not None and len(threads) <= _GeOrder.FEW_THREADS and \
                high - low < 1 << (62 - seq_bits - rank_bits):
            # each key's first launch, as (time, thread rank, seq) packed into one integer, found by a GROUP BY
            # that hands SQLite's sorter a key per launch and Python a row per key: streaming every launch into
            # Python in that order took 1.8 s at 1M tasks
            rank = ("CASE thread " + " ".join(f"WHEN {int(t)} THEN {r}" for t, r in threads.items()) + " END"
                    if len(threads) > 1 else "0")
            return conn.execute(
                f"SELECT {keys} FROM host.launch WHERE device_id = :dev GROUP BY {group} ORDER BY"
                f" min(((ts - :low) << {seq_bits + rank_bits}) | ({rank} << {seq_bits}) | seq)",
                dict(params, low=low))
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS msprof_thread_rank (thread INTEGER PRIMARY KEY, rank INTEGER)")
        conn.execute("DELETE FROM msprof_thread_rank")
        conn.executemany("INSERT INTO msprof_thread_rank VALUES (?, ?)", threads.items())
        if conn.in_transaction:         # (the temporary table's rows are written in a transaction of its own)
            conn.commit()
        return conn.execute(
            f"SELECT {keys} FROM host.launch h LEFT JOIN msprof_thread_rank r ON r.thread = h.thread"
            f" WHERE h.device_id = :dev ORDER BY h.ts, coalesce(r.rank, {_GeOrder.LAST}), h.seq", params)


# the default context id of a task outside FFTS+ (the reference's keys carry it)
_CONTEXT = 4294967295


@functools.lru_cache(maxsize=1)
def _ids() -> List[int]:
    """One int object per 16-bit id (stream and task ids are 16 bits), shared by every key that holds it: 28
    bytes less per key (2 MB, made when a run has ties)."""
    return list(range(1 << 16))


def _key_batches(cursor, batched: bool) -> Iterator[Iterator[tuple]]:
    """The reference's task keys of rows (stream, task, batch), a batch of rows at a time: (stream, task, context)
    or, ``batched``, (stream, task, context, batch) — tuples made at C speed, sharing their ints."""
    ids = _ids().__getitem__
    for rows in iter(functools.partial(cursor.fetchmany, 4096), []):
        streams, tasks, batches = zip(*rows)
        streams, tasks = map(ids, streams), map(ids, tasks)
        yield (zip(streams, tasks, repeat(_CONTEXT), batches) if batched
               else zip(streams, tasks, repeat(_CONTEXT)))


class _OpTotals(Tap):
    """op_statistic's sums per op, gathered from the pass of op_summary and task_time over every timed task
    (a query of its own joins every task to its launch and op again: 1-2 s of a 1M-task per-launch export
    summary). The tasks op_statistic counts (started after the collection began, GE tasks of an op type) by op
    id: count, total, min and max of the durations (ns, floats, summed in start order) and how many are not
    whole."""

    inputs = (f"CASE WHEN op_type IS NOT NULL AND ge = 1 AND {STARTED} THEN op_id END", "dur")

    def __init__(self):
        super().__init__()
        self.ops: Dict[int, list] = {}

    def feed(self, columns: List[tuple]) -> None:
        ops = self.ops
        for op_id, d in zip(*columns):
            if op_id is None:
                continue
            sums = ops.get(op_id)
            if sums is None:
                ops[op_id] = [1, d, d, d, 0 if d.is_integer() else 1]
                continue
            sums[0] += 1
            sums[1] += d
            if d < sums[2]:
                sums[2] = d
            if d > sums[3]:
                sums[3] = d
            if not d.is_integer():
                sums[4] += 1

    def result(self) -> Dict[int, list]:
        return self.ops

    @staticmethod
    def merged(parts: List[Dict[int, list]]) -> Dict[int, list]:
        """The sums of parts of the tasks (in start order) as one."""
        ops: Dict[int, list] = {}
        for part in parts:
            for op_id, sums in part.items():
                _add_sums(ops, op_id, sums)
        return ops


def _add_sums(groups: dict, key, sums) -> None:
    """Sums of durations (count, total, min, max, how many not whole) added to those of ``groups[key]``."""
    group = groups.get(key)
    if group is None:
        groups[key] = list(sums)
        return
    count, total, low, high, fractional = sums
    group[:] = [group[0] + count, group[1] + total, min(group[2], low), max(group[3], high), group[4] + fractional]


class _Wait(Running):
    """op_summary's wait column: 0 for the first row, else max(start − previous start − previous duration, 0)
    in µs, in start order whatever the stream (as the reference). ``previous``: (start, duration) of the row
    before the first (a later part of the table). ``unseen``: makes an iterator of the (start, duration) of
    the tasks left out as the collection did not see them, in start order: the reference computes the waits
    before it leaves them out (a row after one of them waits from it), then makes the first row's 0."""

    columns = ("Task Wait Time(us)",)
    inputs = ("start_ns", "dur")

    def __init__(self, previous: Optional[tuple] = None, unseen=lambda: iter(())):
        self.first = self.previous = previous
        self.unseen = unseen
        self.pending: Optional[tuple] = None
        self.rows: Iterator[tuple] = iter(())

    def start(self) -> None:
        self.previous = self.first
        self.rows = self.unseen()
        self.pending = next(self.rows, None)

    def fill(self, batch: List[tuple]) -> List[tuple]:
        if not batch:
            return []
        if self.pending is not None and self.pending[0] < batch[-1][0]:
            return self._merged(batch)
        starts, durations = (list(c) for c in zip(*batch))
        out = []
        if self.previous is None:
            out.append((0,))
        else:
            starts.insert(0, self.previous[0])
            durations.insert(0, self.previous[1])
        gaps = map(sub, map(sub, starts[1:], starts), durations)
        out += zip(map(truediv, map(max, gaps, repeat(0)), repeat(1000)))
        self.previous = batch[-1]
        return out

    def _merged(self, batch: List[tuple]) -> List[tuple]:
        """A batch among whose rows unseen tasks fall: row by row (rare, at the collection's beginning)."""
        out = []
        for start, duration in batch:
            while self.pending is not None and self.pending[0] < start:
                if self.previous is not None:         # (the first row the table keeps waits 0)
                    self.previous = self.pending
                self.pending = next(self.rows, None)
            if self.previous is None:
                out.append((0,))
            else:
                out.append((max(start - self.previous[0] - self.previous[1], 0) / 1000,))
            self.previous = (start, duration)
        return out


def _truncated_division(total: int, count: int) -> int:
    """SQLite's integer division (toward zero)."""
    return total // count if total >= 0 else -(-total // count)


def _us(ns: float) -> float:
    return round(round(ns, 6) / 1000, 3)


def _json(value):
    import json

    try:
        return json.loads(value) if value is not None else None
    except ValueError:
        return None


def _create_empty(conn: sqlite3.Connection) -> None:
    for name, table in HOST.tables.items():
        names = ", ".join(f"[{c}]" for c in table.columns)
        conn.execute(f"CREATE TABLE host.[{name}] ({names})")

