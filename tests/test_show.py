"""show and query as people and scripts read them (issue 13 #1, #2, #3, #8): --top on every table, --sort,
the terminal's width, one JSON document with a pinned schema, several result dirs, csv as one table, and
what an import lost said again by every later command.

Values come from the generator's description (fixtures/networks.small_job): one model "tiny", 3 executions;
conv1 100/110/120 µs, pool "max", 2x2 50 µs, nms 200 µs (AA_CPU, no PMU record)."""
import csv
import io
import json
import sys

import pytest

from fixtures import faults
from fixtures.board import jobgen
from fixtures.networks import small_job

# the op_summary columns of the default metric set (outputs.md §3.1), as scripts get them
SUMMARY_KEYS = ["layer_id", "ori_layer_name", "layer_name", "layer_type", "time_us", "time_ratio",
                "mac_busy_ratio", "mac_ppen_ratio", "vec_busy_ratio", "vec_ppen_ratio", "dstr_ratio",
                "dtrans_ratio", "dld_ratio", "wld_ratio", "memory_bound", "ddr_read_byte", "ddr_write_byte",
                "ddr_total_byte"]
WIDE = {"COLUMNS": "400"}


@pytest.fixture
def job(tmp_path):
    return jobgen.write_job(tmp_path, small_job())


def table_blocks(stdout: str) -> dict:
    """Title → (header names, data rows as {header: cell}, the note line or None), read the way the 'simple'
    style draws them: the dashed rule under the header gives each column's span."""
    lines = stdout.splitlines()
    blocks = {}
    for i in range(1, len(lines) - 1):
        rule = lines[i + 1]
        if rule.startswith("---") and set(rule) <= {"-", " "}:
            spans, start = [], None
            for j, ch in enumerate(rule + " "):
                if ch == "-" and start is None:
                    start = j
                elif ch == " " and start is not None:
                    spans.append((start, j))
                    start = None

            def cells(line):
                return [line[a:b].strip() for a, b in spans]

            header = cells(lines[i])
            rows, note = [], None
            for line in lines[i + 2:]:
                if not line.strip():
                    break
                if line.startswith("("):
                    note = line
                    break
                rows.append(dict(zip(header, cells(line))))
            blocks[lines[i - 1]] = (header, rows, note)
    return blocks


