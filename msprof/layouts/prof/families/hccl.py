"""HCCL (collective communication) of a PROF_: the host's hccl_info and hccl_op_info records
(msprof.decode.hccl), and what the reference makes of them with the call tree and the device's task runs
(docs/prof-format.md, "HCCL"): communication tasks, communication ops, communication_statistic and the
COMMUNICATION rows of op_summary.

A communication task is a task_track launched inside an HCCL-level call (level 5500; its struct type names it
master or slave) of the same thread; its hccl_info is the one inside that call; its op is the node-level call
(level 10000) enclosing it (op name: the call's item through hash_dic, op type: its node_basic_info). The
device run of a task is the run paired with its launch (``launch.occ`` = ``task.exec_n``).

``communication_tasks`` reads msprof's PROF databases (the device's, the host's attached as ``host``, where
this family's tables are).
"""
from collections import defaultdict
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.decode.compact import CompactDecoder, aging_of
from msprof.decode.hccl import HCCL_INFO, HCCL_OP_INFO, LEVEL_HCCL
from msprof.layouts.prof.families.base import Context, Family, kinds, run_launch
from msprof.store import TableDef

STATISTIC_COLUMNS = ["OP Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
                     "Ratio(%)"]

TABLES = {
    "hccl_info": TableDef({f: int for f in HCCL_INFO.layout.fields if f} | {"duration_estimated": float}),
    "hccl_op_info": TableDef({f: int for f in HCCL_OP_INFO.layout.fields} | {"aging": int}),
}

FAMILY = Family("hccl", "host", kinds((r"^(un)?aging\.additional\.hccl_info$", "hccl_info"),
                                      (r"^(un)?aging\.compact\.hccl_op_info$", "hccl_op_info")), TABLES,
                {"hccl_info": lambda item: CompactDecoder(HCCL_INFO),
                 "hccl_op_info": lambda item: CompactDecoder(HCCL_OP_INFO, aging_of(item.stem))},
                indexes=[("hccl_info", ["thread", "ts"]), ("hccl_op_info", ["thread", "ts"])])

# every communication task: its HCCL call and hccl_info, its op's node call (innermost: latest begun) and that
# call's hccl_op_info, the run
TASKS_SQL = f"""
SELECT x.*, i.size, i.plane_id, i.group_id, i.item_id, i.local_rank, i.remote_rank, i.rank_size, i.context_id,
       i.notify_id, i.duration_estimated, i.data_type, i.link_type, i.transport_type, i.rdma_type,
       p.data_type, p.alg_type, p.count
FROM (
SELECT l.seq, l.thread, l.ts, l.stream_id, l.task_id, l.batch_id, t.start_syscnt, t.end_syscnt,
       (SELECT coalesce(n.name, '') FROM host.type_name n WHERE n.level = {LEVEL_HCCL} AND n.type = h.struct_type)
           AS role,
       (SELECT i.rowid FROM host.hccl_info i WHERE i.thread = l.thread AND i.ts BETWEEN h.begin AND h.end
        ORDER BY i.ts DESC LIMIT 1) AS info,
       o.begin AS op_begin, o.item_id AS op_item, o.end AS op_end, o.seq AS op_seq, l.model_id,
       (SELECT ni.op_type_hash FROM host.node_info ni WHERE ni.thread = l.thread AND ni.ts BETWEEN o.begin AND o.end
        ORDER BY ni.ts DESC LIMIT 1) AS op_type_hash,
       (SELECT oi.rowid FROM host.hccl_op_info oi WHERE oi.thread = l.thread AND oi.ts BETWEEN o.begin AND o.end
        ORDER BY oi.ts DESC LIMIT 1) AS op_info,
       (SELECT lo.task_type FROM host.op lo WHERE lo.op_id = l.op_id) AS task_type
FROM host.launch l
JOIN host.api h ON h.level = {LEVEL_HCCL} AND h.thread = l.thread AND l.ts BETWEEN h.begin AND h.end
LEFT JOIN host.api o ON o.rowid = (SELECT a.rowid FROM host.api a WHERE a.level = 10000 AND a.thread = l.thread
                                   AND l.ts BETWEEN a.begin AND a.end ORDER BY a.begin DESC LIMIT 1)
JOIN main.task t ON {run_launch("t", "l")}
) x
LEFT JOIN host.hccl_info i ON i.rowid = x.info
LEFT JOIN host.hccl_op_info p ON p.rowid = x.op_info
ORDER BY x.ts, x.start_syscnt
"""
# what communication_tasks keeps of a task's hccl_info and its op's hccl_op_info, by name
INFO_FIELDS = ("item_id", "local_rank", "remote_rank", "rank_size", "context_id", "notify_id", "duration_estimated",
               "data_type", "link_type", "transport_type", "rdma_type", "op_data_type", "alg_type", "count")


