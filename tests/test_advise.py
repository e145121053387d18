"""msprof advise: each rule on the Mish / LeakyReLU networks, a PROF collection and hand-made JOBs, with
expectations computed from the generators' truth (task durations, PMU counters, ACL call times), the JSON
document's shape, the table view's order, missing PMU/ACL data, the selection, rules as data."""
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fixtures import indepgen  # noqa: E402
from fixtures import faults  # noqa: E402
from fixtures import profgen as pg  # noqa: E402
from fixtures.board import jobgen  # noqa: E402
from fixtures.networks import small_job  # noqa: E402

from msprof import api  # noqa: E402
from msprof.analysis.advise import RULES, Rule, activation_chains, find  # noqa: E402
from msprof.analysis.facts import Layer  # noqa: E402
from msprof.frame import ensure_databases  # noqa: E402
from msprof.layouts import find_units  # noqa: E402
from msprof.contract import Selection  # noqa: E402

MAC_BUSY, VEC_PPEN, DSTR, DLD, WLD = 0x300, 0x303, 0x304, 0x306, 0x307
SS928_NATIVE = "SS928: Relu, LeakyRelu, PRelu, Elu, Srelu"


def pct(part, whole) -> float:
    return round(float(Fraction(part) * 100 / Fraction(whole)), 2)


def us(value) -> float:
    return round(float(value), 3)


