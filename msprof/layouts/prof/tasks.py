"""The query of a PROF_ device's timed tasks: each with its host launch and op (msprof.layouts.prof.associate),
its times as the reference analyser computes them (msprof.layouts.timebase.ProfTime) and, when asked, its PMU
record. Every PROF table, fact and timeline selects from it, asking for the columns it uses by name
(``TASK_FIELDS``)."""
from typing import List, Optional, Tuple

from msprof.contract import Selection
from msprof.layouts.prof.tensors import COLUMNS as TENSOR_COLUMNS
from msprof.layouts.timebase import ProfTime
from msprof.layouts.where import selection_sql
from msprof.metrics import aicore_time_sql, counter_ratios
from msprof.tables import part_cut

HWTS_TASK_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK"}

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
    "launches": "lc.launches", "batch_id": "h.batch_id",
    # the task_track time of the last launch of the task's (stream, task), and the seq of its launch's node-level
    # call (the CANN layout's flows and connection_id)
    "last_ts": ("(SELECT l.ts FROM host.launch l WHERE l.device_id = :dev AND l.occ = lc.launches - 1"
                " AND l.stream_id = t.stream_id AND l.task_id = t.task_id)"),
    "call_seq": ("(SELECT a.seq FROM host.api a WHERE a.level = 10000 AND a.thread = h.thread"
                 " AND a.begin = h.call_begin LIMIT 1)"),
    **{field: f"tn.{field}" for _title, field in TENSOR_COLUMNS},
    # the STARS PMU context record of the run (msprof.layouts.prof.families.ffts_pmu)
    "f_cycles": "f.total_cycles", **{f"f_c{i}": f"f.c{i}" for i in range(8)}, "f_ffts": "f.ffts_type",
    "f_subtask_type": "f.subtask_type", "f_subtask": "f.subtask_id",
    "start_ns": ProfTime.device_ns_sql("t.start_syscnt"),
    "end_ns": ProfTime.device_ns_sql("t.end_syscnt"),
}
SELECTED = ("model_id", "iteration")       # what a --model-id/--iteration-id selection filters on
_TIMED = "t.start_syscnt IS NOT NULL AND t.end_syscnt IS NOT NULL"


