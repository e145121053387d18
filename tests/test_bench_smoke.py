"""The benchmark's smoke sizes (CI runs no real benchmark): bench/run.py works end to end on a JOB and on
a PROF_, reports the generator's record count and the files each step wrote; the peak RSS it reports is
the measured command's own; the reference comparison runs each tool on its own copy of the raw data."""
import importlib.util
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_peak_rss_is_the_commands_own():
    """Measured from a bench process that has grown to 300 MB, `python -c pass` reports its own few MB."""
    bench = load_bench()
    grown = bytearray(300 << 20)
    grown[::4096] = b"\x01" * (len(grown) // 4096)     # touch every page: they count only once written
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 >= 300
    # the premise: a child started from this process directly reports (at least) our peak
    direct = subprocess.Popen([sys.executable, "-c", "pass"])
    assert os.wait4(direct.pid, 0)[2].ru_maxrss / 1024 >= 300
    direct.returncode = 0
    try:
        wall, rss, code = bench.run_measured([sys.executable, "-c", "pass"])
    finally:
        bench.stop_spawner()
    del grown
    assert code == 0
    assert 0 < rss < 100


def test_bench_smoke_size(tmp_path):
    bench = load_bench()
    from fixtures.board import jobgen

    truth = jobgen.build(bench.job_description(2000))
    records = len(truth.hwts_records) + len(truth.pmu_records) + len(truth.acl_calls) + len(truth.step_records)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--sizes", "2000", "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PROF_ series" not in proc.stdout and "Reference" not in proc.stdout    # --quick: neither by default
    assert f"2,000 tasks: {records:,} raw records" in proc.stdout
    assert records == 2 * 2000 + 2000 + len(truth.acl_calls) + 2 * 2     # HWTS pairs, PMU, ACL, 2 step marks × 2
    steps = re.findall(r"^  (import|export summary|export timeline|show) +(\d+\.\d+) ", proc.stdout, re.M)
    assert [s for s, _ in steps] == ["import", "export summary", "export timeline", "show"]
    assert "timeline files: acl_0.bench.1.1.json, task_time_0.bench.1.1.json" in proc.stdout
    job = next((tmp_path / "job-2000").glob("JOB*"))
    assert len(list((job / "summary").glob("op_summary_*.csv"))) == 2          # 2 iterations of 1000 layers


def run_bench(*args):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_bench_prof_smoke_size(tmp_path):
    bench = load_bench()
    from fixtures import profgen

    truth = profgen.build(bench.prof_description(2000))
    records = (2 * len(truth.tasks) + sum(1 for t in truth.tasks if t.pmu is not None) + len(truth.apis)
               + len(truth.nodes) + len(truth.tracks) + len(truth.graph_maps))
    # HWTS start/end pairs, PMU, APIs (launch + KernelLaunch per op at model load, the ModelLoad, ModelExecute
    # + aclmdlExecute per iteration), node infos and task tracks (one per op: a static graph), one graph map
    assert records == 2 * 2000 + 2000 + (2 * 1000 + 1 + 2 * 2) + 1000 + 1000 + 1
    stdout = run_bench("--sizes", "", "--prof-sizes", "2000", "--quick", "--out", str(tmp_path))
    assert "PROF_ series: chip 3, one model of 1000 AI_CORE ops" in stdout and "static graph" in stdout
    assert "generated PROF_" in stdout
    assert f"2,000 tasks: {records:,} raw records" in stdout
    steps = re.findall(r"^  (import|export summary|export timeline|show) +(\d+\.\d+) ", stdout, re.M)
    assert [s for s, _ in steps] == ["import", "export summary", "export timeline", "show"]
    assert "timeline files: msprof.json" in stdout
    assert "Reference" not in stdout
    prof = next((tmp_path / "prof-2000").glob("PROF_*"))
    summary = prof / "device_0" / "summary"
    assert sorted(p.name for p in summary.iterdir()) == ["api_statistic.csv", "op_statistic.csv", "op_summary.csv",
                                                         "task_time.csv"]
    assert len((summary / "op_summary.csv").read_text().splitlines()) == 1 + len(truth.tasks)   # a header
    assert len((summary / "op_statistic.csv").read_text().splitlines()) == 1 + len({t.op_type for t in truth.tasks})
    assert (prof / "host" / "sqlite" / "msprof.db").is_file()
    # a second run uses the cached data (the marker matches the description) and rewrites the outputs
    again = run_bench("--sizes", "", "--prof-sizes", "2000", "--quick", "--out", str(tmp_path))
    assert "generated" not in again
    assert f"2,000 tasks: {records:,} raw records" in again
    assert sorted(p.name for p in summary.iterdir()) == ["api_statistic.csv", "op_statistic.csv", "op_summary.csv",
                                                         "task_time.csv"]


@pytest.mark.reference
def test_bench_reference_ratio_smoke(tmp_path):
    from reference_runner import reference_available

    ok, reason = reference_available()
    if not ok:
        pytest.skip(reason)
    stdout = run_bench("--sizes", "", "--prof-sizes", "", "--reference-tasks", "2000", "--out", str(tmp_path))
    found = re.search(r"reference (\d+\.\d+) s, msprof (\d+\.\d+) s, ratio reference/msprof = (\d+\.\d)x", stdout)
    assert found, stdout
    reference, ours, ratio = map(float, found.groups())
    # the ratio of the printed times, up to their rounding (0.005 s each) and the ratio's own (0.05)
    assert abs(ratio - reference / ours) <= 0.05 + ratio * (0.005 / reference + 0.005 / ours)
    assert "judged at 250,000 tasks" in stdout
    # each tool ran on its own copy; the generated data stayed raw
    generated = next((tmp_path / "prof-2000").glob("PROF_*"))
    assert not list(generated.rglob("sqlite")) and not (generated / "mindstudio_profiler_output").exists()
    ref_summary = list((tmp_path / "reference-static-2000" / "ref" / generated.name /
                        "mindstudio_profiler_output").glob("op_summary_*.csv"))
    assert len(ref_summary) == 1 and len(ref_summary[0].read_text().splitlines()) == 1 + 2000
    ours_summary = (tmp_path / "reference-static-2000" / "ours" / generated.name / "device_0" / "summary" /
                    "op_summary.csv")
    assert len(ours_summary.read_text().splitlines()) == 1 + 2000


def test_bench_per_launch_shape(tmp_path):
    """--prof-shape per-launch: the host launches every op of every iteration (its own cache directory)."""
    stdout = run_bench("--sizes", "", "--prof-sizes", "2000", "--quick", "--prof-shape", "per-launch",
                       "--out", str(tmp_path))
    assert "launched by the host every iteration" in stdout
    prof = next((tmp_path / "prof-per-launch-2000").glob("PROF_*"))
    tracks = sum(p.stat().st_size for p in (prof / "host" / "data").glob("*task_track*")) // 64
    assert tracks == 2000                                   # one task_track per task
    assert len((prof / "device_0" / "summary" / "op_summary.csv").read_text().splitlines()) == 1 + 2000
