"""The import's fast paths load exactly what the plain paths load.

Large JOBs take shortcuts (docs/performance.md): HWTS runs of start, end, start, end… are paired whole,
tasks are placed with map() over columns, PMU and ACL chunks are checked on byte columns and unpacked in
blocks, and PMU and ACL are loaded by worker processes into part databases that are merged. Each test
imports the same damaged JOB both ways and compares every table row for row; the values themselves are
checked by hand-computed tests elsewhere (test_job_values, test_faults).
"""
import contextlib
import threading

import pytest

from fixtures import faults
from fixtures.board import jobgen
from fixtures.networks import small_job, two_model_job
from msprof import parts, store, workers
from msprof.decode import hwts
from msprof.layouts.job import importer


def pmu_bad_magic(job, index: int):
    """Overwrite the magic of PMU record ``index`` (one slice: slice_bytes is large in these JOBs)."""
    (path,) = faults.stream_files(job, "pmu")
    data = bytearray(path.read_bytes())
    data[index * 128 + 2:index * 128 + 4] = b"\xad\xde"
    path.write_bytes(bytes(data))


def shared_ids_job(slice_bytes):
    """An AA_CPU task of one model on the (stream, task) of another's AA Core task: their executions are numbered
    apart (hwts.Pairer ``apart``), in the whole-run path as record by record."""
    return {"seed": 4, "slice_bytes": slice_bytes, "models": [
        {"id": 1, "name": "cpu", "stream_id": 3, "executions": 4, "layers": [
            {"name": "c", "task_id": 1, "task_type": "AA_CPU", "duration_us": 10}]},
        {"id": 2, "name": "core", "stream_id": 3, "executions": 3, "layers": [
            {"name": "a", "task_id": 1, "duration_us": 10}, {"name": "b", "task_id": 2, "duration_us": 20}]}]}


SCENARIOS = {
    "clean": (small_job, lambda job: None),
    "AA_CPU and AA Core tasks of one (stream, task)": (shared_ids_job, lambda job: None),
    "two models": (two_model_job, lambda job: None),
    "end without start first": (small_job, lambda job: faults.end_without_start(job, 0)),
    "counter gap": (small_job, lambda job: faults.hwts_counter_gap(job, 5, 3)),
    "start never ended": (small_job, lambda job: faults.start_never_ended(job)),
    "end never started mid-stream": (small_job, lambda job: faults.end_without_start(job, 6, renumber=False)),
    "bad PMU and ACL magic": (small_job, lambda job: (pmu_bad_magic(job, 1), faults.bad_magic(job, "acl_model", 1))),
}


def make(tmp_path, scenario):
    network, damage = SCENARIOS[scenario]
    job = jobgen.write_job(tmp_path, network(slice_bytes=1 << 20))
    damage(job)
    return job


def tables(job):
    """Every table but meta (which holds the import time), rows in stored order."""
    importer.import_result_dir(job)
    return database_tables(job / "sqlite" / "msprof.db")


def database_tables(path):
    """The tables of a database and of its parts (a worker's, attached as msprof reads them): every one but
    meta and the parts' tokens, rows in stored order."""
    with contextlib.closing(store.open_readonly(path)) as conn:
        schemas = [row[1] for row in conn.execute("PRAGMA database_list")]
        names = sorted({n for schema in schemas for (n,) in conn.execute(
            f"SELECT name FROM [{schema}].sqlite_master WHERE type = 'table'")} - {"meta", "part_token"})
        return {n: conn.execute(f"SELECT * FROM [{n}] ORDER BY rowid").fetchall() for n in names}


