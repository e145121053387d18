"""Fault fixtures through the real CLI: documented messages and exit codes, never a traceback,
never a destroyed earlier result."""
import csv
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from fixtures import faults
from fixtures.board import jobgen
from fixtures.networks import small_job, two_model_job


@pytest.fixture
def job(tmp_path):
    return jobgen.write_job(tmp_path, small_job())


def no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


def db_count(job_dir, sql):
    with sqlite3.connect(job_dir / "sqlite" / "msprof.db") as conn:
        return conn.execute(sql).fetchone()[0]


def summary_names(job_dir):
    return sorted(p.name for p in (job_dir / "summary").iterdir())


def test_clean_job_is_silent_and_complete(job, msprof_cli):
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    assert db_count(job, "SELECT count(*) FROM task WHERE start_syscnt IS NULL OR end_syscnt IS NULL") == 0
    assert len(summary_names(job)) == 3 + 1 + 1  # 3 iterations, op_statistic, acl_statistic


def test_tail_cut_reports_bytes_lost(job, msprof_cli):
    truth = faults.tail_cut(job, "hwts")
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 0
    no_traceback(proc)
    assert f"{truth['bytes_lost']} bytes of HWTS data lost at the tail" in proc.stderr
    # every HWTS record is one side of a task row
    assert db_count(job, "SELECT count(start_syscnt) + count(end_syscnt) FROM task") == truth["records_after"]
    # the last end record was cut: that task's start is kept, its end is not invented
    assert "1 task start(s) never ended" in proc.stderr
    assert db_count(job, "SELECT count(*) FROM task WHERE end_syscnt IS NULL") == 1


def test_head_partial_record_dropped_from_head(job, msprof_cli):
    truth = faults.head_partial(job, "pmu")
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 0
    assert f"{truth['bytes_lost']} bytes of AA Core PMU data lost at the head" in proc.stderr
    assert db_count(job, "SELECT count(*) FROM pmu") == truth["records_after"]


@pytest.mark.parametrize("cut", ["tail", "head"])
def test_a_step_trace_cut_at_either_end_keeps_its_whole_records(tmp_path, msprof_cli, cut):
    """Step-trace records carry tag 10 and a start/end tag id where they start, so a file cut at its end (the
    app died) is read at its real alignment, not shifted as if it had lost its head: the iterations whose marks
    are whole are kept (found by a newcomer's trial: 13 bytes cut from the end lost every op_summary). A cut at
    the head still follows the spec."""
    whole = jobgen.write_job(tmp_path / "whole", small_job())
    job = jobgen.write_job(tmp_path / "cut", small_job())
    truth = faults.tail_cut(job, "step", 13) if cut == "tail" else faults.head_partial(job, "step", 13)
    assert truth["bytes_lost"] == 27
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert f"27 bytes of step trace data lost at the {cut} of ts_track.data.0.slice_0" in proc.stderr
    assert "taken to be at the head" not in proc.stderr
    assert db_count(job, "SELECT count(*) FROM step_trace") == truth["records_after"]
    # small_job: 3 executions; the lost record is the last iteration's end (tail) or the first's start (head)
    assert msprof_cli("export", "summary", "-dir", whole).returncode == 0

    def by_iteration(job_dir):      # op_summary_{device}.{model}.{id}.{?}.{iterations}.{iteration}.N_A.1000.csv
        return {int(p.name.split(".")[5]): p.read_text() for p in (job_dir / "summary").glob("op_summary_*")}

    kept = by_iteration(job)
    assert sorted(kept) == {"tail": [1, 2], "head": [2, 3]}[cut]
    assert kept == {i: text for i, text in by_iteration(whole).items() if i in kept}