def test_top_cuts_every_table_ranked_by_time_and_keeps_the_total(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--top", "1", env=WIDE)
    assert proc.returncode == 0, proc.stderr
    blocks = table_blocks(proc.stdout)
    header, rows, note = blocks["AA Core metrics: tiny (model 1), iteration 3"]
    # iteration 3: nms 200, conv1 120, pool 50 µs → the longest, then the total row of all three
    assert [(r["Layer Name"], r["Time(us)"]) for r in rows] == [("nms", "200.000"), ("-", "370.000")]
    assert note == "(1 of 3 rows by Time(us): --top N)"
    _, rows, note = blocks["Op statistic: tiny (model 1)"]
    assert [(r["OP Name"], r["Total Time(us)"]) for r in rows] == [("nms", "600.000")]
    _, rows, _ = blocks["ACL statistic"]
    assert len(rows) == 1
    _, rows, note = blocks["Frequency"]
    assert len(rows) == 2 and note is None           # facts, not a ranking: never cut


def test_default_top_is_20_rows_in_the_terminal_and_0_means_all(tmp_path, msprof_cli):
    sys.path.insert(0, str(jobgen.Path(__file__).resolve().parents[1] / "bench"))
    from run import job_description

    job = jobgen.write_job(tmp_path, job_description(30))      # 30 layers, 5 + i % 11 µs, one iteration
    proc = msprof_cli("show", "-dir", job, "--table", "op_summary", env=WIDE)
    header, rows, note = table_blocks(proc.stdout)["AA Core metrics: bench (model 1), iteration 1"]
    assert note == "(20 of 30 rows by Time(us): --top N)"
    times = [float(r["Time(us)"]) for r in rows[:-1]]
    assert times == sorted((5 + i % 11 for i in range(30)), reverse=True)[:20]
    proc = msprof_cli("show", "-dir", job, "--table", "op_summary", "--top", "0", env=WIDE)
    _, rows, note = table_blocks(proc.stdout)["AA Core metrics: bench (model 1), iteration 1"]
    assert len(rows) == 31 and note is None


def test_sort_by_any_column_title_or_key_and_reverse(job, msprof_cli):
    def names(*options):
        proc = msprof_cli("show", "-dir", job, "--table", "op_summary", *options, env=WIDE)
        assert proc.returncode == 0, proc.stderr
        header, rows, _ = table_blocks(proc.stdout)["AA Core metrics: tiny (model 1), iteration 3"]
        return [r["Layer Id"] for r in rows[:-1]]

    assert names() == ["2", "0", "1"]                                 # time, longest first
    assert names("--sort", "time_us", "-r") == ["1", "0", "2"]
    assert names("--sort", "Layer Id") == ["2", "1", "0"]              # numbers: largest first
    assert names("--sort", "layer_id", "--reverse") == ["0", "1", "2"]
    assert names("--sort", "layer_type") == ["0", "1", "2"]            # text A→Z: Convolution, Pooling, Proposal
    proc = msprof_cli("show", "-dir", job, "--sort", "bogus")
    assert proc.returncode == 2 and "--sort bogus: no such column" in proc.stderr and "time_us" in proc.stderr


def test_a_bad_sort_is_refused_before_anything_is_written(job, msprof_cli):
    """On a fresh collection show imports (to know the tables): a --sort no table has is refused, and the
    import is all that is done."""
    proc = msprof_cli("show", "-dir", job, "--sort", "bogus")
    assert proc.returncode == 2 and "--sort bogus: no such column" in proc.stderr
    assert not (job / "timeline").exists()


def test_the_sort_column_stays_on_a_narrow_terminal(job, msprof_cli):
    """Rows ranked by a column the width would leave out keep it (in its place among those shown)."""
    title = "AA Core metrics: tiny (model 1), iteration 3"
    proc = msprof_cli("show", "-dir", job, "--table", "op_summary", env={"COLUMNS": "60"})
    header, _rows, _note = table_blocks(proc.stdout)[title]
    assert "Ori Layer Name" not in header                      # (the width leaves it out by default)
    proc = msprof_cli("show", "-dir", job, "--table", "op_summary", "--sort", "ori_layer_name",
                      env={"COLUMNS": "60"})
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 60
    header, rows, note = table_blocks(proc.stdout)[title]
    assert {"Layer Name", "Ori Layer Name"} <= set(header) and "more columns: --wide" in note
    assert [r["Layer Name"] for r in rows[:-1]] == ["conv1", "nms", 'pool "max", 2x2']       # text A→Z


@pytest.mark.parametrize("columns", ["20", "30", "40"])
def test_a_very_narrow_terminal_keeps_the_name_and_the_ranking_column(job, msprof_cli, columns):
    """However narrow: the name and the value the rows are ranked by; the name is wrapped rather than the value
    left out (found by a newcomer's trial: at 30-40 columns only the names were shown)."""
    proc = msprof_cli("show", "-dir", job, "--table", "op_summary", "--table", "acl_statistic",
                      env={"COLUMNS": columns})
    assert proc.returncode == 0, proc.stderr
    blocks = table_blocks(proc.stdout)
    header, rows, _note = blocks["AA Core metrics: tiny (model 1), iteration 3"]
    assert header[:2] == ["Layer Name", "Time(us)"]
    assert [r["Time(us)"] for r in rows if r["Time(us)"]] == ["200.000", "120.000", "50.000", "370.000"]
    header, rows, _note = blocks["ACL statistic"]
    assert header[:2] == ["Name", "Total Time(us)"]
    assert [r["Total Time(us)"] for r in rows if r["Total Time(us)"]][:2] == ["5000.000", "1290.000"]


def test_control_characters_in_names_are_escaped_in_the_table(tmp_path, msprof_cli):
    """A tab, an escape sequence or a line break in a layer name from the data: shown escaped, so the table's
    lines stay aligned and the terminal is not driven (found by a newcomer's trial: a tab misaligned show)."""
    job = jobgen.write_job(tmp_path, small_job(models=[{"name": "tiny", "layers": [
        {"name": "conv\t1"}, {"name": "re\x1b[31mlu"}, {"name": "two\nlines"}]}]))
    proc = msprof_cli("show", "-dir", job, "--table", "op_summary", "--wide")
    assert proc.returncode == 0, proc.stderr
    assert "\t" not in proc.stdout and "\x1b" not in proc.stdout
    header, rows, _note = table_blocks(proc.stdout)["AA Core metrics: tiny (model 1), iteration 3"]
    assert [(r["Layer Name"], r["Time(us)"]) for r in rows] == [
        ("conv\\t1", "100.000"), ("re\\x1b[31mlu", "100.000"), ("two\\nlines", "100.000"), ("-", "300.000")]
    assert {r["Layer Type"] for r in rows} == {"Convolution", "-"}      # (read at the columns' places: aligned)


def stdout_on_a_terminal(*args) -> bytes:
    """What ``msprof ARGS`` writes to a standard output that is a terminal (a pty), as read from its other end."""
    import os
    import pty
    import subprocess
    import sys

    primary, secondary = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(jobgen.Path(__file__).resolve().parents[1]), NO_COLOR="1")
    run = subprocess.run([sys.executable, "-m", "msprof", *map(str, args)], stdout=secondary,
                         stderr=subprocess.PIPE, env=env, timeout=60)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:         # (the other end closed)
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    assert run.returncode == 0, run.stderr
    return seen


