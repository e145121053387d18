"""show, advise and compare per framework op (msprof.layouts.framework.opstats, msprof.analysis.framework_rules,
msprof.analysis.compare.framework_op_rows) on torch_npu directories written by fixtures/fwkwrite.py: every
number from the generator's truth — each op's range, its children's, the kernels it launched."""
import copy
import json
import subprocess
import sys

import pytest

from fixtures import fwkscenarios, fwkwrite

MSPROF = [sys.executable, "-m", "msprof"]


def run(*args):
    return subprocess.run(MSPROF + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)


def _shapes(op):
    return ";".join(",".join(map(str, s)) for s in op.template.get("shapes", []))


def _groups(fw, step=None):
    """(name, shapes) → [count, device total µs, device self µs, host total µs, host self µs, AI Core µs,
    AI CPU kernels {name: (count, µs)}] from the generator's truth."""
    groups = {}
    for op in fw.ops:
        if op.name.startswith("ProfilerStep#") or (step is not None and op.step != step):
            continue
        spans = [s for o in op.walk() for s in o.spans if s.kernel]
        own = [s for s in op.spans if s.kernel]
        g = groups.setdefault((op.name, _shapes(op)), [0, 0, 0, 0, 0, 0, {}])
        g[0] += 1
        g[1] += sum(s.task_end - s.task_start for s in spans) / 1000
        g[2] += sum(s.task_end - s.task_start for s in own) / 1000
        g[3] += (op.end - op.start) / 1000
        g[4] += (op.end - op.start - sum(c.end - c.start for c in op.children)) / 1000
        g[5] += sum(s.task_end - s.task_start for s in spans
                    if s.kernel.get("task_type", "AI_CORE") == "AI_CORE") / 1000
        for s in own:
            if s.kernel.get("task_type") == "AI_CPU":
                count, us = g[6].get(s.kernel["name"], (0, 0))
                g[6][s.kernel["name"]] = (count + 1, us + (s.task_end - s.task_start) / 1000)
    return groups


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    fw = fwkscenarios.write_scenario("pt_l1_eager", tmp_path_factory.mktemp("ops"))[0]
    assert run("import", "-dir", fw.root).returncode == 0
    return fw


@pytest.mark.parametrize("step", [None, 2])
def test_show_ranks_the_framework_ops_by_device_time(eager, step):
    args = ["--iteration-id", step] if step is not None else []
    proc = run("show", "-dir", eager.root, "--format", "json", "--table", "framework_ops", *args)
    assert proc.returncode in (0, 2), proc.stderr       # (the PROF_ device records no step 2: said, exit 2)
    document = json.loads(proc.stdout)[eager.root.name]["tables"]["framework_ops"]
    got = [(r["name"], r["input_shapes"], r["count"], r["device_total_us"], r["device_self_us"], r["host_total_us"],
            r["host_self_us"], r["ai_core_pct"]) for r in document["rows"]]
    expected = [(name, shapes, g[0], round(g[1], 3), round(g[2], 3), round(g[3], 3), round(g[4], 3),
                 round(g[5] * 100 / g[1], 2) if g[1] else 0.0) for (name, shapes), g in _groups(eager, step).items()]
    expected.sort(key=lambda r: (-r[3], r[0], r[1]))
    assert got == expected
    # (the model's slowest torch op on the device: aten::unique's AI CPU kernel, 40 µs a step)
    assert got[0][:4] == ("aten::unique", "", 3 if step is None else 1, 120.0 if step is None else 40.0)


def test_advise_names_the_ai_cpu_kernels_under_torch_ops(eager):
    proc = run("advise", "-dir", eager.root, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    findings = [f for f in json.loads(proc.stdout)["findings"] if f.get("result_dir") == eager.root.name]
    assert [f["id"] for f in findings] == ["ai_cpu_in_framework_op"]
    device = sum(s.task_end - s.task_start for op in eager.ops for s in op.spans if s.kernel) / 1000
    (item,) = findings[0]["evidence"]
    assert item["key"] == {"op_name": "aten::unique", "input_shapes": "", "kernel": "Unique"}
    assert item["values"] == {"count": 3, "time_us": 120.0, "share_pct": round(120.0 * 100 / device, 2)}
    assert findings[0]["severity"] == ("high" if 120.0 / device >= 0.2 else "medium")


def test_advise_finds_ops_whose_host_time_dwarfs_their_device_time(tmp_path):
    model = copy.deepcopy(fwkscenarios.SMALL_MODEL) + [{"name": "aten::item", "shapes": [[1]]}] * 30
    fw = fwkwrite.write(tmp_path, {"name": "overhead", "model": model, "memory": False})
    proc = run("advise", "-dir", fw.root, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    findings = {f["id"]: f for f in json.loads(proc.stdout)["findings"] if f.get("result_dir") == fw.root.name}
    groups = _groups(fw)
    heavy = sorted(((key, g) for key, g in groups.items() if g[4] > 0 and g[4] >= 10 * g[1]), key=lambda kg: -kg[1][4])
    host = sum(step.end - step.start for step in fw.steps) / 1000
    time = sum(g[4] for _key, g in heavy)
    assert [key for key, _g in heavy][:1] == [("aten::item", "1")] and time / host >= 0.05
    finding = findings["framework_overhead"]
    assert [(e["key"]["op_name"], e["key"]["input_shapes"]) for e in finding["evidence"]] == [k for k, _g in heavy]
    assert finding["evidence"][0]["values"] == {"count": 90, "host_self_us": round(heavy[0][1][4], 3),
                                                "device_total_us": 0.0,
                                                "share_pct": round(heavy[0][1][4] * 100 / host, 2)}
    assert f"{round(time, 3)} µs of host self time, {round(time * 100 / host, 2)} %" in finding["message"]


def test_compare_tells_which_framework_ops_got_slower(tmp_path):
    base = fwkwrite.write(tmp_path / "base", {"name": "run", "model": fwkscenarios.SMALL_MODEL, "memory": False})
    slower = copy.deepcopy(fwkscenarios.SMALL_MODEL)
    slower[0]["children"][0]["kernels"][0]["dur_us"] = 40          # aten::matmul's MatMulV2: 25 → 40 µs
    new = fwkwrite.write(tmp_path / "new", {"name": "run", "model": slower, "memory": False})
    proc = run("compare", base.root, new.root, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["framework_ops"]
    b, n = _groups(base), _groups(new)
    assert [(r["op_name"], r["input_shapes"]) for r in rows[:2]] == [("aten::linear", "32,1024;4096,1024"),
                                                                     ("aten::matmul", "")]
    for row in rows:
        key = (row["op_name"], row["input_shapes"])
        assert (row["base_count"], row["new_count"]) == (b[key][0], n[key][0])
        assert row["base_device_us"] == round(b[key][1] / b[key][0], 3)
        assert row["new_device_us"] == round(n[key][1] / n[key][0], 3)
        assert row["base_host_us"] == round(b[key][3] / b[key][0], 3)
    assert rows[0]["delta_device_us"] == 15.0 and rows[1]["delta_device_us"] == 15.0
    assert all(r["delta_device_us"] == 0.0 for r in rows[2:])
    table = run("compare", base.root, new.root, "--table", "framework_ops", "--wide")
    assert table.returncode == 0, table.stderr
    assert "aten::linear" in table.stdout and "15.000" in table.stdout
