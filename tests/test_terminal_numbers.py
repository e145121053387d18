"""The terminal's tables as people read them (issue 38 #3): numbers right-aligned with one number of decimals
per column (µs 3, percentages 2, counts none), and on a narrow terminal the columns that name a row and the
ones read first (count, total, average, share) kept, the wide and constant ones left out first.

Expected lines are built here from the generators' descriptions (durations given in µs) and the 'simple'
style's rule (columns two spaces apart, each as wide as its widest text, numbers to the right)."""
import csv
import io
import json
import shutil
import statistics

import pytest

from fixtures import profgen
from fixtures.board import jobgen
from fixtures.networks import small_job

PROF_OPS = [{"name": "conv1", "type": "Conv2D", "block_dim": 8, "dur_us": 1234.5},
            {"name": "relu1", "type": "Relu", "task_type": "AI_VECTOR_CORE", "block_dim": 4, "dur_us": 5}]


def drawn(header, rows, numeric):
    """The lines 'simple' draws: the header, its rule, the rows (texts as given); a column is at least two
    wider than its header."""
    widths = [max(len(h) + 2, *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric)).rstrip()

    return [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def block(stdout: str, title: str) -> list:
    lines = stdout.splitlines()
    start = lines.index(title) + 1
    end = next(i for i in range(start, len(lines) + 1) if i == len(lines) or not lines[i] or lines[i][0] == "(")
    return [line.rstrip() for line in lines[start:end]]


@pytest.fixture
def prof(tmp_path):
    return profgen.write_prof(tmp_path, {"iterations": 3, "threads": [{"ops": PROF_OPS}]})


def test_prof_op_statistic_at_80_and_200_columns(prof, msprof_cli):
    total = 3 * 1234.5 + 3 * 5
    # count, total, min, avg, median, sample std dev, max, ratio
    conv = ["Conv2D", "3", "3703.500", "1234.500", "1234.500", "1234.500", "0.000", "1234.500",
            f"{3 * 1234.5 / total * 100:.2f}"]
    relu = ["Relu", "3", "15.000", "5.000", "5.000", "5.000", "0.000", "5.000", f"{15 / total * 100:.2f}"]
    assert conv[-1] == "99.60" and relu[-1] == "0.40"
    wide = msprof_cli("show", "-dir", prof, "--table", "op_statistic", "--spread", env={"COLUMNS": "200"})
    assert wide.returncode == 0, wide.stderr
    header = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
              "Median Time(us)", "StdDev Time(us)", "Max Time(us)", "Ratio(%)"]
    rows = [["0", "Conv2D", "AI_CORE"] + conv[1:], ["0", "Relu", "AI_VECTOR_CORE"] + relu[1:]]
    numeric = [True, False, False] + [True] * 8
    assert block(wide.stdout, "Op statistic (device 0)") == drawn(header, rows, numeric)
    # at 80: the device (the same in every row) goes first, then the core type, then the spread
    narrow = msprof_cli("show", "-dir", prof, "--table", "op_statistic", "--spread", env={"COLUMNS": "80"})
    keep = [1, 3, 4, 6, 10]
    expected = drawn([header[i] for i in keep], [[r[i] for i in keep] for r in rows], [numeric[i] for i in keep])
    assert block(narrow.stdout, "Op statistic (device 0)") == expected
    assert "(6 more columns: --wide)" in narrow.stdout
    assert max(map(len, narrow.stdout.splitlines())) <= 80


