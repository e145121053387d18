"""A real OpenSSH sshd on 127.0.0.1 for the collect tests (see ../shared/notes/ssh-testing.md).

Own config and host key in a temp dir, a free port, ready when the port answers with an OpenSSH banner.
Teardown kills the per-connection children first, then the listener. A throw-away local user (useradd), one
per suite run (tests/conftest.py ``system_user``), gives password and key logins as a non-root "board" user.
Needs root (useradd, /run/sshd).
"""
import contextlib
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

SSHD = "/usr/sbin/sshd"
SFTP_SERVER_CANDIDATES = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                          "/usr/libexec/sftp-server")


def skip_reason() -> Optional[str]:
    """Why the real-sshd tests cannot run here, or None."""
    if os.name != "posix":
        return "real-sshd tests need a POSIX host"
    if os.geteuid() != 0:
        return "real-sshd tests need root (useradd, /run/sshd); run .ci/run as root"
    if not os.path.exists(SSHD):
        return f"{SSHD} missing: apt-get install -y openssh-server (.ci/run does it)"
    if not shutil.which("ssh-keygen"):
        return "ssh-keygen missing (openssh-client)"
    if not shutil.which("useradd"):
        return "useradd missing"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path, comment: str = "msprof-test") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdout=subprocess.DEVNULL)
    return path


def _children(pid: int) -> List[int]:
    """All descendants of ``pid`` (via /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        parents.setdefault(int(fields[1]), []).append(int(entry))
    result, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            result.append(child)
            todo.append(child)
    return result


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


class SshdServer:
    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.port = 0
        self.proc = None
        self.host_key = self.workdir / "ssh_host_ed25519_key"
        self.client_key = self.workdir / "id_ed25519"
        self.config = self.workdir / "sshd_config"
        self.log_path = self.workdir / "sshd.log"
        self.known_hosts = self.workdir / "known_hosts"

    def start(self) -> "SshdServer":
        os.makedirs("/run/sshd", 0o755, exist_ok=True)
        if not self.host_key.exists():
            keygen(self.host_key, "msprof-test-host")
        if not self.client_key.exists():
            keygen(self.client_key)
        sftp = next((p for p in SFTP_SERVER_CANDIDATES if os.path.exists(p)), "internal-sftp")
        last = ""
        for _ in range(5):
            self.port = free_port()
            self.config.write_text("\n".join([
                f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}", "PidFile none",
                "UsePAM no", "StrictModes no", "PubkeyAuthentication yes",
                f"AuthorizedKeysFile {self.workdir}/authorized_keys .ssh/authorized_keys",
                "PasswordAuthentication yes", "KbdInteractiveAuthentication no", "PermitEmptyPasswords no",
                "MaxAuthTries 6", "MaxStartups 100:30:200", "LoginGraceTime 20", "X11Forwarding no",
                "AllowTcpForwarding no", "PrintMotd no", "PrintLastLog no", "UseDNS no", "LogLevel VERBOSE",
                f"Subsystem sftp {sftp}", ""]))
            check = subprocess.run([SSHD, "-t", "-f", str(self.config)], capture_output=True, text=True)
            if check.returncode != 0:
                raise RuntimeError(f"sshd -t: {check.stderr.strip()}")
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)], stdout=log, stderr=log)
            log.close()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if self.banner().startswith("SSH-2.0-OpenSSH"):
                    return self
                time.sleep(0.02)
            last = self.log_path.read_text(errors="replace")[-500:]
            self.stop()
        raise RuntimeError(f"sshd did not start: {last}")

    def banner(self) -> str:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                return sock.recv(64).decode("ascii", "replace")
        except OSError:
            return ""

    def host_key_line(self) -> str:
        kind, b64 = (self.host_key.with_suffix(".pub")).read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {b64}\n"

    def write_known_hosts(self, path: Optional[Path] = None) -> Path:
        path = Path(path or self.known_hosts)
        path.write_text(self.host_key_line())
        return path

    def sessions(self) -> List[int]:
        """Per-connection sshd children (and everything below them)."""
        return _children(self.proc.pid) if self.proc else []

    def kill_sessions(self, sig=signal.SIGKILL) -> int:
        """Cut every live connection (kill the per-connection sshd processes and their children)."""
        pids = self.sessions()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.kill_sessions(signal.SIGTERM)
        time.sleep(0.05)
        self.kill_sessions(signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# -- the throw-away system user ------------------------------------------------------------------------
# One user per suite run, named PREFIX-PID: two suites on one machine (two checkouts, two Pythons) never
# share one, and a run killed before its teardown leaves a name whose pid is gone, which the next run removes.
@dataclass(frozen=True)
class SystemUser:
    name: str
    password: str
    entry: pwd.struct_passwd


def random_password() -> str:
    return "T3st-" + secrets.token_urlsafe(12)


def user_prefix() -> str:
    return os.environ.get("MSPROF_TEST_USER") or "msproft"


def unique_user_name(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}"


def remove_stale_users(prefix: str) -> List[str]:
    """Remove the users PREFIX-PID whose pid no longer runs (left by a suite that was killed); return them."""
    pattern = re.compile(re.escape(prefix) + r"-([0-9]+)")
    removed = []
    for entry in pwd.getpwall():
        match = pattern.fullmatch(entry.pw_name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            remove_user(entry.pw_name)
            removed.append(entry.pw_name)
    return removed


def ensure_user(name: str, password: str) -> pwd.struct_passwd:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
    return pwd.getpwnam(name)


def remove_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    subprocess.run(["userdel", "-r", "-f", name], check=False, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def removed_on_termination():
    """SIGTERM and SIGHUP raise KeyboardInterrupt inside the block, so that pytest tears its fixtures down
    (the user is removed) as it does for Ctrl-C; handlers someone else installed are left alone."""
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def install_user_key(name: str, public_key: str) -> None:
    entry = pwd.getpwnam(name)
    ssh_dir = Path(entry.pw_dir) / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    keys = ssh_dir / "authorized_keys"
    keys.write_text(public_key)
    os.chmod(keys, 0o600)
    for path in (ssh_dir, keys):
        os.chown(path, entry.pw_uid, entry.pw_gid)
