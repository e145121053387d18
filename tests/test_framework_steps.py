"""Steps as the unit (docs/framework-plan.md §4–5): show's steps table (kernels, device time in the Overlap
Analysis lanes, memory peaks) and advise's step rules (msprof.analysis.step_rules), against the generator's
truth."""
import json

import pytest

from fixtures import fwkscenarios, fwkwrite
from tests.test_framework_layout import _merged_ns, run

MB = 1024.0 ** 2


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    fw = fwkscenarios.write_scenario("pt_l1_eager", tmp_path_factory.mktemp("steps"))[0]
    assert run("import", "-dir", fw.root).returncode == 0
    return fw


def _kernels(step):
    return [span for op in step.walk() for span in op.spans if span.kernel]


def test_show_steps_has_each_steps_kernels_busy_time_and_memory_peaks(eager):
    proc = run("show", "-dir", eager.root, "--table", "steps", "--wide")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.split()[:1] in (
        [str(s.step)] for s in eager.steps)}
    for step in eager.steps:
        row = rows[str(step.step)]
        kernels = _kernels(step)
        busy = _merged_ns((k.task_start, k.task_end) for k in kernels)
        inside = [m for m in eager.memory if step.start <= m.time <= step.end]
        assert row[5:7] == [str(len(list(step.walk()))), str(len(kernels))]
        assert float(row[7]) == round(busy / 1000, 3)
        assert [float(v) for v in row[10:]] == [round(max(m.allocated for m in inside) / MB, 3),
                                                round(max(m.reserved for m in inside) / MB, 3)]
        # (Preparing: the first kernel's start after the step's start, in float µs of epoch times)
        assert float(row[9]) == pytest.approx((kernels[0].task_start - step.start) / 1000, abs=0.25)


# a model whose ops launch a 2 µs kernel each after three ops that launch nothing: the host cannot keep up
HOST_BOUND = [{"name": "aten::add", "kernels": [{"name": "Add", "type": "Add", "dur_us": 2}],
               "children": [{"name": "aten::view"}, {"name": "aten::view"}, {"name": "aten::view"}]}] * 4


@pytest.fixture(scope="module")
def host_bound(tmp_path_factory):
    fw = fwkwrite.write(tmp_path_factory.mktemp("hb"), {"model": HOST_BOUND, "memory": False})
    assert run("import", "-dir", fw.root).returncode == 0
    return fw


def _lanes(fw):
    """Per step from the truth: (Computing, Free) µs, Free being the gaps between the device's busy sections
    that start in the step's device range (its first kernel's start to its host end or last kernel's end)."""
    sections = []
    for start, end in sorted((k.task_start, k.task_end) for s in fw.steps for k in _kernels(s)):
        if sections and start <= sections[-1][1]:
            sections[-1][1] = max(sections[-1][1], end)
        else:
            sections.append([start, end])
    gaps = [(a[1], b[0] - a[1]) for a, b in zip(sections, sections[1:]) if b[0] > a[1]]
    out = {}
    for step in fw.steps:
        kernels = _kernels(step)
        lo, hi = kernels[0].task_start, max(max(k.task_end for k in kernels), step.end)
        busy = _merged_ns((k.task_start, k.task_end) for k in kernels) / 1000
        out[step.step] = (busy, sum(g for at, g in gaps if lo <= at < hi) / 1000)
    return out


def _advise(fw, *options):
    proc = run("advise", "-dir", fw.root, "--format", "json", *options)
    assert proc.returncode == 0, proc.stderr
    return {finding["id"]: finding for finding in json.loads(proc.stdout)["findings"]}