CONTROL_NAMES = {"models": [{"name": "net\x1b[31mRED", "id": 1, "layers": [
    {"name": "la\tyer", "type": "Conv\x1b[2Jolution"}, {"name": "l\x1b]0;pwned\x07b", "type": "Mish"}]}]}


def test_csv_on_stdout_is_the_file_byte_for_byte_and_escaped_on_a_terminal(tmp_path, msprof_cli):
    """show --format csv into a pipe: the summary file's bytes, escape sequences and all (click stripped them,
    so the csv differed from the file: found by a newcomer's trial); on a terminal the control characters are
    escaped, so that a name from the data cannot drive it."""
    job = jobgen.write_job(tmp_path, small_job(**CONTROL_NAMES))
    assert msprof_cli("export", "summary", "-dir", job).returncode == 0
    [summary] = sorted((job / "summary").glob("op_summary_*.3.N_A.1000.csv"))
    piped = msprof_cli("-q", "show", "-dir", job, "--format", "csv", "--table", "op_summary")
    assert piped.returncode == 0 and piped.stdout.encode() == summary.read_bytes().replace(b"\r\n", b"\n")
    assert "\x1b[2J" in piped.stdout
    seen = stdout_on_a_terminal("-q", "show", "-dir", job, "--format", "csv", "--table", "op_summary")
    assert b"\x1b" not in seen and b"\x07" not in seen
    assert b"Conv\\x1b[2Jolution" in seen and b"l\\x1b]0;pwned\\x07b" in seen and b"la\tyer" in seen


def test_json_on_a_terminal_stays_json(tmp_path):
    """A C1 control character (which json.dumps leaves as it is) escaped for a terminal as \u009b: the document
    is still valid JSON, and reads back the same name (the review found \x9b, which JSON has no escape for)."""
    import json

    job = jobgen.write_job(tmp_path, small_job(models=[{"name": "tiny", "layers": [{"name": "c1\x9bname"}]}]))
    seen = stdout_on_a_terminal("-q", "show", "-dir", job, "--format", "json", "--table", "op_summary")
    text = seen.decode().replace("\r\n", "\n")
    assert "\x9b" not in text and "\\u009b" in text
    document = json.loads(text)
    assert "c1\x9bname" in json.dumps(document, ensure_ascii=False)


