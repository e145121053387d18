"""msprof compare: every field of the JSON document, the table/csv views, the exit-9 gate both ways, a JOB
pair (the Mish network and its LeakyReLU version) and a PROF pair, one-sided models/types/ops, missing data.

Expected numbers come from the generators' truth (exact per-task durations and ACL call times), computed
here with Fractions, independently of msprof."""
import csv
import io
import json
import logging
import shutil
import sys
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fixtures import indepgen  # noqa: E402
from fixtures import profgen as pg  # noqa: E402
from fixtures.board import jobgen  # noqa: E402
from fixtures.networks import small_job, two_model_job  # noqa: E402

from msprof import api  # noqa: E402
from msprof.analysis.compare import SECTIONS  # noqa: E402
from msprof.errors import RegressionError, UsageError  # noqa: E402

KEYS = {
    "models": ["base_model_name", "new_model_name", "base_us", "new_us", "delta_us", "delta_pct"],
    "op_types": ["op_type", "base_us", "new_us", "delta_us", "base_count", "new_count"],
    "ops": ["op_name", "base_op_type", "new_op_type", "base_us", "new_us", "delta_us"],
    "apis": ["name", "base_count", "new_count", "base_avg_us", "new_avg_us", "delta_avg_us", "base_total_us",
             "new_total_us"],
}


def r3(value) -> float:
    return round(float(value), 3)


# --- truth: what each section must hold, from the generators ------------------------------------------------
def job_truth(job):
    """Per model: mean busy µs per iteration; per type: (µs, count) per iteration; per layer name: (type, avg
    µs); per ACL name: (count, total µs) — from the recorded tasks and calls."""
    per_iteration = defaultdict(Fraction)
    types, names = defaultdict(lambda: [Fraction(0), 0]), defaultdict(lambda: [None, Fraction(0), 0])
    for task in job.tasks:
        if task["recorded"]:
            per_iteration[task["index_id"]] += Fraction(task["duration_us"])
            types[task["layer_type"]][0] += Fraction(task["duration_us"])
            types[task["layer_type"]][1] += 1
            name = names[task["layer_name"]]
            name[0] = task["layer_type"]
            name[1] += Fraction(task["duration_us"])
            name[2] += 1
    iterations = len(per_iteration)
    calls = defaultdict(lambda: [0, Fraction(0)])
    for call in job.acl_calls:
        if call["recorded"]:
            calls[call["name"]][0] += 1
            calls[call["name"]][1] += Fraction(call["end_ns"] - call["start_ns"], 1000)
    return {"model": sum(per_iteration.values()) / iterations,
            "types": {t: (us / iterations, count / iterations) for t, (us, count) in types.items()},
            "ops": {n: (t, us / count) for n, (t, us, count) in names.items()}, "apis": dict(calls)}


def prof_truth(prof):
    per_iteration = defaultdict(Fraction)
    types, names = defaultdict(lambda: [Fraction(0), 0]), defaultdict(lambda: [None, Fraction(0), 0])
    for task in prof.tasks:
        us = Fraction(task.dur_ns, 1000)
        per_iteration[task.iteration] += us
        types[task.op_type][0] += us
        types[task.op_type][1] += 1
        names[task.op_name][0] = task.op_type
        names[task.op_name][1] += us
        names[task.op_name][2] += 1
    iterations = len(per_iteration)
    calls = defaultdict(lambda: [0, Fraction(0)])
    for call in prof.apis:
        calls[call.name][0] += 1
        calls[call.name][1] += Fraction(call.end - call.begin, 1000)
    return {"model": sum(per_iteration.values()) / iterations,
            "types": {t: (us / iterations, count / iterations) for t, (us, count) in types.items()},
            "ops": {n: (t, us / count) for n, (t, us, count) in names.items()}, "apis": dict(calls)}


def renamed(desc, name):
    desc["models"][0]["name"] = name
    return desc


@pytest.fixture(scope="module")
def job_pair(tmp_path_factory):
    """The Mish network and its LeakyReLU version, both as model ``yolov3_tiny`` (the same .om name), and
    the fixtures' own names (yolov3_tiny_mish / yolov3_tiny_leaky: matched by name, so one-sided)."""
    parent = tmp_path_factory.mktemp("jobs")
    out = {}
    for variant in ("mish", "leakyrelu"):
        same = renamed(jobgen.detection_network(variant), "yolov3_tiny")
        out[variant] = (jobgen.build(same), jobgen.write_job(parent / variant, same))
        own = jobgen.detection_network(variant)
        out[variant + "_own"] = (jobgen.build(own), jobgen.write_job(parent / (variant + "_own"), own))
    return out


def field_rows(document, section, key):
    return {row[KEYS[section][0]]: row for row in document[section]} if key is None else \
        next(row for row in document[section] if row[KEYS[section][0]] == key)


