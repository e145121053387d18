"""Self-tests of fixtures/families (no reference needed): each family writes its files where and as the
format says, with the truth it reports."""
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fixtures import families  # noqa: E402
from fixtures.families import step_trace  # noqa: E402

ALL = {"step_trace": {"all_reduce": 1, "noise": 2}, "ffts_pmu": {}, "mstx": {}, "hccl": {}, "aicpu": {},
       "memory": {}, "l2_cache": {}}
OPS = [{"name": "conv1", "type": "Conv2D", "block_dim": 8, "dur_us": 20},
       {"name": "cast", "type": "Cast", "task_type": "AI_CPU", "dur_us": 3},
       {"name": "mix", "type": "FA", "task_type": "MIX_AIC", "block_dim": 2, "mix_block": 2, "dur_us": 5}]


def test_every_family_writes_its_files(tmp_path):
    written = families.write(tmp_path, {"platform_version": "5", "iterations": 2, "threads": [{"ops": OPS}],
                                        "families": ALL})
    device = written.path / "device_0" / "data"
    host = written.path / "host" / "data"
    sizes = {"ts_track.data.0.slice_0": 40, "ffts_profile.data.0.slice_0": 128, "aicpu.data.0.slice_0": 256,
             "npu_mem.data.0.slice_0": 32, "npu_module_mem.data.0.slice_0": 24, "l2_cache.data.0.slice_0": 72,
             "stars_soc.data.0.slice_0": 64}
    for name, size in sizes.items():
        data = (device / name).read_bytes()
        assert data and len(data) % size == 0, name
    for name, size in {"unaging.additional.msproftx.slice_0": 256, "aging.additional.hccl_info.slice_0": 256,
                       "aging.compact.hccl_op_info.slice_0": 64, "unaging.additional.task_memory_info.slice_0": 256,
                       "unaging.additional.context_id_info.slice_0": 256}.items():
        data = (host / name).read_bytes()
        assert data and len(data) % size == 0, name
    truth = written.truth
    # two iterations of one model, each FP at its first task's start, BP at its last task's end
    tasks = sorted(written.prof.tasks, key=lambda t: t.start_syscnt)
    assert [(i["iteration_id"], i["fp"]) for i in truth["step_trace"]["iterations"]] == [
        (1, tasks[0].start_syscnt), (2, tasks[3].start_syscnt)]
    # the ts_track stream: step trace marks (5 per iteration + 2 reduce marks), 2 noise records, mstx marks
    records = (device / "ts_track.data.0.slice_0").read_bytes()
    tags = [step_trace.RECORD.unpack_from(records, i)[1] for i in range(0, len(records), 40)]
    assert tags.count(12) == 2 and tags.count(10) == 14 + 3       # one mstx marker and one range (2 records)
    # one context record per AI Core / MIX run, the MIX runs with 2 blocks each
    assert len((device / "ffts_profile.data.0.slice_0").read_bytes()) == (4 + 2 * 2) * 128
    assert [r["kind"] for r in truth["ffts_pmu"]["records"]] == ["AI_CORE", "MIX_AIC", "AI_CORE", "MIX_AIC"]
    sample = json.loads((written.path / "device_0" / "sample.json").read_text())
    assert sample["ai_core_metrics"] == "PipeUtilizationExct" and sample["l2CacheTaskProfilingEvents"]
    assert [len(op["tasks"]) for op in truth["hccl"]["ops"]] == [4, 4]
    assert [t["stream"] for t in truth["aicpu"]["tasks"]] == [3, 3]


def test_aicpu_task_record_fields(tmp_path):
    written = families.write(tmp_path, {"platform_version": "1", "threads": [{"ops": OPS[:2]}],
                                        "families": {"aicpu": {"compute_us": 4, "memcpy_us": 2, "dispatch_us": 9}}})
    data = (written.path / "device_0" / "data" / "aicpu.data.0.slice_0").read_bytes()
    records = [struct.unpack_from("=HHIIIQHHIQQQQQQQIIQQQQIIIHBB14Q", data, i) for i in range(0, len(data), 256)]
    assert sorted(r[2] for r in records) == [0, 1, 1]              # one task, the two default DP events
    fields = [r for r in records if r[2] == 0][0]
    cast = [t for t in written.prof.tasks if t.task_type == "AI_CPU"][0]
    assert fields[:3] == (0x5A5A, 6000, 0)
    assert (fields[6], fields[7], fields[10], fields[15]) == (cast.stream, cast.task, cast.start_syscnt + 1,
                                                              cast.end_syscnt - 1)
    assert (fields[12] - fields[11], fields[13] - fields[12], fields[23]) == (4, 2, 9)