def test_prof_op_summary_at_80_columns_tells_the_runs_of_one_op_apart(prof, msprof_cli):
    """Three runs of conv1 looked like one row three times: the task id, which differs, stays; the device,
    model and stream ids (the same in every row) go first."""
    proc = msprof_cli("show", "-dir", prof, "--table", "op_summary", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = block(proc.stdout, "Op summary (device 0)")
    header = ["Task ID", "Op Name", "OP Type", "Task Type", "Task Duration(us)"]
    # tasks alternate conv1, relu1 (ids 0, 1, 2, ...); the longest first
    rows = [[str(t), "conv1", "Conv2D", "AI_CORE", "1234.500"] for t in (0, 2, 4)] + \
           [[str(t), "relu1", "Relu", "AI_VECTOR_CORE", "5.000"] for t in (1, 3, 5)]
    assert lines == drawn(header, rows, [True, False, False, False, True])


def test_job_tables_at_80_and_200_columns(tmp_path, msprof_cli):
    """small_job: conv1 100/110/120 µs, pool 50 µs, nms 200 µs per iteration, 3 iterations."""
    job = jobgen.write_job(tmp_path, small_job())
    title = "Op statistic: tiny (model 1)"
    total = 330 + 150 + 600
    for columns in ("80", "200"):
        proc = msprof_cli("show", "-dir", job, "--table", "op_statistic", "--spread", env={"COLUMNS": columns})
        assert proc.returncode == 0, proc.stderr
        lines = block(proc.stdout, title)
        header = [h.strip() for h in lines[0].split("  ") if h.strip()]
        conv = {"OP Name": "conv1", "Total Time(us)": "330.000", "Count": "3", "Avg(us)": "110.000",
                "Max(us)": "120.000", "Min(us)": "100.000", "Total Time Ratio(%)": f"{330 / total * 100:.2f}",
                "Task Type": "AA_CORE"}
        assert {"OP Name", "Total Time(us)", "Count", "Avg(us)"} <= set(header)
        conv_line = next(line for line in lines[2:] if line.startswith("conv1") or " conv1 " in line)
        for name in header:
            if name in conv:
                assert conv[name] in conv_line.split(), (name, conv_line)
        # numbers right-aligned: each ends where its header ends
        for name in ("Total Time(us)", "Avg(us)"):
            end = lines[0].index(name) + len(name)
            assert conv_line[end - len(conv[name]):end] == conv[name]
        if columns == "80":
            assert max(map(len, proc.stdout.splitlines())) <= 80
        else:
            assert header == ["Task ID", "Stream ID", "OP Name", "Task Type", "Total Time Ratio(%)",
                              "Total Time(us)", "Count", "Avg(us)", "Median(us)", "StdDev(us)", "Max(us)",
                              "Min(us)"]


# --- output for scripts (issue 38 #5): one table per csv, one document per json, lists as lists -------------
def test_query_json_gives_iteration_ids_as_a_list_and_csv_as_ranges(prof, msprof_cli):
    document = json.loads(msprof_cli("query", "-dir", prof, "--format", "json").stdout)
    [section] = document.values()
    assert section["tables"]["collection"]["rows"] == [
        {"device": 0, "platform": "1", "model_id": 1, "model_name": "resnet50", "iterations": 3,
         "iteration_ids": [1, 2, 3]}]
    rows = list(csv.DictReader(io.StringIO(msprof_cli("query", "-dir", prof, "--format", "csv").stdout)))
    assert rows == [{"Device": "0", "Platform": "1", "Model Id": "1", "Model Name": "resnet50", "Iterations": "3",
                     "Iteration Ids": "1-3"}]


def test_compare_of_several_devices_is_one_csv_table(tmp_path, msprof_cli):
    """Two PROF_ directories of two devices: one csv table, its first column naming the pair."""

    sides = [profgen.write_prof(tmp_path / side, {"device_id": 0, "threads": [{"ops": PROF_OPS}]})
             for side in ("base", "new")]
    for side in sides:      # a second device: the first's copy, as device_1
        shutil.copytree(side / "device_0", side / "device_1")
        for info in (side / "device_1").rglob("*"):
            if info.is_file() and "device_0" in info.name:
                info.rename(info.with_name(info.name.replace("device_0", "device_1")))
    proc = msprof_cli("compare", *sides, "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["comparison", "base_model_name", "new_model_name", "base_us", "new_us", "delta_us",
                       "delta_pct"]
    assert [row[1:] for row in rows[1:]] == [["resnet50", "resnet50", "1239.5", "1239.5", "0.0", "0.0"]] * 2
    assert [row[0] for row in rows[1:]] == [f"{sides[0].name}/device_{n} → {sides[1].name}/device_{n}"
                                            for n in (0, 1)]


# --- the spread of durations (issue 38 #8): median and sample std dev in show --spread, not in summary files
def test_job_statistics_in_show_have_median_and_sample_std_dev(tmp_path, msprof_cli):
    """small_job: conv1 takes 100, 110, 120 µs (median 110, sample std dev 10), nms 200 µs each time."""
    job = jobgen.write_job(tmp_path, small_job())
    plain = msprof_cli("show", "-dir", job, "--table", "op_statistic", "--format", "csv").stdout
    assert "Median" not in plain.splitlines()[0]           # (a second pass over the tasks: asked for)
    proc = msprof_cli("show", "-dir", job, "--table", "op_statistic", "--format", "csv", "--spread")
    assert proc.returncode == 0, proc.stderr
    rows = {row["OP Name"]: row for row in csv.DictReader(io.StringIO(proc.stdout))}
    assert (rows["conv1"]["Median(us)"], rows["conv1"]["StdDev(us)"]) == (
        str(float(statistics.median([100, 110, 120]))), str(round(statistics.stdev([100, 110, 120]), 3)))
    assert (rows["nms"]["Median(us)"], rows["nms"]["StdDev(us)"]) == ("200.0", "0.0")
    document = json.loads(msprof_cli("show", "-dir", job, "--table", "op_statistic", "--format", "json",
                                     "--spread").stdout)
    [section] = document.values()
    conv1 = next(r for r in section["tables"]["op_statistic"]["rows"] if r["op_name"] == "conv1")
    assert (conv1["median_us"], conv1["stddev_us"]) == (110.0, 10.0)
    # the summary file keeps the SS928 tool's columns
    assert msprof_cli("export", "summary", "-dir", job).returncode == 0
    [summary] = (job / "summary").glob("op_statistic_*.csv")
    assert summary.read_text().splitlines()[0] == ("Task ID,Stream ID,OP Name,Task Type,Total Time Ratio(%),"
                                                   "Total Time(us),Count,Avg(us),Max(us),Min(us)")


def test_prof_op_statistic_in_show_has_median_and_sample_std_dev(tmp_path, msprof_cli):
    ops = PROF_OPS + [{"name": "conv2", "type": "Conv2D", "block_dim": 8, "dur_us": 20}]
    prof = profgen.write_prof(tmp_path, {"iterations": 3, "threads": [{"ops": ops}]})
    proc = msprof_cli("show", "-dir", prof, "--table", "op_statistic", "--format", "json", "--spread")
    assert proc.returncode == 0, proc.stderr
    [section] = json.loads(proc.stdout).values()
    conv = next(r for r in section["tables"]["op_statistic"]["rows"] if r["op_type"] == "Conv2D")
    durations = [1234.5, 20] * 3
    assert conv["median_time_us"] == statistics.median(durations) == 627.25
    assert conv["stddev_time_us"] == round(statistics.stdev(durations), 3)
    relu = next(r for r in section["tables"]["op_statistic"]["rows"] if r["op_type"] == "Relu")
    assert (relu["median_time_us"], relu["stddev_time_us"]) == (5.0, 0.0)
    assert msprof_cli("export", "summary", "-dir", prof).returncode == 0
    [summary] = (prof / "device_0" / "summary").glob("op_statistic*.csv")
    assert summary.read_text().splitlines()[0] == ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),"
                                                   "Avg Time(us),Max Time(us),Ratio(%)")