# --- JOB pair, through the CLI ------------------------------------------------------------------------------
def test_job_pair_json_document_field_by_field(job_pair, msprof_cli):
    (mish, mish_dir), (leaky, leaky_dir) = job_pair["mish"], job_pair["leakyrelu"]
    result = msprof_cli("compare", mish_dir, leaky_dir, "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["base", "new", "models", "op_types", "ops", "apis"]
    assert document["base"] == str(mish_dir) and document["new"] == str(leaky_dir)
    for section, keys in KEYS.items():
        assert all(list(row) == keys for row in document[section]), section
    base, new = job_truth(mish), job_truth(leaky)

    # models: 23145 µs of tasks per Mish execute (23.3 ms minus launch, return, pads and 54 gaps of 2 µs)
    assert r3(base["model"]) == 23145.0 and r3(new["model"]) == 14111.0
    delta = r3(r3(new["model"]) - r3(base["model"]))
    assert document["models"] == [{"base_model_name": "yolov3_tiny", "new_model_name": "yolov3_tiny",
                                   "base_us": r3(base["model"]),
                                   "new_us": r3(new["model"]), "delta_us": delta,
                                   "delta_pct": r3(delta / r3(base["model"]) * 100)}]
    assert document["models"][0]["delta_pct"] == -39.032

    # op types: Softplus only in the base (0 in the new), Convolution on both sides (LeakyReLU fused: +3 %)
    softplus = field_rows(document, "op_types", "Softplus")
    us, count = base["types"]["Softplus"]
    assert softplus == {"op_type": "Softplus", "base_us": r3(us), "new_us": 0.0, "delta_us": r3(-r3(us)),
                        "base_count": 11, "new_count": 0} and count == 11
    conv = field_rows(document, "op_types", "Convolution")
    (b_us, b_count), (n_us, n_count) = base["types"]["Convolution"], new["types"]["Convolution"]
    assert conv == {"op_type": "Convolution", "base_us": r3(b_us), "new_us": r3(n_us),
                    "delta_us": r3(r3(n_us) - r3(b_us)), "base_count": 13, "new_count": 13}
    assert b_count == n_count == 13
    assert {row["op_type"] for row in document["op_types"]} == set(base["types"]) | set(new["types"])
    assert [abs(row["delta_us"]) for row in document["op_types"]] == sorted(
        (abs(row["delta_us"]) for row in document["op_types"]), reverse=True)

    # ops: every layer name of either side (json is not cut by --top); conv1 on both, the Mish layers base only
    assert len(document["ops"]) == len(set(base["ops"]) | set(new["ops"])) == 55
    conv1 = field_rows(document, "ops", "conv1")
    assert conv1 == {"op_name": "conv1", "base_op_type": "Convolution", "new_op_type": "Convolution", "base_us": r3(base["ops"]["conv1"][1]),
                     "new_us": r3(new["ops"]["conv1"][1]),
                     "delta_us": r3(r3(new["ops"]["conv1"][1]) - r3(base["ops"]["conv1"][1]))}
    softplus1 = field_rows(document, "ops", "conv1_mish_softplus")
    assert softplus1 == {"op_name": "conv1_mish_softplus", "base_op_type": "Softplus", "new_op_type": None,
                         "base_us": r3(base["ops"]["conv1_mish_softplus"][1]), "new_us": None, "delta_us": None}
    assert document["ops"][0]["op_name"] == "conv1_mish_softplus"      # the largest change first

    # apis: execute 23.3 ms → 14.2 ms
    count_b, total_b = base["apis"]["svp_acl_mdl_execute"]
    count_n, total_n = new["apis"]["svp_acl_mdl_execute"]
    execute = field_rows(document, "apis", "svp_acl_mdl_execute")
    assert execute == {"name": "svp_acl_mdl_execute", "base_count": count_b, "new_count": count_n,
                       "base_avg_us": r3(total_b / count_b), "new_avg_us": r3(total_n / count_n),
                       "delta_avg_us": r3(r3(total_n / count_n) - r3(total_b / count_b)),
                       "base_total_us": r3(total_b), "new_total_us": r3(total_n)}
    assert execute["base_avg_us"] == 23300.0 and execute["new_avg_us"] == 14200.0 and execute["base_count"] == 3
    assert {row["name"] for row in document["apis"]} == set(base["apis"])
    assert document["apis"][0]["name"] == "svp_acl_mdl_execute"          # the largest total first


def test_gate_exit_9_both_ways(job_pair, msprof_cli):
    (mish, mish_dir), (leaky, leaky_dir) = job_pair["mish"], job_pair["leakyrelu"]
    base, new = r3(job_truth(leaky)["model"]), r3(job_truth(mish)["model"])
    growth = (new - base) / base * 100                      # Mish after LeakyReLU: +64.02 %
    assert 64 < growth < 64.1
    slower = msprof_cli("compare", leaky_dir, mish_dir, "--fail-if-slower", "50")
    assert slower.returncode == 9
    assert slower.stdout.startswith("yolov3_tiny: 14111.0 → 23145.0 µs per iteration, +64.0 %\n")  # data first
    assert "performance regression: yolov3_tiny: 14111.0 → 23145.0 µs per iteration (+64.0 %, more than 50 %)" \
        in slower.stderr
    assert msprof_cli("compare", leaky_dir, mish_dir, "--fail-if-slower", "64.1").returncode == 0
    faster = msprof_cli("compare", mish_dir, leaky_dir, "--fail-if-slower", "0", "--format", "json")
    assert faster.returncode == 0 and json.loads(faster.stdout)["models"][0]["delta_pct"] < 0
    with pytest.raises(RegressionError) as raised:        # the library raises what the CLI maps to exit 9
        api.compare(leaky_dir, mish_dir, fmt="json", fail_if_slower=10)
    assert raised.value.exit_code == 9 and "yolov3_tiny" in raised.value.message


def test_table_view_verdict_first_and_top(job_pair, msprof_cli):
    (_, mish_dir), (_, leaky_dir) = job_pair["mish"], job_pair["leakyrelu"]
    result = msprof_cli("compare", mish_dir, leaky_dir, "--top", "3", "--wide")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # (14111 − 23145) / 23145 = −39.03 %
    assert lines[0] == "yolov3_tiny: 23145.0 → 14111.0 µs per iteration, −39.0 %"
    titles = [line for line in lines if line and not line.startswith((" ", "-")) and ":" in line][1:]
    assert [t.split(":")[0] for t in titles] == ["Models", "Op types", "Ops", "ACL/API calls"]
    ops = lines.index("Ops: average duration (µs), the 3 largest changes of 55")
    assert [line.split()[0] for line in lines[ops + 3:ops + 6]] == [
        "conv1_mish_softplus", "conv1_mish_tanh", "conv1_mish_mul"]
    assert lines[ops + 6] == ""


def test_csv_view(job_pair, msprof_cli):
    """One table that csv.reader loads: models by default (the other sections named on stderr), --table for
    another; every row unless --top."""
    (_, mish_dir), (_, leaky_dir) = job_pair["mish"], job_pair["leakyrelu"]
    result = msprof_cli("compare", mish_dir, leaky_dir, "--format", "csv")
    assert result.returncode == 0, result.stderr
    assert list(csv.reader(io.StringIO(result.stdout))) == [
        KEYS["models"], ["yolov3_tiny", "yolov3_tiny", "23145.0", "14111.0", "-9034.0", "-39.032"]]
    assert "csv holds one table: models printed; --table {op_types, ops, apis} for another" in result.stderr
    ops = list(csv.DictReader(io.StringIO(msprof_cli("compare", mish_dir, leaky_dir, "--format", "csv", "--table",
                                                     "ops").stdout)))
    assert len(ops) == 55 and list(ops[0]) == KEYS["ops"]            # all of them, as json has
    assert ops[0] == {"op_name": "conv1_mish_softplus", "base_op_type": "Softplus", "new_op_type": "N/A",
                      "base_us": "1836.21", "new_us": "N/A", "delta_us": "N/A"}
    two = msprof_cli("compare", mish_dir, leaky_dir, "--format", "csv", "--table", "ops", "--top", "2").stdout
    assert [row["op_name"] for row in csv.DictReader(io.StringIO(two))] == ["conv1_mish_softplus", "conv1_mish_tanh"]


def model_means(job):
    """Per model name: the mean over its recorded iterations of the summed task durations."""
    sums = defaultdict(Fraction)
    for task in job.tasks:
        if task["recorded"]:
            sums[(task["model_name"], task["index_id"])] += Fraction(task["duration_us"])
    means = defaultdict(list)
    for (name, _index), total in sums.items():
        means[name].append(total)
    return {name: r3(sum(totals) / len(totals)) for name, totals in means.items()}


def test_models_on_one_side_only(tmp_path, msprof_cli):
    """Two models against one: ``tiny`` is matched by name, ``tiny_b`` is the base's only (null on the new
    side) and the gate checks ``tiny`` only, warning about ``tiny_b``; with no common name at all, the gate fails
    (exit 9), since it could check nothing."""
    two, one = two_model_job(), small_job()
    two_dir, one_dir = jobgen.write_job(tmp_path / "two", two), jobgen.write_job(tmp_path / "one", one)
    base, new = model_means(jobgen.build(two)), model_means(jobgen.build(one))
    # docs/fixtures.md: conv1 100/110/120 µs by execution, pool 50, nms 200 (tiny_b: conv1 and pool only)
    assert base == {"tiny": (350 + 360) / 2, "tiny_b": (150 + 160) / 2} and new == {"tiny": (350 + 360 + 370) / 3}
    result = msprof_cli("compare", two_dir, one_dir, "--format", "json", "--fail-if-slower", "1.4")
    assert result.returncode == 9 and "tiny_b" not in result.stderr.split("error")[1]  # (360 − 355) / 355 = 1.408 %
    assert f"warning: --fail-if-slower 1.4: not checked, no time per iteration in {one_dir}: tiny_b" in result.stderr
    document = json.loads(result.stdout)
    assert document["models"] == [
        {"base_model_name": "tiny", "new_model_name": "tiny", "base_us": 355.0, "new_us": 360.0, "delta_us": 5.0,
         "delta_pct": 1.408},
        {"base_model_name": "tiny_b", "new_model_name": None, "base_us": 155.0, "new_us": None, "delta_us": None,
         "delta_pct": None}]
    assert msprof_cli("compare", two_dir, one_dir, "--fail-if-slower", "1.41").returncode == 0
    table = msprof_cli("compare", two_dir, one_dir)
    # the verdict names the model the new side lost (it said nothing of it: a newcomer's trial)
    assert table.stdout.splitlines()[0] == "tiny: 355.0 → 360.0 µs per iteration, +1.4 %; tiny_b (timed in base only)"
    nothing = msprof_cli("compare", one_dir, jobgen.write_job(tmp_path / "other", small_job(
        models=[{"name": "x", "layers": [{"name": "l"}]}, {"name": "y", "id": 2, "layers": [{"name": "l"}]}])),
        "--fail-if-slower", "0")
    # a gate that passed on nothing would pass a renamed model unseen (found by two newcomers' trials)
    assert nothing.returncode == 9 and ("msprof: error: --fail-if-slower 0: no model could be checked: no model timed"
                                        " in both collections") in nothing.stderr
    assert nothing.stdout.splitlines()[0] == ("no model timed in both collections (models are matched by name): "
                                              "tiny (timed in base only), x (timed in new only), y (timed in new only)")


def test_ops_of_one_name_in_two_models_are_two_ops(tmp_path, msprof_cli):
    """conv1 of det got slower and conv1 of cls faster: averaged by name alone they were one unchanged op of
    300 µs (a newcomer's trial). They are two rows, each named by its model (a name only one model has stays
    as it is); a layer whose type changed says both types; an op of a model on one side only is on that side
    only."""
    def job(name, det_us, cls_us, cls_type="Convolution", third=None):
        models = [{"name": "det", "executions": 2, "layers": [{"name": "conv1", "duration_us": det_us},
                                                               {"name": "head", "duration_us": 30}]},
                  {"name": "cls", "id": 2, "executions": 2, "layers": [{"name": "conv1", "duration_us": cls_us,
                                                                        "type": cls_type}]}]
        if third:
            models.append({"name": third, "id": 3, "executions": 2, "layers": [{"name": "b1", "duration_us": 50}]})
        return jobgen.write_job(tmp_path / name, small_job(models=models))

    base, new = job("base", 100, 500, third="netB"), job("new", 400, 200, "Pooling", third="netC")
    document = json.loads(msprof_cli("compare", base, new, "--format", "json").stdout)
    assert [(m["base_model_name"], m["new_model_name"]) for m in document["models"]] == [
        ("cls", "cls"), ("det", "det"), ("netB", None), (None, "netC")]
    assert sorted(tuple(o.values()) for o in document["ops"]) == [
        ("cls: conv1", "Convolution", "Pooling", 500.0, 200.0, -300.0),
        ("det: conv1", "Convolution", "Convolution", 100.0, 400.0, 300.0),
        ("head", "Convolution", "Convolution", 30.0, 30.0, 0.0),     # (a name of one model: issue 12's op name)
        ("netB: b1", "Convolution", None, 50.0, None, None),
        ("netC: b1", None, "Convolution", None, 50.0, None)]
    assert all(list(row) == KEYS["ops"] for row in document["ops"])
    # one model each side: names as they are (issue 12's document)
    one = json.loads(msprof_cli("compare", jobgen.write_job(tmp_path / "one", small_job()),
                                jobgen.write_job(tmp_path / "two", small_job()), "--format", "json").stdout)
    assert sorted(o["op_name"] for o in one["ops"]) == ["conv1", "nms", 'pool "max", 2x2']


def test_a_gate_of_nan_is_refused_and_a_cut_csv_says_so(job_pair, msprof_cli):
    """nan compares false with every growth: ``--fail-if-slower nan`` passed a +64 % regression with exit 0
    (a newcomer's trial). A csv cut to --top ops says so on stderr (a script reading it had no sign)."""
    mish_dir, leaky_dir = job_pair["mish"][1], job_pair["leakyrelu"][1]
    for pct in ("nan", "inf"):
        result = msprof_cli("compare", leaky_dir, mish_dir, "--fail-if-slower", pct)
        assert result.returncode == 2 and f"--fail-if-slower {pct}: not a percentage" in result.stderr
    assert msprof_cli("compare", leaky_dir, mish_dir, "--fail-if-slower", "5").returncode == 9
    whole = json.loads(msprof_cli("compare", leaky_dir, mish_dir, "--format", "json").stdout)["ops"]
    cut = msprof_cli("compare", leaky_dir, mish_dir, "--format", "csv", "--table", "ops", "--top", "3")
    assert len(whole) > 3 and f"ops: the 3 largest changes of {len(whole)} in the csv (--top 0: all)" in cut.stderr
    assert "largest changes" not in msprof_cli("compare", leaky_dir, mish_dir, "--format", "csv", "--table", "ops",
                                               "--top", "0").stderr


def test_the_verdict_wraps_on_a_terminal_and_is_one_line_in_a_pipe(tmp_path, msprof_cli, monkeypatch):
    from test_show import stdout_on_a_terminal

    two_dir = jobgen.write_job(tmp_path / "two", two_model_job())
    one_dir = jobgen.write_job(tmp_path / "one", small_job())
    piped = msprof_cli("compare", two_dir, one_dir).stdout.splitlines()[0]
    assert piped == "tiny: 355.0 → 360.0 µs per iteration, +1.4 %; tiny_b (timed in base only)"
    monkeypatch.setenv("COLUMNS", "40")
    lines = stdout_on_a_terminal("compare", two_dir, one_dir).decode().replace("\r\n", "\n").split("\n\n")[0]
    assert lines.splitlines() == ["tiny: 355.0 → 360.0 µs per iteration,", "  +1.4 %; tiny_b (timed in base only)"]


def test_the_gate_is_not_hidden_by_a_closed_pipe(tmp_path):
    """``compare … --fail-if-slower 1.4 | head -1`` in a CI job: the reader going away after one line ends the
    table, not the gate — exit 9 and its message still come (found by a newcomer's trial: exit 0, silent)."""
    import os
    import subprocess

    two_dir = jobgen.write_job(tmp_path / "two", two_model_job())
    one_dir = jobgen.write_job(tmp_path / "one", small_job())
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    for fmt in ("table", "csv", "json"):
        for pct, code in (("1.4", 9), ("1.41", 0)):       # tiny: 355 → 360 µs, +1.408 %
            run = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -1', "-", sys.executable, "-m",
                                  "msprof", "-q", "compare", str(two_dir), str(one_dir), "--format", fmt,
                                  "--fail-if-slower", pct], env=env, capture_output=True, text=True, timeout=120)
            assert run.returncode == code and len(run.stdout.splitlines()) == 1, (fmt, pct, run)
            if code:
                assert run.stderr == ("msprof: error: performance regression: tiny: 355.0 → 360.0 µs per iteration "
                                      "(+1.4 %, more than 1.4 %)\n"), (fmt, run.stderr)
            else:
                assert run.stderr == "", (fmt, run.stderr)