def test_symbolic_links_in_data_are_followed_inside_the_collection_only(tmp_path, msprof_cli):
    """One rule (raw-format.md §1: never follow a symlink out of the collection): a raw file linked to a file of
    the collection is read; one linked outside is not, and the import says so; a data/ directory linked
    outside is refused, naming it (found by a newcomer's trial: an inside link was silently skipped, losing
    every op_summary, while an outside data/ was read)."""
    whole = jobgen.write_job(tmp_path / "whole", small_job())
    assert msprof_cli("export", "summary", "-dir", whole).returncode == 0
    expected = {p.name: p.read_bytes() for p in (whole / "summary").iterdir()}

    inside = jobgen.write_job(tmp_path / "inside", small_job())
    hwts = next((inside / "data").glob("hwts.data*"))
    hwts.rename(inside / "kept_hwts")
    hwts.symlink_to(Path("..") / "kept_hwts")
    proc = msprof_cli("export", "summary", "-dir", inside)
    assert proc.returncode == 0 and "symbolic link" not in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in (inside / "summary").iterdir()} == expected

    outside = jobgen.write_job(tmp_path / "outside", small_job())
    slices = sorted((outside / "data").glob("hwts.data*"))
    for hwts in slices:
        hwts.rename(tmp_path / hwts.name)
        hwts.symlink_to(tmp_path / hwts.name)
    proc = msprof_cli("import", "-dir", outside)
    assert proc.returncode == 0, proc.stderr
    assert (f"{outside / 'data'}: {len(slices)} symbolic link(s) out of the collection not read: "
            + ", ".join(p.name for p in slices)) in proc.stderr
    assert db_count(outside, "SELECT count(start_syscnt) + count(end_syscnt) FROM task") == 0

    loops = jobgen.write_job(tmp_path / "loops", small_job())          # links that lead nowhere: no crash
    (loops / "data" / "x").symlink_to("y")
    (loops / "data" / "y").symlink_to("x")
    (loops / "loopself").symlink_to("loopself")
    proc = msprof_cli("export", "summary", "-dir", loops)
    assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr

    linked = jobgen.write_job(tmp_path / "linked", small_job())
    (linked / "data").rename(tmp_path / "elsewhere_data")
    (linked / "data").symlink_to(tmp_path / "elsewhere_data", target_is_directory=True)
    proc = msprof_cli("import", "-dir", linked)
    assert proc.returncode == 8
    assert f"msprof: error: {linked / 'data'}: a symbolic link out of the collection ({linked}): not followed" in \
        proc.stderr
    no_traceback(proc)


@pytest.mark.parametrize("whole_run", [True, False])
def test_a_task_ending_before_it_starts_loses_its_end_and_is_said(job, msprof_cli, whole_run):
    """An end record whose counter is below its start's (damage): no negative duration in op_summary or
    op_statistic (found by a newcomer's trial: -10.0 µs, silently); the end is dropped, the task kept with its
    start, and the import names the file and offset — on the whole-run path (start, end, start, end…) and the
    record-by-record one alike."""
    import struct as _struct

    first = faults.stream_files(job, "hwts")[0]
    data = bytearray(first.read_bytes())
    if not whole_run:       # a counter gap sends the records one by one
        data[64 * 2] = (data[64 * 2] & 0x0F) | ((((data[64 * 2] >> 4) + 5) & 15) << 4)
    start = _struct.unpack_from("<q", data, 8)[0]
    _struct.pack_into("<q", data, 64 + 8, start - 1000)
    first.write_bytes(bytes(data))
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert (f"{first.name} offset 64: 1 task end(s) before their start (a counter below the start's), the first "
            "here: those ends are dropped, the tasks kept with their start only") in proc.stderr
    assert db_count(job, "SELECT count(*) FROM task WHERE end_syscnt < start_syscnt") == 0
    assert db_count(job, "SELECT count(*) FROM task WHERE start_syscnt = %d AND end_syscnt IS NULL" % start) == 1
    times = [(path.name, column, value) for path in (job / "summary").glob("op_*.csv")
             for row in csv.DictReader(open(path)) for column, value in row.items()
             if column in ("Time(us)", "Total Time(us)", "Avg(us)", "Max(us)", "Min(us)")]
    assert len(times) > 10 and not [t for t in times if t[2].startswith("-")], times


