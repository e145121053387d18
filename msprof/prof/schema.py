"""Tables of the PROF databases, as data (like msprof/schema.py does for JOBs): name → (columns, primary key).

Two databases per PROF_ directory (docs/prof.md "Databases"):

* ``host/sqlite/msprof.db``: decoded host records, the name dictionaries and the derived ``host_task``
  table (every kernel task launched on the host with its op name/type, task type, block dim, model and
  iteration: the association of docs/prof-format.md §3, done once at import).
* ``device_N/sqlite/msprof.db``: device tasks (HWTS or STARS start/end pairs) and the aicore PMU records.
  Reports open it and ATTACH the host database as ``host``.

The bookkeeping tables (meta, source_file, decode_count, notice) are the JOB ones, so freshness checks
(msprof.store.is_fresh) work unchanged.
"""
from msprof.schema import TABLES as JOB_TABLES

PMU_COUNTERS = 8
PMU_COLUMNS = [f"c{i}" for i in range(PMU_COUNTERS)]

BOOKKEEPING = {name: JOB_TABLES[name] for name in ("meta", "source_file", "decode_count", "notice")}

HOST_TABLES = dict(BOOKKEEPING, **{
    # raw records (host timestamps as recorded; hashes as signed 64-bit)
    "api": ({"seq": int, "level": int, "struct_type": int, "thread": int, "begin": int, "end": int,
             "item_id": int, "request_id": int, "from_events": int}, "seq"),
    "event": ({"seq": int, "level": int, "struct_type": int, "thread": int, "request_id": int, "ts": int,
               "item_id": int}, "seq"),
    "node_info": ({"seq": int, "thread": int, "ts": int, "op_name_hash": int, "task_type": int,
                   "op_type_hash": int, "block_dim": int, "op_flag": int, "aging": int}, "seq"),
    "task_track": ({"seq": int, "thread": int, "ts": int, "device_id": int, "stream_id": int, "task_id": int,
                    "batch_id": int, "rts_type": int, "kernel_hash": int, "aging": int}, "seq"),
    "graph_map": ({"seq": int, "thread": int, "ts": int, "model_name_hash": int, "graph_id": int}, "seq"),
    "type_name": ({"level": int, "type": int, "name": str}, None),
    "hash_string": ({"hash": int, "text": str}, "hash"),
    # derived
    "model_exec": ({"seq": int, "thread": int, "begin": int, "end": int, "model_id": int, "iteration": int},
                   "seq"),
    "model": ({"model_id": int, "model_name": str, "iterations": int}, "model_id"),
    "host_task": ({"seq": int, "device_id": int, "stream_id": int, "task_id": int, "batch_id": int,
                   "thread": int, "ts": int, "op_name": str, "op_type": str, "task_type": str, "block_dim": int,
                   "op_flag": int, "op_state": str, "model_id": int, "iteration": int, "kernel_name": str,
                   "rts_type": str, "occ": int, "cnt": int}, "seq"),
})

DEVICE_TABLES = dict(BOOKKEEPING, **{
    "task": ({"seq": int, "stream_id": int, "task_id": int, "task_type": int, "start_syscnt": int,
              "end_syscnt": int, "exec_n": int, "occ": int}, "seq"),
    "stars_log": ({"seq": int, "stream_id": int, "task_id": int, "sqe_type": int, "log_type": int,
                   "syscnt": int}, "seq"),
    "pmu": (dict({"seq": int, "stream_id": int, "task_id": int, "exec_n": int, "total_cycles": int},
                 **{c: int for c in PMU_COLUMNS}), "seq"),
    "pmu_event": ({"slot": int, "event_id": int}, "slot"),
})

HOST_INDEXES = [
    ("api", ["thread", "level", "begin"]),
    ("node_info", ["thread", "ts"]),
    ("graph_map", ["thread", "ts"]),
    ("host_task", ["device_id", "stream_id", "task_id", "occ"]),
    ("type_name", ["level", "type"]),
]
DEVICE_INDEXES = [
    ("task", ["stream_id", "task_id", "start_syscnt"]),
    ("pmu", ["stream_id", "task_id", "exec_n"]),
]


def create(db, tables) -> None:
    for name, (columns, pk) in tables.items():
        db[name].create(columns, pk=pk, not_null={pk} if pk else None)


def create_indexes(db, indexes) -> None:
    for table, columns in indexes:
        db[table].create_index(columns, if_not_exists=True)


def insert_sql(tables, table: str) -> str:
    columns = [c for c in tables[table][0] if c != "seq"]
    return (f"INSERT INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})")
