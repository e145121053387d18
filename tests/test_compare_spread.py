"""compare --spread (issue 38 #8): each side's median and sample standard deviation of the durations a row
averages (a model's iterations, an op's tasks, an API's calls), in json, csv and the terminal; without the
flag, the document of before.

Expected values are computed here with Python's statistics module from the durations the generators packed
(their truth), independently of msprof."""
import csv
import io
import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from fixtures import profgen
from fixtures.board import jobgen
from fixtures.networks import small_job, two_model_job

SPREAD_KEYS = ["base_median_us", "new_median_us", "base_stddev_us", "new_stddev_us"]
KEYS = {
    "models": ["base_model_name", "new_model_name", "base_us", "new_us", "delta_us", "delta_pct", *SPREAD_KEYS],
    "op_types": ["op_type", "base_us", "new_us", "delta_us", "base_count", "new_count"],
    "ops": ["op_name", "base_op_type", "new_op_type", "base_us", "new_us", "delta_us", *SPREAD_KEYS],
    "apis": ["name", "base_count", "new_count", "base_avg_us", "new_avg_us", "delta_avg_us", *SPREAD_KEYS,
             "base_total_us", "new_total_us"],
}


def spread(durations):
    """(median, sample std dev) as compare prints them: 3 decimals; no std dev of one value."""
    if not durations:
        return None, None
    deviation = round(statistics.stdev(durations), 3) if len(durations) > 1 else None
    return round(statistics.median(durations), 3), deviation


def job_durations(desc):
    """Per section, key → durations (µs): each model's iterations (task sums), each (model, layer)'s tasks, each
    ACL name's calls."""
    job = jobgen.build(desc)
    iterations, ops, apis = defaultdict(float), defaultdict(list), defaultdict(list)
    for task in job.tasks:
        if task["recorded"]:
            iterations[(task["model_name"], task["index_id"])] += task["duration_us"]
            ops[(task["model_name"], task["layer_name"])].append(task["duration_us"])
    for call in job.acl_calls:
        if call["recorded"]:
            apis[call["name"]].append((call["end_ns"] - call["start_ns"]) / 1000)
    models = defaultdict(list)
    for (name, _index), busy in sorted(iterations.items()):
        models[name].append(busy)
    return {"models": models, "ops": ops, "apis": apis}


def prof_durations(prof):
    iterations, ops, apis = defaultdict(int), defaultdict(list), defaultdict(list)
    for task in prof.tasks:
        iterations[task.iteration] += task.dur_ns
        ops[task.op_name].append(task.dur_ns / 1000)
    for call in prof.apis:
        apis[call.name].append((call.end - call.begin) / 1000)
    return {"models": {"resnet50": [ns / 1000 for ns in iterations.values()]}, "ops": ops, "apis": apis}