def test_advise_and_compare_escape_names_in_their_table_views(tmp_path, msprof_cli):
    """Names from the data in advise's paragraphs and compare's verdict are escaped, as show's cells (found by a
    newcomer's trial: an OSC sequence set the terminal's title)."""
    job = jobgen.write_job(tmp_path, small_job(**CONTROL_NAMES))
    for args in (("advise", "-dir", job), ("compare", job, job)):
        proc = msprof_cli("-q", *args)
        assert proc.returncode == 0, proc.stderr
        assert not any(c in proc.stdout for c in "\x1b\x07\t"), (args, proc.stdout)
    advised = msprof_cli("-q", "advise", "-dir", job).stdout
    assert "l\\x1b]0;pwned\\x07b (Mish)" in advised and "la\\tyer" in advised
    assert msprof_cli("-q", "compare", job, job).stdout.startswith("net\\x1b[31mRED: ")


def test_the_table_fits_the_terminal_and_wide_shows_all(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, env={"COLUMNS": "60"})
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 60
    header, rows, note = table_blocks(proc.stdout)["AA Core metrics: tiny (model 1), iteration 3"]
    assert header[0] == "Layer Name" and "Time(us)" in header and "more columns: --wide" in note
    proc = msprof_cli("show", "-dir", job, "--wide", env={"COLUMNS": "60"})
    header_line = [l for l in proc.stdout.splitlines() if l.lstrip().startswith("Layer Id")][0]
    for name in ("Ori Layer Name", "Mac Busy Ratio", "Memory Bound", "DDR Total(byte)"):
        assert name in header_line