def communication_tasks(conn, context: Context) -> List[dict]:
    """The device runs of the communication tasks with their op and hccl_info, in the reference's order
    (host launch time, then device start)."""
    names = dict(conn.execute("SELECT hash, text FROM host.hash_string"))
    tasks = []
    for (seq, thread, ts, stream, task, batch, start, end, role, info_row, op_begin, op_item, _op_end, op_seq, model,
         op_type, _op_info, task_type, size, plane, group, *info) in conn.execute(TASKS_SQL,
                                                                                  {"device": int(context.device_id)}):
        start_ns = context.device_ns(start)
        tasks.append({"thread": thread, "host_ts": ts, "stream": stream, "task": task, "start": start_ns,
                      "syscnt": start,
                      "duration": context.device_ns(end) - start_ns, "master": role == "master", "size": size,
                      "plane": plane, "op_begin": op_begin, "batch": batch, "info": info_row, "op_seq": op_seq, "model": model,
                      "task_type": task_type, "group_id": group,
                      "group": "N/A" if group is None else str(group & 0xFFFFFFFFFFFFFFFF),
                      "op_name": names.get(op_item, str(op_item)) if op_item is not None else "N/A",
                      "op_type": names.get(op_type, str(op_type)) if op_type is not None else "N/A",
                      **dict(zip(INFO_FIELDS, info))})
    return tasks


def communication_ops(tasks: List[dict], context: Context) -> List[dict]:
    """Each execution of a communication op (its node call): the first start and last end of its master tasks
    that started after the collection began."""
    ops: Dict[tuple, dict] = {}
    for task in tasks:
        if not task["master"] or task["start"] < context.begin_raw_ns:
            continue
        key = (task["op_name"], task["op_begin"], task["op_type"])
        op = ops.setdefault(key, {"op_name": task["op_name"], "op_type": task["op_type"], "start": task["start"],
                                  "end": task["start"] + task["duration"]})
        op["start"] = min(op["start"], task["start"])
        op["end"] = max(op["end"], task["start"] + task["duration"])
    return list(ops.values())


def statistic(conn, context: Context) -> Tuple[List[str], List[List[str]]]:
    """communication_statistic's columns (before Device_id) and text rows."""
    ops = communication_ops(communication_tasks(conn, context), context)
    groups: Dict[str, dict] = defaultdict(lambda: {"count": 0, "total": 0, "min": float("inf"),
                                                   "max": -float("inf")})
    for op in ops:
        duration = op["end"] - op["start"]
        group = groups[op["op_type"]]
        group["count"] += 1
        group["total"] += duration
        group["min"] = min(group["min"], duration)
        group["max"] = max(group["max"], duration)
    grand = sum(g["total"] for g in groups.values())
    rows = []
    for op_type, g in groups.items():
        ratio = round(float(g["total"] / grand * 100), 6) if grand else 0
        rows.append((op_type, g["count"], round(float(g["total"]), 6), round(float(g["min"]), 6),
                     round(float(g["total"] / g["count"]), 6), round(float(g["max"]), 6), ratio))
    rows.sort(key=lambda r: r[5], reverse=True)
    rows.sort(key=lambda r: r[2], reverse=True)
    out = [[op_type, str(count)] + [_round3(conn, v / 1000) for v in (total, low, avg, high)] +
           [_round3(conn, ratio)] for op_type, count, total, low, avg, high, ratio in rows]
    return STATISTIC_COLUMNS, out


def _round3(conn, value: float) -> str:
    """SQLite's round(x, 3), as the reference's report query rounds (msprof.tables.SQLITE_ROUND3)."""
    return repr(conn.execute("SELECT round(?, 3)", (value,)).fetchone()[0])


def op_rows(conn, context: Context, tasks: Optional[List[dict]] = None) -> List[tuple]:
    """The COMMUNICATION rows op_summary adds (op name as the reference names an execution, op type, start
    and duration in ns, as integers, and the device counter of that start), in the order of their groups:
    every execution of a communication op (its master tasks, the collection's beginning not applied)."""
    tasks = communication_tasks(conn, context) if tasks is None else tasks
    ops: Dict[tuple, list] = {}
    for name, task in named_tasks(tasks, context):
        if task["master"]:
            op = ops.setdefault((name, task["op_begin"]), [name, task["op_type"], task["start"],
                                                            task["start"] + task["duration"], task["syscnt"]])
            if task["start"] < op[2]:
                op[2], op[4] = task["start"], task["syscnt"]
            op[3] = max(op[3], task["start"] + task["duration"])
    return [(name, op_type, int(start), int(end - start), syscnt) for name, op_type, start, end, syscnt in ops.values()]


def named_tasks(tasks: List[dict], context: Context) -> Iterator[Tuple[str, dict]]:
    """Each communication task with the name the reference gives its op execution (also its ``unique_name``):
    ``<op>_<last 3 characters of the group id>_<execution of that group since the collection began>_<run of
    the task id>``."""
    groups: Dict[str, dict] = {}
    runs: Dict[tuple, int] = defaultdict(int)
    for task in tasks:
        key = (task["stream"], task["task"], task["batch"])
        runs[key] += 1
        group = groups.setdefault(task["group"], {"first": 0, "count": -1})
        if task["start"] > context.begin_raw_ns and task["op_begin"] > group["first"]:
            group["first"] = task["op_begin"]
            group["count"] += 1
        task["unique_name"] = f"{task['op_name']}_{task['group'][-3:]}_{group['count']}_{runs[key]}"
        yield task["unique_name"], task