def test_the_table_view_fits_the_terminal_and_top_0_shows_every_op(tmp_path, msprof_cli):
    """As show: the tables fit COLUMNS, keeping the name and the change, naming what went (--wide: all);
    ``--top 0`` is every op, as in show (found by newcomers' trials: 150-column tables, and --top 0 refused)."""
    two_dir = jobgen.write_job(tmp_path / "two", two_model_job())
    one_dir = jobgen.write_job(tmp_path / "one", small_job())
    narrow = msprof_cli("compare", two_dir, one_dir, env={"COLUMNS": "60"})
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert all(len(line) <= 60 for line in lines[1:]), lines         # (the verdict is one line, whatever its length)
    acl = lines[lines.index("ACL/API calls: count, average and total (µs)") + 1].split()
    assert acl[0] == "name" and "delta_avg_us" in acl and "base_total_us" not in acl
    assert "(5 more columns: --wide)" in lines
    wide = msprof_cli("compare", two_dir, one_dir, "--wide", env={"COLUMNS": "60"})
    acl = wide.stdout.splitlines()[wide.stdout.splitlines().index("ACL/API calls: count, average and total (µs)") + 1]
    assert acl.split() == list(SECTIONS["apis"][0]) and "more columns" not in wide.stdout
    every = json.loads(msprof_cli("compare", two_dir, one_dir, "--format", "json").stdout)["ops"]
    for top in ("0", None):          # csv: every op, unless --top
        csv_ops = msprof_cli("compare", two_dir, one_dir, "--format", "csv", "--table", "ops",
                             *(("--top", top) if top else ())).stdout
        assert len(list(csv.reader(io.StringIO(csv_ops)))) == 1 + len(every)
    one = msprof_cli("compare", two_dir, one_dir, "--format", "csv", "--table", "ops", "--top", "1").stdout
    assert len(list(csv.reader(io.StringIO(one)))) == 2 < 1 + len(every)
    # the terminal: the 20 largest changes unless --top
    assert len(every) < 20 or "the 20 largest changes" in msprof_cli("compare", two_dir, one_dir).stdout
    # a model's label is wrapped, not cut in the middle ("yolov3_tin…h → yolov3_tiny_leaky" hid "mish")
    renamed = jobgen.write_job(tmp_path / "renamed", small_job(models=[dict(
        small_job()["models"][0], name="tiny_with_a_rather_long_model_name_v2")]))
    table = msprof_cli("compare", one_dir, renamed, env={"COLUMNS": "60"}).stdout
    models = table.split("Models: device time per iteration (µs)\n")[1].split("\n\n")[0]
    assert "…" not in models and "with_a_rather_long_model_name_v2" in "".join(models.split())