def half_up(value: Fraction, digits: int) -> float:
    return float((Decimal(value.numerator) / Decimal(value.denominator)).quantize(
        Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def memory_bound(task):
    """outputs.md §3.1: max(Dstr, DLD, WLD ratio) / max(Mac Busy, Vec Ppen ratio), the ratios sharing the
    task's cycles: the ratio of the counters, 4 decimals half up."""
    c = task["counters"]
    divisor = max(c[MAC_BUSY], c[VEC_PPEN])
    return half_up(Fraction(max(c[DSTR], c[DLD], c[WLD]), divisor), 4) if divisor else None


def iteration_tasks(job, index_id):
    return job.recorded_tasks(index_id=index_id)


def by_id(findings):
    out = defaultdict(list)
    for finding in findings:
        out[finding["id"]].append(finding)
    return out


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    parent = tmp_path_factory.mktemp("nets")
    out = {}
    for variant in ("mish", "leakyrelu"):
        desc = jobgen.detection_network(variant)
        out[variant] = (jobgen.build(desc), jobgen.write_job(parent / variant, desc))
    return out


@pytest.fixture(scope="module")
def mish_findings(networks):
    """advise --format json on the Mish network, through the CLI (once for the module's tests)."""
    _, path = networks["mish"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    result = subprocess.run([sys.executable, "-m", "msprof", "advise", "-dir", str(path), "--format", "json"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_document_shape_and_order(mish_findings):
    assert list(mish_findings) == ["findings"]
    findings = mish_findings["findings"]
    for finding in findings:
        assert list(finding) == ["id", "severity", "message", "evidence"]
        assert finding["severity"] in ("high", "medium", "info") and finding["evidence"]
        assert all(list(item) == ["table", "key", "values"] for item in finding["evidence"])
    # both high: the activation (all of its 40.6 % can go) before the memory-bound layers (their time above
    # their compute time); then the info findings by share: execute is 74.9 % of ACL time, the CPU 3.7 %
    assert [(f["id"], f["severity"]) for f in findings] == [
        ("decomposed_activation", "high"), ("memory_bound", "high"), ("acl_hotspot", "info"),
        ("cpu_fallback", "info")]


def test_decomposed_activation_mish(networks, mish_findings):
    job, _ = networks["mish"]
    [finding] = by_id(mish_findings["findings"])["decomposed_activation"]
    tasks = iteration_tasks(job, 3)                       # the last recorded iteration (what show prints)
    busy = sum(Fraction(t["duration_us"]) for t in tasks)
    groups = defaultdict(list)
    for task in tasks:
        if task["layer_type"] in ("Softplus", "Tanh", "Mul"):
            groups[task["ori_layer_name"]].append(task)
    assert len(groups) == 11 and all(len(g) == 3 for g in groups.values())
    total = sum(Fraction(t["duration_us"]) for g in groups.values() for t in g)
    assert finding["message"].startswith(
        f"Mish is computed as Softplus → Tanh → Mul in 11 place(s) of yolov3_tiny_mish (iteration 3): "
        f"{us(total)} µs, {pct(total, busy)} % of the iteration's device time. The AA Core has no Mish layer")
    assert f"({SS928_NATIVE})" in finding["message"] and pct(total, busy) == 40.58
    ranked = sorted(groups.items(), key=lambda item: -sum(Fraction(t["duration_us"]) for t in item[1]))
    assert [item["key"]["group"] for item in finding["evidence"]] == [ori for ori, _ in ranked]
    ori, layers = ranked[0]
    time = sum(Fraction(t["duration_us"]) for t in layers)
    assert finding["evidence"][0] == {
        "table": "op_summary", "key": {"model_name": "yolov3_tiny_mish", "iteration": 3, "group": "conv1_mish"},
        "values": {"activation": "Mish", "layers": "conv1_mish_softplus;conv1_mish_tanh;conv1_mish_mul",
                   "layer_types": "Softplus;Tanh;Mul", "time_us": us(time), "share_pct": pct(time, busy)}}
    assert ori == "conv1_mish" and us(time) == 4371.93


def test_memory_bound_ranked_by_time(networks, mish_findings):
    job, _ = networks["mish"]
    [finding] = by_id(mish_findings["findings"])["memory_bound"]
    tasks = iteration_tasks(job, 3)
    busy = sum(Fraction(t["duration_us"]) for t in tasks)
    bound = [(t, memory_bound(t)) for t in tasks if t["task_type"] == "AA_CORE"]
    bound = [(t, b) for t, b in bound if b > 1]
    time = sum(Fraction(t["duration_us"]) for t, _ in bound)
    assert finding["message"].startswith(
        f"{len(bound)} of the {len(tasks)} layers of yolov3_tiny_mish (iteration 3) are memory-bound "
        f"(Memory Bound > 1: they wait for data more than they compute): {us(time)} µs, {pct(time, busy)} %")
    ranked = sorted(bound, key=lambda tb: -Fraction(tb[0]["duration_us"]))[:20]     # stable: execution order
    assert [(item["key"]["layer_name"], item["values"]["memory_bound"]) for item in finding["evidence"]] == [
        (t["layer_name"], b) for t, b in ranked]
    top, value = ranked[0]
    assert finding["evidence"][0] == {
        "table": "op_summary", "key": {"model_name": "yolov3_tiny_mish", "iteration": 3,
                                       "layer_name": "conv1_mish_softplus"},
        "values": {"layer_type": "Softplus", "memory_bound": value, "time_us": us(top["duration_us"]),
                   "share_pct": pct(top["duration_us"], busy)}}
    assert value == 1.7317 and len(bound) == 41


def test_cpu_fallback_and_acl_hotspot(networks, mish_findings):
    job, _ = networks["mish"]
    findings = by_id(mish_findings["findings"])
    [cpu] = findings["cpu_fallback"]
    busy = sum(Fraction(t["duration_us"]) for t in job.recorded_tasks())
    on_cpu = job.recorded_tasks(task_type="AA_CPU")
    assert {t["layer_name"] for t in on_cpu} == {"detection_out"} and len(on_cpu) == 3
    time = sum(Fraction(t["duration_us"]) for t in on_cpu)
    assert cpu["severity"] == "info" and pct(time, busy) == 3.67         # under 5 %
    assert cpu["message"].startswith(f"{pct(time, busy)} % of the device time of yolov3_tiny_mish runs on the "
                                     f"AA CPU ({us(time / 3)} µs per iteration): detection_out "
                                     "(YoloV3DetectionOutput).")
    assert cpu["evidence"] == [{"table": "op_statistic",
                                "key": {"model_name": "yolov3_tiny_mish", "op_name": "detection_out"},
                                "values": {"op_type": "YoloV3DetectionOutput", "count_per_iteration": 1.0,
                                           "time_us": 850.0, "share_pct": pct(time, busy)}}]

    [hot] = findings["acl_hotspot"]
    calls = defaultdict(lambda: [0, Fraction(0)])
    for call in job.acl_calls:
        calls[call["name"]][0] += 1
        calls[call["name"]][1] += Fraction(call["end_ns"] - call["start_ns"], 1000)
    total = sum(t for _, t in calls.values())
    ranked = sorted(calls.items(), key=lambda item: (-item[1][1], item[0]))[:5]
    assert [item["key"]["name"] for item in hot["evidence"]] == [name for name, _ in ranked]
    count, execute = calls["svp_acl_mdl_execute"]
    assert hot["evidence"][0] == {"table": "acl_statistic", "key": {"name": "svp_acl_mdl_execute"},
                                  "values": {"level": "ACL_MODEL", "count": count, "total_us": us(execute),
                                             "avg_us": us(execute / count), "share_pct": pct(execute, total)}}
    assert hot["message"] == (f"svp_acl_mdl_execute takes the most ACL/API time: 69900.0 µs in 3 call(s) "
                              f"(23300.0 µs each), {pct(execute, total)} % of the time in the application's own ACL "
                              "calls.")


def test_leakyrelu_network(networks, msprof_cli):
    job, path = networks["leakyrelu"]
    result = msprof_cli("advise", "-dir", path, "--format", "json")
    assert result.returncode == 0, result.stderr
    findings = by_id(json.loads(result.stdout)["findings"])
    assert "decomposed_activation" not in findings and "host_bound" not in findings
    busy = sum(Fraction(t["duration_us"]) for t in job.recorded_tasks())
    [cpu] = findings["cpu_fallback"]
    assert cpu["severity"] == "medium" and pct(2550, busy) == 6.02          # 5 % ≤ share < 20 %
    [bound] = findings["memory_bound"]
    tasks = iteration_tasks(job, 3)
    slow = [t for t in tasks if t["task_type"] == "AA_CORE" and memory_bound(t) > 1]
    share = pct(sum(Fraction(t["duration_us"]) for t in slow), sum(Fraction(t["duration_us"]) for t in tasks))
    assert bound["severity"] == "info" and share < 5
    assert {t["layer_type"] for t in slow} == {"Pooling", "Upsample", "Concat"}


def test_table_view_paragraphs_most_important_first(networks, msprof_cli):
    _, path = networks["mish"]
    result = msprof_cli("advise", "-dir", path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path.name}: 4 finding(s), most important first"
    heads = [line for line in lines if line[:1].isdigit()]
    assert heads == ["1. [high] decomposed_activation", "2. [high] memory_bound", "3. [info] acl_hotspot",
                     "4. [info] cpu_fallback"]
    first = lines.index(heads[0])
    assert lines[first + 1].startswith("   Mish is computed as Softplus → Tanh → Mul in 11 place(s)")
    assert "   - conv1_mish: conv1_mish_softplus;conv1_mish_tanh;conv1_mish_mul — 4371.93 µs, 18.89 %" in lines
    assert "   - … 6 more (--format json lists them)" in lines            # 11 groups, 5 shown
    # 41 memory-bound layers: the evidence is the 20 longest (the message counts them all)
    assert "   - … 15 more of the 20 largest (--format json lists them)" in lines
    assert all(len(line) <= 100 for line in lines if not line.startswith("   - "))


def test_host_bound_job(tmp_path):
    """Three 100 µs layers with 60 µs of idle device between them: 120 µs idle per 300 µs busy."""
    desc = {"models": [{"name": "gappy", "gap_us": 60, "executions": 3, "layers": [
        {"name": f"conv{i}", "duration_us": 100} for i in range(3)]}]}
    path = jobgen.write_job(tmp_path, desc)
    findings = by_id(api.advise(path, fmt="json"))
    [idle] = findings["host_bound"]
    assert idle["severity"] == "medium"                                  # 10 % ≤ idle / busy < 50 %
    assert idle["evidence"] == [{"table": "task", "key": {"model_name": "gappy"},
                                 "values": {"iterations": 3, "busy_us": 300.0, "idle_us": 120.0, "idle_pct": 40.0}}]
    assert idle["message"].startswith("The device idles between the tasks of gappy: 120.0 µs per iteration, "
                                      "40.0 % of its busy time (300.0 µs).")


def test_prof_collection(tmp_path):
    """A PROF network with Sigmoid → Mul (SiLU), an AI_CPU op, PipeUtilization PMU, and a host that launches
    slowly (30 µs between launches: the device waits)."""
    desc = {"iterations": 2, "pmu": "PipeUtilization", "threads": [{"gap_us": 30, "ops": [
        {"name": "conv1", "type": "Conv2D", "block_dim": 8, "dur_us": [20, 22]},
        {"name": "sig1", "type": "Sigmoid", "task_type": "AI_VECTOR_CORE", "dur_us": 5, "total_cycles": 5000,
         "pmu": [1500, 500, 0, 0, 3500, 0, 0, 0]},        # vec 0.3, mac 0.1, mte2 0.7: 0.7 / 0.3 = 2.333
        {"name": "mul1", "type": "Mul", "task_type": "AI_VECTOR_CORE", "dur_us": 3},
        {"name": "nms", "type": "NonMaxSuppression", "task_type": "AI_CPU", "dur_us": 40}]}]}
    prof, path = pg.build(desc), pg.write_prof(tmp_path, desc)
    findings = api.advise(path, fmt="json")
    by = by_id(findings)
    assert api.advise(path, fmt=None) == findings          # (the library's: nothing printed)

    # iteration 2: conv1 22, sig1 5, mul1 3, nms 40 µs
    [silu] = by["decomposed_activation"]
    assert silu["severity"] == "high" and pct(8, 70) == 11.43
    assert silu["evidence"] == [{"table": "op_summary", "key": {"model_name": "resnet50", "iteration": 2,
                                                                "group": "sig1"},
                                 "values": {"activation": "SiLU/Swish", "layers": "sig1;mul1",
                                            "layer_types": "Sigmoid;Mul", "time_us": 8.0, "share_pct": 11.43}}]
    assert "The AI Core has no SiLU/Swish operator, so the model converter split it into separate elementwise ops" in silu["message"]

    # memory_bound = mte2 / max(vec, mac) of the ratios rounded to 3, the quotient rounded to 3 as op_summary
    # prints it (profgen's default counters: cycles·(k+1)//16 in slots vec 0x8, mac 0xa, …, mte2 0xc)
    def bound(cycles, counters=None):
        counters = counters or [cycles * (k + 1) // 16 for k in range(8)]
        r = [float((Decimal(c) / cycles).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)) for c in counters]
        return round(r[4] / max(r[0], r[1]), 3)
    [mem] = by["memory_bound"]
    assert [(e["key"]["layer_name"], e["values"]["memory_bound"], e["values"]["time_us"]) for e in mem["evidence"]] \
        == [("conv1", bound(22000), 22.0), ("sig1", bound(5000, [1500, 500, 0, 0, 3500, 0, 0, 0]), 5.0),
            ("mul1", bound(3000), 3.0)]
    assert [e["values"]["memory_bound"] for e in mem["evidence"]] == [2.504, 2.333, 2.496]
    assert mem["severity"] == "high"                                    # 30 of 70 µs

    [cpu] = by["cpu_fallback"]
    assert cpu["severity"] == "high" and cpu["evidence"][0]["values"]["share_pct"] == pct(80, 138)
    assert "runs on the AI CPU (40.0 µs per iteration): nms (NonMaxSuppression)" in cpu["message"]

    # idle between consecutive device tasks, from the truth: start − latest end before it
    idle, busy = Fraction(0), Fraction(0)
    for iteration in (1, 2):
        tasks = sorted((t for t in prof.tasks if t.iteration == iteration), key=lambda t: t.start_ns)
        busy += sum(Fraction(t.dur_ns, 1000) for t in tasks)
        idle += sum(max(0, Fraction(t.start_ns - max(p.end_ns for p in tasks[:i]), 1000))
                    for i, t in enumerate(tasks) if i)
    [host] = by["host_bound"]
    assert host["evidence"][0]["values"] == {"iterations": 2, "busy_us": us(busy / 2), "idle_us": us(idle / 2),
                                             "idle_pct": pct(idle, busy)}
    assert host["severity"] == ("high" if idle / busy >= Fraction(1, 2) else "medium") and idle / busy > 0.1

    [hot] = by["acl_hotspot"]                     # only the application's own (acl level) calls
    assert [e["key"]["name"] for e in hot["evidence"]] == ["aclmdlExecute"]
    severities = [f["severity"] for f in findings]
    assert severities == sorted(severities, key=("high", "medium", "info").index)


def test_data_loss(tmp_path, capsys):
    path = jobgen.write_job(tmp_path, small_job())
    cut = faults.tail_cut(path, "hwts")
    magic = faults.bad_magic(path, "acl_model")
    [loss] = by_id(api.advise(path, fmt="json"))["data_loss"]
    assert loss["severity"] == "medium"
    streams = {item["key"]["stream"]: item["values"] for item in loss["evidence"] if item["table"] == "decode_count"}
    assert streams == {
        "AclModule.acl_model.0": {"kind": "acl", "records": magic["records_total"], "skipped": 1, "head_lost": 0,
                                  "tail_lost": 0},
        "hwts.data.0": {"kind": "hwts", "records": cut["records_after"], "skipped": 0, "head_lost": 0,
                        "tail_lost": cut["bytes_lost"]}}
    warnings = [item["values"]["message"] for item in loss["evidence"] if item["table"] == "notice"]
    assert any(f"{cut['bytes_lost']} bytes of HWTS data lost at the tail" in w for w in warnings)
    assert any("1 ACL record(s) skipped" in w for w in warnings)
    assert loss["message"].startswith(f"The import skipped or lost data, or warned about it: 1 record(s) skipped "
                                      f"and {cut['bytes_lost']} byte(s) lost in 2 stream(s); {len(warnings)} "
                                      "warning(s).")
    # query's Data table says the bytes lost for a JOB too, as for a PROF_ (it had no such column)
    from msprof.show import View

    capsys.readouterr()
    api.query(path, View(fmt="json"))
    doc = json.loads(capsys.readouterr().out)[path.name]["tables"]["data"]["rows"]
    assert {"data": "hwts", "records": cut["records_after"], "bytes_lost": cut["bytes_lost"]} in doc


def test_data_loss_is_high_when_a_fifth_of_the_tasks_is_untimed(tmp_path):
    """Every HWTS end record lost: all 9 tasks of small_job (3 layers, 3 executions) lack their end — every figure
    is wrong, so the finding is high and says how many (found by a newcomer's trial: a few bytes cut inside a
    task log misread most records after them, and data_loss stayed medium)."""
    path = jobgen.write_job(tmp_path, small_job())
    files = faults.stream_files(path, "hwts")
    data = faults.read_stream(path, "hwts")
    kept = b"".join(data[i:i + 64] for i in range(0, len(data), 64) if data[i] & 7 != 1)
    assert len(kept) == len(data) // 2 == 9 * 64
    files[0].write_bytes(kept)
    for extra in files[1:]:
        extra.unlink()
    [loss] = by_id(api.advise(path, fmt="json"))["data_loss"]
    assert loss["severity"] == "high"
    assert " 9 of the 9 device task(s) expected are missing or lack a start or an end (100.0 %). The figures" \
        " miss" in loss["message"]


def test_data_loss_share_counts_each_skipped_record_once(tmp_path):
    """decode_count's records include the skipped ones: 1 bad of small_job's 5 acl_model records is a fifth
    (high), not 1 of 6 (the review found the skipped counted twice)."""
    path = jobgen.write_job(tmp_path, small_job())
    assert len(faults.read_stream(path, "acl_model")) // 128 == 5
    faults.bad_magic(path, "acl_model", 2)
    [loss] = by_id(api.advise(path, fmt="json"))["data_loss"]
    [stream] = [e["values"] for e in loss["evidence"] if e["table"] == "decode_count"]
    assert (stream["records"], stream["skipped"]) == (5, 1)
    assert loss["severity"] == "high"


@pytest.mark.parametrize("loads", [1, 3])
def test_load_and_unload_outweigh_execute(tmp_path, loads):
    """Loaded more than once: load once, outside the timed loop (medium). Loaded once, as a short profiling run
    is: that advice was wrong (a newcomer's trial); the run is short (info)."""
    extra = [{"name": "svp_acl_mdl_load_from_file", "api_type": 2, "duration_us": 5000}] * (loads - 1)
    desc = small_job(acl_call_us={"svp_acl_mdl_load_from_file": 5000}, extra_acl_calls=extra)
    job, path = jobgen.build(desc), jobgen.write_job(tmp_path, desc)
    [hot] = by_id(api.advise(path, fmt="json"))["acl_hotspot"]
    setup = sum(Fraction(c["end_ns"] - c["start_ns"], 1000) for c in job.acl_calls
                if c["name"] in ("svp_acl_mdl_load_from_file", "svp_acl_mdl_unload"))
    execute = sum(Fraction(c["end_ns"] - c["start_ns"], 1000) for c in job.execute_calls())
    assert setup > execute and hot["severity"] == ("medium" if loads > 1 else "info")
    assert hot["evidence"][0]["key"] == {"name": "svp_acl_mdl_load_from_file"}
    assert hot["evidence"][0]["values"]["count"] == loads
    said = f" Model load and unload ({us(setup)} µs) outweigh execute ({us(execute)} µs)"
    if loads > 1:
        assert hot["message"].endswith(f"{said}, with {loads} loads: load the model once, outside the timed loop, "
                                       "and reuse it for every execution.")
    else:
        executes = len(job.execute_calls())
        assert hot["message"].endswith(f"{said}, but each model is loaded once: a short run ({executes} execute "
                                       "call(s)); profile more executions to see the steady state.")


def test_load_once_is_judged_against_the_run_s_models_whatever_the_selection(tmp_path):
    """Two models loaded once each: a short run (info) for the whole run and for a selection of one model alike
    (a selection compared the run's 2 loads with its one model: "load the model once", medium)."""
    desc = small_job(acl_call_us={"svp_acl_mdl_load_from_file": 50000}, models=[
        {"name": "det", "layers": [{"name": "conv"}]}, {"name": "cls", "id": 2, "layers": [{"name": "conv"}]}])
    path = jobgen.write_job(tmp_path, desc)
    for selection in (Selection(), Selection(1, 1), Selection(2, 1)):
        [hot] = by_id(api.advise(path, fmt=None, selection=selection))["acl_hotspot"]
        assert hot["severity"] == "info" and "but each model is loaded once: a short run" in hot["message"]


def test_without_pmu_or_acl_data(tmp_path, msprof_cli):
    """No PMU data: no memory_bound finding; no ACL data: no acl_hotspot — said on stderr, not an error."""
    desc = jobgen.detection_network("mish", acl_api="off", aac_metrics="PipeUtilization")
    path = jobgen.write_job(tmp_path, desc)
    result = msprof_cli("advise", "-dir", path, "--format", "json")
    assert result.returncode == 0, result.stderr
    ids = [f["id"] for f in json.loads(result.stdout)["findings"]]
    assert ids == ["decomposed_activation", "cpu_fallback"]
    assert ("no PMU data: memory_bound not checked (a collection with --aac-metrics ArithmeticUtilization (the"
            " default) has it)") in result.stderr
    assert "no ACL/API data: acl_hotspot not checked" in result.stderr


def test_selection(networks, msprof_cli):
    _, path = networks["mish"]
    result = msprof_cli("advise", "-dir", path, "--format", "json", "--model-id", "1", "--iteration-id", "1")
    assert result.returncode == 0, result.stderr
    findings = by_id(json.loads(result.stdout)["findings"])
    assert {e["key"]["iteration"] for e in findings["decomposed_activation"][0]["evidence"]} == {1}
    assert "(iteration 1)" in findings["memory_bound"][0]["message"]
    assert msprof_cli("advise", "-dir", path, "--model-id", "1", "--iteration-id", "9").returncode == 2
    assert msprof_cli("advise", "-dir", path, "--model-id", "1").returncode == 2


def test_activation_chains():
    def layer(name, kind, ori=None):
        return Layer(name, ori, kind, 1.0, None)

    layers = [layer("c", "Conv"), layer("s", "Sigmoid"), layer("m", "Mul"),             # SiLU
              layer("e", "Erf"), layer("a", "Add"), layer("m2", "Mul"),                 # GELU
              layer("sp", "SoftPlus", "act1"), layer("t", "TanH", "act1"), layer("m3", "Mul", "act2"),  # 2 groups
              layer("t2", "Tanh"), layer("a2", "Add"), layer("m4", "Mul"),              # GELU tanh tail
              layer("hs", "HardSigmoid"), layer("m5", "Mul"), layer("x", "Sigmoid")]
    found = [(name, [l.name for l in chain]) for name, chain in activation_chains(iter(layers))]
    assert found == [("SiLU/Swish", ["s", "m"]), ("GELU", ["e", "a", "m2"]),
                     ("GELU (tanh approximation)", ["t2", "a2", "m4"]), ("HardSwish", ["hs", "m5"])]
    assert [[l.name for l in c] for _n, c in activation_chains([layer("sp", "Softplus", "x"),
                                                                 layer("t", "Tanh", "x"),
                                                                 layer("m", "Mul", "x")])] == [["sp", "t", "m"]]


def test_rules_are_data(networks):
    """A rule is one Rule object; find() runs any list of them."""
    job, path = networks["leakyrelu"]
    assert [rule.id for rule in RULES] == ["decomposed_activation", "memory_bound", "cpu_fallback",
                                           "acl_hotspot", "host_bound", "device_idle", "data_loss", "step_time",
                                           "communication_not_overlapped", "aicpu_overhead", "memory_peak",
                                           "host_bound_steps", "slow_steps"]

    def slowest_layer(facts, selection):
        from msprof.analysis.advise import Hit

        [iteration] = facts.layer_iterations(selection)
        top = max(facts.layers(iteration), key=lambda l: l.us)
        yield Hit("info", 0.0, {"name": top.name, "us": top.us}, [])

    [unit] = find_units(path)
    ensure_databases(unit)
    with unit.open() as report:
        findings = find(unit.layout.facts(report), Selection(),
                        [Rule("slowest_layer", slowest_layer, "{name} takes {us} µs", "")])
    conv1 = max((t for t in job.recorded_tasks(index_id=3)), key=lambda t: Fraction(t["duration_us"]))
    assert findings == [{"id": "slowest_layer", "severity": "info",
                         "message": f"{conv1['layer_name']} takes {us(conv1['duration_us'])} µs", "evidence": []}]


def test_each_result_dir_is_advised_on(networks, msprof_cli):
    """A parent of two JOBs, as a PROF_ of two devices, was refused ("name one of them", exit 2): each is
    advised on, and said (issue 38 #7); in json each finding names its result dir, and holds what advise
    on that one alone finds."""
    alone = {}
    for name in ("mish", "leakyrelu"):
        _, path = networks[name]
        proc = msprof_cli("advise", "-dir", path, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        alone[path.name] = json.loads(proc.stdout)["findings"]
    parent = networks["mish"][1].parent.parent
    result = msprof_cli("advise", "-dir", parent, "--format", "json")            # holds both networks
    assert result.returncode == 0, result.stderr
    assert "advising on 2 result directories, each on its own:" in result.stderr
    found = json.loads(result.stdout)["findings"]
    assert sorted({f["result_dir"] for f in found}) == sorted(alone)
    for label, findings in alone.items():
        assert [{k: v for k, v in f.items() if k != "result_dir"} for f in found if f["result_dir"] == label] \
            == findings
    table = msprof_cli("advise", "-dir", parent)
    heads = sorted(line.split(":")[0] for line in table.stdout.splitlines() if "finding(s), most important" in line)
    assert table.returncode == 0 and heads == sorted(alone), table.stdout


def test_each_device_of_a_prof_dir_is_advised_on(tmp_path, msprof_cli):
    prof = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "8", "--iters", "2", "--devices", "2"]))
    result = msprof_cli("advise", "-dir", prof, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert f"advising on 2 result directories, each on its own: {prof.name}/device_0, {prof.name}/device_1" \
        in result.stderr
    found = json.loads(result.stdout)["findings"]
    for device in ("device_0", "device_1"):
        alone = msprof_cli("advise", "-dir", prof / device, "--format", "json")
        mine = [{k: v for k, v in f.items() if k != "result_dir"} for f in found
                if f["result_dir"] == f"{prof.name}/{device}"]
        assert mine == json.loads(alone.stdout)["findings"]


def test_help_has_examples(msprof_cli):
    for command in ("advise", "compare"):
        result = msprof_cli(command, "--help")
        assert result.returncode == 0 and "Example" in result.stdout and f"msprof {command} " in result.stdout
        assert "9  performance regression" in result.stdout


@pytest.mark.parametrize("pmu", [None, "Memory", "PipeUtilization", "PipeUtilization without 0x55"])
def test_prof_memory_bound_needs_pipe_utilization(tmp_path, msprof_cli, pmu):
    """memory_bound reads PipeUtilization's memory_bound column: PMU data of another metric set, of that set
    without all its events, or none, are said (what there is) with the collection option that gives it."""
    desc = {"iterations": 2, "pmu": pmu and pmu.split()[0], "threads": [{"ops": [
        {"name": "conv1", "type": "Conv2D", "dur_us": 20, "total_cycles": 1000,
         "pmu": [100, 100, 0, 0, 900, 0, 0, 0]}]}]}
    path = pg.write_prof(tmp_path, desc)
    if pmu and " without " in pmu:           # sample.json lists another event in the slot of 0x55
        sample_path = path / "device_0" / "sample.json"
        sample = json.loads(sample_path.read_text())
        sample["ai_core_profiling_events"] = sample["ai_core_profiling_events"].replace("0x55", "0x99")
        sample_path.write_text(json.dumps(sample))
    result = msprof_cli("advise", "-dir", path, "--format", "json")
    assert result.returncode == 0, result.stderr
    ids = [f["id"] for f in json.loads(result.stdout)["findings"]]
    said = {None: "no PMU data", "Memory": "PMU data of the Memory metric set, no memory-bound value",
            "PipeUtilization without 0x55": "PMU data of the PipeUtilization metric set without its event(s) 0x55,"
                                            " no memory-bound value"}
    if pmu in said:
        assert "memory_bound" not in ids
        assert (f"{said[pmu]}: memory_bound not checked (a collection with --aic-metrics PipeUtilization has it)"
                in result.stderr), result.stderr
    else:
        assert "memory_bound" in ids and "memory_bound not checked" not in result.stderr


def test_prof_memory_bound_on_a_stars_chip_without_its_pmu_file(tmp_path, msprof_cli):
    """A STARS chip (platform 5) keeps its PMU in ffts_profile.data, which this collection lacks: advise says
    that, not a metric set to collect with (its sample.json has PipeUtilization already; found by a newcomer's
    trial). With the file, the rule runs (tests/test_families_export.py)."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "2", "--ops", "6", "--iters", "2", "--platform", "5"]))
    sample = json.loads((prof_dir / "device_0" / "sample.json").read_text())
    assert sample["ai_core_metrics"] == "PipeUtilization"
    result = msprof_cli("advise", "-dir", prof_dir / "device_0")
    assert result.returncode == 0, result.stderr
    assert ("no PMU data: memory_bound not checked (a STARS chip keeps its AI Core PMU in ffts_profile.data, which"
            " this collection does not have)") in result.stderr
    assert "--aic-metrics" not in result.stderr


@pytest.mark.parametrize("layout", ["job", "prof"])
def test_pmu_records_without_event_ids_are_said_at_import_and_by_advise(tmp_path, msprof_cli, layout):
    """PMU files but no sample.json (so no event ids): the import warns that the counters cannot be named, and
    advise does not say there is no PMU data or send the user to collect with a metric set (found by a
    newcomer's trial: silent, and advise blamed the collection)."""
    if layout == "job":
        root = result_dir = jobgen.write_job(tmp_path, small_job())
        remedy = "--aac-metrics"
    else:
        root = pg.write_prof(tmp_path, {"iterations": 2, "pmu": "PipeUtilization", "threads": [{"ops": [
            {"name": "conv1", "type": "Conv2D", "dur_us": 20, "total_cycles": 1000,
             "pmu": [100, 100, 0, 0, 900, 0, 0, 0]}]}]})
        result_dir = root / "device_0"
        remedy = "--aic-metrics"
    (result_dir / "sample.json").unlink()
    imported = msprof_cli("import", "-dir", root)
    assert imported.returncode == 0, imported.stderr
    assert ("warning: no PMU event ids (sample.json's ai_core_profiling_events; sample.json missing or without it):"
            " the PMU records' counters cannot be named, so op_summary has no PMU metric columns") in imported.stderr
    advised = msprof_cli("advise", "-dir", result_dir)
    assert advised.returncode == 0, advised.stderr
    assert ("PMU data of records whose events sample.json does not name, no memory-bound value: memory_bound not"
            " checked (it needs sample.json's ai_core_profiling_events to name the counters)") in advised.stderr
    assert remedy not in advised.stderr


@pytest.mark.parametrize("exec_gap_us, severity", [(1000, "high"), (300, "medium"), (100, None)])
def test_device_idle_between_iterations(tmp_path, exec_gap_us, severity):
    """The device waiting between inferences (found missing by a newcomer's trial: busy 30 % of the time and no
    finding). small_job: task spans of 370, 380, 390 µs; between two, step pad 5 + return 20 + the gap between
    execute calls + launch 20 + pad 5 µs (docs/fixtures.md)."""
    job = jobgen.write_job(tmp_path, small_job(model={"exec_gap_us": exec_gap_us}))
    gap = 5 + 20 + exec_gap_us + 20 + 5
    elapsed = 370 + 380 + 390 + 2 * gap
    findings = by_id(api.advise(job, fmt="json"))
    if severity is None:                              # 150 of 1440 µs: 20.8 %, the cost of an execute call
        assert "device_idle" not in findings
        return
    [idle] = findings["device_idle"]
    assert idle["severity"] == severity
    assert idle["message"].startswith(
        f"The device is idle {pct(2 * gap, elapsed)} % of the time across its recorded iterations: "
        f"{2 * gap:.1f} µs of {elapsed:.1f} µs lie between iterations (3 iterations, 2 gap(s) of {gap:.1f} µs on "
        "average), when no inference runs.")
    assert idle["evidence"] == [{"table": "task", "key": {"model_name": "tiny", "index_id": i},
                                 "values": {"gap_us": float(gap)}} for i in (1, 2)]
    # one iteration selected: nothing between
    assert "device_idle" not in by_id(api.advise(job, fmt="json", selection=Selection(1, 2)))


def test_device_idle_counts_no_gap_that_may_hold_unrecorded_executions(tmp_path):
    """interval 3: executions 1, 4, 7, 10 recorded, the others ran in the "gaps" between them — not idle (found
    by a newcomer's trial: a high finding of 60.8 %). With every execution recorded, the same device is busy."""
    layers = [{"name": "a1", "duration_us": 1000}, {"name": "a2", "duration_us": 1000}]
    sampled = jobgen.write_job(tmp_path / "sampled", {"interval": 3, "models": [
        {"name": "netA", "id": 1, "executions": 12, "exec_gap_us": 10, "layers": layers}]})
    assert "device_idle" not in by_id(api.advise(sampled, fmt="json"))
    # interval 2 with long waits between executions: only the pairs of consecutive ids would count — none
    waits = jobgen.write_job(tmp_path / "waits", {"interval": 2, "models": [
        {"name": "netA", "id": 1, "executions": 6, "exec_gap_us": 20000, "layers": layers}]})
    assert "device_idle" not in by_id(api.advise(waits, fmt="json"))
    every = jobgen.write_job(tmp_path / "every", {"models": [
        {"name": "netA", "id": 1, "executions": 6, "exec_gap_us": 20000, "layers": layers}]})
    [idle] = by_id(api.advise(every, fmt="json"))["device_idle"]
    assert idle["severity"] == "high" and len(idle["evidence"]) == 5


def test_prof_device_idle_between_iterations_from_the_generator_s_times(tmp_path):
    """The same rule on PROF_ data, against the generator's own task times: each iteration's span (first start
    to last end), the gaps between consecutive spans."""
    desc = {"iterations": 4, "threads": [{"gap_us": 400, "ops": [
        {"name": "conv1", "type": "Conv2D", "dur_us": 30}, {"name": "relu1", "type": "Relu", "dur_us": 20}]}]}
    prof = pg.build(desc)
    path = pg.write_prof(tmp_path, desc)
    by_iteration = defaultdict(list)
    for task in prof.tasks:
        by_iteration[task.iteration].append(task)
    spans = sorted((min(t.start_ns for t in ts), max(t.end_ns for t in ts), it) for it, ts in by_iteration.items())
    gaps = [(b[0] - a[1], a[2]) for a, b in zip(spans, spans[1:])]
    idle, elapsed = sum(g for g, _ in gaps), spans[-1][1] - spans[0][0]
    assert idle / elapsed >= 0.5                      # (the description's point: a high finding)
    [finding] = by_id(api.advise(path / "device_0", fmt="json"))["device_idle"]
    assert finding["severity"] == "high"
    assert finding["message"].startswith(
        f"The device is idle {pct(idle, elapsed)} % of the time across its recorded iterations: "
        f"{us(Fraction(idle, 1000))} µs of {us(Fraction(elapsed, 1000))} µs lie between iterations (4 iterations, 3 "
        f"gap(s) of {us(Fraction(idle, 3000))} µs on average)")
    expected = sorted(((us(Fraction(g, 1000)), it) for g, it in gaps), key=lambda x: -x[0])
    assert [(e["values"]["gap_us"], e["key"]["index_id"]) for e in finding["evidence"]] == expected


def test_prof_without_host_is_one_single_op_iteration(tmp_path, msprof_cli):
    """No host data: no op names, no model executions; the device tasks are one iteration of ``single-op``,
    streamed through the layer rules, and there is no iteration to select."""
    desc = {"iterations": 2, "threads": [{"ops": [
        {"name": "conv1", "type": "Conv2D", "dur_us": 20},
        {"name": "nms", "type": "NonMaxSuppression", "task_type": "AI_CPU", "dur_us": 40}]}]}
    path = pg.write_prof(tmp_path, desc)
    shutil.rmtree(path / "host")
    result = msprof_cli("advise", "-dir", path, "--format", "json")
    assert result.returncode == 0, result.stderr
    # said (no command did: a newcomer's trial)
    assert (f"warning: {path}: no host/ directory: op names, models and the API statistic are unknown; the device's "
            "tasks are reported by their task type") in result.stderr
    findings = by_id(json.loads(result.stdout)["findings"])
    assert sorted(findings) == ["cpu_fallback"]             # no PMU, no API data, nothing lost
    [cpu] = findings["cpu_fallback"]
    assert cpu["evidence"] == [{"table": "op_statistic", "key": {"model_name": "single-op", "op_name": "AI_CPU"},
                                "values": {"op_type": "AI_CPU", "count_per_iteration": 2.0, "time_us": 80.0,
                                           "share_pct": pct(80, 120)}}]
    assert cpu["severity"] == "high"                        # 66.67 % of the device time
    # its one "iteration" is the whole run: a total, said so (found by a newcomer's trial: "per iteration")
    assert cpu["message"].startswith(f"{pct(80, 120)} % of the device time of single-op runs on the AI CPU (80.0 µs in"
                                     " all): AI_CPU (AI_CPU).")
    table = msprof_cli("advise", "-dir", path).stdout
    assert f"   - AI_CPU (AI_CPU): 80.0 µs in all, {pct(80, 120)} %" in table
    selected = msprof_cli("advise", "-dir", path, "--model-id", "1", "--iteration-id", "1")
    assert selected.returncode == 2 and "no model 1 recorded (models: none;" in selected.stderr


def test_warnings_alone_and_no_iterations(tmp_path, msprof_cli):
    """An import warning without lost records is information; without a step trace the device rules have
    no iteration to read, and advise says so instead of failing."""
    no_layers = jobgen.write_job(tmp_path / "a", small_job())
    faults.missing_layer_info(no_layers)
    [warned] = by_id(api.advise(no_layers, fmt="json"))["data_loss"]
    assert warned["severity"] == "info" and [e["table"] for e in warned["evidence"]] == ["notice"]
    assert "no layer.info" in warned["evidence"][0]["values"]["message"]
    no_steps = jobgen.write_job(tmp_path / "b", small_job())
    faults.missing_step_trace(no_steps)
    result = msprof_cli("advise", "-dir", no_steps, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert [f["id"] for f in json.loads(result.stdout)["findings"]] == ["acl_hotspot"]
    assert "no recorded iteration (step trace / model executions): the device rules have no task to read" \
        in result.stderr


def test_a_run_cut_off_reads_its_last_complete_iteration(networks, tmp_path, msprof_cli):
    """The task log cut off in the last iteration (7 of its tasks kept): advise read that iteration by
    default, so the Mish and memory-bound findings shrank or vanished, the CPU time per iteration was averaged
    over an iteration without its CPU task, and the loss was counted against the tasks left (issue 38 #2). Now
    the layer findings read the last complete iteration (2) and say so, the figures per iteration leave the
    cut-off one out, and the loss is counted against every recorded iteration's tasks."""
    job, intact = networks["mish"]
    per_iteration = len(job.recorded_tasks(index_id=1))
    assert [len(job.recorded_tasks(index_id=i)) for i in (1, 2, 3)] == [per_iteration] * 3
    path = tmp_path / intact.name
    shutil.copytree(intact, path, ignore=shutil.ignore_patterns("sqlite", "log"))
    files = faults.stream_files(path, "hwts")
    data = faults.read_stream(path, "hwts")
    assert len(data) == 3 * per_iteration * 2 * 64                    # a start and an end record per task
    files[0].write_bytes(data[:(2 * per_iteration + 7) * 2 * 64])
    for extra in files[1:]:
        extra.unlink()
    proc = msprof_cli("advise", "-dir", path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert (f"yolov3_tiny_mish: iteration 3, the last recorded, has 7 of its {per_iteration} task(s) timed: the "
            "layer findings read iteration 2, the last complete one") in proc.stderr
    found = by_id(json.loads(proc.stdout)["findings"])
    second = msprof_cli("advise", "-dir", intact, "--format", "json", "--model-id", "1", "--iteration-id", "2")
    expected = by_id(json.loads(second.stdout)["findings"])
    for rule in ("decomposed_activation", "memory_bound"):
        assert found[rule] == expected[rule] and found[rule], rule
    on_cpu = [t for i in (1, 2) for t in job.recorded_tasks(index_id=i) if t["task_type"] == "AA_CPU"]
    time = sum(Fraction(t["duration_us"]) for t in on_cpu)
    [cpu] = found["cpu_fallback"]
    assert f"({us(time / 2)} µs per iteration)" in cpu["message"] and len(on_cpu) == 2
    [loss] = found["data_loss"]
    lost = per_iteration - 7
    assert (f" {lost} of the {3 * per_iteration} device task(s) expected are missing or lack a start or an end "
            f"({pct(lost, 3 * per_iteration)} %).") in loss["message"] and loss["severity"] == "high"
