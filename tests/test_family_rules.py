"""advise's rules of the data families (msprof.analysis.family_rules): each finding's numbers worked out here
from what the rule reads, independently of msprof — the reference analyser's step_trace, aicpu, npu_mem,
memory_record and operator_memory files of the same data, and the generator's own times of the communication
and compute tasks — and the thresholds applied as THRESHOLDS says."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from famtest import generate, need_reference, reference
from test_ecosystem import _sections as _union
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


SHOWN_NUMBERS = {"aicpu": {"Compute_time(us)", "Memcpy_time(us)", "Task_time(us)", "Dispatch_time(us)",
                           "Total_time(us)"},
                 "npu_mem": {"ddr(KB)", "hbm(KB)", "memory(KB)"}, "operator_memory": {"Size(KB)", "Duration(us)"},
                 "l2_cache": {"Hit Rate", "Victim Rate"}}


@pytest.mark.reference
def test_show_aicpu_memory_and_l2_tables(tmp_path, msprof_cli):
    """``show --table aicpu|npu_mem|operator_memory|l2_cache --format json``: the reference's rows of those
    files, in its order, the columns show ranks by as numbers (N/A as null)."""
    need_reference()
    written = generate(tmp_path, TOGETHER["stars_per_launch"])
    tables = sorted(SHOWN_NUMBERS)
    ref = reference(written, tmp_path, tables)
    result = msprof_cli("show", "-dir", written.path, *sum((["--table", t] for t in tables), []), "--format", "json")
    assert result.returncode == 0, result.stderr
    [unit] = json.loads(result.stdout).values()
    got = unit["tables"]
    assert sorted(got) == sorted(t for t in tables if ref["rows"][t]) and len(got) >= 3
    for table in got:
        header = ref["headers"][table]
        expected = [[None if cell == "N/A" and name in SHOWN_NUMBERS[table] else
                     float(cell) if name in SHOWN_NUMBERS[table] else int(cell) if name == "Device_id" else cell
                     for name, cell in zip(header, row)] for row in ref["rows"][table]]
        assert [list(row.values()) for row in got[table]["rows"]] == expected, table
    # the terminal ranks npu_mem's samples by their whole: the peak first
    table = msprof_cli("show", "-dir", written.path, "--table", "npu_mem", "--top", "1")
    peak = max(float(row[ref["headers"]["npu_mem"].index("memory(KB)")]) for row in ref["rows"]["npu_mem"])
    assert table.returncode == 0 and ("%.3f" % peak) in table.stdout, table.stdout


def _side(tmp_path, name, desc):
    written = generate(tmp_path / name, desc)
    ref = reference(written, tmp_path / name, ["step_trace", "communication_statistic"])
    return written, {t: _columns(ref, t) for t in ("step_trace", "communication_statistic")}


@pytest.mark.reference
def test_compare_steps_and_communication(tmp_path, msprof_cli):
    """compare's steps and communication tables: each side's step_trace and communication_statistic files
    (the reference's) summed up here, base against new."""
    need_reference()
    import copy

    desc = copy.deepcopy(TOGETHER["stars_per_launch"])
    desc["iterations"] = 3
    desc["families"]["hccl"] = {"ops": [{"name": "hcom_allGather_", "type": "HcomAllGather", "tasks": [
        {"name": "Memcpy", "kind": "MEMCPY_ASYNC", "stream": 31, "dur_us": 12, "size": 65536}]}]}
    base, base_files = _side(tmp_path, "base", TOGETHER["stars_per_launch"])
    new, new_files = _side(tmp_path, "new", desc)
    result = msprof_cli("compare", base.path, new.path, "--format", "json", "--table", "step_trace",
                        "--table", "communication")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["base", "new", "step_trace", "communication"]

    def mean(rows, column):
        values = [float(r[column]) for r in rows if r[column] != "N/A"]
        return round(sum(values) / len(values), 3) if values else None

    [row] = document["step_trace"]
    for side, files in (("base", base_files), ("new", new_files)):
        steps = files["step_trace"]
        times = [float(r["Iteration Time(us)"]) for r in steps]
        assert row["model_id"] == steps[0]["Model ID"]
        assert (row[side + "_iterations"], row[side + "_mean_us"], row[side + "_min_us"], row[side + "_max_us"]) == (
            len(steps), round(sum(times) / len(times), 3), round(min(times), 3), round(max(times), 3))
        assert (row[side + "_fp_bp_us"], row[side + "_refresh_us"], row[side + "_data_aug_us"]) == tuple(
            mean(steps, c) for c in ("FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)"))
    assert row["delta_mean_us"] == round(row["new_mean_us"] - row["base_mean_us"], 3)
    expected = {}
    for side, files in (("base", base_files), ("new", new_files)):
        for r in files["communication_statistic"]:
            expected.setdefault(r["OP Type"], {})[side] = (int(r["Count"]), float(r["Total Time(us)"]),
                                                           float(r["Avg Time(us)"]))
    assert {r["op_type"]: {side: (r[side + "_count"], r[side + "_total_us"], r[side + "_avg_us"])
                           for side in ("base", "new") if r[side + "_count"] is not None}
            for r in document["communication"]} == expected
    assert set(expected) == {"HcomAllReduce", "HcomAllGather"}


def test_compare_without_the_families_has_no_such_tables(tmp_path, msprof_cli):
    """Neither side has a step trace or HCCL data: the document is what it was before them, and asking for
    their tables says why there is none."""
    written = generate(tmp_path, {"platform_version": "5", "iterations": 2})
    result = msprof_cli("compare", written.path, written.path, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)) == ["base", "new", "models", "op_types", "ops", "apis"]
    result = msprof_cli("compare", written.path, written.path, "--format", "json", "--table", "step_trace",
                        "--table", "communication")
    assert result.returncode == 0 and list(json.loads(result.stdout)) == ["base", "new"]
    assert "no step trace (step_trace) on either side: step_trace not compared" in result.stderr
    assert "no communication (HCCL) data on either side: communication not compared" in result.stderr