def test_a_new_export_replaces_the_files_of_the_last_one_it_does_not_write(job, msprof_cli):
    """summary/ holds one run's results: files the previous whole-run export wrote and this one does not (their
    data gone) are removed and named; a selection's own files and files msprof did not write stay (found by a
    newcomer's trial: 13 files of two runs mixed)."""
    def names():
        return set(summary_names(job))

    assert msprof_cli("export", "summary", "-dir", job).returncode == 0
    first = names()
    assert msprof_cli("export", "summary", "-dir", job, "--model-id", "1", "--iteration-id", "1").returncode == 0
    selection_only = names() - first
    assert selection_only == {"acl_statistic_0_1_1.csv", "op_statistic_0_1_1_1.csv"}
    (job / "summary" / "my_notes.csv").write_text("mine\n")
    faults.missing_step_trace(job)        # no iterations: no op_summary, no op_statistic
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    written = {"acl_statistic_0.csv"}
    assert names() == written | selection_only | {"my_notes.csv"}
    gone = sorted(first - written)
    assert f"removed {len(gone)} file(s) an earlier export wrote that this one does not: {', '.join(gone)}" \
        in proc.stderr
    # json's files are another format's export: a csv export leaves them
    assert msprof_cli("export", "summary", "-dir", job, "--format", "json").returncode == 0
    assert msprof_cli("export", "summary", "-dir", job).returncode == 0
    assert "acl_statistic_0.json" in names()


def test_acl_calls_with_impossible_times_are_skipped_and_said(job, msprof_cli):
    """An ACL record whose start is 2^63 or more, or whose end comes before its start (damage), is skipped and
    counted like a bad magic; its nonsense duration went silently into acl_statistic (found by a newcomer's
    trial: a Total of 9.2e15 µs, or a negative one)."""
    import struct as _struct

    whole = jobgen.write_job(job.parent / "whole", small_job())
    assert msprof_cli("export", "summary", "-dir", whole).returncode == 0
    [path] = faults.stream_files(job, "acl_model")[:1]
    data = bytearray(path.read_bytes())
    records = len(data) // 128
    assert records >= 3
    _struct.pack_into("<Q", data, 128 + 8, 1 << 63)                        # record 1: start 2^63
    start = _struct.unpack_from("<q", data, 2 * 128 + 8)[0]
    _struct.pack_into("<q", data, 2 * 128 + 16, start - 1000)               # record 2: ends before it starts
    path.write_bytes(bytes(data))
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    assert (f"{path.name} offset 128: 2 ACL record(s) skipped (time stamp of 2^63 or more, or an end before its "
            "start)") in proc.stderr
    assert db_count(job, "SELECT count(*) FROM acl_api WHERE [end] < start OR start < 0") == 0
    assert db_count(job, "SELECT count(*) FROM acl_api") == db_count(whole, "SELECT count(*) FROM acl_api") - 2
    [stats] = (job / "summary").glob("acl_statistic_*.csv")
    totals = [float(r["Total Time(us)"]) for r in csv.DictReader(open(stats))]
    assert totals and all(0 <= t < 1e9 for t in totals)
    # a bad magic before it: the bad time is still named at its own offset (the review found it shifted)
    shifted = jobgen.write_job(job.parent / "shifted", small_job(slice_bytes=100000))   # (one chunk)
    [spath] = faults.stream_files(shifted, "acl_model")[:1]
    sdata = bytearray(spath.read_bytes())
    sdata[0] ^= 0xFF                                                        # record 0: bad magic
    _struct.pack_into("<Q", sdata, 3 * 128 + 8, 1 << 63)                    # record 3: start 2^63
    spath.write_bytes(bytes(sdata))
    proc = msprof_cli("import", "-dir", shifted)
    assert f"{spath.name} offset 384: 1 ACL record(s) skipped (time stamp of 2^63" in proc.stderr, proc.stderr
    # every record of a stream so damaged: nothing of it is loaded, the rest is
    for record in range(records):
        _struct.pack_into("<Q", data, record * 128 + 8, 1 << 63)
    path.write_bytes(bytes(data))
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr
    assert f"{records} ACL record(s) skipped" in proc.stderr


