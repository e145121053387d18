"""The benchmark's smoke size (CI runs no real benchmark): bench/run.py works end to end and reports
the generator's record count and the files each step wrote."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_smoke_size(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import run as bench
    finally:
        sys.path.remove(str(ROOT / "bench"))
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
