"""The families of issue 37 against the reference analyser (marker ``reference``): each scenario is generated
by fixtures/families (alone and together, HWTS and STARS chips, per launch, static graph and single ops), run
through the reference, and its tables compared row for row, cell for cell, with what msprof's standalone
family reports print from a database its decoders built (msprof.layouts.prof.families)."""
from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from famtest import agree, generate, msprof_databases, msprof_db, need_reference, reference, with_device

from msprof.layouts.prof.families import aicpu, hccl, l2_cache, memory, msproftx, step_trace

ALL_EXPORT = 0x072211
ROOT = Path(__file__).resolve().parents[1]

STEP_TRACE = {
    "hwts_per_launch_reduce": {"platform_version": "1", "iterations": 3, "model_as_events": True,
                               "drv_version": ALL_EXPORT, "families": {"step_trace": {"all_reduce": 2}}},
    "hwts_graph_export_noise_sliced": {"platform_version": "2", "iterations": 4, "model_as_events": True,
                                       "families": {"step_trace": {"noise": 5, "slices": 3}}},
    "stars_static_graph": {"platform_version": "5", "iterations": 4, "static_graph": True, "load_as_events": True,
                           "model_as_events": True, "drv_version": ALL_EXPORT,
                           "families": {"step_trace": {"all_reduce": 1}}},
    "loop_two_models": {"platform_version": "1", "iterations": 3, "model_as_events": True, "drv_version": ALL_EXPORT,
                        "models": [{"id": 1, "name": "a"}, {"id": 7, "name": "b"}],
                        "threads": [{"ops": [{"name": "x", "dur_us": 6}]},
                                    {"model": 7, "start_us": 40, "ops": [{"name": "y", "dur_us": 3}]}],
                        "families": {"step_trace": {"shape": "loop"}}},
    "inference": {"platform_version": "5", "iterations": 2, "model_as_events": True, "drv_version": ALL_EXPORT,
                  "families": {"step_trace": {"shape": "inference"}}},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(STEP_TRACE))
def test_step_trace(tmp_path, name):
    def ours(written, path):
        return {"step_trace": with_device("0", *step_trace.summary(*msprof_db(written, path)))}

    written, matched = agree(tmp_path, STEP_TRACE[name], ["step_trace"], ours)
    assert matched["step_trace"] == len(written.truth["step_trace"]["iterations"])
    print("step_trace %s: reference rows matched %s" % (name, matched))


MSTX = {
    "hwts_per_launch": {"platform_version": "1", "iterations": 2, "drv_version": ALL_EXPORT, "families": {"mstx": {}}},
    "stars_static_ranges_old_cann": {
        "platform_version": "5", "iterations": 2, "static_graph": True, "drv_version": ALL_EXPORT,
        "families": {"mstx": {"cann_version": "8.0.RC1", "device": [
            {"mark_id": 6, "start_tick": 5, "end_tick": 40}, {"mark_id": 5, "start_tick": 1, "end_tick": None},
            {"mark_id": 6, "start_tick": 60, "end_tick": 90}]}}},
    "segments_and_unmatched": {
        "platform_version": "5", "single_op": True, "acl_api": "aclopCompileAndExecute", "drv_version": ALL_EXPORT,
        "families": {"mstx": {
            "ex": [{"mark_id": 9, "event": "start/end", "start_us": 12, "end_us": 19, "domain": "d9",
                    "message": "long " * 70},
                   {"mark_id": 4, "event": "marker", "start_us": 11, "end_us": 11, "domain": "d4", "message": "lone"}],
            "device": [{"mark_id": 9, "start_tick": 3, "end_tick": 20}, {"mark_id": 9, "start_tick": 30,
                                                                          "end_tick": 33}],
            "slices": {"count": 2, "aligned": True}}}},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(MSTX))