def test_metadata_and_device_links_out_of_the_collection_are_not_followed(tmp_path, msprof_cli):
    """sample.json linked out of the collection is not read (its events: no PMU columns) and is named; a
    PROF_ device_N that is a link is named, not passed over silently (found by a newcomer's trial)."""
    from fixtures import indepgen

    job = jobgen.write_job(tmp_path / "job", small_job())
    (job / "sample.json").rename(tmp_path / "sample.json")
    (job / "sample.json").symlink_to(tmp_path / "sample.json")
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    assert f"{job}: 1 symbolic link(s) out of the collection not read: sample.json" in proc.stderr
    header = next(csv.reader(open(next((job / "summary").glob("op_summary_*")))))
    assert "Memory Bound" not in header
    info = next(job.glob("info.json*"))                 # info.json linked out: named, not "no info.json found"
    info.rename(tmp_path / info.name)
    info.symlink_to(tmp_path / info.name)
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 8, proc.stderr
    assert f"{info}: a symbolic link out of the collection ({job}): not followed" in proc.stderr
    prof_dir = Path(indepgen.generate(tmp_path / "prof", ["--seed", "1", "--ops", "4", "--iters", "2"]))
    (prof_dir / "device_0").rename(tmp_path / "device_0")
    (prof_dir / "device_0").symlink_to(tmp_path / "device_0", target_is_directory=True)
    proc = msprof_cli("export", "summary", "-dir", prof_dir)
    assert proc.returncode == 8, proc.stderr
    assert f"{prof_dir / 'device_0'}: a symbolic link: not followed" in proc.stderr
    (prof_dir / "device_0").unlink()                   # the device back, the host behind a link: said, not read
    (tmp_path / "device_0").rename(prof_dir / "device_0")
    (prof_dir / "host").rename(tmp_path / "host")
    (prof_dir / "host").symlink_to(tmp_path / "host", target_is_directory=True)
    proc = msprof_cli("export", "summary", "-dir", prof_dir)
    assert proc.returncode == 0, proc.stderr
    assert f"{prof_dir / 'host'}: a symbolic link: not followed" in proc.stderr and "no info.json" not in proc.stderr
    (prof_dir / "device_0").rename(tmp_path / "device_0b")        # nothing but links: named, not "no collection"
    (prof_dir / "device_0").symlink_to(tmp_path / "device_0b", target_is_directory=True)
    proc = msprof_cli("export", "summary", "-dir", prof_dir)
    assert proc.returncode == 8 and ": a symbolic link: not followed" in proc.stderr, proc.stderr


def test_straddling_records_decode_identically(tmp_path, msprof_cli):
    a = jobgen.write_job(tmp_path / "a", small_job())
    b = jobgen.write_job(tmp_path / "b", small_job())
    faults.straddle(b, "hwts", slice_bytes=100)
    faults.straddle(b, "pmu", slice_bytes=300)
    for path in (a, b):
        assert msprof_cli("export", "summary", "-dir", path).returncode == 0
    for name in summary_names(a):
        assert (a / "summary" / name).read_bytes() == (b / "summary" / name).read_bytes()


def test_bad_magic_skipped_and_counted(job, msprof_cli):
    faults.bad_magic(job, "acl_model", 0)
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 0
    assert "AclModule.acl_model.0.slice_0 offset 0: 1 ACL record(s) skipped (bad magic or tag)" in proc.stderr
    assert db_count(job, "SELECT sum(skipped) FROM decode_count WHERE kind = 'acl'") == 1


def test_counter_gap_names_stream_and_task(job, msprof_cli):
    truth = faults.hwts_counter_gap(job, index=2, count=2)
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 0
    assert (f"rolling counter gap, HWTS records lost before stream {truth['next_stream_id']} "
            f"task {truth['next_task_id']}") in proc.stderr