def test_advise_finds_the_host_bound_steps_with_each_steps_lanes(host_bound):
    lanes = _lanes(host_bound)
    finding = _advise(host_bound)["host_bound_steps"]
    assert finding["severity"] == "high"              # (Free and Preparing are most of the steps' device time)
    got = {item["key"]["step"]: item["values"] for item in finding["evidence"]}
    assert sorted(got) == [s.step for s in host_bound.steps]
    for step in host_bound.steps:
        computing, free = lanes[step.step]
        assert got[step.step]["computing_us"] == round(computing, 3) and got[step.step]["free_us"] == round(free, 3)
        first = _kernels(step)[0].task_start
        assert got[step.step]["preparing_us"] == pytest.approx((first - step.start) / 1000, abs=0.25)
    assert free > computing / 2                         # (the truth is host-bound: the rule had to fire)
    one = _advise(host_bound, "--step", 2)["host_bound_steps"]
    assert [item["key"]["step"] for item in one["evidence"]] == [2]


def test_a_compute_bound_run_has_no_step_finding(eager):
    findings = _advise(eager)
    assert "host_bound_steps" not in findings and "slow_steps" not in findings


def test_slow_steps_are_those_above_one_and_a_half_medians():
    from msprof.analysis.step_rules import slow_steps
    from msprof.layouts.framework.stepstats import StepStat

    steps = [StepStat(n, kernels=5, computing_us=c, free_us=1.0, preparing_us=1.0)
             for n, c in ((1, 98.0), (2, 98.0), (3, 398.0), (4, 98.0), (5, 0.0))]
    steps[4].kernels = 0                                # (a step that launched nothing is not a step's time)
    ((severity, share, fields, evidence),) = list(slow_steps(steps))
    assert (fields["count"], fields["steps"], fields["median_us"], fields["worst"], fields["excess_us"]) == (
        1, 4, 100.0, 3, 300.0)
    assert share == pytest.approx(300 / 700) and severity == "medium"
    assert [item["key"]["step"] for item in evidence] == [3]
    assert list(slow_steps(steps[:2])) == []             # (fewer than three steps: no median to speak of)


def _device_us(fw):
    """Per step from the truth: (Computing + Free + Preparing, Computing) µs; Preparing in torch_npu's float µs
    of epoch times (the first kernel's start after the step op's start)."""
    out = {}
    for step in fw.steps:
        computing, free = _lanes(fw)[step.step]
        first = _kernels(step)[0].task_start
        preparing = fw.local_ns(first) / 1000 - fw.local_ns(step.start) / 1000
        out[step.step] = (computing + free + preparing, computing)
    return out


def test_compare_two_framework_directories_step_by_step_and_by_their_median_step(host_bound, tmp_path):
    slower = [dict(op, kernels=[dict(op["kernels"][0], dur_us=5)]) for op in HOST_BOUND]
    new = fwkwrite.write(tmp_path, {"model": slower, "memory": False})
    proc = run("compare", host_bound.root, new.root, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["steps"]
    base_us, new_us = _device_us(host_bound), _device_us(new)
    assert [row["step"] for row in rows] == ["1", "2", "3", "median"]
    for row in rows[:3]:
        step = int(row["step"])
        assert (row["base_us"], row["new_us"]) == (round(base_us[step][0], 3), round(new_us[step][0], 3))
        assert (row["base_computing_us"], row["new_computing_us"]) == (round(base_us[step][1], 3),
                                                                       round(new_us[step][1], 3))
        assert row["delta_us"] == round(row["new_us"] - row["base_us"], 3)
    median = sorted(v[0] for v in new_us.values())[1]
    assert rows[3]["new_us"] == round(median, 3) and rows[3]["base_computing_us"] == 8.0


def test_a_report_opened_afresh_selects_a_step_as_a_worker_process_does(eager):
    """Worker processes (show's op_statistic, export's parts, timelines) open the unit again and are handed
    the selection only: the step is selected by the query's selection, not by an earlier check."""
    from msprof.contract import Selection
    from msprof.layouts import find_units

    device = find_units(eager.root)[0]
    step = eager.steps[1]
    with device.open() as report:
        rows = report.op_statistic_rows(Selection(0, step.step))
    kernels = _kernels(step)
    assert sorted((row[1], row[3]) for row in rows) == sorted((k.kernel["type"], 1) for k in kernels)
    assert sum(row[4] for row in rows) == pytest.approx(sum(k.task_end - k.task_start for k in kernels) / 1000)
