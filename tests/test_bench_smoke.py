"""The benchmark's smoke size (CI runs no real benchmark): bench/run.py works end to end and reports
the generator's record count and the files each step wrote; and the peak RSS it reports is the measured
command's own."""
import importlib.util
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

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
    assert f"2,000 tasks: {records:,} raw records" in proc.stdout
    assert records == 2 * 2000 + 2000 + len(truth.acl_calls) + 2 * 2     # HWTS pairs, PMU, ACL, 2 step marks × 2
    steps = re.findall(r"^  (import|export summary|export timeline|show) +(\d+\.\d+) ", proc.stdout, re.M)
    assert [s for s, _ in steps] == ["import", "export summary", "export timeline", "show"]
    assert "timeline files: acl_0.bench.1.1.json, task_time_0.bench.1.1.json" in proc.stdout
    job = next((tmp_path / "job-2000").glob("JOB*"))
    assert len(list((job / "summary").glob("op_summary_*.csv"))) == 2          # 2 iterations of 1000 layers
