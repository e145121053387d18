"""The families' summary files as ``msprof export summary`` writes them (msprof.layouts.prof.family_files)
against the reference analyser's, file for file, row for row and cell for cell (marker ``reference``): the
scenarios of tests/test_families_reference.py, each family alone and all together, on HWTS and STARS chips.
A file the reference does not write, msprof does not write either; a PROF_ without the families gets exactly
the files it got before them."""
from __future__ import annotations

import json

import pytest

from famtest import _rows, generate, need_reference, reference
from reference_runner import read_csv_header
from test_families_reference import AICPU, HCCL, L2, MEMORY, MSTX, STEP_TRACE, TOGETHER

from msprof.layouts.prof.family_files import FILES

SCENARIOS = {
    "step_trace_hwts": STEP_TRACE["hwts_per_launch_reduce"],
    "step_trace_two_models": STEP_TRACE["loop_two_models"],
    "step_trace_stars_static": STEP_TRACE["stars_static_graph"],
    "mstx_segments": MSTX["segments_and_unmatched"],
    "mstx_old_cann": MSTX["stars_static_ranges_old_cann"],
    "hccl_hwts_static": HCCL["hwts_static_two_ops"],
    "aicpu_sliced": AICPU["hwts_static_sliced"],
    "aicpu_single_op": AICPU["single_op"],
    "memory_device_3": MEMORY["hwts_device_3_static"],
    "l2_stars": L2["stars_two_streams"],
    "l2_hwts_random": L2["hwts_platform_2_random_static"],
    "together_stars": TOGETHER["stars_per_launch"],
    "together_hwts_static": TOGETHER["hwts_static_graph"],
}
BEFORE = {"op_summary", "op_statistic", "task_time", "api_statistic"}


def _export(msprof_cli, written) -> dict:
    result = msprof_cli("export", "summary", "-dir", written.path)
    assert result.returncode == 0, result.stderr
    summary = written.path / ("device_%d" % written.prof.desc["device_id"]) / "summary"
    return {path.stem: path for path in summary.glob("*.csv")}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_family_files_agree_with_the_reference(tmp_path, msprof_cli, name):
    need_reference()
    written = generate(tmp_path, SCENARIOS[name])
    ref = reference(written, tmp_path, list(FILES))
    ours = _export(msprof_cli, written)
    theirs = {t for t in FILES if t in ref["headers"]}
    assert {t for t in ours if t in FILES} == theirs
    matched = {}
    for table in sorted(theirs):
        header = read_csv_header(ours[table])
        rows = _rows(ours[table])
        assert header == ref["headers"][table], table
        assert rows == ref["rows"][table], table
        matched[table] = len(rows)
    assert sum(matched.values()) > 0
    print("%s: reference rows matched %s" % (name, matched))


def test_a_prof_without_the_families_gets_the_files_it_got(tmp_path, msprof_cli):
    written = generate(tmp_path, {"platform_version": "1", "iterations": 2, "drv_version": 0x072211})
    assert set(_export(msprof_cli, written)) == BEFORE
    query = msprof_cli("query", "-dir", written.path)
    assert query.returncode == 0, query.stderr
    assert "Data families" not in query.stdout and "step_trace" not in query.stdout


