"""Tables of a JOB result directory's database (``<JOB>/sqlite/msprof.db``), as data.

Raw tables hold every decoded record as read (plus its stream order ``seq``); derived tables are computed
from them at import. Column order here is the insert order used by the loaders.

HWTS records are stored paired: each ``task`` row holds one execution's start record and end record (their
syscnt and task type), and an unmatched record is a row with the other side NULL — so every decoded HWTS
record is in ``task`` exactly once, without a second 2-rows-per-task copy. Their rolling counters are
checked while decoding and gaps are reported, not stored.
"""
from msprof.decode.pmu import SVP
from msprof.store import BOOKKEEPING, Schema, TableDef

PMU_COLUMNS = [f"c{i}" for i in range(SVP.counters)]

SCHEMA = Schema("JOB", dict(BOOKKEEPING, **{
    # model description (net.info, layer.info)
    "model": TableDef({"model_id": int, "model_name": str, "batch_num": int, "input_pic_num": int, "layer_num": int},
                   "model_id"),
    "layer": TableDef({"model_id": int, "layer_id": int, "task_id": int, "stream_id": int, "layer_type": str,
                    "layer_name": str, "ori_layer_name": str}),
    # raw records
    "acl_api": TableDef({"seq": int, "api_type": int, "start": int, "end": int, "pid": int, "tid": int, "name": str},
                     "seq"),
    "pmu": TableDef(dict({"seq": int, "core_id": int, "stream_id": int, "task_id": int, "exec_n": int,
                       "total_cycles": int}, **{c: int for c in PMU_COLUMNS}), "seq"),
    "pmu_event": TableDef({"slot": int, "event_id": int, "name": str}, "slot"),
    "step_trace": TableDef({"seq": int, "syscnt": int, "index_id": int, "model_id": int, "stream_id": int,
                         "task_id": int, "tag_id": int}, "seq"),
    "freq_change": TableDef({"seq": int, "syscnt": int, "mhz": int}, "seq"),
    # derived (task: paired HWTS records, see above)
    "iteration": TableDef({"model_id": int, "index_id": int, "start_syscnt": int, "end_syscnt": int}),
    "task": TableDef({"seq": int, "stream_id": int, "task_id": int, "task_type": int, "start_syscnt": int,
                   "end_syscnt": int, "at_syscnt": int, "exec_n": int, "dur_us": float, "model_id": int,
                   "index_id": int, "layer_id": int}, "seq"),
}), indexes=[
    ("task", ["model_id", "index_id", "at_syscnt"]),
    # exec_n first: an iteration's lookups share one exec_n, so they read neighbouring index pages (with
    # (stream, task, exec_n) each lookup landed on a page of its own)
    ("pmu", ["exec_n", "stream_id", "task_id"]),
    ("layer", ["model_id", "layer_id"]),
])

TASK_COLUMNS = ("stream_id", "task_id", "task_type", "start_syscnt", "end_syscnt", "at_syscnt", "exec_n", "dur_us",
                "model_id", "index_id", "layer_id")
