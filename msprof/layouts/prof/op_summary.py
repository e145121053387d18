"""op_summary (docs/prof-format.md §5) and task_time (§8) of one PROF_ device: the timed tasks in start order,
with the reference analyser's columns, rounding, waits and ties, over one RowSource (msprof.tables) that also
gathers op_statistic's sums per op."""
import functools
from itertools import repeat
from operator import sub, truediv
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.contract import Selection
from msprof.layouts.prof import communication_rows
from msprof.layouts.prof.associate import UNKNOWN_MODEL
from msprof.layouts.prof.families.ffts_pmu import StarsPmu
from msprof.layouts.prof.statistics import NOT_IN_OP_SUMMARY, OpTotals
from msprof.layouts.prof.tasks import part_bounds, task_query, where
from msprof.layouts.prof.tensors import COLUMNS as TENSOR_COLUMNS
from msprof.layouts.prof.ties import GeOrder
from msprof.layouts.timebase import ProfTime
from msprof.metrics import py_round_sql
from msprof.tables import EPOCH_US, INT, ROUND3, SQLITE_ROUND3, Column, Running, RowSource, Table

_NOT_IN_OP_SUMMARY_SQL = ", ".join(f"'{t}'" for t in NOT_IN_OP_SUMMARY)
# tasks left out as unseen, read a page at a time (``_unseen``)
UNSEEN_PAGE = 4096
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
SUMMARY_FIELDS = ("seq", "start_syscnt", "op_id", "ge", "model_id", "task_id", "stream_id", "op_name", "op_type",
                  "op_state", "task_type", "block_dim", "op_flag", "start_ns", "end_ns")
STARS_FIELDS = tuple(f for f in StarsPmu.inputs if f.startswith("f_")) + ("exec_n",)
TASK_TIME_FIELDS = ("kernel_name", "op_name", "task_type", "hw_type", "stream_id", "task_id", "start_ns", "end_ns",
                    "ge", "exec_n", "launches")


def summary_tables(report, selection: Selection, part: Optional[Tuple[int, int]], pmu: bool,
                   task_time: bool = False, as_file: bool = True) -> List[Table]:
    """op_summary (and task_time, with op_statistic's sums gathered) over one RowSource: the timed tasks in
    start order with their launch and op, their times as the reference computes them (``start_ns``,
    ``dur``, epoch ns ``e_start``/``e_stop``) and, with ``pmu``, their PMU record and metrics
    (msprof.metrics.AscendMetrics). ``part`` (k, n): only the k-th of n ranges of start times, starting with
    the wait since the row before it."""
    conditions, args = where(report, selection)
    metrics = report.metrics if pmu else None
    span, previous = "", None
    if part is not None:
        args["lo"], args["hi"] = part_bounds(report, *part)
        span = "AND t.start_syscnt >= :lo AND t.start_syscnt < :hi"
        previous = _last_before(report, conditions, args)
    source = _source(report, selection, metrics, span, args, task_time)
    unseen = report.unseen_tasks
    # (when the first task started at or after the beginning, every task was seen: no row pays for the test)
    waits = _Wait(previous, functools.partial(_unseen, report, conditions, args, span) if unseen else lambda: iter(()))
    stars = report.stars_pmu(selection.everything or not as_file) if pmu and report.stars_pmu else None
    tables = [Table("op_summary", "op_summary", _op_summary_columns(report, metrics, stars,
                                                                     selection if as_file else Selection(),
                                                                     selection.everything),
                    source=source,
                    where=included(report, conditions), running=Runnings(waits, stars) if stars else waits,
                    ties=report.ge_order if report.has_ties else None)]
    if task_time:
        tables.append(Table("task_time", "task_time", _task_time_columns(report), source=source,
                            where=_task_time_rows(report, unseen),
                            ties=report.first_appearance if report.has_ties else None))
    return tables


def _source(report, selection: Selection, metrics, span: str, args: dict, task_time: bool) -> RowSource:
    """The rows the tables' columns read: the task query's and the times and metrics derived from them."""
    fields = SUMMARY_FIELDS + (TASK_TIME_FIELDS if task_time else ())
    fields += tuple(field for _title, field in TENSOR_COLUMNS) if report.has_tensors else ()
    fields += STARS_FIELDS if report.stars_pmu else ()
    derived = [f"{py_round_sql('aicore_raw', 2)} AS aicore2"] if metrics else []
    derived += ["end_ns - start_ns AS dur", f"{ProfTime.epoch_ns_sql('start_ns')} AS e_start",
                f"{ProfTime.epoch_ns_sql('(start_ns + (end_ns - start_ns))')} AS e_stop"]
    if metrics:
        derived += metrics.outer("(end_ns - start_ns)", report.aic_mhz, report.ai_core_num)
    tasks = task_query(report, fields, metrics is not None, span, inner=metrics.inner("p.") if metrics else (),
                       selected=not selection.everything, counters=metrics.counters() if metrics else None,
                       within=selection)
    if selection.everything:
        tasks = communication_rows.merged(report, tasks, args, span)
    return RowSource(report.conn, f"SELECT *, {', '.join(derived)} FROM ({tasks}) LIMIT -1 OFFSET 0", args,
                     order="start_syscnt", taps=[OpTotals()] if task_time else [])