def task_query(report, fields, pmu: bool = False, span: str = "", order: str = "", inner=(), selected: bool = True,
               counters: Optional[List[int]] = None, within: Selection = Selection(),
               timed: bool = True) -> str:
    """Timed device tasks in start order (``order`` "DESC": backwards) with ``fields`` (TASK_FIELDS): their
    host launch and op (when an op task launched them) and times as the reference computes them; with
    ``pmu``, also their PMU record (total_cycles, c0…c7, each counter's ratio to the cycles ``r0``…``r7``)
    and aicore time before its rounding (``aicore_raw``), and the columns ``inner`` (SQL over the PMU
    record ``p``; ``counters``: only these counters c<slot>, by default all). ``span``: a condition on
    t.start_syscnt. ``selected``: also what a selection filters on (SELECTED). ``within``: only the tasks of
    this selection (its parameters are ``where``'s): the query that wraps this one filters on the same
    fields, but only after the rows are made; this filter comes before their PMU join and columns. ``timed``
    False: the tasks that lack a start or an end instead (a record lost), with their launch and op."""
    known = report.task_fields(within)   # (TASK_FIELDS; a framework directory's eager device selects steps)
    columns = [f"{known[f]} AS {f}" for f in dict.fromkeys(tuple(fields) + (SELECTED if selected else ()))]
    join = ""
    if any(TASK_FIELDS[f].startswith("tn.") for f in fields):
        join = "LEFT JOIN host.tensor tn ON tn.tensor_id = h.tensor_id"
    if any(TASK_FIELDS[f].startswith("f.") for f in fields):
        join += (" LEFT JOIN ffts_pmu f ON f.stream_id = t.stream_id AND f.task_id = t.task_id"
                 " AND f.exec_n = t.exec_n")
    if pmu:
        # the reference takes a single op's block count (for its AI Core time) only from the launches at or
        # after the collection's beginning on the host's clock (pmu_calculator: against warm-up's wrapped
        # ids); a single op launched before it is timed with 0 blocks, its AI Core time 0
        block = ("CASE WHEN h.model_id IS NULL AND h.ts < :host_begin THEN 0 ELSE (o.block_dim & 65535) END"
                 if report.params["host_begin"] is not None else "(o.block_dim & 65535)")
        aicore = aicore_time_sql("p.total_cycles", block, report.aic_mhz, report.ai_core_num)
        columns += [pmu_columns(counters), f"CASE WHEN p.seq IS NULL THEN NULL ELSE {aicore} END AS aicore_raw"]
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
        WHERE {_TIMED if timed else f"NOT ({_TIMED})"} {span} {_within(within, known)}
        ORDER BY t.start_syscnt {order}, t.seq {order} LIMIT -1 OFFSET 0"""


def where(report, selection: Selection) -> Tuple[str, dict]:
    """The conditions of ``selection`` over a task query's rows (its ``model_id`` and ``iteration``), and the
    parameters of both (the report's and the selection's)."""
    conditions, args = selection_sql(selection)
    return (" AND ".join(conditions) or "1"), dict(report.params, **args)


def _within(selection: Selection, known: dict) -> str:
    """SQL over the joined task rows: ``AND`` the conditions of ``where(selection)``."""
    conditions, _args = selection_sql(selection, known["model_id"], known["iteration"])
    return " ".join(f"AND {condition}" for condition in conditions)


def pmu_columns(counters: Optional[List[int]] = None) -> str:
    return ", ".join(["p.total_cycles"] + [f"p.c{i}" for i in (range(8) if counters is None else counters)])


def task_span(report, selection: Selection):
    """(first, last) host timestamps (as recorded) of the selected tasks and their launches, or None."""
    conditions, args = where(report, selection)
    tasks = task_query(report, ("start_ns", "end_ns", "call_begin"), within=selection)
    lo, hi, call = report.conn.execute(f"SELECT min(start_ns), max(end_ns), min(call_begin) FROM ({tasks})"
                                       f" WHERE {conditions}", args).fetchone()
    if lo is None:
        return _execution_span(report, selection) if report.without_devices else None
    lo, hi = report.time.host_stamp(lo), report.time.host_stamp(hi)    # (ticks when the host gives its frequency)
    if call is not None:
        lo = min(lo, call)
    return int(lo) - 1, int(hi) + 1


def _execution_span(report, selection: Selection):
    """A host without devices: (first, last) host timestamps of the selected model executions' calls."""
    conditions, args = where(report, selection)        # (model_id and iteration: model_exec's columns)
    lo, hi = report.conn.execute("SELECT min(a.begin), max(a.[end]) FROM host.model_exec m JOIN host.api a"
                                 f" ON a.seq = m.seq WHERE {conditions}", args).fetchone()
    return None if lo is None else (int(lo) - 1, int(hi) + 1)


def part_bounds(report, k: int, n: int) -> Tuple[int, int]:
    """Start counters splitting the timed tasks into the n ranges of msprof.tables.part_cut: range k."""
    conn = report.conn
    (count,) = conn.execute("SELECT count(*) FROM task WHERE start_syscnt IS NOT NULL").fetchone()

    def cut(i: int) -> int:
        if i <= 0:
            return -(1 << 63)
        if i >= n:
            return (1 << 63) - 1
        row = conn.execute("SELECT start_syscnt FROM task WHERE start_syscnt IS NOT NULL"
                           " ORDER BY start_syscnt LIMIT 1 OFFSET ?", (int(count * part_cut(i, n)),)).fetchone()
        return row[0] if row else (1 << 63) - 1

    return cut(k), cut(k + 1)
