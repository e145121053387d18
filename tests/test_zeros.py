"""Raw files full of zeros (zero-filled, preallocated, or sparse after a crash): their records of all zero bytes
are skipped and counted, said in one warning naming the file, offset and count of each run, and never become
data; a sparse file's holes are not read, so time and memory do not grow with its apparent size (issue 35,
item 4: a sparse 1 GB hwts.data slice made 16.7M tasks at time 0 in 150 s and 2 GB)."""
import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import faults
from fixtures import profgen as pg
from fixtures.board import jobgen
from fixtures.networks import small_job
from msprof.decode import zeros

ROOT = Path(__file__).resolve().parents[1]


def rows(db: Path, sql: str) -> list:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that holds no data: one hole."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def holes_supported(directory: Path) -> bool:
    probe = sparse(directory / "probe", 1 << 20)
    try:
        with open(probe, "rb") as handle:
            return os.lseek(handle.fileno(), 0, os.SEEK_DATA) >= 0
    except OSError:
        return True             # ENXIO: no data at all, as a hole reports it
    finally:
        probe.unlink()


def import_measured(result_dir: Path):
    """msprof import in a process of its own: (completed process, its peak RSS in MB)."""
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
            " sys.stdout.write(p.stderr); sys.stdout.write('\\nRSS %d %d' % (resource.getrusage(resource.RUSAGE_CHILDREN)"
            ".ru_maxrss, p.returncode))")
    proc = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "msprof", "import", "-dir", str(result_dir)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1"),
                          timeout=300)
    stderr, _, tail = proc.stdout.rpartition("\nRSS ")
    rss_kb, code = map(int, tail.split())
    return subprocess.CompletedProcess(proc.args, code, "", stderr), rss_kb / 1024


def job_tasks(job: Path) -> list:
    return rows(job / "sqlite" / "msprof.db", "SELECT stream_id, task_id, task_type, start_syscnt, end_syscnt, exec_n,"
                                              " model_id, index_id, layer_id FROM task ORDER BY seq")


def next_slice(job: Path, kind: str) -> Path:
    last = faults.stream_files(job, kind)[-1]
    stem, number = last.name.rsplit("_", 1)
    return last.with_name(f"{stem}_{int(number) + 1}")