def test_msprof_tx(tmp_path, name):
    def ours(written, path):
        host, host_context = msprof_db(written, path, "host")
        device, device_context = msprof_db(written, path)
        return {"msprof_tx": msproftx.summary(host, host_context, [("0", device, device_context)])}

    print("msprof_tx %s: reference rows matched %s" % (name, agree(tmp_path, MSTX[name], ["msprof_tx"], ours)[1]))


HCCL = {
    "stars_per_launch": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT, "families": {"hccl": {}}},
    "hwts_static_two_ops": {
        "platform_version": "2", "iterations": 3, "static_graph": True, "drv_version": ALL_EXPORT,
        "families": {"hccl": {"ops": [
            {"name": "hcom_broadcast_", "type": "HcomBroadcast", "tasks": [
                {"name": "Memcpy", "kind": "MEMCPY_ASYNC", "stream": 30, "dur_us": 3.5, "size": 4096}]},
            {"name": "hcom_allGather_", "type": "HcomAllGather", "tasks": [
                {"name": "Notify_Wait", "kind": "NOTIFY_WAIT", "stream": 31, "dur_us": 1, "transport": "LOCAL"},
                {"name": "Memcpy", "kind": "MEMCPY_ASYNC", "stream": 31, "dur_us": 7, "size": 65536},
                {"name": "Memcpy", "kind": "MEMCPY_ASYNC", "stream": 32, "dur_us": 9, "size": 65536,
                 "master": False}]}]}}},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(HCCL))
def test_communication_statistic(tmp_path, name):
    def ours(written, path):
        return {"communication_statistic": with_device("0", *hccl.statistic(*msprof_databases(written, path)))}

    matched = agree(tmp_path, HCCL[name], ["communication_statistic"], ours)[1]
    print("communication_statistic %s: reference rows matched %s" % (name, matched))


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(HCCL))
def test_communication_op_rows(tmp_path, name):
    """op_summary's COMMUNICATION rows: op name, type, task type, start and duration."""
    need_reference()
    written = generate(tmp_path, HCCL[name])
    ref = reference(written, tmp_path, ["op_summary"])
    header = ref["headers"]["op_summary"]
    at = [header.index(c) for c in ("Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)")]
    theirs = [[row[i] for i in at] for row in ref["rows"]["op_summary"] if row[header.index("Task Type")]
              == "COMMUNICATION"]
    conn, context = msprof_databases(written, tmp_path)
    ours = [[name_, op_type, "COMMUNICATION", context.ns_text(start), repr(round(duration / 1000, 3))]
            for name_, op_type, start, duration, _syscnt in sorted(hccl.op_rows(conn, context), key=lambda r: r[2])]
    assert ours == theirs
    print("op_summary COMMUNICATION %s: %d reference rows matched" % (name, len(ours)))


AICPU_OPS = [{"name": "conv1", "type": "Conv2D", "dur_us": 20}, {"name": "cast", "type": "Cast", "task_type": "AI_CPU",
                                                                  "dur_us": 3},
             {"name": "topk", "type": "TopK", "task_type": "AI_CPU", "dur_us": 7.5, "stream": 5}]
AICPU = {
    "stars_per_launch": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT,
                         "threads": [{"ops": AICPU_OPS}], "families": {"aicpu": {"other_type": 2}}},
    "hwts_static_sliced": {"platform_version": "1", "iterations": 3, "static_graph": True, "drv_version": ALL_EXPORT,
                           "threads": [{"ops": AICPU_OPS}],
                           "families": {"aicpu": {"compute_us": 3, "memcpy_us": 0, "dispatch_us": 7, "slices": 2}}},
    "single_op": {"platform_version": "5", "single_op": True, "acl_api": "aclopCompileAndExecute",
                  "drv_version": ALL_EXPORT, "threads": [{"ops": AICPU_OPS}], "families": {"aicpu": {}}},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(AICPU))
