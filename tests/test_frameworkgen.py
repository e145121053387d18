"""fixtures/frameworkgen.py (torch_npu and MindSpore result directories): the records it packs, the layout of
its ops around the PROF_'s launches, and — marker ``reference`` — torch_npu's own analysis of two scenarios
(``../shared/oracles/torch_npu.py --backend reference``), whose results must be what the generator's truth says
they are: every task in its step, every framework op's device time, every allocation named after its op.
"""
import csv
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import frameworkgen, fwkexpected, fwkrecords as R, fwkscenarios, fwkwrite


# ------------------------------------------------------------------------------------------- packed bytes
def test_op_range_record_is_a_58_byte_struct_then_inner_strings():
    data = R.op_range(10, 20, 7, 4242, 4243, "aten::add", dtypes=["float", "int"], shapes=[[8, 64], [1]],
                      stack=["a.py(1): f", "b.py(2): g"])
    kind, length = struct.unpack_from("<HI", data)
    assert (kind, length) == (1, len(data) - 6)
    assert struct.unpack_from("<3q4QB?", data, 6) == (10, 20, 7, 4242, 4243, 4243, 0, 0, False)
    inner, at = {}, 6 + 58
    while at < len(data):
        t, n = struct.unpack_from("<HI", data, at)
        inner[t] = data[at + 6:at + 6 + n].decode()
        at += 6 + n
    assert inner == {2: "aten::add", 3: "float;int", 4: "8,64;1", 8: "a.py(1): f;b.py(2): g"}


def test_fixed_and_tlv_sizes_follow_framework_md():
    assert len(R.op_mark(5, R.DEQUEUE_END, 9, 1, 2, "x")) == 6 + 40 + 6 + 1
    assert len(R.memory(1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 8, 9)) == 6 + 77
    assert len(R.gc_record(1, 2, 3)) == 24
    assert len(R.py_func(1, 2, 3, 4, R.PY_RETURN)) == 33
    assert R.py_hash(7, "f") == struct.pack("<HIQ", 4, 15, 7) + struct.pack("<HI", 1, 1) + b"f"
    ms = R.ms_op_range(11, 12, 3, 100, 200, 4242, "Add", "Default/Add-op1", module=2, event=4)
    assert struct.unpack_from("<5Qi3Hb3?", ms, 6) == (11, 12, 3, 100, 200, 4242, 2, 4, 0, 0, False, False, False)


def test_memory_record_fields_in_order():
    data = R.memory(0x10, 99, -512, 1024, 2048, 512, 0xAA, 3, R.COMPONENT_WORKSPACE, R.FREE, 77, 4242)
    assert struct.unpack("<7q2b3B2Q", data[6:]) == (0x10, 99, -512, 1024, 2048, 512, 0xAA, 20, 3, 1, 1, 0, 77, 4242)


# ------------------------------------------------------------------------------------------- layout
def _inside(inner, outer):
    return outer.start < inner.start and inner.end < outer.end


@pytest.mark.parametrize("name", ["pt_l1_eager", "pt_l1_marks", "pt_l1_graph", "pt_l1_syscnt"])
def test_every_op_nests_and_holds_its_launches(name):
    fw = frameworkgen.build(fwkscenarios.SCENARIOS[name][0])
    lead = frameworkgen.QUEUE_LEAD_NS if fw.desc["op_marks"] else 0
    for step, nxt in zip(fw.steps, fw.steps[1:]):
        assert step.end < nxt.start
    for op in fw.ops:
        if op.parent is not None:
            assert _inside(op, op.parent)
        for span in op.spans:
            assert op.start + lead < span.begin < span.end < op.end + lead
            if span.kernel:         # (a launch; a graph's load or run holds no flow of its own)
                assert span.begin <= span.track <= span.end


def test_each_step_launches_the_model_and_the_tasks_follow_their_launches():
    fw = frameworkgen.build({"steps": 2})
    kernels = [k["name"] for k in frameworkgen.kernels_of({"children": frameworkgen.DEFAULT_MODEL})]
    for step in fw.steps:
        spans = [s for op in step.walk() for s in op.spans]
        assert [s.kernel["name"] for s in spans] == kernels
        assert all(s.track < s.task_start < s.task_end for s in spans)
        assert step.end >= max(s.task_end for s in spans) + frameworkgen.STEP_TAIL_NS


def test_counter_times_read_back_exactly():
    fw = frameworkgen.build({"syscnt": True})
    t = fw.steps[0].children[0].start
    assert (fw.raw(t) - fw.host_mono_ns) * 10 + fw.host_mono_ns == t
    with pytest.raises(ValueError):
        fw.raw(fw.host_mono_ns + 5)


def test_allocations_are_named_after_the_op_running_them_and_the_last_one_stays():
    fw = frameworkgen.build({"steps": 1})
    mallocs = [m for m in fw.memory if m.data_type == R.MALLOC]
    assert [m.op_name for m in mallocs] == ["aten::_convolution", "aten::batch_norm", "aten::batch_norm",
                                            "aten::relu", "aten::add"]
    def freed(malloc):
        return any(m.ptr == malloc.ptr and m.time > malloc.time and m.data_type == R.FREE for m in fw.memory)
    assert [freed(m) for m in mallocs] == [True, True, True, True, False]
    assert fw.memory[-1].allocated == 512 and fw.memory[-1].active == 512