def test_a_sparse_hwts_slice_makes_no_task_and_memory_stays_flat(tmp_path):
    """Two JOBs, each with a sparse slice after its HWTS data (16 MB and 256 MB apparent, nothing on disk): the
    tasks are those of the JOB without it, the warning names the slice, offset 0 and the records, and the
    import's peak memory is the same for both sizes."""
    clean = jobgen.write_job(tmp_path / "clean", small_job())
    assert subprocess.run([sys.executable, "-m", "msprof", "import", "-dir", str(clean)], capture_output=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT))).returncode == 0
    peaks = {}
    for size in (16 << 20, 256 << 20):
        job = jobgen.write_job(tmp_path / str(size), small_job())
        hole = sparse(next_slice(job, "hwts"), size)
        proc, peaks[size] = import_measured(job)
        assert proc.returncode == 0, proc.stderr
        assert job_tasks(job) == job_tasks(clean)
        records = size // 64
        assert (f"{records} HWTS record(s) of all zero bytes skipped (a zero-filled or sparse file: nothing was "
                f"recorded there), in 1 run(s): {hole.name} offset 0 ({records})") in proc.stderr
        assert rows(job / "sqlite" / "msprof.db", "SELECT records, skipped FROM decode_count WHERE kind = 'hwts'") \
            == [(len(faults.read_stream(clean, "hwts")) // 64 + records, records)]
        assert "rolling counter gap" not in proc.stderr and "never ended" not in proc.stderr
    assert peaks[256 << 20] < peaks[16 << 20] + 16, peaks


@pytest.mark.parametrize("lone", [False, True])
def test_zeros_written_inside_a_stream_are_left_out(tmp_path, lone):
    """Zeros really written (no hole), between two tasks: a run starting inside a chunk and ending in the next
    one, or a lone record of zeros in a chunk whose first and last records are real (the stream passes such a
    chunk on whole: the pairer meets it). The tasks are the clean JOB's; the run is named with its file, offset
    and count, the lone record as a skipped one."""
    network = small_job(slice_bytes=1 << 20)            # (one file, and one chunk without the zeros)
    clean = jobgen.write_job(tmp_path / "clean", network)
    subprocess.run([sys.executable, "-m", "msprof", "import", "-dir", str(clean)], check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    job = jobgen.write_job(tmp_path / "zeros", network)
    [path] = faults.stream_files(job, "hwts")
    data = path.read_bytes()
    count = 1 if lone else 5000                 # 320,000 bytes: beyond a 256 kB chunk
    path.write_bytes(data[:4 * 64] + bytes(count * 64) + data[4 * 64:])        # after the second task
    proc = subprocess.run([sys.executable, "-m", "msprof", "import", "-dir", str(job)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1"))
    assert proc.returncode == 0, proc.stderr
    assert job_tasks(job) == job_tasks(clean)
    if lone:
        assert f"{path.name} offset 256: 1 HWTS record(s) skipped (all zero bytes)" in proc.stderr
    else:
        assert (f"{count} HWTS record(s) of all zero bytes skipped (a zero-filled or sparse file: nothing was recorded "
                f"there), in 1 run(s): {path.name} offset 256 ({count})") in proc.stderr
    assert rows(job / "sqlite" / "msprof.db", "SELECT skipped FROM decode_count WHERE kind = 'hwts'") == [(count,)]
    assert "rolling counter gap" not in proc.stderr


def test_a_prof_device_and_host_with_zeros_import_their_real_records_only(tmp_path):
    """PROF_: a sparse aicore.data slice (the Ascend PMU record has no magic: every record of its size passed), a
    lone PMU record of zeros among real ones, and a sparse hash_dic slice (text: zero bytes, no lines). The
    tables are those of the collection without them."""
    desc = {"pmu": "PipeUtilization", "pmu_reserved": "zero"}
    clean = pg.write_prof(tmp_path / "clean", desc)
    damaged = pg.write_prof(tmp_path / "zeros", desc)
    device, host = damaged / "device_0" / "data", damaged / "host" / "data"
    [aicore] = sorted(device.glob("aicore.data.0.slice_*"))[:1]
    data = aicore.read_bytes()
    aicore.write_bytes(data[:128] + bytes(128) + data[128:])
    pmu_hole = sparse(aicore.with_name("aicore.data.0.slice_99"), 64 << 20)
    [hash_dic] = sorted(host.glob("*hash_dic*"))[-1:]
    text_hole = sparse(hash_dic.with_name(hash_dic.name.rsplit("_", 1)[0] + "_99"), 64 << 20)
    runs = []
    for prof in (clean, damaged):
        proc = subprocess.run([sys.executable, "-m", "msprof", "export", "summary", "-dir", str(prof)],
                              capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1"))
        assert proc.returncode == 0, proc.stderr
        runs.append(proc.stderr)
    assert (f"{(64 << 20) // 128} aicore PMU record(s) of all zero bytes skipped (a zero-filled or sparse file: "
            f"nothing was recorded there), in 1 run(s): {pmu_hole.name} offset 0 ({(64 << 20) // 128})") in runs[1]
    assert f"{aicore.name} offset 128: 1 aicore PMU record(s) skipped (all zero bytes)" in runs[1]
    assert (f"{64 << 20} hash_dic zero byte(s) skipped (a zero-filled or sparse file: nothing was recorded there), "
            f"in 1 run(s): {text_hole.name} offset 0 ({64 << 20})") in runs[1]
    for name in ("pmu", "task"):
        sql = f"SELECT * FROM {name} ORDER BY rowid"
        [before, after] = [rows(p / "device_0" / "sqlite" / "msprof.db", sql) for p in (clean, damaged)]
        assert before == after and before
    summaries = [sorted((p / "device_0" / "summary").iterdir()) for p in (clean, damaged)]
    assert [p.read_bytes() for p in summaries[0]] == [p.read_bytes() for p in summaries[1]]


def test_the_holes_of_a_sparse_file_are_not_read(tmp_path):
    """zeros.blocks hands a hole on as its length (the file system's SEEK_HOLE/SEEK_DATA), and data as bytes."""
    if not holes_supported(tmp_path):
        pytest.skip(f"the file system of {tmp_path} does not report holes (SEEK_DATA)")
    path = tmp_path / "mixed"
    with open(path, "wb") as handle:
        handle.write(b"\x01" * 4096)
        handle.seek(4096 + (8 << 20))
        handle.write(b"\x02" * 4096)
    with open(path, "rb") as handle:
        got = [b if isinstance(b, int) else (b[:1], len(b)) for b in zeros.blocks(handle, 1 << 16, path.stat().st_size)]
    assert got == [(b"\x01", 4096), 8 << 20, (b"\x02", 4096)]


def test_zero_runs_are_summarised_not_listed():
    runs = zeros.ZeroRuns()
    for k in range(10):
        runs.add(k * 1000, 2, 64)
    runs.add(9000 + 128, 3, 64)         # continues the last run
    [message] = runs.message("HWTS record(s) of all zero bytes", lambda offset: f"f offset {offset}")
    assert message == ("23 HWTS record(s) of all zero bytes skipped (a zero-filled or sparse file: nothing was recorded"
                       " there), in 10 run(s): f offset 0 (2), f offset 1000 (2), f offset 2000 (2) and 7 more run(s)")


def test_split_leaves_out_only_whole_records_of_zeros():
    size = 8
    record = b"\x01" * size
    whole = record + bytes(5) + b"\x01" * 3 + bytes(2 * size) + record + bytes(size)
    runs = zeros.ZeroRuns()
    kept = list(zeros.split(whole, size, 800, runs))
    # the second record has zeros but is not all zeros; records 2-3 and 5 are
    assert kept == [(800, whole[:16]), (832, record)]
    assert (runs.records, runs.runs, runs.named) == (3, 2, [[816, 2], [840, 1]])


def test_task_logs_with_a_counter_of_2_to_the_63_or_more_are_skipped():
    """An HWTS or STARS log whose counter is 2^63 or more (read signed: only damage writes one) cannot be real:
    skipped and counted, never a task at a negative time."""
    import struct

    from msprof.decode.base import Tally
    from msprof.decode.hwts import HwtsDecoder
    from msprof.decode.stars import StarsDecoder

    def hwts(log_type, counter, task, syscnt):
        return struct.pack("<BBHHHQI44x", log_type | counter << 4, 0, 0x6BD3, 0, task, syscnt, 3)

    records = [hwts(0, 0, 1, 100), hwts(1, 1, 1, 200), hwts(0, 2, 2, 1 << 63), hwts(1, 3, 2, 400),
               hwts(0, 4, 3, 500), hwts(1, 5, 3, 600)]
    tally = Tally(64)
    tally.base = 640
    tasks = []
    decoder = HwtsDecoder(lambda piece: [piece])
    for complete, data in decoder.decode(b"".join(records), tally) + decoder.finish(tally):
        tasks += list(zip(*data)) if complete else data
    assert tasks == [(3, 1, 0, 100, 200, 0), (3, 2, 0, None, 400, 0), (3, 3, 0, 500, 600, 0)]
    assert (tally.counts, tally.first) == ({"time stamp of 2^63 or more": 1}, {"time stamp of 2^63 or more": 640 + 128})

    def stars(log_type, task, syscnt):
        return struct.pack("<4HQ48x", log_type, 0x6BD3, 3, task, syscnt)

    tally = Tally(64)
    [rows] = StarsDecoder().decode(stars(0, 1, 100) + stars(1, 1, 1 << 63) + stars(1, 1, 300), tally)
    assert rows.rows == [(3, 1, 0, 0, 100), (3, 1, 0, 1, 300)]
    assert (tally.counts, tally.first) == ({"time stamp of 2^63 or more": 1}, {"time stamp of 2^63 or more": 64})