def test_a_gate_on_a_model_the_new_side_did_not_time_fails(tmp_path, msprof_cli):
    """The model is in both collections, but the new one lost its device task log: nothing can be checked, so
    the gate fails and says why (found by a newcomer's trial: exit 0, and a notice that the model was not in
    both)."""
    base = jobgen.write_job(tmp_path / "base", small_job())
    new = jobgen.write_job(tmp_path / "new", small_job())
    for path in (new / "data").glob("hwts.data*"):
        path.unlink()
    result = msprof_cli("-q", "compare", base, new, "--fail-if-slower", "5")
    assert result.returncode == 9
    assert result.stderr == ("msprof: error: --fail-if-slower 5: no model could be checked: no model timed in both"
                             " collections (models are matched by name): tiny (timed in base only)\n")


def test_one_model_each_with_no_op_in_common_is_not_paired(tmp_path, msprof_cli):
    """Two devices that ran different networks (graph_1_*, graph_2_*: no op name in common) are not one
    network converted again: not compared (found by a newcomer's trial), and a gate, which can check nothing,
    fails."""
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "1", "--ops", "8", "--iters", "2", "--devices", "2",
                                                 "--models", "2"]))
    result = msprof_cli("compare", prof_dir / "device_1", prof_dir / "device_0", "--format", "json",
                        "--fail-if-slower", "0")
    assert result.returncode == 9, result.stderr
    models = json.loads(result.stdout)["models"]
    sides = {(m["base_model_name"] or m["new_model_name"]).split("_")[1]: (m["base_us"] is None, m["new_us"] is None)
             for m in models}
    assert sides == {"1": (True, False), "2": (False, True)}            # graph_1_* new only, graph_2_* base only
    new_name, base_name = (m["base_model_name"] or m["new_model_name"] for m in models)
    assert [(m["base_model_name"], m["new_model_name"]) for m in models] == [(None, new_name), (base_name, None)]
    assert (f"models not matched: {base_name} (base) and {new_name} (new) have other names and no op name in "
            "common") in result.stderr and "no model could be checked" in result.stderr