def test_written_directory(tmp_path):
    fw = fwkwrite.write(tmp_path, {"rank": 1, "op_marks": True, "gc": True, "python_tracer": True})
    assert fw.root.name == "gen_4242_20240101000000000_ascend_pt"
    info = json.loads((fw.root / "profiler_info_1.json").read_text())
    assert info["rank_id"] == 1 and info["config"]["experimental_config"]["_profiler_level"] == "Level1"
    assert sorted(p.name for p in (fw.root / "FRAMEWORK").iterdir()) == sorted(
        ["torch.op_range", "torch.op_mark", "torch.memory_usage", "torch.gc_record", "torch.python_tracer_func",
         "torch.python_tracer_hash", "torch.param_tensor_info"])
    assert (fw.root / fwkwrite.PROF_NAME / "device_1").is_dir()
    marks = (fw.root / "FRAMEWORK" / "torch.op_mark").read_bytes()
    assert len(marks) == 4 * len(fw.marks) * (6 + 40 + 6) + sum(4 * len(m.name) for m in fw.marks)
    with pytest.raises(FileExistsError):
        fwkwrite.write(tmp_path, {"rank": 1})


def test_mindspore_directory(tmp_path):
    fw = fwkscenarios.write_scenario("ms_pynative", tmp_path)[0]
    assert fw.root.name.endswith("_ascend_ms")
    data = (fw.root / "FRAMEWORK" / "op_range_0").read_bytes()
    assert struct.unpack_from("<HI", data)[0] == 1
    lines = (fw.root / "FRAMEWORK" / "cpu_ms_memory_record_0.txt").read_text().splitlines()
    assert lines[0] == "Timestamp(ns),Total Allocated(Byte),Total Reserved(Byte),Total Active(Byte)"
    assert len(lines) == 1 + len(fw.memory)


# ------------------------------------------------------------------------------------------- torch_npu
def _oracle_or_skip():
    oracle = fwkexpected.oracle_path()
    if not oracle.is_file():
        pytest.skip("torch_npu oracle not found at %s (set MSPROF_TORCH_NPU_ORACLE)" % oracle)
    return oracle


def _analyse(tmp_path, scenario):
    oracle = _oracle_or_skip()
    fw = fwkscenarios.write_scenario(scenario, tmp_path / "in")[0]
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(oracle), str(fw.root), "--backend", "reference", "--out", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)
    if "reference analyser not found" in proc.stdout:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout
    return fw, out / fw.root.name / "ASCEND_PROFILER_OUTPUT"


def _rows(path: Path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _us(ns: int) -> float:
    return ns / 1000


def _expected_operators(fw):
    """operator_details as the truth says: every op but the steps, by start; device = its tasks' durations."""
    out = []
    for op in sorted((o for o in fw.ops if o.depth), key=lambda o: o.start):
        own = [s for s in op.spans]
        total = [s for o in op.walk() for s in o.spans]
        core = [s for s in total if s.kernel.get("task_type", "AI_CORE") == "AI_CORE"]
        own_core = [s for s in own if s.kernel.get("task_type", "AI_CORE") == "AI_CORE"]
        dur = lambda spans: sum(_us(s.task_end - s.task_start) for s in spans)  # noqa: E731
        out.append((op.name, _us(op.end - op.start - sum(c.end - c.start for c in op.children)), _us(op.end - op.start),
                    dur(own), dur(total), dur(own_core), dur(core)))
    return out


@pytest.mark.reference
@pytest.mark.parametrize("scenario", ["pt_l1_eager", "pt_l1_marks"])
def test_torch_npu_links_every_op_to_its_tasks_as_generated(tmp_path, scenario):
    fw, results = _analyse(tmp_path, scenario)
    got = [(r["Name"], float(r["Host Self Duration(us)"]), float(r["Host Total Duration(us)"]),
            float(r["Device Self Duration(us)"]), float(r["Device Total Duration(us)"]),
            float(r["Device Self Duration With AICore(us)"]), float(r["Device Total Duration With AICore(us)"]))
           for r in _rows(results / "operator_details.csv")]
    want = _expected_operators(fw)
    assert [g[0] for g in got] == [w[0] for w in want]
    for g, w in zip(got, want):
        assert g[1:] == pytest.approx(w[1:], abs=1e-9), g[0]
    kernels = _rows(results / "kernel_details.csv")
    spans = sorted((s for op in fw.ops for s in op.spans), key=lambda s: s.task_start)
    assert [(int(r["Step Id"]), r["Name"]) for r in kernels] == [
        (op.step, s.kernel["name"]) for s in spans for op in fw.ops if s in op.spans]
    trace = json.loads((results / "trace_view.json").read_text())
    flows = [e for e in trace if e.get("cat") == "async_npu" and e["ph"] == "s"]
    assert len(flows) == len(spans)
    names = [r["Name"] for r in _rows(results / "operator_memory.csv")]
    assert names == [m.op_name for m in fw.memory if m.data_type == R.MALLOC]
