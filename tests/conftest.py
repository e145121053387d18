import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # so tests can import fixtures.*
sys.path.insert(0, str(ROOT / "tests"))  # and the test helpers (sshd_harness)
import sshd_harness  # noqa: E402


@pytest.fixture
def msprof_cli():
    """Run ``python -m msprof`` as a real process; return CompletedProcess (text stdout/stderr)."""

    def run(*args, cwd=None, timeout=120, env=None):
        env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", **(env or {}))
        return subprocess.run([sys.executable, "-m", "msprof", *map(str, args)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def system_user():
    """One throw-away local user for this suite run (the SSH board login, the unprivileged user of the
    permission tests), named ``$MSPROF_TEST_USER-PID`` (prefix ``msproft`` by default) so that two suites on
    one machine never share or delete each other's; removed at the end, after a failure, Ctrl-C, SIGTERM or
    SIGHUP, and by the next run when this one was killed outright."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("a throw-away system user needs root and useradd; .ci/run runs as root")
    prefix = sshd_harness.user_prefix()
    sshd_harness.remove_stale_users(prefix)
    name = sshd_harness.unique_user_name(prefix)
    password = sshd_harness.random_password()
    with sshd_harness.removed_on_termination():
        try:
            entry = sshd_harness.ensure_user(name, password)
            yield sshd_harness.SystemUser(name, password, entry)
        finally:
            sshd_harness.remove_user(name)
