"""bench/fuzz.py at a small size (the heavy fuzz is run by hand: ``python bench/fuzz.py --trials 2000``):
planted bookkeeping files, special files, damaged raw files under every raw-file name and signals at random
moments give no traceback, hang, internal error or touched file outside the collection."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_small_fuzz_of_hostile_collections_finds_nothing(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "fuzz.py"), "--trials", "8", "--seed", "35",
                           "--work", str(tmp_path), "--timeout", "120"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for family in ("bookkeeping", "special", "raw", "signal"):
        assert f"{family:12}     2 trial(s), 0 failed" in proc.stdout, proc.stdout
