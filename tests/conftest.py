import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # so tests can import fixtures.*


@pytest.fixture
def msprof_cli():
    """Run ``python -m msprof`` as a real process; return CompletedProcess (text stdout/stderr)."""

    def run(*args, cwd=None, timeout=120, env=None):
        env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", **(env or {}))
        return subprocess.run([sys.executable, "-m", "msprof", *map(str, args)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)

    return run