def check_spread(document, base, new, op_key=lambda row: (row["op_name"],) * 2):
    """Every row of models, ops and apis against the durations of each side (``op_key``: a row's (base key,
    new key) in the truth's ops)."""
    for section in ("models", "ops", "apis"):
        assert document[section], section
        for row in document[section]:
            assert list(row) == KEYS[section], section
            if section == "models":
                keys = (row["base_model_name"], row["new_model_name"])
            elif section == "ops":
                keys = op_key(row)
            else:
                keys = (row["name"],) * 2
            (b_median, b_dev), (n_median, n_dev) = (spread(truth[section].get(key, [])) for truth, key in
                                                    zip((base, new), keys))
            assert (row["base_median_us"], row["base_stddev_us"]) == (b_median, b_dev), (section, row)
            assert (row["new_median_us"], row["new_stddev_us"]) == (n_median, n_dev), (section, row)
    assert "op_types" in document and all(list(row) == KEYS["op_types"] for row in document["op_types"])


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Two models against one: the base runs tiny (2 executions) and tiny_b (its conv1 and pool only: ops and a
    model the new side lacks); the new side runs tiny 3 times, conv1 taking 90, 130 and 150 µs."""
    parent = tmp_path_factory.mktemp("jobs")
    new = small_job()
    new["models"][0]["layers"][0]["duration_us"] = [90, 130, 150]
    descs = {"base": two_model_job(), "new": new}
    return {side: (jobgen.write_job(parent / side, desc), job_durations(desc)) for side, desc in descs.items()}


def test_job_json_has_each_sides_median_and_std_dev(jobs, msprof_cli):
    (base_dir, base), (new_dir, new) = jobs["base"], jobs["new"]
    result = msprof_cli("compare", base_dir, new_dir, "--format", "json", "--spread")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    # ops of two models' names are "model: op" (conv1 and the pool are in both of the base's models)
    ops = {row["op_name"]: row for row in document["ops"]}
    assert set(ops) == {"tiny: conv1", 'tiny: pool "max", 2x2', "tiny_b: conv1", 'tiny_b: pool "max", 2x2', "nms"}

    def op_key(row):
        model, _, name = row["op_name"].rpartition(": ")
        return (model or "tiny", name), (model or "tiny", name)

    check_spread(document, base, new, op_key)
    # by hand: conv1 took 100 and 110 µs in the base, 90, 130 and 150 in the new side
    assert [ops["tiny: conv1"][key] for key in SPREAD_KEYS] == [105.0, 130.0, 7.071, 30.551]
    # an op and a model the new side lacks: nothing on that side
    assert [ops["tiny_b: conv1"][key] for key in SPREAD_KEYS] == [105.0, None, 7.071, None]
    tiny_b = next(row for row in document["models"] if row["base_model_name"] == "tiny_b")
    assert [tiny_b[key] for key in SPREAD_KEYS] == [155.0, None, 7.071, None]
    # one call: a median, no sample std dev
    init = next(row for row in document["apis"] if row["name"] == "svp_acl_init")
    assert (init["base_count"], init["base_median_us"], init["base_stddev_us"]) == (1, 1000.0, None)


def test_job_csv_and_terminal_have_the_columns_and_plain_compare_has_none(jobs, msprof_cli):
    (base_dir, base), (new_dir, new) = jobs["base"], jobs["new"]
    plain = json.loads(msprof_cli("compare", base_dir, new_dir, "--format", "json").stdout)
    assert not any(key in row for section in ("models", "ops", "apis") for row in plain[section]
                   for key in SPREAD_KEYS)
    spread_document = json.loads(msprof_cli("compare", base_dir, new_dir, "--format", "json", "--spread").stdout)
    for section in plain:      # the same document, the spread's fields added
        if isinstance(plain[section], list):
            assert [{k: v for k, v in row.items() if k not in SPREAD_KEYS} for row in spread_document[section]] \
                == plain[section]
    proc = msprof_cli("compare", base_dir, new_dir, "--format", "csv", "--table", "ops", "--spread")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert list(rows[0]) == KEYS["ops"]
    conv1 = next(row for row in rows if row["op_name"] == "tiny: conv1")
    assert [conv1[key] for key in SPREAD_KEYS] == ["105.0", "130.0", "7.071", "30.551"]
    lone = next(row for row in rows if row["op_name"] == "tiny_b: conv1")
    assert [lone[key] for key in SPREAD_KEYS] == ["105.0", "N/A", "7.071", "N/A"]
    # the terminal: every column at 200; at 80 the spread goes first, and each line fits
    wide = msprof_cli("compare", base_dir, new_dir, "--spread", env={"COLUMNS": "200"}).stdout.splitlines()
    header = wide[wide.index("Ops: average duration (µs)") + 1].split()
    assert header == ["op_name", "op_type", "base_us", "new_us", "delta_us", *SPREAD_KEYS]
    models = wide[wide.index("Models: device time per iteration (µs)") + 1].split()
    assert models == ["model_name", "base_us", "new_us", "delta_us", "delta_pct", *SPREAD_KEYS]
    narrow = msprof_cli("compare", base_dir, new_dir, "--spread", env={"COLUMNS": "80"}).stdout.splitlines()
    assert max(map(len, narrow)) <= 80
    models = narrow[narrow.index("Models: device time per iteration (µs)") + 1].split()
    assert models[:5] == ["model_name", "base_us", "new_us", "delta_us", "delta_pct"]


def test_a_long_model_label_is_wrapped_and_the_spread_left_out_at_80_columns(tmp_path, msprof_cli):
    """The models table wraps a long label ("base → new"), never cuts it; with --spread its columns no longer
    fit 80 columns even with the label wrapped, and the spread's go first (said under the table)."""
    descs = [small_job(), small_job()]
    descs[0]["models"][0]["name"] = "yolov3_tiny_mish_converted_again"
    descs[1]["models"][0]["name"] = "yolov3_tiny_leaky_converted_again"
    base, new = (jobgen.write_job(tmp_path / side, desc) for side, desc in zip(("a", "b"), descs))
    lines = msprof_cli("compare", base, new, "--spread", env={"COLUMNS": "80"}).stdout.splitlines()
    assert max(map(len, lines[1:])) <= 80                   # (the verdict's line is a sentence: not a table's)
    at = lines.index("Models: device time per iteration (µs)")
    block = lines[at:lines.index("", at)]
    first = len(block[2].split()[0])            # (the rule under the header: the first column's width)
    assert "".join(line[:first].strip() for line in block[3:-1]) == \
        "yolov3_tiny_mish_converted_again → yolov3_tiny_leaky_converted_again"
    assert block[-1].endswith("more columns: --wide)")
    assert block[1].split()[:5] == ["model_name", "base_us", "new_us", "delta_us", "delta_pct"]


