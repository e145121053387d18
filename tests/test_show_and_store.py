"""show / query output, selection options, database freshness and atomic rebuilds."""
import os
import sqlite3

import pytest

from fixtures.board import jobgen
from fixtures.networks import small_job


@pytest.fixture
def job(tmp_path):
    return jobgen.write_job(tmp_path, small_job())


def test_show_prints_four_tables_and_creates_dirs(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # a title is the line above a table header (which is followed by the dashed rule)
    titles = [lines[i - 1] for i in range(1, len(lines) - 1) if lines[i + 1].startswith("---")]
    assert titles == ["AA Core metrics: tiny (model 1), iteration 3", "Op statistic: tiny (model 1)",
                      "ACL statistic", "Frequency"]
    # show builds the database it reads and logs; it writes no timeline (a reading command: issue 38 #1)
    assert (job / "sqlite" / "msprof.db").is_file() and (job / "log" / "msprof.log").is_file()
    assert not (job / "timeline").exists()
    assert "imported" not in proc.stdout  # progress goes to stderr, data to stdout


def test_show_selected_iteration_and_style(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--model-id", "1", "--iteration-id", "1", "--style", "github", "--wide",
                      "--sort", "layer_id", "--reverse")
    assert proc.returncode == 0
    assert "AA Core metrics: tiny (model 1), iteration 1" in proc.stdout and "|   Layer Id" in proc.stdout
    conv = [[c.strip() for c in l.split("|")[1:-1]] for l in proc.stdout.splitlines() if "| conv1 " in l][0]
    # the first execution of conv1 takes 100 µs of 100 + 50 + 200
    assert conv[:6] == ["0", "conv1;bn1;relu1", "conv1", "Convolution", "100.000", "28.57"]


def test_show_unknown_iteration_is_usage_error(job, msprof_cli):
    proc = msprof_cli("show", "-dir", job, "--model-id", "1", "--iteration-id", "9")
    assert proc.returncode == 2 and "no recorded iteration 9 of model 1" in proc.stderr
    assert not (job / "timeline").exists()            # checked before any work: no timeline written for nothing
    proc = msprof_cli("show", "-dir", job, "--model-id", "7", "--iteration-id", "1")
    assert proc.returncode == 2 and "no model 7 recorded (models: 1;" in proc.stderr


def test_export_summary_of_one_iteration(job, msprof_cli):
    proc = msprof_cli("export", "summary", "-dir", job, "--model-id", "1", "--iteration-id", "2")
    assert proc.returncode == 0
    names = sorted(p.name for p in (job / "summary").iterdir())
    assert [n for n in names if n.startswith("op_summary")] == ["op_summary_0.tiny.1.1.3.2.N_A.1000.csv"]
    statistic = [n for n in names if n.startswith("op_statistic")][0]
    rows = (job / "summary" / statistic).read_text().splitlines()
    assert rows[1].split(",")[5:7] == ["200.0", "1"]  # one execution of nms


def test_query_lists_models_and_iterations(job, msprof_cli):
    proc = msprof_cli("query", "-dir", job)
    assert proc.returncode == 0
    line = [l for l in proc.stdout.splitlines() if "tiny" in l][0].split()
    assert line == ["0", "1", "tiny", "3", "1-3"]
    assert "hwts" in proc.stdout and "pmu" in proc.stdout


def test_log_records_commands_without_secrets(job, msprof_cli):
    msprof_cli("import", "-dir", job)
    msprof_cli("export", "summary", "-dir", job)
    text = (job / "log" / "msprof.log").read_text()
    assert "begin: import" in text and "begin: export summary --format csv" in text
    assert "imported" in text


def db_identity(job):
    stat = (job / "sqlite" / "msprof.db").stat()
    return stat.st_ino, stat.st_mtime_ns


def test_database_reused_while_sources_unchanged(job, msprof_cli):
    assert msprof_cli("import", "-dir", job).returncode == 0
    before = db_identity(job)
    proc = msprof_cli("export", "summary", "-dir", job)
    assert "importing" not in proc.stderr and db_identity(job) == before
    # touching a file without changing it keeps the database (hash unchanged)
    hwts = sorted((job / "data").glob("hwts.data.*"))[0]
    os.utime(hwts, ns=(1, 1))
    proc = msprof_cli("export", "summary", "-dir", job)
    assert "importing" not in proc.stderr and db_identity(job) == before


def test_database_rebuilt_when_a_source_changes(job, msprof_cli):
    assert msprof_cli("import", "-dir", job).returncode == 0
    acl = sorted((job / "data").glob("AclModule.acl_rts.*"))[0]
    data = bytearray(acl.read_bytes())
    data[32:32 + len(b"svp_renamed_api") + 1] = b"svp_renamed_api\0"  # the first record's API name, same size
    acl.write_bytes(bytes(data))
    proc = msprof_cli("export", "summary", "-dir", job)
    assert f"importing (data/{acl.name} changed)" in proc.stderr
    with sqlite3.connect(job / "sqlite" / "msprof.db") as conn:
        assert conn.execute("SELECT count(*) FROM acl_api WHERE name = 'svp_renamed_api'").fetchone()[0] == 1


def test_new_raw_file_triggers_rebuild(job, msprof_cli):
    assert msprof_cli("import", "-dir", job).returncode == 0
    (job / "data" / "notes.txt").write_text("x")
    proc = msprof_cli("export", "summary", "-dir", job)
    assert "importing (raw files added or removed)" in proc.stderr


def test_failed_import_keeps_previous_database(job, msprof_cli):
    assert msprof_cli("import", "-dir", job).returncode == 0
    before = (job / "sqlite" / "msprof.db").read_bytes()
    (job / "data" / "tiny.1.layer.info").write_text("layer_id,task_id\n1,2\n")  # header lacks columns
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 8 and "tiny.1.layer.info: line 1: header lacks column(s)" in proc.stderr
    assert (job / "sqlite" / "msprof.db").read_bytes() == before
    assert [p.name for p in (job / "sqlite").iterdir()] == ["msprof.db"]  # no temp file left


def test_outputs_respect_umask_0027(job, msprof_cli):
    assert msprof_cli("export", "summary", "-dir", job).returncode == 0
    for path in [job / "sqlite" / "msprof.db", *(job / "summary").iterdir()]:
        assert path.stat().st_mode & 0o027 == 0, path


@pytest.mark.parametrize("layout", ["JOB", "PROF_"])
def test_library_outputs_respect_umask_0027_too(tmp_path, layout):
    """The library (no CLI to narrow the umask) keeps results within umask 0027 under a user's 0022."""
    from fixtures import profgen
    from msprof import api

    root = jobgen.write_job(tmp_path, small_job()) if layout == "JOB" else profgen.write_prof(tmp_path)
    before = {p for p in root.rglob("*")}
    old = os.umask(0o022)
    try:
        api.export_summary(root)
        api.export_timeline(root)
    finally:
        os.umask(old)
    made = [p for p in root.rglob("*") if p not in before]
    assert any(p.suffix == ".db" for p in made) and any(p.suffix == ".json" for p in made)
    assert any(p.name == "msprof.log" for p in made) and any(p.is_dir() for p in made)
    assert [(str(p), oct(p.stat().st_mode & 0o777)) for p in made if p.stat().st_mode & 0o027] == []


def test_demo_runs_the_bundled_sample(tmp_path, msprof_cli):
    proc = msprof_cli("demo", "--output", tmp_path / "demo", cwd=tmp_path, env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    job = next((tmp_path / "demo").glob("JOB*"))
    assert any((job / "timeline").glob("task_time_*.json")) and any((job / "summary").glob("op_summary_*"))
    execute = [l.split() for l in proc.stdout.splitlines() if "svp_acl_mdl_execute" in l][0]
    # the bundled Mish network: every inference takes 23.3 ms (SS928 guide's worked example)
    assert execute[5:10] == ["69900.000", "3", "23300.000", "23300.000", "23300.000"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")
def test_disk_full_during_import_is_exit_6(job, tmp_path, msprof_cli):
    import shutil
    import subprocess

    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], check=True)
    try:
        target = mount / job.name
        shutil.copytree(job, target)
        filler = mount / "filler"
        free = shutil.disk_usage(mount).free
        filler.write_bytes(b"\0" * max(0, free - 8192))
        proc = msprof_cli("import", "-dir", target)
        assert proc.returncode == 6, proc.stderr
        assert "not enough disk space" in proc.stderr and "Traceback" not in proc.stderr
        assert not (target / "sqlite" / "msprof.db").exists()
    finally:
        subprocess.run(["umount", "-l", str(mount)])


@pytest.mark.parametrize("command", [("import",), ("export", "summary"), ("export", "timeline"), ("show",),
                                     ("query",)])
def test_one_broken_result_dir_of_several_does_not_stop_the_others(tmp_path, msprof_cli, command):
    """A parent of three JOBs, the second with corrupt metadata: the first and third are done, the second is
    named with its error, and the run ends with a line naming it and the data error's exit code (8)."""
    jobs = sorted((jobgen.write_job(tmp_path, small_job(seed=seed)) for seed in ("one", "two", "three")),
                  key=lambda p: p.name)
    (jobs[1] / "info.json.0").write_text("{broken")
    proc = msprof_cli(*command, "-dir", tmp_path)
    assert proc.returncode == 8, proc.stderr
    assert f"{jobs[1] / 'info.json.0'}: line 1: invalid JSON" in proc.stderr and "Traceback" not in proc.stderr
    noun = "databases" if command == ("import",) else "result directories"
    assert f"1 of 3 {noun} failed (see above): {jobs[1]}; the others were done" in proc.stderr
    made = {"import": "sqlite", "summary": "summary", "timeline": "timeline", "show": "sqlite", "query": "sqlite"}
    for job in (jobs[0], jobs[2]):
        assert any((job / made[command[-1]]).iterdir()), job
        if command[0] in ("show", "query"):
            assert job.name in proc.stdout
    assert jobs[1].name not in proc.stdout


@pytest.mark.parametrize("command", [("import",), ("export", "summary"), ("show",)])
def test_a_prof_dir_that_cannot_be_read_does_not_stop_the_others(tmp_path, msprof_cli, command):
    """A parent of a JOB and two PROF_ directories, one of them a host only whose info.json is cut short: the JOB
    and the whole PROF_ are done, the other is named with what is wrong in it, and the run exits with the data
    error's code (8). On its own, it is that one error. (A readable host without devices is reported:
    test_host_without_devices_gives_its_api_statistic.)"""
    import shutil

    from fixtures import profgen

    job = jobgen.write_job(tmp_path, small_job())
    whole = profgen.write_prof(tmp_path, name="PROF_000001_20240101000000000_WHOLE")
    cut = profgen.write_prof(tmp_path, name="PROF_000002_20240101000000000_HOSTONLY")
    shutil.rmtree(cut / "device_0")
    info = next((cut / "host").glob("info.json*"))
    info.write_text(info.read_text()[:40])
    problem = f"{info}: line 1: invalid JSON"
    proc = msprof_cli(*command, "-dir", tmp_path)
    assert proc.returncode == 8, proc.stderr
    assert problem in proc.stderr and "Traceback" not in proc.stderr
    assert f"failed (see above): {cut / 'host'}; the others were done" in proc.stderr
    assert (job / "sqlite" / "msprof.db").is_file() and (whole / "device_0" / "sqlite" / "msprof.db").is_file()
    if command[0] == "export":
        assert any((job / "summary").iterdir()) and any((whole / "device_0" / "summary").iterdir())
    if command[0] == "show":         # (a reading command: what it printed, and no timeline)
        assert job.name in proc.stdout and whole.name in proc.stdout
        assert not (job / "timeline").exists() and not (whole / "device_0" / "timeline").exists()
    assert not (cut / "host" / "sqlite").exists()
    alone = msprof_cli(*command, "-dir", cut)
    assert alone.returncode == 8 and alone.stderr.strip().splitlines()[-1].startswith(f"msprof: error: {problem}")


def test_query_gives_the_device_as_a_number_in_both_layouts(tmp_path, msprof_cli):
    """query --format json: a JOB's device, like a PROF_ device's, is the number its info.json names (the JOB's
    was a string); a PROF_ host without devices is "host"."""
    import json
    import shutil

    from fixtures import profgen

    job = jobgen.write_job(tmp_path, small_job())
    prof = profgen.write_prof(tmp_path, name="PROF_000001_20240101000000000_WHOLE")
    alone = profgen.write_prof(tmp_path, name="PROF_000002_20240101000000000_HOSTONLY")
    shutil.rmtree(alone / "device_0")
    proc = msprof_cli("query", "-dir", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    devices = {label: [row["device"] for row in unit["tables"]["collection"]["rows"]]
               for label, unit in json.loads(proc.stdout).items()}
    assert devices == {job.name: [0], f"{prof.name}/device_0": [0], f"{alone.name}/host": ["host"]}


def test_result_dirs_of_the_same_name_are_told_apart(tmp_path, msprof_cli):
    """Two copies of one JOB in two directories of a parent: show and query key them by their path under it (not
    one key for both); under --output, where their results would mix, they are refused."""
    import json
    import shutil

    first = jobgen.write_job(tmp_path / "a", small_job())
    shutil.copytree(first, tmp_path / "b" / first.name)
    proc = msprof_cli("query", "-dir", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(proc.stdout)) == [f"a/{first.name}", f"b/{first.name}"]
    proc = msprof_cli("export", "summary", "-dir", tmp_path, "--output", tmp_path / "out")
    assert proc.returncode == 2 and "result directories of the same name would share their results" in proc.stderr
    assert not (tmp_path / "out").exists()