def indexed_tables(path):
    with contextlib.closing(store.open_readonly(path)) as conn:
        schemas = [row[1] for row in conn.execute("PRAGMA database_list")]
        return {t for schema in schemas for (t,) in conn.execute(
            f"SELECT tbl_name FROM [{schema}].sqlite_master WHERE type = 'index'")}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_whole_run_pairing_matches_record_by_record(tmp_path, monkeypatch, scenario):
    job = make(tmp_path, scenario)
    monkeypatch.setattr(hwts, "RUN_RECORDS", 6)        # many runs, odd boundaries, runs cut by faults
    whole_runs = []
    pair_whole = hwts.Pairer._pair_whole
    monkeypatch.setattr(hwts.Pairer, "_pair_whole", lambda self, body: whole_runs.append(1) or pair_whole(self, body))
    fast = tables(job)
    assert whole_runs, "the whole-run path was not taken"
    monkeypatch.setattr(hwts.Pairer, "_alternates", lambda self, body: False)
    slow = tables(job)
    assert fast == slow
    assert len(fast["task"]) >= 8          # small_job: 9 tasks, a fault loses at most one


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_worker_processes_load_the_same_database(tmp_path, monkeypatch, scenario):
    job = make(tmp_path, scenario)
    inline = tables(job)
    monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    parallel = tables(job)
    assert parallel == inline
    assert not [p for p in (job / "sqlite").iterdir() if p.name.startswith(".")]      # no temporaries left
    # the worker's tables stayed in parts of their own, indexed, read with the database
    assert sorted(p.name.split(".")[1] for p in (job / "sqlite").iterdir()) == ["acl", "db", "pmu"]
    assert {"task", "pmu", "layer"} <= indexed_tables(job / "sqlite" / "msprof.db")


def test_prof_device_worker_loads_the_same_database(tmp_path, monkeypatch):
    """A PROF_ device's aicore.data loaded by a worker process and merged gives the database the inline
    load gives (the same check as for a JOB above), with the PMU index kept."""
    from fixtures import profgen
    from msprof.layouts.prof import importer as prof_importer

    prof = profgen.write_prof(tmp_path, dict(profgen_multi(), pmu="PipeUtilization", pmu_reserved="zero"))
    device = prof / "device_0"

    def device_tables():
        prof_importer.import_result_dir(device, "device", spare_cores=True)
        return database_tables(device / "sqlite" / "msprof.db")

    inline = device_tables()
    monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", 0)
    parallel = device_tables()
    assert parallel == inline
    assert (len(inline["task"]), len(inline["pmu"])) == (12, 10)   # 2 iterations of 6 ops; the AI_CPU op has no PMU
    assert not [p for p in (device / "sqlite").iterdir() if p.name.startswith(".")]
    assert {"task", "pmu"} <= indexed_tables(device / "sqlite" / "msprof.db")


def test_prof_host_worker_loads_the_same_database(tmp_path, monkeypatch):
    """A PROF_ host's node_basic_info loaded by a worker process (into a part the association then reads, in
    this process and, when the task_track records are split, in the process resolving their later half)
    gives the database the inline load gives, and the same op_summary."""
    from fixtures import profgen
    from msprof import api
    from msprof.decode import slices
    from msprof.layouts.prof import importer as prof_importer
    from msprof.layouts.prof import launches
    from test_prof import with_tensors

    desc = with_tensors(dict(profgen_multi(), iterations=30, task_id_wrap=5))
    prof = profgen.write_prof(tmp_path, desc)
    host = prof / "host"
    monkeypatch.setattr(prof_importer, "several_cores", lambda: True)
    monkeypatch.setattr(launches, "several_cores", lambda: True)
    monkeypatch.setattr(slices, "CHUNK_BYTES", 640)              # ten records a chunk: both halves have some

    # the association forks its worker from a process without threads of the import's own (the node infos'
    # worker pool is shut down by then: forking a threaded process may deadlock the child)
    forked_with = []
    load_launches = prof_importer.load_launches
    monkeypatch.setattr(prof_importer, "load_launches", lambda *args: forked_with.append(
        set(threading.enumerate())) or load_launches(*args))

    def host_tables(parallel: int, split: int):
        monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", parallel)
        monkeypatch.setattr(launches, "SPLIT_TRACK_BYTES", split)
        before = set(threading.enumerate())
        prof_importer.import_result_dir(host, "host")
        assert forked_with.pop() <= before
        made = database_tables(host / "sqlite" / "msprof.db")
        files = sorted(p.name.split(".")[1] for p in (host / "sqlite").iterdir())
        api.export_summary(prof, "csv")
        return made, files, (prof / "device_0" / "summary" / "op_summary.csv").read_text()

    inline, inline_parts, inline_summary = host_tables(1 << 40, 1 << 40)
    assert inline_parts == ["db"] and len(inline["node_info"]) == 30 * 6 and len(inline["launch"]) == 30 * 6
    for split in (1 << 40, 0):
        parallel, files, summary = host_tables(0, split)
        assert parallel == inline and summary == inline_summary
        assert files == ["db", "node_info"]       # kept as a part, read with the database
    assert "node_info" in indexed_tables(host / "sqlite" / "msprof.db")
    assert not [p for p in (host / "sqlite").iterdir() if p.name.startswith(".")]