def test_aicpu_and_dp(tmp_path, name):
    def ours(written, path):
        conn, context = msprof_databases(written, path, "device")
        return {"aicpu": with_device("0", *aicpu.aicpu_rows(conn, context)),
                "dp": with_device("0", *aicpu.dp_rows(conn, context))}

    print("aicpu %s: reference rows matched %s" % (name, agree(tmp_path, AICPU[name], ["aicpu", "dp"], ours)[1]))


MEMORY = {
    "stars_per_launch": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT,
                         "families": {"memory": {}}},
    "hwts_device_3_static": {"platform_version": "3", "device_id": 3, "iterations": 2, "static_graph": True,
                             "drv_version": ALL_EXPORT, "families": {"memory": {
                                 "modules": [{"module": 99, "us": 3, "size": 0}, {"module": 36, "us": 2, "size": 5},
                                             {"module": 36, "us": 1, "size": 7}],
                                 "ops": [{"op": "a", "addr": 1, "size": 100, "us": 3, "allocated": 100, "reserved": 2048},
                                         {"op": "a", "addr": 2, "size": 200, "us": 4, "allocated": 300, "reserved": 2048},
                                         {"op": "a", "addr": 1, "size": -100, "us": 9, "allocated": 200,
                                          "reserved": 2048},
                                         {"op": "nameless", "addr": 3, "size": -5, "us": 10, "allocated": 200,
                                          "reserved": 2048}]}}},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(MEMORY))
def test_memory(tmp_path, name):
    def ours(written, path):
        device, context = msprof_db(written, path)
        host, host_context = msprof_db(written, path, "host")
        dev = str(written.prof.desc["device_id"])
        return {"npu_mem": with_device(dev, *memory.npu_mem_rows(device, context)),
                "npu_module_mem": with_device(dev, *memory.module_rows(device, context)),
                "memory_record": with_device(dev, *memory.record_rows(host, host_context, "main")),
                "operator_memory": with_device(dev, *memory.operator_rows(host, host_context, "main"))}

    tables = ["npu_mem", "npu_module_mem", "memory_record", "operator_memory"]
    print("memory %s: reference rows matched %s" % (name, agree(tmp_path, MEMORY[name], tables, ours)[1]))


L2 = {
    "hwts_platform_1": {"platform_version": "1", "iterations": 2, "drv_version": ALL_EXPORT,
                        "families": {"l2_cache": {}}},
    "hwts_platform_2_random_static": {"platform_version": "2", "iterations": 3, "static_graph": True,
                                      "drv_version": ALL_EXPORT, "families": {"l2_cache": {"counters": 7}}},
    "stars_two_streams": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT,
                          "threads": [{"ops": [{"name": "a", "dur_us": 4}]},
                                      {"ops": [{"name": "b", "task_type": "AI_VECTOR_CORE", "dur_us": 6}]}],
                          "families": {"l2_cache": {"counters": 3}}},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(L2))
def test_l2_cache(tmp_path, name):
    def ours(written, path):
        return {"l2_cache": with_device("0", *l2_cache.rows(*msprof_databases(written, path, "device")))}

    print("l2_cache %s: reference rows matched %s" % (name, agree(tmp_path, L2[name], ["l2_cache"], ours)[1]))