def test_import_and_query_name_the_families(tmp_path, msprof_cli):
    """A plain import names what it decodes but makes nothing of yet and the raw files nothing reads; query
    lists each family present with its records and files (issue 37 item 3)."""
    written = generate(tmp_path, TOGETHER["stars_per_launch"])
    device = written.path / "device_0"
    (device / "data" / "dvpp.data.0.slice_0").write_bytes(bytes(64))
    imported = msprof_cli("import", "-dir", written.path)
    assert imported.returncode == 0, imported.stderr
    assert ("msproftx data decoded (msprof query counts them); not made from them yet: the msproftx timeline"
            in imported.stderr)
    assert "ffts_pmu data decoded" not in imported.stderr        # (platform 5: op_summary's STARS PMU columns)
    assert "not analysed by msprof: dvpp.data (1 file)" in imported.stderr
    query = msprof_cli("query", "-dir", written.path, "--format", "json")
    assert query.returncode == 0, query.stderr
    unit = json.loads(query.stdout)["%s/device_0" % written.path.name]
    rows = {(r["directory"], r["family"]): r["summary_files"] for r in unit["tables"]["families"]["rows"]}
    assert rows == {("host", "hccl"): "communication_statistic", ("host", "msproftx"): "msprof_tx",
                    ("host", "task_memory"): "memory_record, operator_memory", ("device_0", "aicpu"): "aicpu, dp",
                    ("device_0", "ffts_pmu"): "none yet", ("device_0", "l2_cache"): "l2_cache",
                    ("device_0", "memory"): "npu_mem, npu_module_mem", ("device_0", "step_trace"): "step_trace"}
    one = msprof_cli("query", "-dir", written.path, "--table", "families", "--format", "csv")
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines()[0] == "Directory,Family,Records decoded,Summary files,Not made yet"


def test_a_step_trace_without_the_device_frequency_is_a_clear_error(tmp_path, msprof_cli):
    """ts_track marks are device counter ticks: without info.json's hwts_frequency (here on a device with no
    task log, which would need it too) the import says which file lacks what, not a traceback at export."""
    written = generate(tmp_path, STEP_TRACE["hwts_per_launch_reduce"])
    device = written.path / "device_0"
    for path in (device / "data").glob("hwts.data*"):
        path.unlink()
    info_path = next(device.glob("info.json*"))
    info = json.loads(info_path.read_text())
    del info["DeviceInfo"][0]["hwts_frequency"]
    info_path.write_text(json.dumps(info))
    result = msprof_cli("import", "-dir", written.path)
    assert result.returncode == 8, result.stderr
    assert ("%s: DeviceInfo[0].hwts_frequency missing or not a positive number (needed to convert step_trace "
            "timestamps)" % info_path) in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.reference
def test_advise_memory_bound_on_stars(tmp_path, msprof_cli):
    """advise's memory-bound rule on platform 5 reads op_summary's STARS PMU columns: each op's bound is the
    larger MTE2 ratio of its two cores over the larger of AI Core's cube and AI Vector Core's vector ratio,
    computed here from the reference's op_summary of the same data."""
    from test_families_reference import FFTS

    need_reference()
    written = generate(tmp_path, FFTS["per_launch_ramp"])
    ref = reference(written, tmp_path, ["op_summary"])
    at = {name: i for i, name in enumerate(ref["headers"]["op_summary"])}
    last = max(int(row[at["Iteration ID"]]) if "Iteration ID" in at else 0 for row in ref["rows"]["op_summary"])
    bounds = {}
    for row in ref["rows"]["op_summary"]:
        if row[at["aic_mte2_ratio"]] == "N/A":
            continue
        mte2 = max(float(row[at["aic_mte2_ratio"]]), float(row[at["aiv_mte2_ratio"]]))
        top = max(float(row[at["aic_mac_ratio"]]), float(row[at["aiv_vec_ratio"]]))
        bounds[row[at["Op Name"]]] = round(mte2 / top, 3) if top else 0.0
    expected = sorted(name for name, bound in bounds.items() if bound > 1)
    assert expected and last == 0            # (every iteration's ops have the same counters: "ramp")
    result = msprof_cli("advise", "-dir", written.path, "--format", "json")
    assert result.returncode == 0, result.stderr
    findings = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "memory_bound"]
    assert findings, result.stdout
    for finding in findings:
        got = {item["key"]["layer_name"]: item["values"]["memory_bound"] for item in finding["evidence"]}
        assert sorted(got) == expected and all(got[name] == bounds[name] for name in got)