def profgen_multi() -> dict:
    from test_profgen import MULTI

    return dict(MULTI)


def test_bad_pmu_and_acl_records_are_skipped_and_counted(tmp_path):
    job = make(tmp_path, "bad PMU and ACL magic")
    clean = tables(make(tmp_path / "clean", "clean"))
    damaged = tables(job)
    # exactly the damaged records are gone: PMU record 1 and acl_model record 1 (seq and exec_n, the
    # numbering of what was decoded, move up behind them)
    def values(row):
        return row[1:4] + row[5:]
    assert [values(r) for r in damaged["pmu"]] == [values(r) for i, r in enumerate(clean["pmu"]) if i != 1]
    skipped = {stream: skipped for stream, _kind, _files, _bytes, _records, skipped, *_lost in damaged["decode_count"]}
    assert skipped == {"ts_track.data.0": 0, "hwts.data.0": 0, "AAcore.data.0": 1, "AclModule.acl_model.0": 1,
                       "AclModule.acl_others.0": 0, "AclModule.acl_rts.0": 0}
    assert len(damaged["acl_api"]) == len(clean["acl_api"]) - 1


def test_a_damaged_pmu_count_is_said_at_its_offset_when_bad_records_come_before_it():
    """An AA Core PMU record with a count of 2^63 or more is said at its stream offset; records of bad magic
    before it in the chunk (left out before the counts are read) do not move that offset (it was early by
    them)."""
    import struct

    from msprof.decode.base import Tally
    from msprof.decode.pmu import SVP, PmuDecoder

    def record(task, cycles, magic=0x6BD3):
        return struct.pack("<BBHHHII", 4, 0, magic, 0, task, 0, 7) + struct.pack("<q10q24x", cycles, *range(10))

    records = [record(t, 1000 + t) for t in range(10)]
    records[2] = record(2, 1002, magic=0x1234)
    records[3] = record(3, 1003, magic=0x1234)
    records[6] = record(6, -1)                      # 2^64 - 1 cycles, read signed
    decoder, tally = PmuDecoder(SVP), Tally(128)
    tally.base = 1280
    [blocks] = decoder.decode(b"".join(records), tally)
    assert tally.counts == {"bad magic or log type": 2} and tally.first == {"bad magic or log type": 1280 + 2 * 128}
    assert decoder.damaged == 1 and decoder.first_damaged == 1280 + 6 * 128
    assert [r[1] for r in _rows(blocks)] == [0, 1, 4, 5, 6, 7, 8, 9]       # task ids kept, in order


def _rows(blocks):
    width = blocks.layout.width + len(blocks.layout.extras)
    out = []
    for block in blocks.blocks:
        n = len(block) // width
        out += [tuple(block[k * blocks.layout.width:(k + 1) * blocks.layout.width]) for k in range(n)]
    return out