def _bench_shape(desc: dict) -> dict:
    spec = importlib.util.spec_from_file_location("stars_families", ROOT / "bench" / "stars_families.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    desc = module.describe(desc)
    # (without HCCL: op_summary's COMMUNICATION rows are not msprof's yet, docs/families-plan.md)
    return dict(desc, families={k: v for k, v in desc["families"].items() if k != "hccl"})


STARS_OPS = [{"name": "conv1", "type": "Conv2D", "block_dim": 8, "dur_us": 20},
             {"name": "relu1", "type": "Relu", "task_type": "AI_VECTOR_CORE", "block_dim": 4, "dur_us": 5},
             {"name": "cast", "type": "Cast", "task_type": "AI_CPU", "dur_us": 3},
             {"name": "mixc", "type": "FA", "task_type": "MIX_AIC", "block_dim": 3, "mix_block": 2, "dur_us": 7},
             {"name": "mixv", "type": "FB", "task_type": "MIX_AIV", "block_dim": 2, "mix_block": 3, "dur_us": 9},
             {"name": "big", "type": "MatMul", "block_dim": 40, "dur_us": 11.5}]
METRIC_SETS = ("PipeUtilization", "ArithmeticUtilization", "Memory", "MemoryL0", "MemoryUB",
               "ResourceConflictRatio", "L2Cache")
CUSTOM_EVENTS = ["0x08", "0xa", "0x15", "0x500", "0x54", "0x9", "0x302"]
FFTS = {
    "per_launch_ramp": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT,
                        "threads": [{"ops": STARS_OPS}], "families": {"ffts_pmu": {}}},
    "static_random_counters": {"platform_version": "5", "iterations": 3, "static_graph": True,
                               "drv_version": ALL_EXPORT, "threads": [{"ops": STARS_OPS}],
                               "families": {"ffts_pmu": {"counters": 11, "aiv_num": 20}}},
    **{f"single_op_{s}": {"platform_version": "5", "iterations": 2, "single_op": True, "drv_version": ALL_EXPORT,
                          "threads": [{"ops": STARS_OPS}], "families": {"ffts_pmu": {"metrics": s, "counters": 7}}}
       for s in METRIC_SETS},
    **{f"graph_{s}": {"platform_version": "5", "iterations": 2, "static_graph": True, "drv_version": ALL_EXPORT,
                      "threads": [{"ops": STARS_OPS}], "families": {"ffts_pmu": {"metrics": s, "counters": 5,
                                                                                 "aiv_num": 12}}}
       for s in METRIC_SETS if s != "PipeUtilization"},
    # Custom sets: each side's raw count of the AI Core events (the AI Vector Core's in its own slot order, here
    # a superset); when the AI Vector Core's events lack one of them the reference writes no PMU column at all
    "graph_custom": {"platform_version": "5", "iterations": 2, "static_graph": True, "drv_version": ALL_EXPORT,
                     "threads": [{"ops": STARS_OPS}],
                     "families": {"ffts_pmu": {"metrics": "Custom:0x08,0xa,0x15,0x500,0x54,0x9,0x302",
                                               "events": CUSTOM_EVENTS[:7], "counters": 5,
                                               "aiv_events": ["0x31"] + CUSTOM_EVENTS[6::-1]}}},
    "single_op_custom_aiv_unfit": {"platform_version": "5", "iterations": 1, "single_op": True,
                                   "drv_version": ALL_EXPORT, "threads": [{"ops": STARS_OPS}],
                                   "families": {"ffts_pmu": {"metrics": "Custom:0x08,0xa,0x15,0x500,0x54,0x9,0x302",
                                                             "events": CUSTOM_EVENTS[:7], "counters": 5,
                                                             "aiv_events": ["0x31"] + CUSTOM_EVENTS[:6]}}},
    # taskBlock on: a MIX task's first core writes block records too, which are not summed into the second's
    "static_task_block": {"platform_version": "5", "iterations": 3, "static_graph": True, "drv_version": ALL_EXPORT,
                          "threads": [{"ops": STARS_OPS}], "families": {"ffts_pmu": {"counters": 3,
                                                                                     "task_block": True}}},
    # bench/run.py's stars-families shape at 20 ops (every other family present; AI CPU tasks among them)
    "bench_shape": _bench_shape({"iterations": 2, "static_graph": True, "drv_version": ALL_EXPORT, "jitter": 1,
                                 "models": [{"id": 1, "name": "bench"}],
                                 "threads": [{"ops": [{"name": f"op{i}", "dur_us": 5 + i % 11} for i in range(20)]}]}),
    "per_launch_task_block": {"platform_version": "5", "iterations": 2, "drv_version": ALL_EXPORT,
                              "threads": [{"ops": STARS_OPS}],
                              "families": {"ffts_pmu": {"metrics": "Memory", "task_block": True}}},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(FFTS))
