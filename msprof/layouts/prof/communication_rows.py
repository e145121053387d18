"""op_summary's COMMUNICATION rows (docs/prof-format.md, "HCCL"): each execution of a communication op
(msprof.layouts.prof.families.hccl.op_rows) as a row of the task query, merged with the tasks by start time
so that the waits are computed over both, as the reference analyser sorts them into the table.

The rows are few (one per collective op run): they are put in a TEMP table of the report's connection and
joined to the task query with UNION ALL. A device without HCCL data pays one one-row query and its query
is left as it was.
"""
from msprof.collection import read_result_dir
from msprof.layouts.prof.families import hccl
from msprof.layouts.prof.families.base import Context

TABLE = "temp.communication_op"
TASKS = "temp.communication_task"           # (stream, task) of the communication ops' tasks
TASK_TYPE = "COMMUNICATION"
# the fields a COMMUNICATION row has (every other field of the task query is NULL in it): ``start_syscnt`` is
# the counter of its first task plus a half, so that it comes after the tasks starting then (the reference
# sorts its rows after the tasks' with a stable sort) and ties with none of them; ``ge`` 1 makes it one of
# op_summary's rows; no ``seq`` tells it from a task.
FIELDS = ("start_syscnt", "op_name", "op_type", "task_type", "ge", "start_ns", "end_ns")


def make(report) -> int:
    """Fill TABLE with the device's communication op runs; how many there are (0: none, no table)."""
    if report.without_devices or not report.has_host or report.conn.execute(
            "SELECT 1 FROM host.sqlite_master WHERE name = 'hccl_info'").fetchone() is None or \
            report.conn.execute("SELECT 1 FROM host.hccl_info LIMIT 1").fetchone() is None:
        return 0
    context = Context(read_result_dir(report.unit.path))
    tasks = hccl.communication_tasks(report.conn, context)
    rows = [(syscnt + 0.5, name, op_type, TASK_TYPE, 1, start, start + duration)
            for name, op_type, start, duration, syscnt in hccl.op_rows(report.conn, context, tasks)]
    if rows:
        conn = report.conn
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS communication_op ({', '.join(FIELDS)})")
        conn.execute(f"DELETE FROM {TABLE}")
        conn.executemany(f"INSERT INTO {TABLE} VALUES ({', '.join('?' * len(FIELDS))})", rows)
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS communication_task (stream_id, task_id,"
                     " PRIMARY KEY (stream_id, task_id)) WITHOUT ROWID")
        conn.execute(f"DELETE FROM {TASKS}")
        conn.executemany(f"INSERT OR IGNORE INTO {TASKS} VALUES (?, ?)", ((t["stream"], t["task"]) for t in tasks))
    return len(rows)


def task_name(report, name: str) -> str:
    """SQL of a task's name in the timeline (``name``: its name otherwise): the reference names a communication
    op's task (no GE task) by its task type."""
    if not report.communication_ops:
        return name
    return f"CASE WHEN {is_task()} THEN task_type ELSE {name} END"


def is_task() -> str:
    """SQL: whether the task of a task query's row ``q`` (with ``ge``) is a communication op's."""
    return (f"(ge = 0 AND EXISTS (SELECT 1 FROM {TASKS} c WHERE c.stream_id = q.stream_id"
            f" AND c.task_id = q.task_id))")


def merged(report, tasks: str, args: dict, span: str) -> str:
    """The task query ``tasks`` with the COMMUNICATION rows in it (those of ``span``, a condition on
    ``t.start_syscnt``), in start order; ``tasks`` itself when the device has none."""
    if not report.communication_ops:
        return tasks
    names = [d[0] for d in report.conn.execute(f"SELECT * FROM ({tasks}) LIMIT 0", args).description]
    arm = ", ".join(f"{name}" if name in FIELDS else f"NULL AS {name}" for name in names)
    return (f"SELECT * FROM ({tasks}) UNION ALL SELECT {arm} FROM {TABLE} t WHERE 1 {span}"
            " ORDER BY start_syscnt")