def test_bad_records_are_the_records_failing_a_check():
    """bad_records against its definition, record by record, on random chunks and checks."""
    import random

    from msprof.decode.blocks import bad_records

    rng = random.Random(7)
    for _trial in range(300):
        size = rng.choice([8, 40, 64])
        count = rng.randint(0, 50)
        common = bytes(rng.randrange(256) for _ in range(size))
        chunk = b"".join(common if rng.random() < 0.8 else bytes(rng.randrange(256) for _ in range(size))
                         for _ in range(count))
        checks = {offset: (rng.choice([0xFF, 0x80, 0x07]), 0) for offset in rng.sample(range(size), 2)}
        checks = {offset: (mask, common[offset] & mask) for offset, (mask, _v) in checks.items()}
        want = [i for i in range(count) if any(chunk[i * size + offset] & mask != value
                                               for offset, (mask, value) in checks.items())]
        assert bad_records(chunk, size, checks) == want


def test_positions_cut_at_iteration_starts_equal_one_bisect_per_task():
    import bisect
    import random

    rng = random.Random(5)
    for trial in range(400):
        starts = sorted(rng.randint(0, 100) for _ in range(rng.randint(0, 8)))   # duplicates happen
        placer = importer.TaskPlacer([(1, i, s, s + rng.randint(0, 30)) for i, s in enumerate(starts)], [])
        moments = [rng.randint(-5, 140) for _ in range(rng.randint(0, 40))]
        if trial % 2:
            moments.sort()                                # the cut path; unsorted ones take the plain path
        assert placer._positions(moments) == [bisect.bisect_right(starts, m) for m in moments]


def test_parts_belong_to_their_database(tmp_path, monkeypatch):
    """A worker's table stays in a part file read with its database; a part missing, or one from another
    import (swapped in by hand, or left by an import killed between its moves), makes the database stale —
    never read — and the next command rebuilds it; an import that loads the family itself removes the part."""
    from msprof import api
    from msprof.errors import DataError
    from msprof.layouts import find_units

    monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    job = make(tmp_path / "a", "clean")
    other = make(tmp_path / "b", "two models")
    for collection in (job, other):
        api.import_collection(collection)
    db = job / "sqlite" / "msprof.db"

    def part():
        [found] = (job / "sqlite").glob("msprof.pmu.*.db")
        return found

    expected = database_tables(db)
    [unit] = find_units(job)
    assert unit.database.stale() is None

    part().write_bytes(next((other / "sqlite").glob("msprof.pmu.*.db")).read_bytes())   # another import's
    with pytest.raises(DataError, match=r"msprof\.pmu\.[0-9a-f]+\.db is from another import"):
        store.open_readonly(db)
    assert "from another import" in unit.database.stale()
    api.export_summary(job, "csv")                    # rebuilt first, then read
    assert unit.database.stale() is None and database_tables(db) == expected

    part().unlink()
    assert "is missing" in unit.database.stale()
    api.export_summary(job, "csv")
    assert database_tables(db) == expected

    monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", 1 << 40)           # now loaded inline
    api.import_collection(job)
    # (beside the database: the list of the files the last whole-run export wrote)
    assert sorted(p.name for p in (job / "sqlite").iterdir()) == ["msprof.db", "summary.csv.manifest"]
    assert database_tables(db) == expected


def test_a_failed_import_keeps_the_earlier_database_and_its_parts(tmp_path, monkeypatch):
    """The new parts are moved in under names of their own and the old ones removed only once the new
    database has replaced the old: an import whose very last step (moving the database into place) fails
    leaves the earlier database whole and readable, and the new parts are not read with it."""
    import os

    from msprof.layouts.job import importer as job_importer

    monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    job = make(tmp_path, "clean")
    job_importer.import_result_dir(job)
    db = job / "sqlite" / "msprof.db"
    expected, earlier_parts = database_tables(db), sorted((job / "sqlite").glob("msprof.*.*.db"))
    replace = os.replace

    def full_disk_for_the_database(source, target):
        if str(target).endswith("msprof.db"):
            raise OSError(28, "No space left on device")
        return replace(source, target)

    monkeypatch.setattr(os, "replace", full_disk_for_the_database)
    with pytest.raises(Exception, match="No space left"):
        job_importer.import_result_dir(job)
    monkeypatch.setattr(os, "replace", replace)
    assert all(p.exists() for p in earlier_parts)                 # the earlier parts are still there
    assert database_tables(db) == expected                # and the earlier database reads them
    assert not [p for p in (job / "sqlite").iterdir() if p.name.startswith(".")]


