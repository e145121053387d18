"""Tables of the per-result-dir database, as data: name → (columns, primary key).

Raw tables hold every decoded record as read (plus its stream order ``seq``); derived tables are
computed from them at import. Column order here is the insert order used by the loaders.

HWTS records are stored paired: each ``task`` row holds one execution's start record and end record
(their syscnt and task type), and an unmatched record is a row with the other side NULL — so every
decoded HWTS record is in ``task`` exactly once, without a second 2-rows-per-task copy. Their rolling
counters are checked while decoding and gaps are reported, not stored.
"""
from msprof.decode.pmu import COUNTERS

PMU_COLUMNS = [f"c{i}" for i in range(COUNTERS)]

TABLES = {
    # bookkeeping
    "meta": ({"key": str, "value": str}, "key"),
    "source_file": ({"path": str, "kind": str, "size": int, "mtime_ns": int, "sha256": str}, "path"),
    "decode_count": ({"stream": str, "kind": str, "files": int, "bytes": int, "records": int,
                      "skipped": int, "head_lost": int, "tail_lost": int}, "stream"),
    "notice": ({"seq": int, "level": str, "message": str}, "seq"),
    # model description (net.info, layer.info)
    "model": ({"model_id": int, "model_name": str, "batch_num": int, "input_pic_num": int, "layer_num": int},
              "model_id"),
    "layer": ({"model_id": int, "layer_id": int, "task_id": int, "stream_id": int, "layer_type": str,
               "layer_name": str, "ori_layer_name": str}, None),
    # raw records
    "acl_api": ({"seq": int, "api_type": int, "start": int, "end": int, "pid": int, "tid": int, "name": str},
                "seq"),
    "pmu": (dict({"seq": int, "core_id": int, "stream_id": int, "task_id": int, "exec_n": int,
                  "total_cycles": int}, **{c: int for c in PMU_COLUMNS}), "seq"),
    "pmu_event": ({"slot": int, "event_id": int, "name": str}, "slot"),
    "step_trace": ({"seq": int, "syscnt": int, "index_id": int, "model_id": int, "stream_id": int,
                    "task_id": int, "tag_id": int}, "seq"),
    "freq_change": ({"seq": int, "syscnt": int, "mhz": int}, "seq"),
    # derived (task: paired HWTS records, see above)
    "iteration": ({"model_id": int, "index_id": int, "start_syscnt": int, "end_syscnt": int}, None),
    "task": ({"seq": int, "stream_id": int, "task_id": int, "task_type": int, "start_syscnt": int,
              "end_syscnt": int, "at_syscnt": int, "exec_n": int, "dur_us": float, "model_id": int, "index_id": int,
              "layer_id": int}, "seq"),
}

# Created after the bulk load (cheaper than maintaining them row by row).
INDEXES = [
    ("task", ["model_id", "index_id", "at_syscnt"]),
    ("pmu", ["stream_id", "task_id", "exec_n"]),
    ("layer", ["model_id", "layer_id"]),
]


def insert_sql(table: str, skip_seq: bool = False, rows: int = 1) -> str:
    columns = [c for c in TABLES[table][0] if not (skip_seq and c == "seq")]
    one = f"({', '.join('?' for _ in columns)})"
    return f"INSERT INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) VALUES {', '.join([one] * rows)}"

