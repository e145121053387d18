"""AI CPU of a PROF_ device: the kernels' own times and the data-preprocessing events of ``aicpu.data``
(msprof.decode.aicpu), printed as the reference's ``aicpu`` and ``dp`` files (docs/prof-format.md, "AI CPU").

An AI CPU record names its op through the device run that contains its end (same stream and task) and that
run's launch: the op's name when the launch is one of GE's tasks, N/A otherwise. ``aicpu_rows`` reads this
family's table in the device database (``main``, beside ``task``) with the host's attached as ``host``.
"""
from decimal import Decimal
from typing import List, Tuple

from msprof.decode.aicpu import DP_COLUMNS, NODE_COLUMNS, AicpuDecoder
from msprof.layouts.prof.families.base import Context, Family, kinds, run_launch
from msprof.store import TableDef

AICPU_COLUMNS = ["Timestamp(us)", "Node", "Compute_time(us)", "Memcpy_time(us)", "Task_time(us)",
                 "Dispatch_time(us)", "Total_time(us)", "Stream ID", "Task ID"]
DP_HEADERS = ["Timestamp(us)", "Action", "Source", "Cached Buffer Size"]

TABLES = {"aicpu_task": TableDef(dict({c: int for c in NODE_COLUMNS})),
          "aicpu_dp": TableDef({"ts": int, "action": str, "source": str, "buffer_size": int})}

FAMILY = Family("aicpu", "device", kinds((r"^aicpu\.data(\.\d+)?$", "aicpu")), TABLES,
                {"aicpu": lambda item: AicpuDecoder()})

# each record with the device run containing its end, and that run's op (a GE task's). The runs are those of
# the AI CPU tasks' ids, set apart once first: searched among all of the device's tasks, each record's search
# cost a scan of them. (LIMIT -1 keeps SQLite from folding them back into each search: what MATERIALIZED
# says, which SQLite before 3.35 does not know.)
ROWS_SQL = f"""
WITH runs AS (
    SELECT t.stream_id, t.task_id, t.start_syscnt, t.end_syscnt, t.exec_n FROM main.task t
    WHERE (t.stream_id, t.task_id) IN (SELECT stream_id, task_id FROM main.aicpu_task) LIMIT -1)
SELECT a.stream_id, a.task_id, a.start_syscnt, a.end_syscnt, a.compute_start_us, a.memcpy_start_us,
       a.memcpy_end_us, a.submit_syscnt, a.after_run_syscnt, a.dispatch_us,
       (SELECT o.op_name FROM runs t JOIN host.launch l ON {run_launch("t", "l")}
            JOIN host.op o ON o.op_id = l.op_id AND o.ge = 1
        WHERE t.stream_id = a.stream_id AND t.task_id = a.task_id AND t.start_syscnt <= a.end_syscnt
            AND a.end_syscnt <= t.end_syscnt ORDER BY t.start_syscnt LIMIT 1) AS op_name
FROM main.aicpu_task a ORDER BY a.rowid
"""


def aicpu_rows(conn, context: Context) -> Tuple[List[str], List[List[str]]]:
    """aicpu's columns (before Device_id) and text rows: the records that started after the collection began,
    by start."""
    rows = []
    begin = float(context.begin_text)
    for (stream, task, start, end, c0, c1, c2, submit, after, dispatch, op_name) in conn.execute(ROWS_SQL, {"device": int(context.device_id)}):
        start_ms, end_ms = _ms(context, start), _ms(context, end)
        start_text = context.local_text(start_ms * 1000)
        if begin > float(start_text):
            continue
        rows.append([start_text, op_name or "N/A", _r3((c1 - c0) / 1000 * 1000), _r3((c2 - c1) / 1000 * 1000),
                     _r3((end_ms - start_ms) * 1000), _r3(dispatch / 1000 * 1000),
                     _r3(float(after - submit) / context.hz * 1000 * 1000), str(stream), str(task)])
    rows.sort(key=lambda row: row[0])
    return AICPU_COLUMNS, rows


def dp_rows(conn, context: Context, schema: str = "main") -> Tuple[List[str], List[List[str]]]:
    """dp's columns and rows (times without the TAB the other files have: the reference prints them so);
    ``schema``: where this family's tables are."""
    rows = [[context.ns_text(float(ts)), action, source, str(size)]
            for ts, action, source, size in conn.execute(f"SELECT ts, action, source, buffer_size FROM"
                                                         f" {schema}.aicpu_dp ORDER BY rowid")]
    return DP_HEADERS, rows


def _ms(context: Context, syscnt: int) -> float:
    return float(syscnt - context.cnt_s * 1e9) / context.hz * 1000 + context.mono_s * 1000


def _r3(value: float) -> str:
    return repr(round(value, 3))