def test_a_link_where_a_part_goes_is_not_written_through(tmp_path, monkeypatch):
    """The worker's part is a new temporary, never a name planted in advance: a link at the final part name
    (a collection received with its sqlite/ directory) is replaced by the part, its target untouched."""
    from msprof import api

    monkeypatch.setattr(parts, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    job = make(tmp_path, "clean")
    (job / "sqlite").mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (job / "sqlite" / "msprof.pmu.db").symlink_to(victim)
    (job / "sqlite" / "msprof.acl.db").symlink_to(tmp_path / "nowhere")        # dangling
    (job / "sqlite" / "msprof.pmu.0123456789abcdef.db").symlink_to(victim)
    api.import_collection(job)
    assert victim.read_text() == "keep me" and not (tmp_path / "nowhere").exists()
    assert not [p for p in (job / "sqlite").iterdir() if p.is_symlink()]     # removed, never followed
    assert database_tables(job / "sqlite" / "msprof.db")["pmu"]


@pytest.mark.parametrize("layout", ["JOB", "PROF"])
def test_commands_started_together_on_a_fresh_collection_import_it_once(tmp_path, layout):
    """``export summary & export timeline & show`` on a collection with no database yet: one of them imports,
    the others wait for it and read what it built (found by a newcomer's trial: each imported on its own)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fixtures import indepgen

    root = Path(__file__).resolve().parents[1]
    if layout == "JOB":
        target = jobgen.write_job(tmp_path, small_job())
    else:
        target = Path(indepgen.generate(tmp_path, ["--seed", "4", "--ops", "20", "--iters", "20"]))
    env = dict(os.environ, PYTHONPATH=str(root), NO_COLOR="1", COLUMNS="200")
    commands = [["export", "summary"], ["export", "timeline"], ["show"]]
    runs = [subprocess.Popen([sys.executable, "-m", "msprof", *command, "-dir", str(target)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for command in commands]
    results = [run.communicate(timeout=120) + (run.returncode,) for run in runs]
    assert [code for _out, _err, code in results] == [0, 0, 0], results
    imported = [line for _out, err, _code in results for line in err.splitlines() if line.startswith("imported ")]
    assert len(imported) == (1 if layout == "JOB" else 2), results        # (a PROF_: its host and its device)


def test_two_devices_exported_together_import_their_shared_host_once(tmp_path):
    """Two commands on the two devices of one PROF_ share its host database: it is imported once (the lock was
    the device directory's, so both imported the host: found by a review)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fixtures import indepgen

    root = Path(__file__).resolve().parents[1]
    prof_dir = Path(indepgen.generate(tmp_path, ["--seed", "4", "--ops", "20", "--iters", "20", "--devices", "2"]))
    env = dict(os.environ, PYTHONPATH=str(root), NO_COLOR="1")
    runs = [subprocess.Popen([sys.executable, "-m", "msprof", "export", "summary", "-dir", str(prof_dir / device)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for device in ("device_0", "device_1")]
    results = [run.communicate(timeout=120) + (run.returncode,) for run in runs]
    assert [code for _out, _err, code in results] == [0, 0], results
    imported = [line for _out, err, _code in results for line in err.splitlines() if line.startswith("imported ")]
    assert sorted(line.split(" -> ")[0].rsplit("/", 1)[1] for line in imported) == ["device_0", "device_1", "host"]