PER_ITERATION = {
    "hwts_per_launch_reduce": (STEP_TRACE["hwts_per_launch_reduce"], 1, 2),
    "two_models_second": (STEP_TRACE["loop_two_models"], 7, 2),
    "two_models_first_iteration": (STEP_TRACE["loop_two_models"], 1, 1),
    "stars_static_graph": (STEP_TRACE["stars_static_graph"], 1, 3),
    "stars_pmu_per_launch": (dict(TOGETHER["stars_per_launch"], families={"step_trace": {}, "ffts_pmu": {}}), 1, 2),
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(PER_ITERATION))
def test_per_iteration_export(tmp_path, msprof_cli, name):
    """``export summary --model-id M --iteration-id I``: op_summary with the reference's Model Name and Infer ID
    columns, every row and cell as the reference's export of the same iteration; step_trace with that
    iteration's row of the reference's (which writes the whole run's step trace in every such export)."""
    desc, model, iteration = PER_ITERATION[name]
    need_reference()
    written = generate(tmp_path, desc)
    ref = reference(written, tmp_path, ["op_summary", "step_trace"],
                    export_args=["--model-id", str(model), "--iteration-id", str(iteration)])
    result = msprof_cli("export", "summary", "-dir", written.path, "--model-id", str(model),
                        "--iteration-id", str(iteration))
    assert result.returncode == 0, result.stderr
    summary = written.path / ("device_%d" % written.prof.desc["device_id"]) / "summary"
    suffix = "_model%d_iter%d" % (model, iteration)
    header = ref["headers"]["op_summary"]
    assert header[:6] == ["Device_id", "Model Name", "Model ID", "Task ID", "Stream ID", "Infer ID"]
    assert read_csv_header(summary / ("op_summary%s.csv" % suffix)) == header
    ours = _rows(summary / ("op_summary%s.csv" % suffix))
    assert ours and ours == ref["rows"]["op_summary"]
    steps = ref["headers"]["step_trace"]
    theirs = [row for row in ref["rows"]["step_trace"]
              if (row[steps.index("Model ID")], row[steps.index("Iteration ID")]) == (str(model), str(iteration))]
    assert read_csv_header(summary / ("step_trace%s.csv" % suffix)) == steps
    assert len(theirs) == 1 and _rows(summary / ("step_trace%s.csv" % suffix)) == theirs
    print("per-iteration %s: op_summary %d rows, step_trace 1 row matched" % (name, len(ours)))


@pytest.mark.reference
def test_show_family_tables(tmp_path, msprof_cli):
    """``show --table step_trace|communication_statistic|msprof_tx --format json``: the reference's rows of
    those files, times as numbers (N/A as null) where show ranks by them, and an iteration's step_trace row."""
    need_reference()
    written = generate(tmp_path, TOGETHER["stars_per_launch"])
    tables = ["step_trace", "communication_statistic", "msprof_tx"]
    ref = reference(written, tmp_path, tables)
    numeric = {"Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Count",
               "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"}

    def shown(*selection):
        result = msprof_cli("show", "-dir", written.path, *sum((["--table", t] for t in tables), []),
                            "--format", "json", *selection)
        assert result.returncode == 0, result.stderr
        [unit] = json.loads(result.stdout).values()
        return unit["tables"]

    def expected(table, rows):
        # (msprof_tx's Device_id is text: "host" or a device's number, as the reference writes it)
        header = ref["headers"][table]
        return [[None if cell == "N/A" and name in numeric else float(cell) if name in numeric else
                 (int(cell) if name == "Device_id" and table != "msprof_tx" else cell)
                 for name, cell in zip(header, row)] for row in rows]

    got = shown()
    assert list(got) == ["step_trace", "msprof_tx", "communication_statistic"]
    for table in tables:
        rows = [list(row.values()) for row in got[table]["rows"]]
        assert rows == expected(table, ref["rows"][table]) and rows, table
    one = shown("--model-id", "1", "--iteration-id", "2")["step_trace"]["rows"]
    assert [list(row.values()) for row in one] == expected("step_trace", ref["rows"]["step_trace"][1:2])