def _op_summary_columns(report, metrics, stars, selection: Selection, everything: bool) -> List[Column]:
    # (the export of every task has the COMMUNICATION rows: N/A in the columns of a task, their texts)
    comm = everything and report.communication_ops > 0
    ops = "SELECT {} FROM host.op" + (" UNION ALL SELECT {} FROM " + communication_rows.TABLE if comm else "")
    task_types = f"{ops.format('task_type', 'task_type')} UNION ALL SELECT 'UNKNOWN'"
    columns = [report.device_column(), *_iteration_columns(report, selection, "Model Name"),
               Column("Model ID", INT, sql=f"coalesce(model_id, {UNKNOWN_MODEL})", nullable=False),
               Column("Task ID", INT, sql="task_id", nullable=comm),
               Column("Stream ID", INT, sql="stream_id", nullable=comm),
               *_iteration_columns(report, selection, "Infer ID"),
               Column("Op Name", sql="op_name", domain=ops.format("op_name", "op_name")),
               Column("OP Type", sql="op_type", domain=ops.format("op_type", "op_type")),
               Column("OP State", sql="op_state", domain=ops.format("op_state", "NULL")),
               Column("Task Type", sql="task_type", domain=task_types, nullable=False),
               Column("Task Start Time(us)", EPOCH_US, sql="e_start", nullable=False),
               Column("Task Duration(us)", ROUND3, sql="dur / 1000.0", nullable=False),
               Column("Task Wait Time(us)", ROUND3),
               Column("Block Num", INT, sql="CASE WHEN seq IS NULL THEN 0 ELSE block_dim & 65535 END" if comm
                      else "block_dim & 65535")]
    if report.is_stars:
        columns.append(Column("Mix Block Num", INT, sql="(block_dim & 65535) * (block_dim >> 16 & 65535)"))
    columns.append(Column("HF32 Eligible", sql="CASE WHEN op_flag THEN 'YES' WHEN op_flag IS NOT NULL THEN 'NO' END",
                          domain="SELECT 'YES' UNION ALL SELECT 'NO'"))
    if report.has_tensors:
        columns += [Column(title, sql=field, domain=f"SELECT {field} FROM host.tensor")
                    for title, field in TENSOR_COLUMNS]
    else:     # (N/A in every row: not fetched, nor printed one by one)
        columns += [Column(title, constant=None) for title, _field in TENSOR_COLUMNS]
    if stars:
        columns += stars.column_list()
    elif report.is_stars:
        columns.append(Column("Context ID", constant=None))
    if metrics:
        kinds = {"python": ROUND3, "sqlite": SQLITE_ROUND3, "int": INT}
        columns += [Column(name, kinds[printed], sql=expr, null_when="total_cycles IS NULL")
                    for name, printed, expr in metrics.column_sql("aicore2", report.aic_mhz)]
    return columns


def _task_time_rows(report, unseen: bool) -> str:
    """task_time's rows of the source: every task (seen, when some were not), no COMMUNICATION row."""
    rows = [_seen()] if unseen else []
    rows += ["seq IS NOT NULL"] if report.communication_ops else []
    return " AND ".join(rows)


def _iteration_columns(report, selection: Selection, which: str) -> List[Column]:
    """The reference's columns of an iteration's op_summary (the model's name, N/A when the host does not name
    it, and the iteration), none in the export of every task."""
    if selection.everything:
        return []
    selection = report.resolve(selection)
    if which == "Infer ID":
        return [Column("Infer ID", INT, constant=selection.iteration_id)]
    names = {m["model_id"]: m["model_name"] for m in report.models()}
    return [Column("Model Name", constant=names.get(selection.model_id) or None)]