def test_end_without_start_is_not_given_a_time(job, msprof_cli):
    truth = faults.end_without_start(job, index=0)
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 0
    assert "hwts.data.0.slice_0 offset 0: 1 task end(s) without a start, the first here (no start time invented)" \
        in proc.stderr
    row = sqlite3.connect(job / "sqlite" / "msprof.db").execute(
        "SELECT start_syscnt, end_syscnt, dur_us FROM task WHERE start_syscnt IS NULL").fetchall()
    # conv1's first execution lost its start; its time comes from PMU cycles (100000 / 1000 MHz)
    assert len(row) == 1 and row[0][0] is None and row[0][2] == 100.0
    assert truth["task_id"] == 10


@pytest.mark.parametrize("fault, gone, kept, message", [
    (faults.missing_pmu, "Mac Busy Ratio", "op_summary", "no AA Core PMU data"),
    (faults.missing_acl, "acl_statistic", "op_summary", "no ACL API data"),
    (faults.missing_step_trace, "op_summary", "acl_statistic", "no step trace"),
])
def test_missing_files_skip_only_what_needs_them(job, msprof_cli, fault, gone, kept, message):
    fault(job)
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert message in proc.stderr
    names = summary_names(job)
    assert any(n.startswith(kept) for n in names)
    if gone == "Mac Busy Ratio":
        header = next(csv.reader(open(job / "summary" / [n for n in names if n.startswith("op_summary")][0])))
        assert header == ["Layer Id", "Ori Layer Name", "Layer Name", "Layer Type", "Time(us)", "Time Ratio"]
    else:
        assert not any(n.startswith(gone) for n in names)


def test_missing_layer_info_leaves_names_n_a_and_says_so(job, msprof_cli):
    faults.missing_layer_info(job)
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0
    # (the warning said "tasks are named by task type", which only the timeline does: found by a newcomer)
    assert (f"no layer.info in {job / 'data'}: layer names and types are N/A in the summaries (the timeline names "
            "tasks by their task type)") in proc.stderr
    rows = list(csv.reader(open(next((job / "summary").glob("op_statistic_*")))))
    assert {r[2] for r in rows[1:]} == {"N/A"}


def _digest_tree(path):
    return {p.relative_to(path): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and "log" not in p.parts}


def test_corrupt_info_json_exit_8_and_earlier_results_kept(job, msprof_cli):
    assert msprof_cli("export", "summary", "-dir", job).returncode == 0
    before = {k: v for k, v in _digest_tree(job).items() if k.parts[0] in ("sqlite", "summary")}
    faults.corrupt_info_json(job)
    for command in (["import"], ["export", "summary"], ["show"]):
        proc = msprof_cli(*command, "-dir", job)
        assert proc.returncode == 8, proc.stderr
        no_traceback(proc)
        assert "info.json.0: line 1: invalid JSON" in proc.stderr
    after = {k: v for k, v in _digest_tree(job).items() if k.parts[0] in ("sqlite", "summary")}
    assert after == before


def test_empty_data_exit_8_names_directory(job, msprof_cli):
    faults.empty_data(job)
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 8
    assert f"{job / 'data'}: raw data directory is empty" in proc.stderr
    assert not (job / "sqlite" / "msprof.db").exists()


def test_not_a_collection_exit_2(tmp_path, msprof_cli):
    proc = msprof_cli("import", "-dir", tmp_path)
    assert proc.returncode == 2
    assert f"no info.json* found under {tmp_path} (expected a JOB or PROF_ directory)" in proc.stderr


def test_no_dir_and_no_collection_in_cwd(tmp_path, msprof_cli):
    proc = msprof_cli("show", cwd=tmp_path)
    assert proc.returncode == 2 and "pass one with -dir" in proc.stderr


def test_newest_collection_used_without_dir(tmp_path, msprof_cli):
    job = jobgen.write_job(tmp_path, small_job())
    proc = msprof_cli("export", "summary", cwd=tmp_path)
    assert proc.returncode == 0
    assert f"using {job.name}" in proc.stderr
    assert (job / "summary").is_dir()


