"""Tables of the two databases of a PROF_ directory, as data (docs/prof.md "Databases"):

* ``host/sqlite/msprof.db``: the host's API calls and events, the name dictionaries, the GE node infos, and
  ``launch``: every task_track record with what the association found for it (its op, op type, GE task
  type, block dim, model and iteration; docs/prof-format.md §3), done once at import.
* ``device_N/sqlite/msprof.db``: device tasks (HWTS or STARS start/end pairs) and the aicore PMU records.

Both also hold the tables of their role's data families (msprof.layouts.prof.families), empty without them.

Reports open the device database and ATTACH the host one as ``host``.
"""
from msprof.decode.pmu import ASCEND
from msprof.layouts.prof import families
from msprof.store import BOOKKEEPING, Schema, TableDef

PMU_COLUMNS = [f"c{i}" for i in range(ASCEND.counters)]

HOST = Schema("PROF host", dict(BOOKKEEPING, **{
    # raw records (host timestamps as recorded; hashes as signed 64-bit)
    # (conn_id: the reference's connection_id of a call paired from events, its end's; a decoded call's is
    # computed from its seq: msprof.decode.api_event)
    "api": TableDef({"seq": int, "level": int, "struct_type": int, "thread": int, "begin": int, "end": int,
                  "item_id": int, "request_id": int, "from_events": int, "conn_id": int}, "seq",
                    defaults={"from_events": 0}),
    # the API calls (not the paired events) per (level, key, duration in host ticks), the key being the struct
    # type at the levels named by it, else the item id: what api_statistic sums, counted as the calls are
    # decoded (a key may have several rows: their counts add up)
    "api_duration": TableDef({"level": int, "k": int, "d": int, "n": int}),
    "event": TableDef({"seq": int, "level": int, "struct_type": int, "thread": int, "request_id": int, "ts": int,
                    "item_id": int, "conn_id": int}, "seq"),
    "node_info": TableDef({"seq": int, "thread": int, "ts": int, "op_name_hash": int, "task_type": int,
                           "op_type_hash": int, "block_dim": int, "op_flag": int, "aging": int, "info_id": int},
                          "seq"),
    # a node's tensor description (records of one node merged) as the id of its content, and the contents
    "tensor_info": TableDef({"seq": int, "thread": int, "ts": int, "node_hash": int, "tensor_id": int}, "seq"),
    "tensor": TableDef({"tensor_id": int, "input_shapes": str, "input_data_types": str, "input_formats": str,
                        "output_shapes": str, "output_data_types": str, "output_formats": str}, "tensor_id"),
    "graph_map": TableDef({"seq": int, "thread": int, "ts": int, "model_name_hash": int, "graph_id": int}, "seq"),
    "type_name": TableDef({"level": int, "type": int, "name": str}),
    "hash_string": TableDef({"hash": int, "text": str}, "hash"),
    # derived
    "model_exec": TableDef({"seq": int, "model_id": int, "iteration": int}, "seq"),
    "model": TableDef({"model_id": int, "model_name": str, "iterations": int}, "model_id"),
    # a task_track record and what the association found for it (msprof.layouts.prof.associate): its op, its
    # model and iteration, occ = its rank among the launches of its (device, stream, task), and the begin of
    # its node-level call (a timeline draws its HostToDevice flow from there)
    "launch": TableDef({"seq": int, "thread": int, "ts": int, "device_id": int, "stream_id": int, "task_id": int,
                        "batch_id": int, "occ": int, "op_id": int, "model_id": int, "iteration": int,
                        "call_begin": int, "tensor_id": int}, "seq"),
    # the distinct ops launched: names and types (kernel = 1: an op task, KERNEL_*, STARS_COMMON, FFTS_PLUS;
    # ge = 1: a task of the GE task list op_summary and op_statistic have — not a kernel launched in a node
    # call without node_basic_info, nor a task that is no kernel: their task_type is their runtime type, as
    # task_time names the run paired with them)
    "op": TableDef({"op_id": int, "op_name": str, "op_type": str, "task_type": str, "block_dim": int, "op_flag": int,
                 "op_state": str, "kernel_name": str, "rts_type": str, "kernel": int, "ge": int}, "op_id"),
    # launches per (device, stream, task): an id launched once (a static graph) names all its executions
    "launch_count": TableDef({"device_id": int, "stream_id": int, "task_id": int, "launches": int}),
}, **families.tables("host")), indexes=families.indexes("host") + [
    # the association's time lookups: node- and model-level calls per thread by begin (partial, covering)
    ("api", ["thread", "begin", "end", "item_id", "seq"], "level = 10000"),
    ("api", ["thread", "begin", "end", "item_id", "seq"], "level = 15000"),
    ("node_info", ["thread", "ts", "seq", "info_id"]),
    ("tensor_info", ["thread", "ts", "node_hash", "seq", "tensor_id"]),
])
# Lookups by (stream, task, occurrence) come in time order, where the occurrence (launch rank, execution
# number) grows slowly and the task id cycles: with the occurrence first, consecutive lookups land on
# neighbouring index pages instead of one page per op id, and SQLite's small default cache holds them
# (docs/performance.md, "Index order").
HOST_LATE_INDEXES = [
    ("launch", ["device_id", "occ", "stream_id", "task_id"]),
    ("launch_count", ["device_id", "stream_id", "task_id"]),
]

DEVICE = Schema("PROF device", dict(BOOKKEEPING, **{
    "task": TableDef({"seq": int, "stream_id": int, "task_id": int, "task_type": int, "start_syscnt": int,
                   "end_syscnt": int, "exec_n": int}, "seq"),
    "stars_log": TableDef({"seq": int, "stream_id": int, "task_id": int, "sqe_type": int, "log_type": int,
                        "syscnt": int}, "seq"),
    "pmu": TableDef(dict({"seq": int, "core_id": int, "stream_id": int, "task_id": int, "exec_n": int,
                       "total_cycles": int}, **{c: int for c in PMU_COLUMNS}), "seq"),
    "pmu_event": TableDef({"slot": int, "event_id": int}, "slot"),
    # when two timed tasks start at the same moment (TIED_STARTS): every (stream, task) with its first start,
    # ranked by it, then by its first record, and whether one of its tasks ties (tied = 1). This is the
    # device's half of the reference's order of such tasks (msprof.layouts.prof.ties.FirstAppearance),
    # which every export-summary process needs: made once here, where the device's import ends well before
    # the host's, instead of in each of the two processes. Empty without ties.
    "task_key": TableDef({"rank": int, "stream_id": int, "task_id": int, "first_start": int, "tied": int}, "rank"),
}, **families.tables("device")), indexes=families.indexes("device") + [
    ("task", ["start_syscnt"]),
    ("pmu", ["exec_n", "stream_id", "task_id"]),     # occurrence first: see HOST_LATE_INDEXES
])

TASK_COLUMNS = ("stream_id", "task_id", "task_type", "start_syscnt", "end_syscnt", "exec_n")
# the start counters two or more timed tasks share (tasks that start at the same moment: docs/prof-format.md
# "Ties")
TIED_STARTS = ("SELECT start_syscnt FROM task WHERE start_syscnt IS NOT NULL GROUP BY start_syscnt"
               " HAVING count(*) > 1")