def test_json_is_one_document_with_a_stable_schema(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert list(doc) == [job.name]
    unit = doc[job.name]
    assert unit["path"] == str(job) and unit["layout"] == "JOB" and unit["data_quality"] is None
    relative = msprof_cli("show", "-dir", job.name, "--format", "json", cwd=job.parent)
    assert json.loads(relative.stdout)[job.name]["path"] == str(job)          # absolute, whatever -dir was
    assert list(unit["tables"]) == ["op_summary", "op_statistic", "acl_statistic", "frequency"]
    summary = unit["tables"]["op_summary"]
    assert summary["context"] == {"model_id": 1, "model_name": "tiny", "iteration_id": 3}
    assert summary["columns"] == SUMMARY_KEYS and summary["row_count"] == 3
    # no --top: every row in the table's own order (execution order), keys snake_case, numbers as numbers
    rows = summary["rows"]
    assert [r["layer_name"] for r in rows] == ["conv1", 'pool "max", 2x2', "nms"]
    assert [r["time_us"] for r in rows] == [120.0, 50.0, 200.0]
    assert rows[0]["layer_id"] == 0 and rows[0]["ori_layer_name"] == "conv1;bn1;relu1"
    assert rows[2]["memory_bound"] is None and rows[2]["ddr_total_byte"] is None     # N/A → null (AA_CPU)
    # the total row apart, only the columns that have a total
    assert summary["total"]["time_us"] == 370.0 and summary["total"]["time_ratio"] == 100.0
    assert "layer_id" not in summary["total"] and "layer_name" not in summary["total"]
    statistic = unit["tables"]["op_statistic"]
    assert statistic["context"] == {"model_id": 1, "model_name": "tiny", "iteration_id": None}
    assert [(r["op_name"], r["total_time_us"], r["count"]) for r in statistic["rows"]] == [
        ("nms", 600.0, 3), ("conv1", 330.0, 3), ('pool "max", 2x2', 150.0, 3)]
    assert unit["tables"]["frequency"]["rows"] == [{"clock": "AA Core", "time_us": None, "mhz": 1000},
                                                   {"clock": "HWTS", "time_us": None, "mhz": 100}]


def test_json_top_and_table_selection(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--format", "json", "--top", "1", "--table", "op_summary")
    tables = json.loads(proc.stdout)[job.name]["tables"]
    assert list(tables) == ["op_summary"]
    assert [r["layer_name"] for r in tables["op_summary"]["rows"]] == ["nms"]
    assert tables["op_summary"]["row_count"] == 3


def test_a_table_the_layout_does_not_have_is_named_with_those_it_has(job, tmp_path, msprof_cli):
    """--table acl_statistic of a PROF_ device (which has api_statistic), api_statistic of a JOB: a notice, not
    an empty section alone; when no table asked for is anywhere, a usage error (exit 2: a script must not read
    an empty output as success)."""
    from fixtures import profgen

    prof = profgen.write_prof(tmp_path / "prof")
    proc = msprof_cli("show", "-dir", prof, "--table", "acl_statistic", "--table", "op_statistic")
    assert proc.returncode == 0, proc.stderr
    assert (f"{prof.name}/device_0: no acl_statistic table here (it has op_summary, op_statistic, api_statistic)"
            in proc.stderr)
    assert "Op statistic" in proc.stdout
    proc = msprof_cli("show", "-dir", job, "--table", "api_statistic")
    assert proc.returncode == 2
    assert "--table api_statistic: no such table in any result directory (their tables: op_summary," in proc.stderr
    # (the only result dir, without any table asked for: the error says it, once — not a notice line too)
    assert "no api_statistic table here" not in proc.stderr
    assert proc.stdout == ""                   # not a heading with nothing under it
    # the error names the tables itself: with -q it is all there is (it said "see above": a newcomer's trial)
    quiet = msprof_cli("-q", "show", "-dir", job, "--table", "api_statistic")
    assert quiet.returncode == 2 and quiet.stderr.count("\n") == 1 and "their tables: op_summary," in quiet.stderr


def test_csv_of_several_result_dirs_holds_one_table(tmp_path, msprof_cli):
    """One csv is one table: a result dir without the first's table (a PROF_ host without devices has no
    op_summary) is said, and none of its other tables is printed in its place."""
    import shutil

    from fixtures import profgen

    prof = profgen.write_prof(tmp_path, name="PROF_000001_20240101000000000_WHOLE")
    alone = profgen.write_prof(tmp_path, name="PROF_000002_20240101000000000_HOSTONLY")
    shutil.rmtree(alone / "device_0")
    proc = msprof_cli("show", "-dir", tmp_path, "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0][:3] == ["result_dir", "Device_id", "Model ID"]
    assert {row[0] for row in rows[1:]} == {f"{prof.name}/device_0"}
    assert f"{alone.name}/host: no op_summary table: nothing of it in the csv" in proc.stderr


def test_query_in_a_narrow_terminal_keeps_the_ids_a_selection_takes(job, msprof_cli):
    """The collection table loses Device, Iterations first: Model Id and Iteration Ids are why query is run."""
    proc = msprof_cli("query", "-dir", job, "--table", "collection", env={"COLUMNS": "40"})
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.lstrip().startswith("Model Id"))
    assert header.split() == ["Model", "Id", "Iteration", "Ids"]
    assert "(3 more columns: --wide)" in proc.stdout


def test_several_result_dirs_are_headed_and_keyed(tmp_path, msprof_cli):
    a = jobgen.write_job(tmp_path, small_job(seed="first"))
    b = jobgen.write_job(tmp_path, small_job(seed="second"))
    proc = msprof_cli("show", "-dir", tmp_path, "--top", "1", env=WIDE)
    assert proc.returncode == 0, proc.stderr
    headings = [l for l in proc.stdout.splitlines() if l.startswith("== ")]
    assert headings == [f"== {name} (JOB) ==" for name in sorted([a.name, b.name])]
    doc = json.loads(msprof_cli("show", "-dir", tmp_path, "--format", "json").stdout)
    assert sorted(doc) == sorted([a.name, b.name])
    both = msprof_cli("show", "-dir", tmp_path, "--format", "csv")
    assert both.stderr.count("csv holds one table") == 1, both.stderr       # said once, not per result dir
    rows = list(csv.reader(io.StringIO(both.stdout)))
    assert rows[0][:3] == ["result_dir", "Layer Id", "Ori Layer Name"]
    assert sorted({r[0] for r in rows[1:]}) == sorted([a.name, b.name])
    assert len(rows) == 1 + 2 * (3 + 1)              # one header; 3 layers and a total per result dir
    query = json.loads(msprof_cli("query", "-dir", tmp_path, "--format", "json").stdout)
    assert sorted(query) == sorted([a.name, b.name])


def test_csv_is_one_table(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--format", "csv")
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["Layer Id", "Ori Layer Name", "Layer Name", "Layer Type", "Time(us)", "Time Ratio",
                       "Mac Busy Ratio", "Mac Ppen Ratio", "Vec Busy Ratio", "Vec Ppen Ratio", "Dstr Ratio",
                       "Dtrans Ratio", "DLD Ratio", "WLD Ratio", "Memory Bound", "DDR Read(byte)",
                       "DDR Write(byte)", "DDR Total(byte)"]
    assert [r[2] for r in rows[1:]] == ["conv1", 'pool "max", 2x2', "nms", "-"]
    assert "--table" in proc.stderr
    proc = msprof_cli("show", "-dir", job, "--format", "csv", "--table", "op_statistic")
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0][:3] == ["Task ID", "Stream ID", "OP Name"] and [r[2] for r in rows[1:]] == [
        "nms", "conv1", 'pool "max", 2x2']
    assert "--table" not in proc.stderr


def _damage_second_slice(job) -> str:
    """Remove a task start that lies in the second HWTS slice; return where its end now is
    ('<file> offset <n>'), computed from the rewritten files."""
    size = 64
    files = faults.stream_files(job, "hwts")
    first_size = files[0].stat().st_size
    records = faults._hwts_records(faults.read_stream(job, "hwts"))
    index = next(r["index"] for r in records if r["log_type"] == 0 and r["index"] * size >= first_size)
    removed = records[index]
    faults.end_without_start(job, index=index)
    after = faults._hwts_records(faults.read_stream(job, "hwts"))
    end = next(r["index"] for r in after[index:] if r["log_type"] == 1 and
               (r["stream_id"], r["task_id"]) == (removed["stream_id"], removed["task_id"]))
    position = end * size
    for path in faults.stream_files(job, "hwts"):
        if position < path.stat().st_size:
            return f"{path.name} offset {position}"
        position -= path.stat().st_size
    raise AssertionError("end record not found")


def test_what_an_import_lost_is_said_by_every_later_command(job, msprof_cli):
    where = _damage_second_slice(job)
    assert not where.startswith(faults.stream_files(job, "hwts")[0].name)     # not the first slice
    message = f"{where}: 1 task end(s) without a start, the first here (no start time invented)"
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 0 and message in proc.stderr
    for command in (["show"], ["query"], ["export", "summary"], ["export", "timeline"]):
        proc = msprof_cli(*command, "-dir", job)
        assert proc.returncode == 0, proc.stderr
        assert "importing" not in proc.stderr
        assert f"{job.name}: data quality: {message}" in proc.stderr, command
    doc = json.loads(msprof_cli("query", "-dir", job, "--format", "json").stdout)[job.name]
    assert doc["data_quality"] == message
    assert {"level": "warning", "message": message} in doc["tables"]["notices"]["rows"]
    # the raw data made whole again: rebuilt, and nothing more is said
    fresh = jobgen.write_job(job.parent / "fresh", small_job())
    for path in faults.stream_files(job, "hwts"):
        path.unlink()
    for path in faults.stream_files(fresh, "hwts"):
        (job / "data" / path.name).write_bytes(path.read_bytes())
    proc = msprof_cli("show", "-dir", job)
    assert "importing" in proc.stderr and "data quality" not in proc.stderr


def test_an_iteration_without_tasks_says_so(job, msprof_cli):
    # execution 2's six HWTS records (3 tasks, start and end each) gone: its iteration has no task left
    faults._remove_hwts(job, list(range(6, 12)), renumber=True)
    proc = msprof_cli("show", "-dir", job, "--model-id", "1", "--iteration-id", "2", env=WIDE)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    title = lines.index("AA Core metrics: tiny (model 1), iteration 2")
    assert lines[title + 1] == "(no rows: nothing recorded for model 1, iteration 2)"


def test_a_job_of_two_models_says_which_it_shows_and_how_to_see_the_other(tmp_path, msprof_cli):
    """outputs.md §4: AA Core metrics of the last recorded iteration — model 2's here; model 1 is not silently
    left out: a notice names it and the flags that show it."""
    from fixtures.networks import two_model_job

    job = jobgen.write_job(tmp_path, two_model_job())
    proc = msprof_cli("show", "-dir", job, "--table", "op_statistic")
    assert proc.returncode == 0, proc.stderr
    assert (f"{job.name}: AA Core metrics and op statistic of model 2, the last recorded; also recorded: model 1"
            " (--model-id N --iteration-id N; msprof query lists them)") in proc.stderr
    one = msprof_cli("show", "-dir", job, "--model-id", "1", "--iteration-id", "2", "--table", "op_statistic")
    assert one.returncode == 0 and "also recorded" not in one.stderr, one.stderr
    alone = msprof_cli("show", "-dir", job, "--iteration-id", "2")          # (two models: which one?)
    assert alone.returncode == 2 and alone.stdout == ""
    assert (f"{job.name}: --iteration-id 2 alone needs one model, and 2 are recorded (1, 2): name one with "
            "--model-id") in alone.stderr


def test_iteration_id_alone_selects_the_one_model(job, msprof_cli, tmp_path):
    """--iteration-id without --model-id was refused (exit 2) where a result dir has one model: it selects that
    model's iteration, as both options would (issue 38 #7); --model-id alone is still refused."""
    for command in (["show", "--format", "json"], ["advise", "--format", "json"]):
        both = msprof_cli(*command, "-dir", job, "--model-id", "1", "--iteration-id", "2")
        alone = msprof_cli(*command, "-dir", job, "--iteration-id", "2")
        assert both.returncode == 0 and alone.returncode == 0, alone.stderr
        assert alone.stdout == both.stdout != ""
        everything = msprof_cli(*command, "-dir", job)              # (the last iteration, 3: another answer)
        assert everything.returncode == 0 and everything.stdout != alone.stdout
    exported = msprof_cli("export", "timeline", "-dir", job, "--iteration-id", "2")
    assert exported.returncode == 0, exported.stderr
    assert sorted(p.name for p in (job / "timeline").iterdir()) == ["task_time_0.tiny.1.1_iter2.json"]
    hint = msprof_cli("export", "summary", "-dir", job, "--iteration-id", "3")
    assert hint.returncode == 0 and f"msprof show -dir {job} --iteration-id 3 " in hint.stderr, hint.stderr
    assert msprof_cli("show", "-dir", job, "--model-id", "1").returncode == 2


def _written(path):
    """The files under ``path`` outside its databases and log (what a reading command must leave alone)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")
                  if p.is_file() and not {"sqlite", "log"} & set(p.relative_to(path).parts))


@pytest.mark.parametrize("layout", ["JOB", "PROF"])
def test_reading_commands_write_no_timeline(tmp_path, msprof_cli, layout):
    """show, query and advise read: on a fresh collection they build the database (a cache) and write nothing
    else — show wrote the whole run's timelines first (a 128 MB file nobody asked for), even when it then
    refused its --table (issue 38 #1)."""
    from test_profgen import MULTI

    from fixtures import profgen as pg

    path = jobgen.write_job(tmp_path, small_job()) if layout == "JOB" else pg.write_prof(tmp_path, MULTI)
    raw = _written(path)
    bad = msprof_cli("show", "-dir", path, "--table", "no_such_table")
    assert bad.returncode == 2 and "no_such_table" in bad.stderr, bad.stderr
    for command in (["show"], ["show", "--format", "json"], ["query"], ["advise"]):
        proc = msprof_cli(*command, "-dir", path)
        assert proc.returncode == 0, (command, proc.stderr)
        assert "timeline" not in proc.stderr, (command, proc.stderr)
        assert _written(path) == raw, command
    assert list(path.rglob("msprof.db")) and not list(path.rglob("timeline"))


def test_csv_of_two_tables_asked_for_says_which_it_left_out(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--format", "csv", "--table", "acl_statistic", "--table", "frequency")
    assert proc.returncode == 0, proc.stderr
    # (it printed acl_statistic alone and said nothing: a newcomer's trial)
    assert "csv holds one table: acl_statistic printed, not frequency (one --table per csv)" in proc.stderr
    assert "Total Time Ratio(%)" in proc.stdout.splitlines()[0]