def test_the_newest_collection_is_the_newest_collected_not_the_last_exported(tmp_path, msprof_cli):
    """Newest by its raw data: exporting an older JOB writes summary/ into it (its directory's time changes),
    and does not make it the one a later command without -dir picks (found by a newcomer's trial)."""
    import os

    old = jobgen.write_job(tmp_path / "old", small_job(), name="JOBOLD")
    new = jobgen.write_job(tmp_path / "new", small_job(), name="JOBNEW")
    here = tmp_path / "here"
    here.mkdir()
    for job, when in ((old, 1_700_000_000), (new, 1_700_000_100)):
        moved = here / job.name
        job.rename(moved)
        for path in (moved / "data", moved):
            os.utime(path, (when, when))
    assert msprof_cli("export", "summary", "-dir", here / "JOBOLD").returncode == 0
    assert (here / "JOBOLD").stat().st_mtime > (here / "JOBNEW").stat().st_mtime
    proc = msprof_cli("query", cwd=here)
    assert proc.returncode == 0 and proc.stderr.startswith(f"msprof: using JOBNEW (newest collection in "), proc.stderr


@pytest.mark.parametrize("bad", ["x\ty", "JOB\n", "a\x1bb"])
def test_control_characters_in_paths_are_refused(msprof_cli, bad):
    proc = msprof_cli("import", "-dir", bad)
    assert proc.returncode == 2 and "-dir/--dir/--collection-dir contains a control character" in proc.stderr


def test_ordinary_names_with_quotes_and_shell_characters_are_analysed(job, tmp_path, msprof_cli):
    """A directory named with ', &, ; (and the other characters a shell reads) was refused (exit 2) even for
    local analysis (issue 38 #6): paths never reach a shell, so it is analysed, and the hints that print it
    quote it so that, pasted, the line names that directory and runs nothing else."""
    import shlex

    odd = tmp_path / "it's R&D; \"v2\" $HOME `id` 100% <a>|b"
    odd.mkdir()
    path = Path(shutil.copytree(job, odd / job.name))
    output = tmp_path / "out; & 'x'"
    for command in (["import"], ["show"], ["query"], ["advise"], ["export", "timeline"]):
        proc = msprof_cli(*command, "-dir", path)
        assert proc.returncode == 0, (command, proc.stderr)
    proc = msprof_cli("export", "summary", "-dir", path, "--output", output)
    assert proc.returncode == 0, proc.stderr
    assert any((output / job.name / "summary").iterdir())
    [hint] = [line for line in proc.stderr.splitlines() if line.startswith("next: msprof show")]
    words = shlex.split(hint.split("   (")[0])
    assert words == ["next:", "msprof", "show", "-dir", str(path), "--output", str(output)]
    compared = msprof_cli("compare", path, path, "--format", "json")
    assert compared.returncode == 0 and json.loads(compared.stdout)["base"] == str(path)


def test_model_id_needs_iteration_id(job, msprof_cli):
    proc = msprof_cli("export", "summary", "-dir", job, "--model-id", "1")
    assert proc.returncode == 2 and "--model-id goes with --iteration-id" in proc.stderr


def test_missing_hwts_frequency_names_file_and_key(job, msprof_cli):
    info = next(job.glob("info.json.*"))
    info.write_text(info.read_text().replace('"hwts_frequency"', '"hwts_freq_renamed"'))
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 8
    assert f"{info}: DeviceInfo[0].hwts_frequency missing" in proc.stderr