def test_stars_pmu_columns(tmp_path, name):
    """op_summary's PMU columns on platform 5 (every metric set; AI Core, AI Vector Core, AI CPU and MIX
    tasks), row by row as ``msprof export summary`` writes them."""
    from msprof import api
    from reference_runner import read_csv

    need_reference()
    written = generate(tmp_path, FFTS[name])
    ref = reference(written, tmp_path, ["op_summary"])
    header = ref["headers"]["op_summary"]
    first = header.index("Context ID") + 1
    path = [p for p in api.export_summary(written.path, "csv") if p.name == "op_summary.csv"][0]
    with open(path, newline="") as handle:
        lines = list(csv.reader(handle))
    assert lines[0][lines[0].index("Context ID") + 1:] == header[first:]
    ours = [row[lines[0].index("Context ID") + 1:] for row in lines[1:]]
    theirs = [r[first:] for r in ref["rows"]["op_summary"]]
    # (every row has PMU cells, unless the reference writes no PMU column)
    assert len(ours) == len(theirs) and (first == len(header) or any(r[0] != "N/A" for r in ours))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, "row %d: msprof %r, reference %r" % (i, a, b)
    print("op_summary STARS PMU %s: %d reference rows x %d columns matched" % (name, len(ours), len(header) - first))


ALL_FAMILIES = {"step_trace": {"all_reduce": 1}, "mstx": {}, "hccl": {}, "aicpu": {}, "memory": {}, "l2_cache": {}}
TOGETHER = {
    "stars_per_launch": {"platform_version": "5", "iterations": 2, "model_as_events": True, "drv_version": ALL_EXPORT,
                         "threads": [{"ops": STARS_OPS}], "families": dict(ALL_FAMILIES, ffts_pmu={})},
    "hwts_static_graph": {"platform_version": "3", "iterations": 3, "static_graph": True, "load_as_events": True,
                          "model_as_events": True, "drv_version": ALL_EXPORT,
                          "threads": [{"ops": [op for op in STARS_OPS if not op.get("task_type", "").startswith("MIX")]}],
                          "families": ALL_FAMILIES},
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(TOGETHER))
def test_families_together(tmp_path, name):
    """Every family in one PROF_: each table still agrees with the reference's."""
    def ours(written, path):
        device, context = msprof_db(written, path)
        host, host_context = msprof_db(written, path, "host")
        conn, _context = msprof_databases(written, path, "device")
        both, _c = msprof_databases(written, path, "host")
        return {"step_trace": with_device("0", *step_trace.summary(device, context)),
                "msprof_tx": msproftx.summary(host, host_context, [("0", device, context)]),
                "communication_statistic": with_device("0", *hccl.statistic(both, context)),
                "aicpu": with_device("0", *aicpu.aicpu_rows(conn, context)),
                "dp": with_device("0", *aicpu.dp_rows(conn, context)),
                "npu_mem": with_device("0", *memory.npu_mem_rows(device, context)),
                "npu_module_mem": with_device("0", *memory.module_rows(device, context)),
                "memory_record": with_device("0", *memory.record_rows(host, host_context, "main")),
                "operator_memory": with_device("0", *memory.operator_rows(host, host_context, "main")),
                "l2_cache": with_device("0", *l2_cache.rows(conn, context))}

    tables = ["step_trace", "msprof_tx", "communication_statistic", "aicpu", "dp", "npu_mem", "npu_module_mem",
              "memory_record", "operator_memory", "l2_cache"]
    print("together %s: reference rows matched %s" % (name, agree(tmp_path, TOGETHER[name], tables, ours)[1]))
