import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # so tests can import fixtures.*
sys.path.insert(0, str(ROOT / "tests"))  # and the test helpers (sshd_harness)
import sshd_harness  # noqa: E402

# msprof keeps a signal it was started ignoring (nohup, a script's "&": docs/security.md), and so would every
# msprof the tests start when the suite itself was started so (``nohup pytest … &``): the tests that interrupt
# msprof need them to start with the default handling.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


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


@pytest.fixture
def tmpfs():
    """``tmpfs(options)``: a small disk, a tmpfs mounted with those options ("size=4m,nr_inodes=400") in a new
    directory of /tmp (outside tmp_path, which another user, as the SSH board's, cannot enter); unmounted and
    removed afterwards. Root and mount(8) only: skips, saying why, elsewhere."""
    points = []

    def mount(options: str) -> Path:
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("a small tmpfs needs root and mount(8); .ci/run runs as root")
        point = Path(tempfile.mkdtemp(prefix="msprof-disk-"))
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True)
        if done.returncode != 0:
            point.rmdir()
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
        points.append(point)
        return point

    yield mount
    for point in points:
        subprocess.run(["umount", "-l", str(point)], check=False)
        shutil.rmtree(point, ignore_errors=True)