@pytest.mark.parametrize("seed", range(20))
def test_random_bytes_never_crash(tmp_path, msprof_cli, seed):
    """Fuzz: random and truncated bytes in every stream give a clean exit, never a traceback."""
    import random

    rng = random.Random(seed)
    job = jobgen.write_job(tmp_path, small_job())
    for path in (job / "data").iterdir():
        data = bytearray(path.read_bytes())
        if "info" in path.name:
            continue
        for _ in range(rng.randint(1, 20)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.5 and data:
            del data[rng.randrange(len(data)):]
        path.write_bytes(bytes(data))
    proc = msprof_cli("export", "summary", "-dir", job)
    no_traceback(proc)
    assert proc.returncode in (0, 8), proc.stderr


def test_tail_cut_found_even_when_the_first_record_is_corrupt(job, msprof_cli):
    """The head/tail decision scores several records, so one bad record at the head does not shift
    every record of a stream whose tail was cut."""
    acl = sorted((job / "data").glob("AclModule.acl_model.*"))
    faults.bad_magic(job, "acl_model", 0)
    truth = faults.tail_cut(job, "acl_model", nbytes=50)
    proc = msprof_cli("import", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    assert f"{truth['bytes_lost']} bytes of ACL data lost at the tail" in proc.stderr
    names = {n for (n,) in sqlite3.connect(job / "sqlite" / "msprof.db").execute("SELECT name FROM acl_api")}
    assert names and all(n.startswith("svp_acl_") for n in names), names
    assert acl


def test_fifos_and_devices_named_like_raw_or_metadata_files_are_not_opened_and_said(job, tmp_path, msprof_cli):
    """A FIFO where a raw slice or a metadata file could be (opened, it would hang the import), and a device
    (opened, it would feed it forever) are never opened: each is named in a warning, and the import is the one
    without them (issue 35 item 16: they were passed over without a word)."""
    import os
    import stat

    clean = jobgen.write_job(tmp_path / "clean", small_job())
    assert msprof_cli("import", "-dir", clean).returncode == 0
    fifos = [job / "data" / "hwts.data.0.slice_9", job / "data" / "zero.1.layer.info", job / "end_info.7"]
    for path in fifos:
        os.mkfifo(path)
    special = fifos[:]
    device = job / "data" / "AAcore.data.0.slice_9"
    try:
        os.mknod(device, stat.S_IFCHR | 0o600, os.makedev(1, 5))          # /dev/zero's numbers
        special.append(device)
    except PermissionError:
        print("no device node made (needs CAP_MKNOD): the FIFOs are checked alone")
    proc = msprof_cli("import", "-dir", job, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for path in special:
        kind = "a FIFO" if path in fifos else "a character device"
        assert f"{path}: {kind}, not a regular file: not read" in proc.stderr
    assert db_count(job, "SELECT count(*) FROM task") == db_count(clean, "SELECT count(*) FROM task")


def test_a_linked_collection_in_a_parent_is_said_not_followed(tmp_path, msprof_cli):
    """A parent holding a JOB and a symbolic link to another: the link is not followed (a collection is read
    inside its directory only) and, beside the JOB that is read, said so (it was passed over in silence)."""
    parent = tmp_path / "runs"
    parent.mkdir()
    jobgen.write_job(parent, small_job())
    elsewhere = jobgen.write_job(tmp_path / "elsewhere", two_model_job())
    (parent / "linked").symlink_to(elsewhere)
    proc = msprof_cli("export", "summary", "-dir", parent)
    assert proc.returncode == 0, proc.stderr
    assert (f"{parent / 'linked'}: a symbolic link: not followed (a collection is read inside its directory only)"
            in proc.stderr)
    assert not (elsewhere / "sqlite").exists()


def test_a_model_without_its_layer_info_is_named(tmp_path, msprof_cli):
    """Two models, the second without its layer.info: the warning names that model (it said nothing when any
    model had one), and only its op_statistic rows lack names."""
    job = jobgen.write_job(tmp_path, two_model_job())
    faults.missing_layer_info(job, "tiny_b")
    proc = msprof_cli("export", "summary", "-dir", job)
    assert proc.returncode == 0, proc.stderr
    assert (f"model 2 (tiny_b): no layer.info in {job / 'data'}: its layer names and types are N/A in the summaries "
            "(the timeline names its tasks by their task type)") in proc.stderr
    assert "model 1 (" not in proc.stderr
    names = {path.name.split("_")[3]: {r[2] for r in list(csv.reader(open(path)))[1:]}       # (by model id)
             for path in (job / "summary").glob("op_statistic_*")}
    assert names["2"] == {"N/A"} and "N/A" not in names["1"], names