def test_one_model_each_under_two_names_is_compared(job_pair, msprof_cli):
    """The fixtures' own names differ (yolov3_tiny_mish / yolov3_tiny_leaky): one model each side is the same
    network converted again, so the two are compared, and gated."""
    (_, mish_dir), (_, leaky_dir) = job_pair["mish_own"], job_pair["leakyrelu_own"]
    result = msprof_cli("compare", mish_dir, leaky_dir, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert ("models matched as the only one of each side: yolov3_tiny_mish (base) and yolov3_tiny_leaky (new)"
            in result.stderr)
    assert json.loads(result.stdout)["models"] == [
        {"base_model_name": "yolov3_tiny_mish", "new_model_name": "yolov3_tiny_leaky", "base_us": 23145.0,
         "new_us": 14111.0,
         "delta_us": -9034.0, "delta_pct": -39.032}]
    slower = msprof_cli("compare", leaky_dir, mish_dir, "--fail-if-slower", "10")
    assert slower.returncode == 9
    assert slower.stdout.splitlines()[0] == ("yolov3_tiny_leaky → yolov3_tiny_mish: 14111.0 → 23145.0 µs per "
                                             "iteration, +64.0 %")


def test_collection_without_acl_or_pmu_data(tmp_path, msprof_cli):
    """No ACL data on one side: apis is empty, not an error; no PMU data changes nothing compare reads."""
    with_acl = jobgen.write_job(tmp_path / "a", renamed(jobgen.detection_network("leakyrelu"), "net"))
    desc = renamed(jobgen.detection_network("leakyrelu", acl_api="off", aac_metrics="PipeUtilization"), "net")
    without = jobgen.write_job(tmp_path / "b", desc)
    assert not list((without / "data").glob("AclModule*")) and not list((without / "data").glob("AAcore*"))
    result = msprof_cli("compare", with_acl, without, "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["apis"] == [] and f"no ACL/API data in {without}: apis not compared" in result.stderr
    assert document["models"][0]["delta_us"] == 0.0 and len(document["ops"]) == 22
    table = msprof_cli("compare", without, with_acl)
    assert table.returncode == 0 and "ACL/API calls: count, average and total (µs)\n(none)\n" in table.stdout


def test_base_new_must_each_be_one_result_dir(job_pair, tmp_path, msprof_cli):
    (_, mish_dir), (_, leaky_dir) = job_pair["mish"], job_pair["leakyrelu"]
    parent = tmp_path / "two"
    parent.mkdir()
    for job in (mish_dir, leaky_dir):
        shutil.copytree(job, parent / job.name, ignore=shutil.ignore_patterns("sqlite", "log", "timeline"))
    result = msprof_cli("compare", parent, leaky_dir)
    assert result.returncode == 2
    assert f"{parent} holds 2 result directories; name one of them:" in result.stderr
    [line] = [l for l in result.stderr.splitlines() if "name one of them" in l]    # one line, both named
    assert str(parent / mish_dir.name) in line and str(parent / leaky_dir.name) in line and "\\n" not in line
    shutil.rmtree(parent / leaky_dir.name)          # a parent holding exactly one is that one
    one = msprof_cli("compare", parent, leaky_dir, "--format", "json")
    assert one.returncode == 0 and json.loads(one.stdout)["base"] == str(parent / mish_dir.name)
    assert msprof_cli("compare", tmp_path / "missing", leaky_dir).returncode == 2
    assert msprof_cli("compare", "bad;name", leaky_dir).returncode == 2
    with pytest.raises(UsageError):
        api.compare(mish_dir.parent.parent, leaky_dir)           # the four JOBs of job_pair


# --- PROF pair, through the library -------------------------------------------------------------------------
PROF_BASE = {"iterations": 2, "pmu": "PipeUtilization", "threads": [{"ops": [
    {"name": "conv1", "type": "Conv2D", "block_dim": 8, "dur_us": [20, 22]},
    {"name": "sig1", "type": "Sigmoid", "task_type": "AI_VECTOR_CORE", "dur_us": 5},
    {"name": "mul1", "type": "Mul", "task_type": "AI_VECTOR_CORE", "dur_us": 3},
    {"name": "nms", "type": "NonMaxSuppression", "task_type": "AI_CPU", "dur_us": 40}]}]}


def prof_new():
    """The same network, other op durations (conv1 slower, nms faster)."""
    desc = json.loads(json.dumps(PROF_BASE))
    ops = desc["threads"][0]["ops"]
    ops[0]["dur_us"], ops[1]["dur_us"], ops[3]["dur_us"] = [30.5, 33], 4.02, 25
    return desc


def test_prof_pair(tmp_path, capsys):
    base_dir, new_dir = pg.write_prof(tmp_path / "b", PROF_BASE), pg.write_prof(tmp_path / "n", prof_new())
    base, new = prof_truth(pg.build(PROF_BASE)), prof_truth(pg.build(prof_new()))
    document = api.compare(base_dir, new_dir, fmt="json")
    assert json.loads(capsys.readouterr().out) == document
    assert api.compare(base_dir, new_dir, fmt=None) == document and capsys.readouterr().out == ""  # the library's
    assert document["base"] == str(base_dir / "device_0") and document["new"] == str(new_dir / "device_0")
    # (20 + 5 + 3 + 40 + 22 + 5 + 3 + 40) / 2 = 69 µs; (30.5 + 4.02 + 3 + 25 + 33 + 4.02 + 3 + 25) / 2 = 63.77
    assert r3(base["model"]) == 69.0 and r3(new["model"]) == 63.77
    assert document["models"] == [{"base_model_name": "resnet50", "new_model_name": "resnet50", "base_us": 69.0, "new_us": 63.77,
                                   "delta_us": -5.23, "delta_pct": r3(-5.23 / 69 * 100)}]
    conv = field_rows(document, "op_types", "Conv2D")
    assert conv == {"op_type": "Conv2D", "base_us": r3(base["types"]["Conv2D"][0]),
                    "new_us": r3(new["types"]["Conv2D"][0]), "delta_us": r3(31.75 - 21), "base_count": 1,
                    "new_count": 1}
    assert [row["op_name"] for row in document["ops"]] == ["nms", "conv1", "sig1", "mul1"]
    assert field_rows(document, "ops", "sig1") == {"op_name": "sig1", "base_op_type": "Sigmoid",
                                                   "new_op_type": "Sigmoid", "base_us": 5.0,
                                                   "new_us": 4.02, "delta_us": -0.98}
    execute = field_rows(document, "apis", "aclmdlExecute")
    count, total = base["apis"]["aclmdlExecute"]
    count_n, total_n = new["apis"]["aclmdlExecute"]
    assert execute == {"name": "aclmdlExecute", "base_count": count, "new_count": count_n,
                       "base_avg_us": r3(total / count), "new_avg_us": r3(total_n / count_n),
                       "delta_avg_us": r3(r3(total_n / count_n) - r3(total / count)),
                       "base_total_us": r3(total), "new_total_us": r3(total_n)}
    assert {row["name"] for row in document["apis"]} == set(base["apis"]) == {
        "aclmdlExecute", "ModelExecute", "launch", "KernelLaunch"}
    with pytest.raises(RegressionError):                    # new → base: +8.2 %
        api.compare(new_dir, base_dir, fmt="json", fail_if_slower=8)
    api.compare(new_dir, base_dir, fmt="json", fail_if_slower=8.3)


def test_a_host_without_devices_against_a_full_run_has_no_op_type_values(tmp_path):
    """The same run with its device_N directories gone (API-only profiling): nothing was timed on that side,
    so its op types are N/A (None), as its models and ops are — not 0 µs and 0 runs, which read as a type that
    stopped running. The host's API calls still compare."""
    base_dir = pg.write_prof(tmp_path / "b", PROF_BASE)
    new_dir = pg.write_prof(tmp_path / "n", PROF_BASE)
    for device in new_dir.glob("device_*"):
        shutil.rmtree(device)
    base = prof_truth(pg.build(PROF_BASE))
    document = api.compare(base_dir, new_dir, fmt=None)
    assert document["new"] == str(new_dir / "host")
    assert {row["op_type"] for row in document["op_types"]} == set(base["types"])
    for row in document["op_types"]:
        assert row["base_us"] == r3(base["types"][row["op_type"]][0]) and row["base_count"] == 1
        assert (row["new_us"], row["delta_us"], row["new_count"]) == (None, None, None), row
    assert [row["base_us"] for row in document["op_types"]] == sorted(
        (row["base_us"] for row in document["op_types"]), reverse=True)      # the largest first, as ops
    assert all(row["new_us"] is None for row in document["models"] + document["ops"])
    assert {row["name"] for row in document["apis"]} == set(base["apis"])
    assert all(row["base_count"] == row["new_count"] for row in document["apis"])
    # both sides without devices: what is missing is said (the hosts did record model executions)
    with pytest.raises(RegressionError, match="no model could be checked: no model's device time per iteration "
                                              "recorded on either side"):
        api.compare(new_dir, new_dir, fmt=None, fail_if_slower=5)


@pytest.fixture
def notices():
    """The messages msprof logs (to stderr in the CLI) while the test runs."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep(logging.DEBUG)
    logging.getLogger("msprof").addHandler(handler)
    yield records
    logging.getLogger("msprof").removeHandler(handler)


def test_prof_without_model_executions_is_single_op(tmp_path, notices):
    """A PROF device without its host: no model execution is known, every device task is one iteration."""
    base_dir, new_dir = pg.write_prof(tmp_path / "b", PROF_BASE), pg.write_prof(tmp_path / "n", prof_new())
    for prof_dir in (base_dir, new_dir):
        shutil.rmtree(prof_dir / "host")
    document = api.compare(base_dir, new_dir, fmt="json")
    assert document["models"] == [{"base_model_name": "single-op", "new_model_name": "single-op", "base_us": 138.0, "new_us": 127.54,
                                   "delta_us": -10.46, "delta_pct": r3(-10.46 / 138 * 100)}]
    assert document["apis"] == []
    # without the host no op is known: tasks are named by their HWTS task type
    assert {row["op_type"]: (row["base_count"], row["new_count"]) for row in document["op_types"]} == {
        "AI_CORE": (2, 2), "AI_VECTOR_CORE": (4, 4), "AI_CPU": (2, 2)}
    assert any(m.startswith("no ACL/API data in ") for m in notices)


class CountingConnection:
    """A connection whose cursors count the rows they hand to Python."""

    def __init__(self, conn):
        self.conn, self.rows = conn, 0

    def execute(self, *args):
        return CountingCursor(self, self.conn.execute(*args))

    def __getattr__(self, name):
        return getattr(self.conn, name)


class CountingCursor:
    def __init__(self, owner, cursor):
        self.owner, self.cursor = owner, cursor

    def _count(self, rows):
        self.owner.rows += len(rows)
        return rows

    def __iter__(self):
        for row in self.cursor:
            self.owner.rows += 1
            yield row

    def fetchone(self):
        row = self.cursor.fetchone()
        self.owner.rows += row is not None
        return row

    def fetchall(self):
        return self._count(self.cursor.fetchall())

    def fetchmany(self, size=1):
        return self._count(self.cursor.fetchmany(size))


def test_compare_fetches_aggregates_not_tasks(tmp_path):
    """Facts never hand Python one row per task: the rows compare reads from SQLite are about the number of
    layers and iterations, whatever the number of tasks (a 1M-task compare is timed in docs/tutorial.md, "Speed")."""
    from msprof.analysis.compare import Side
    from msprof.frame import ensure_databases
    from msprof.layouts import find_units

    layers = [{"name": f"l{i}", "type": ("Conv", "Mish")[i % 2], "task_id": i + 1, "duration_us": 1 + i % 3}
              for i in range(40)]
    job = jobgen.write_job(tmp_path, {"models": [{"name": "m", "executions": 50, "gap_us": 1, "layers": layers}]})
    [unit] = find_units(job)
    ensure_databases(unit)
    with unit.open() as report:
        report.conn = counting = CountingConnection(report.conn)
        side = Side.read(unit.layout.facts(report))
    assert len(side.models["m"]) == 50 and len(side.ops) == 40
    assert side.op_types["Mish"].us_per_iteration == sum(1 + i % 3 for i in range(1, 40, 2))
    # 2000 tasks; read: 50 iteration sums, 40 layer groups, 40 layer names, a few models, APIs and counts
    assert 130 < counting.rows < 200


def test_output_dir_leaves_the_collections_alone(job_pair, tmp_path, msprof_cli):
    (_, mish_dir), (_, leaky_dir) = job_pair["mish"], job_pair["leakyrelu"]
    base, new = tmp_path / "base" / mish_dir.name, tmp_path / "new" / leaky_dir.name
    for source, target in ((mish_dir, base), (leaky_dir, new)):
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("sqlite", "log", "timeline"))
    result = msprof_cli("compare", base, new, "--format", "json", "--output", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["models"][0]["delta_us"] == -9034.0
    for collection in (base, new):
        assert sorted(p.name for p in collection.iterdir()) == sorted(p.name for p in mish_dir.iterdir()
                                                                      if p.name not in ("sqlite", "log", "timeline"))
        assert (tmp_path / "out" / collection.name / "sqlite" / "msprof.db").is_file()
    advise = msprof_cli("advise", "-dir", base, "--output", tmp_path / "out")
    assert advise.returncode == 0 and "importing" not in advise.stderr        # the database under out/ is reused


def test_output_dir_keeps_two_sides_of_one_name_apart(tmp_path, msprof_cli):
    """base/PROF_SAME and new/PROF_SAME under one --output: each side is imported into a directory of its own
    (DIR/base/, DIR/new/), never the second over the first (which compared the new run with itself and let a
    regression through the gate)."""
    base_dir, new_dir = pg.write_prof(tmp_path / "b", PROF_BASE), pg.write_prof(tmp_path / "n", prof_new())
    base, new = tmp_path / "base" / "PROF_SAME", tmp_path / "new" / "PROF_SAME"
    shutil.copytree(base_dir, base)
    shutil.copytree(new_dir, new)
    out = tmp_path / "out"
    result = msprof_cli("compare", new, base, "--format", "json", "--output", out, "--fail-if-slower", "8")
    assert result.returncode == 9, result.stderr                     # new → base: 63.77 → 69 µs, +8.2 %
    models = json.loads(result.stdout)["models"]
    assert [(m["base_us"], m["new_us"]) for m in models] == [(63.77, 69.0)]
    assert (out / "base" / "PROF_SAME" / "device_0" / "sqlite" / "msprof.db").is_file()
    assert (out / "new" / "PROF_SAME" / "host" / "sqlite" / "msprof.db").is_file()
    assert not (out / "PROF_SAME").exists()
    # one collection given twice is one directory, as before
    again = msprof_cli("compare", base, base, "--format", "json", "--output", tmp_path / "out2")
    assert again.returncode == 0 and (tmp_path / "out2" / "PROF_SAME" / "device_0" / "sqlite").is_dir()


def test_two_prof_dirs_of_two_devices_are_compared_device_by_device(tmp_path, msprof_cli):
    """Two PROF_ directories of two devices were refused ("name one of them", exit 2): each device is compared
    with the device of the same name, and said (issue 38 #7). Each pair's document is the one compare gives
    for those two device directories named alone; a device one side lacks is said and left out."""
    prof = Path(indepgen.generate(tmp_path / "a", ["--seed", "1", "--ops", "8", "--iters", "2", "--devices", "2"]))
    other = tmp_path / "b" / prof.name
    shutil.copytree(prof, other)
    both = msprof_cli("compare", prof, other, "--format", "json")
    assert both.returncode == 0, both.stderr
    assert "comparing 2 devices, each on its own: device_0, device_1" in both.stderr
    documents = json.loads(both.stdout)["comparisons"]
    for device, document in zip(("device_0", "device_1"), documents):
        alone = msprof_cli("compare", prof / device, other / device, "--format", "json")
        assert alone.returncode == 0, alone.stderr
        assert document == json.loads(alone.stdout)
        assert (document["base"], document["new"]) == (str(prof / device), str(other / device))
    table = msprof_cli("compare", prof, other)
    assert table.returncode == 0, table.stderr
    titles = [line for line in table.stdout.splitlines() if line.startswith("== ")]
    assert titles == [f"== {prof.name}/device_{n} → {prof.name}/device_{n} ==" for n in (0, 1)]
    shutil.rmtree(other / "device_1")
    one = msprof_cli("compare", prof, other, "--format", "json", "--fail-if-slower", "0")
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout) == documents[0]
    assert f"not compared, in base only: {prof.name}/device_1" in one.stderr
