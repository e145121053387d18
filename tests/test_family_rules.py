"""advise's rules of the data families (msprof.analysis.family_rules): each finding's numbers worked out here
from what the rule reads, independently of msprof — the reference analyser's step_trace, aicpu, npu_mem,
memory_record and operator_memory files of the same data, and the generator's own times of the communication
and compute tasks — and the thresholds applied as THRESHOLDS says."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from famtest import generate, need_reference, reference
from test_families_reference import TOGETHER

from msprof.analysis.family_rules import THRESHOLDS

TABLES = ["step_trace", "aicpu", "npu_mem", "memory_record", "operator_memory"]


def _grade(share, limits):
    return "high" if share >= limits.high else "medium" if share >= limits.medium else "info"


def _number(text):
    return None if text == "N/A" else float(text)


def _columns(ref, table):
    header = ref["headers"][table]
    return [dict(zip(header, row)) for row in ref["rows"][table]]


def _findings(msprof_cli, path):
    result = msprof_cli("advise", "-dir", path, "--format", "json")
    assert result.returncode == 0, result.stderr
    return {f["id"]: f for f in json.loads(result.stdout)["findings"]}


@pytest.fixture(scope="module")
def together(tmp_path_factory):
    need_reference()
    tmp = tmp_path_factory.mktemp("together")
    written = generate(tmp, TOGETHER["stars_per_launch"])
    return written, reference(written, tmp, TABLES)


@pytest.mark.reference
def test_step_time(together, msprof_cli):
    written, ref = together
    rows = _columns(ref, "step_trace")
    assert rows
    finding = _findings(msprof_cli, written.path)["step_time"]
    iteration = sum(float(r["Iteration Time(us)"]) for r in rows) / len(rows)
    augs = [float(r["Data Aug Bound(us)"]) for r in rows if r["Data Aug Bound(us)"] != "N/A"]
    aug = sum(augs) / len(augs)
    assert finding["severity"] == _grade(aug / iteration, THRESHOLDS["step_time"])
    assert "data loading (Data Aug Bound) %s µs (%s %%)" % (round(aug, 3), round(aug * 100 / iteration, 2)) \
        in finding["message"]
    assert "%d training iteration(s) of %s µs" % (len(rows), round(iteration, 3)) in finding["message"]
    assert sorted((e["key"]["iteration_id"], e["values"]["data_aug_us"]) for e in finding["evidence"]) == sorted(
        (r["Iteration ID"], _number(r["Data Aug Bound(us)"]) if r["Data Aug Bound(us)"] != "N/A" else "N/A")
        for r in rows)


@pytest.mark.reference
def test_aicpu_overhead(together, msprof_cli):
    written, ref = together
    rows = _columns(ref, "aicpu")
    assert rows
    finding = _findings(msprof_cli, written.path)["aicpu_overhead"]
    total = sum(float(r["Total_time(us)"]) for r in rows)
    compute = sum(float(r["Compute_time(us)"]) for r in rows)
    assert finding["severity"] == _grade((total - compute) / total, THRESHOLDS["aicpu_overhead"])
    assert "%s µs from submission to completion: computing %s µs (%s %%)" % (
        round(total, 3), round(compute, 3), round(compute * 100 / total, 2)) in finding["message"]
    nodes = defaultdict(float)
    for r in rows:
        nodes[r["Node"]] += float(r["Total_time(us)"])
    assert {e["key"]["node"]: e["values"]["total_us"] for e in finding["evidence"]} == {
        k: round(v, 3) for k, v in nodes.items()}


@pytest.mark.reference
def test_memory_peak(together, msprof_cli):
    written, ref = together
    finding = _findings(msprof_cli, written.path)["memory_peak"]
    assert finding["severity"] == "info"
    expected = {}
    for r in _columns(ref, "npu_mem"):
        kb = float(r["memory(KB)"])
        if r["event"] not in expected or kb > expected[r["event"]][0]:
            expected[r["event"]] = (kb, float(r["timestamp(us)"]))
    for r in _columns(ref, "memory_record"):
        kb = float(r["Total Reserved(KB)"])
        if r["Component"] not in expected or kb > expected[r["Component"]][0]:
            expected[r["Component"]] = (kb, float(r["Timestamp(us)"]))
    got = {(e["key"].get("event") or e["key"].get("component")): (e["values"]["kb"], e["values"]["time_us"])
           for e in finding["evidence"] if e["table"] != "operator_memory"}
    assert got == expected and len(got) >= 3
    peak_kb, peak_at = max(expected.values())
    assert "Memory peaks at %s KB" % peak_kb in finding["message"]
    live = sorted((float(r["Size(KB)"]), r["Name"]) for r in _columns(ref, "operator_memory")
                  if float(r["Allocation Time(us)"]) <= peak_at and (
                      r["Duration(us)"] == "N/A" or peak_at < float(r["Allocation Time(us)"]) + float(r["Duration(us)"])))
    assert [e["key"]["name"] for e in finding["evidence"] if e["table"] == "operator_memory"] == \
        [name for _kb, name in sorted(live, key=lambda a: (-a[0], a[1]))][:5]


def _union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


@pytest.mark.reference
def test_communication_not_overlapped(together, msprof_cli):
    """Each op execution's span over its master tasks, less what the union of every other device task covers;
    the device's span from its first task to its last — from the generator's times."""
    written, _ref = together
    prof = written.prof
    hccl = written.truth["hccl"]
    communication = {(t["stream"], t["task_id"]) for op in hccl["ops"] for t in op["tasks"]}
    every = list(prof.tasks) + list(prof.__dict__.get("family_tasks", []))
    compute = _union((t.start_ns, t.end_ns) for t in every if (t.stream, t.task) not in communication)
    spans = []
    for op in hccl["ops"]:
        masters = [t for t in op["tasks"] if t["master"] == "master"]
        start, end = min(t["start_ns"] for t in masters), max(t["end_ns"] for t in masters)
        covered = sum(max(0, min(end, b) - max(start, a)) for a, b in compute)
        spans.append(((end - start) / 1000, (end - start - covered) / 1000))
    elapsed = (max(t.end_ns for t in every) - min(t.start_ns for t in every)) / 1000
    exposed = sum(e for _d, e in spans)
    finding = _findings(msprof_cli, written.path)["communication_not_overlapped"]
    assert exposed > 0 and finding["severity"] == _grade(exposed / elapsed, THRESHOLDS["communication_not_overlapped"])
    assert sorted((e["values"]["duration_us"], e["values"]["exposed_us"]) for e in finding["evidence"]) == \
        sorted((round(d, 3), round(e, 3)) for d, e in spans)
    assert "%s µs of the %s µs of communication" % (round(exposed, 3), round(sum(d for d, _e in spans), 3)) \
        in finding["message"]
    assert "of the device's %s µs" % round(elapsed, 3) in finding["message"]


def test_no_family_no_finding(tmp_path, msprof_cli):
    """A PROF_ without the families: none of their rules says anything."""
    written = generate(tmp_path, {"platform_version": "5", "iterations": 2})
    findings = _findings(msprof_cli, written.path)
    assert not {"step_time", "communication_not_overlapped", "aicpu_overhead", "memory_peak"} & set(findings)