@pytest.fixture(scope="module")
def profs(tmp_path_factory):
    """Two PROF_ directories of two devices (the second a copy of the first: profgen writes one), each op's
    every execution of its own duration (jitter), the new side's conv1 slower."""
    parent = tmp_path_factory.mktemp("profs")
    out = {}
    for side, conv, seed in (("base", 20, 1), ("new", 26, 2)):
        ops = [{"name": "conv1", "type": "Conv2D", "block_dim": 8, "dur_us": conv},
               {"name": "relu1", "type": "Relu", "task_type": "AI_VECTOR_CORE", "dur_us": 5},
               {"name": "mm1", "type": "MatMul", "dur_us": 40}]
        if side == "new":
            ops.append({"name": "gelu1", "type": "Gelu", "dur_us": 7})          # the new side's only
        prof = profgen.build({"iterations": 4, "jitter": seed, "threads": [{"ops": ops}]})
        path = profgen.write_built(parent / side, prof)
        shutil.copytree(path / "device_0", path / "device_1")
        for info in (path / "device_1").rglob("*"):
            if info.is_file() and "device_0" in info.name:
                info.rename(info.with_name(info.name.replace("device_0", "device_1")))
        out[side] = (path, prof_durations(prof))
    return out


def test_prof_json_of_two_devices_has_each_sides_median_and_std_dev(profs, msprof_cli):
    (base_dir, base), (new_dir, new) = profs["base"], profs["new"]
    assert len(set(base["ops"]["conv1"])) == 4         # (jitter: each execution its own time)
    result = msprof_cli("compare", base_dir, new_dir, "--format", "json", "--spread")
    assert result.returncode == 0, result.stderr
    documents = json.loads(result.stdout)["comparisons"]
    assert [Path(doc["base"]).name for doc in documents] == ["device_0", "device_1"]
    for document in documents:
        check_spread(document, base, new)
        gelu = next(row for row in document["ops"] if row["op_name"] == "gelu1")
        assert gelu["base_median_us"] is None and gelu["new_median_us"] == round(
            statistics.median(new["ops"]["gelu1"]), 3)
    # each device's document is the one compare gives for those two device directories named alone
    alone = msprof_cli("compare", base_dir / "device_1", new_dir / "device_1", "--format", "json", "--spread")
    assert json.loads(alone.stdout) == documents[1]
    # csv: one table of both pairs, its first column naming the pair
    rows = list(csv.DictReader(io.StringIO(msprof_cli("compare", base_dir, new_dir, "--format", "csv", "--table",
                                                      "ops", "--spread").stdout)))
    assert list(rows[0]) == ["comparison", *KEYS["ops"]] and len(rows) == 2 * 4
    conv = [row for row in rows if row["op_name"] == "conv1"]
    assert [[row[key] for key in SPREAD_KEYS] for row in conv] == [
        [str(v) for v in (*(spread(base["ops"]["conv1"])[0], spread(new["ops"]["conv1"])[0]),
                          spread(base["ops"]["conv1"])[1], spread(new["ops"]["conv1"])[1])]] * 2