def _task_time_columns(report) -> List[Column]:
    """task_time's columns over a row of TASK_TIME_FIELDS (and ``dur``, ``e_start``, ``e_stop``: the stop
    time as the reference has it, start + duration in floats)."""
    sqe = SQE_TYPES.get(report.platform, DEFAULT_SQE_TYPES)
    type_names = " ".join(f"WHEN {k} THEN '{v}'" for k, v in sqe.items())
    hw_names = " UNION ALL ".join(f"SELECT '{v}'" for v in list(sqe.values()) + ["Other"])
    return [report.device_column(),
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


# --- which tasks the tables have --------------------------------------------------------------------------------
def included(report, conditions: str) -> str:
    """Which timed tasks op_summary has (of the selection's ``conditions``): the eligible ones the collection
    saw (``_seen``)."""
    return f"{eligible(conditions)} AND {_seen()}" if report.unseen_tasks else eligible(conditions)


def eligible(conditions: str) -> str:
    """The tasks an op task launched (the reference joins its GE task list) but WRITE_BACK and INVALID
    ones: those the reference counts op_summary's waits over, before it leaves out the unseen."""
    return f"{conditions} AND ge = 1 AND task_type NOT IN ({_NOT_IN_OP_SUMMARY_SQL})"


def any_unseen(report) -> bool:
    """Whether a task may have ended before the collection began: unless the first to start did so at or
    after the beginning (then every task did)."""
    tasks = task_query(report, ("seq", "start_syscnt", "start_ns"), selected=False)
    row = report.conn.execute(f"SELECT {ProfTime.epoch_ns_sql('start_ns')} >= :begin_ns FROM ({tasks}) LIMIT 1",
                              report.params).fetchone()
    return row is not None and not row[0]


def _seen(start: str = "e_start", stop: str = "e_stop") -> str:
    """Tasks starting at or after the collection began, or ending at or after it (op_summary and task_time,
    docs/prof-format.md §5). The reference compares the printed start with start_info's text and the
    printed stop likewise, as strings: "X.000<TAB>" comes after "X", so a task starting at the very
    microsecond the collection began is kept, as is one ending then; in integer ns since the epoch that
    is a comparison with the beginning rounded up to a ns (``begin_ns``)."""
    return f"({start} >= :begin_ns OR {stop} >= :begin_ns)"


def _seen_of_ns() -> str:
    """``_seen`` over a task query's own start_ns and end_ns (the summaries' source has them as epoch ns)."""
    return _seen(ProfTime.epoch_ns_sql("start_ns"), ProfTime.epoch_ns_sql("(start_ns + (end_ns - start_ns))"))


def _unseen(report, conditions: str, args: dict, span: str) -> Iterator[tuple]:
    """(start, duration) of the tasks op_summary would have but that ended before the collection began
    (``_seen``), in start order (of ``span``, a part's range): the reference counts the wait from them too.
    Found in the index of starts (those starting before a ms after the beginning: few), a page at a time:
    a statement left running would keep the connection from dropping the printing plan's function."""
    time = report.time
    args = dict(args, pre=time.syscnt_at(time.params["begin_mono_ns"], 1e6) + 1, after=-(1 << 63), after_seq=-1)
    tasks = task_query(report, ("seq", "start_syscnt", "op_id", "ge", "task_type", "start_ns", "end_ns"), False,
                       f"{span} AND t.start_syscnt < :pre AND (t.start_syscnt > :after OR"
                       " (t.start_syscnt = :after AND t.seq > :after_seq))")
    sql = (f"SELECT start_syscnt, seq, start_ns, end_ns - start_ns FROM ({tasks})"
           f" WHERE {eligible(conditions)} AND NOT {_seen_of_ns()} LIMIT {UNSEEN_PAGE}")
    while True:
        page = report.conn.execute(sql, args).fetchall()
        for row in page:
            yield row[2:]
        if len(page) < UNSEEN_PAGE:
            return
        args["after"], args["after_seq"] = page[-1][:2]


def _last_before(report, conditions: str, args: dict) -> Optional[tuple]:
    """(start, duration) of op_summary's row before the first of a part (whose wait is from it): the last
    task op_summary would have (seen or not: ``_unseen``) starting before :lo — of those starting at that
    same moment, the last in the reference's order. None when the table keeps no row before :lo (its first
    row then waits 0)."""
    before = task_query(report, ("seq", "start_syscnt", "op_id", "ge", "task_type", "start_ns", "end_ns")
                        + GeOrder.inputs, False, "AND t.start_syscnt < :lo", "DESC")
    kept = f"SELECT 1 FROM ({before}) WHERE {eligible(conditions)} AND {_seen_of_ns()} LIMIT 1"
    if report.unseen_tasks and report.conn.execute(kept, args).fetchone() is None:
        return None
    group: Dict[int, tuple] = {}
    moment = None
    for seq, start, start_ns, duration, *tie in report.conn.execute(
            f"SELECT seq, start_syscnt, start_ns, end_ns - start_ns, {', '.join(GeOrder.inputs)} FROM ({before})"
            f" WHERE {eligible(conditions)}", args):
        if moment is not None and start != moment:
            break
        moment = start
        group[seq] = ((start_ns, duration), tuple(tie))
    if not group:
        return None
    if len(group) == 1:               # no tie: no order to work out (nor launches to look up)
        return next(iter(group.values()))[0]
    seqs = sorted(group)
    rank = dict(zip(seqs, report.ge_order.ranks([group[seq][1] for seq in seqs])))
    return group[max(seqs, key=lambda seq: (rank[seq], seq))][0]


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


class Runnings(Running):
    """Several Running's columns over the same rows (a table has one ``running``): each fills its own."""

    def __init__(self, *parts: Running):
        self.parts = parts
        self.columns = tuple(c for part in parts for c in part.columns)
        self.inputs = tuple(i for part in parts for i in part.inputs)

    def start(self) -> None:
        for part in self.parts:
            part.start()

    def fill(self, batch: List[tuple]) -> List[tuple]:
        made, at = [], 0
        for part in self.parts:
            width = len(part.inputs)
            made.append(part.fill([row[at:at + width] for row in batch]))
            at += width
        return [sum(rows, ()) for rows in zip(*made)]
