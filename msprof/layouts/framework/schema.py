"""The tables FRAMEWORK decoders fill (msprof.decode.framework), as data: one database per framework
directory (per rank). Raw records as written: times in the framework's own base (ns of CLOCK_MONOTONIC_RAW or
counter values; framework.md §1), strings as ids of ``fw_string``; ``seq`` is a record's place in its file.
The derived tables (``fw_op``, ``fw_step``) hold local epoch ns (docs/framework-target.md §2).
"""
from msprof.store import BOOKKEEPING, Schema, TableDef

FRAMEWORK = Schema("framework", dict(BOOKKEEPING, **{
    "fw_string": TableDef({"id": int, "text": str}, "id"),
    # torch.op_range: an op's host range, threads, autograd sequence number and its inner strings (ids)
    "torch_op": TableDef({"seq": int, "start": int, "end": int, "sequence_number": int, "pid": int, "tid": int,
                          "end_tid": int, "fwd_tid": int, "scope": int, "is_async": int, "name": int,
                          "input_dtypes": int, "input_shapes": int, "input_tensors": int, "input_tensor_lists": int,
                          "input_scalars": int, "call_stack": int, "module_hierarchy": int, "extra_args": int},
                         "seq"),
    # torch.op_mark: task-queue marks (category 0 enqueue start, 1 enqueue end, 2 dequeue start, 3 dequeue end)
    "op_mark": TableDef({"seq": int, "time": int, "category": int, "corr_id": int, "tid": int, "pid": int,
                         "name": int}, "seq"),
    # torch.memory_usage: caching-allocator events (data type 0 malloc, 1 free, 2 block free; component 0
    # caching, 1 workspace; device type 20 NPU, 0 CPU)
    "torch_memory": TableDef({"seq": int, "ptr": int, "time": int, "size": int, "allocated": int, "reserved": int,
                              "active": int, "stream_ptr": int, "device_type": int, "device_index": int,
                              "component": int, "data_type": int, "allocator": int, "tid": int, "pid": int}, "seq"),
    "gc_record": TableDef({"seq": int, "pid": int, "start": int, "end": int}, "seq"),
    # torch.python_tracer_func (tag 0 Python call, 1 Python return, 2 C call, 3 C return) and its names
    "py_call": TableDef({"seq": int, "time": int, "tid": int, "pid": int, "hash_key": int, "tag": int}, "seq"),
    "py_name": TableDef({"seq": int, "hash_key": int, "text": str}, "seq"),
    "param_tensor": TableDef({"seq": int, "hash_key": int, "module_params": str, "optimizer_params": str}, "seq"),
    # MindSpore op_range_<rank> and cpu_ms_memory_record_<rank>.txt
    "ms_op": TableDef({"seq": int, "tid": int, "flow_id": int, "step": int, "start": int, "end": int, "pid": int,
                       "module": int, "event": int, "stage": int, "level": int, "is_graph_data": int,
                       "is_stage": int, "is_stack": int, "name": int, "full_name": int, "module_graph": int,
                       "event_graph": int, "custom_info": int}, "seq"),
    "ms_memory": TableDef({"seq": int, "time": int, "allocated": int, "reserved": int, "active": int}, "seq"),
    # derived at import (msprof.layouts.framework.ops): torch ops in tree order, local epoch ns; the steps
    "fw_op": TableDef({"dfs": int, "seq": int, "start": int, "end": int, "tid": int, "depth": int, "parent": int,
                       "dfs_end": int, "step": int, "name": int}, "dfs"),
    "fw_step": TableDef({"step": int, "dfs": int, "start": int, "end": int}, "dfs"),
    # derived at import (msprof.layouts.framework.links): the task queue's ranges (kind 0 enqueue, 1 dequeue;
    # ``op``: the op holding an enqueue), each launched kernel with its self op and step (``dur``: the CANN
    # timeline's µs), and per op the sums operator_details prints (NULL: no kernel, printed as torch_npu's 0) and
    # its children's summed durations (msprof.layouts.framework.operators)
    "fw_queue": TableDef({"seq": int, "kind": int, "corr_id": int, "tid": int, "pid": int, "name": int,
                          "start": int, "end": int, "op": int}, "seq"),
    "fw_link": TableDef({"seq": int, "device": int, "launch": int, "start": int, "dur": float, "task_type": str,
                         "kernel": str, "stream": int, "op": int, "step": int, "corr_id": int}, "seq"),
    "fw_op_device": TableDef({"dfs": int, "self_us": float, "total_us": float, "self_ai_us": float,
                              "total_ai_us": float, "kernels": int}, "dfs"),
    "fw_op_host": TableDef({"dfs": int, "children_ns": int}, "dfs"),
}), indexes=[("torch_op", ["start", "seq"]), ("fw_queue", ["kind", "corr_id"])])
