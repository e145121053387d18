"""One SSH session to the board (paramiko): connect with host-key checking, run commands, move files.

Every failure to reach or log in to the board becomes an :class:`SshError` (exit 3) with a one-line cause.
"""
import base64
import contextlib
import errno
import hashlib
import logging
import os
import re
import select
import shlex
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import paramiko

from msprof.collect.config import BoardConfig, Credentials, can_prompt, credentials, prompt_password
from msprof.console import log, notice
from msprof.errors import RemoteError, SshError

# paramiko's transport thread logs errors ("Exception (client): Error reading SSH protocol banner") that
# would reach stderr through logging's last-resort handler; our one-line errors say it better.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

SFTP_TIMEOUT = 30.0  # seconds without progress on an SFTP or transfer channel before giving up
PID_MARK = b"@@PID "


def q(text: str) -> str:
    return shlex.quote(str(text))


def fingerprint(key: paramiko.PKey) -> str:
    """SHA256 fingerprint as OpenSSH prints it (``SHA256:base64-without-padding``)."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def host_entry_name(host: str, port: int) -> str:
    """The name known_hosts uses: ``host`` on port 22, ``[host]:port`` otherwise (as OpenSSH)."""
    return host if port == 22 else f"[{host}]:{port}"


def user_known_hosts() -> Path:
    return Path(os.path.expanduser("~")) / ".ssh" / "known_hosts"


def known_hosts_files(cfg: BoardConfig) -> List[Path]:
    files = [user_known_hosts()]
    if cfg.known_hosts is not None and cfg.known_hosts not in files:
        files.append(cfg.known_hosts)
    return files


def _name_matches(name: str, pattern: str) -> bool:
    if pattern.startswith("|1|"):
        try:
            return paramiko.HostKeys.hash_host(name, pattern) == pattern
        except Exception:  # malformed hash: not ours
            return False
    if pattern.startswith("!"):
        return False
    if "*" not in pattern and "?" not in pattern:
        return name == pattern
    # OpenSSH patterns know only * and ?; '[' is literal ([host]:port), unlike fnmatch
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name) is not None


def find_host_lines(files: List[Path], name: str) -> List[Tuple[Path, int, str]]:
    """(file, line number, key type) of every known_hosts line that names ``name``."""
    found = []
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            fields = line.split()
            if len(fields) < 3 or line.lstrip().startswith("#"):
                continue
            if fields[0].startswith("@"):  # @cert-authority / @revoked markers
                fields = fields[1:]
                if len(fields) < 3:
                    continue
            if any(_name_matches(name, p) for p in fields[0].split(",")):
                found.append((path, number, fields[1]))
    return found


def append_known_host(path: Path, name: str, key: paramiko.PKey) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = f"{name} {key.get_name()} {key.get_base64()}\n"
    prefix = ""
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                prefix = "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(prefix + line)


class _UnknownHost(Exception):
    def __init__(self, name, key):
        super().__init__(name)
        self.name, self.key = name, key


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown host: refuse, or (``--accept-new-host-key``) append its key, like OpenSSH accept-new."""

    def __init__(self, accept_new: bool, target: Path):
        self.accept_new, self.target = accept_new, target

    def missing_host_key(self, client, hostname, key):
        if not self.accept_new:
            raise _UnknownHost(hostname, key)
        append_known_host(self.target, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)
        notice("msprof: added the host key of %s (%s %s) to %s", hostname, key.get_name(), fingerprint(key),
               self.target)


@dataclass
class RunResult:
    status: int  # remote exit status; -1 when killed by a signal or the connection was lost
    timed_out: bool = False
    connection_lost: bool = False
    stderr_tail: bytes = b""

    @property
    def last_stderr_line(self) -> str:
        lines = [ln for ln in self.stderr_tail.decode("utf-8", "replace").splitlines() if ln.strip()]
        return lines[-1].strip()[:300] if lines else ""


class Board:
    """A connected board. Use :meth:`connect`; close with :meth:`close` (or as a context manager)."""

    def __init__(self, cfg: BoardConfig, client: paramiko.SSHClient, auth: str):
        self.cfg = cfg
        self.client = client
        self.auth = auth  # which credential worked ("password (ini)", "key_file", …) — never the secret
        self._sftp = None

    # -- connecting -----------------------------------------------------------------------------
    @classmethod
    def connect(cls, cfg: BoardConfig, accept_new_host_key: bool = False) -> "Board":
        creds = credentials(cfg)
        try:
            return cls(cfg, _open_client(cfg, creds, accept_new_host_key), creds.describe())
        except paramiko.AuthenticationException as exc:
            if creds.password is None and can_prompt():
                log.info("authentication with %s failed; asking for the password", creds.describe())
                creds = prompt_password(cfg)
                try:
                    return cls(cfg, _open_client(cfg, creds, accept_new_host_key), creds.describe())
                except paramiko.AuthenticationException as again:
                    exc = again
            raise SshError(_auth_message(cfg, creds, exc)) from None

    @property
    def transport(self) -> paramiko.Transport:
        return self.client.get_transport()

    def is_active(self) -> bool:
        transport = self.transport
        return transport is not None and transport.is_active()

    def local_address(self) -> str:
        """This host's address as the board sees it: the local end of the SSH TCP connection."""
        address = self.transport.sock.getsockname()[0]
        if address.startswith("::ffff:"):
            address = address[7:]
        return address

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._sftp is not None:
                self._sftp.close()
        with contextlib.suppress(Exception):
            self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- commands -------------------------------------------------------------------------------
    def wrap(self, command: str) -> str:
        """Prepend ``remote_path`` (ini) to PATH for a remote shell command."""
        if self.cfg.remote_path:
            return f'PATH={q(self.cfg.remote_path)}:"$PATH"; export PATH; {command}'
        return command

    def _session(self) -> paramiko.Channel:
        if not self.is_active():
            raise RemoteError(f"the connection to {self.cfg.host} was lost")
        try:
            return self.transport.open_session(timeout=self.cfg.timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise RemoteError(f"cannot open a channel to {self.cfg.host}: {_cause(exc)}") from None

    def exec(self, command: str, timeout: Optional[float] = None, stdin: bytes = b"") -> Tuple[int, bytes, bytes]:
        """Run a short shell command; return (status, stdout, stderr)."""
        out, err = [], []
        result = self.run(command, timeout=timeout or max(self.cfg.timeout, SFTP_TIMEOUT), on_stdout=out.append,
                          on_stderr=err.append, track_pid=False, stdin=stdin)
        if result.timed_out:
            raise RemoteError(f"remote command timed out on {self.cfg.host}: {command[:80]}")
        return result.status, b"".join(out), b"".join(err)

    def run(self, command: str, timeout: Optional[float] = None, on_stdout: Callable[[bytes], None] = None,
            on_stderr: Callable[[bytes], None] = None, track_pid: bool = True, stdin: bytes = b"") -> RunResult:
        """Run ``command`` through the login shell, streaming its output to the callbacks as it arrives.

        With ``track_pid`` the shell first reports its pid (the session's process group: sshd runs each
        session in a new session), so a timeout or Ctrl-C can kill the whole group.
        """
        on_stdout = on_stdout or (lambda data: None)
        on_stderr = on_stderr or (lambda data: None)
        channel = self._session()
        full = (f'echo "@@PID $$" >&2; {command}') if track_pid else command
        channel.exec_command(self.wrap(full))
        if stdin:
            channel.sendall(stdin)
        channel.shutdown_write()
        deadline = time.monotonic() + timeout if timeout else None
        header = b"" if track_pid else None  # bytes of stderr before the @@PID line is complete
        pgid = None
        tail = b""
        timed_out = False

        def take_stderr(data):
            nonlocal header, pgid, tail
            if header is not None:
                header += data
                if b"\n" not in header and len(header) < 256:
                    return
                first, _, rest = header.partition(b"\n")
                header = None
                if first.startswith(PID_MARK) and first[len(PID_MARK):].strip().isdigit():
                    pgid = int(first[len(PID_MARK):].strip())
                    data = rest
                else:
                    data = first + b"\n" + rest
            if data:
                tail = (tail + data)[-4096:]
                on_stderr(data)

        try:
            while True:
                with contextlib.suppress(ValueError, OSError):
                    select.select([channel], [], [], 0.05)
                while channel.recv_ready():
                    on_stdout(channel.recv(65536))
                while channel.recv_stderr_ready():
                    take_stderr(channel.recv_stderr(65536))
                if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                if channel.closed or not self.is_active() or (channel.eof_received and not self.is_active()):
                    break
                if deadline is not None and time.monotonic() > deadline:
                    timed_out = True
                    self.kill_group(pgid)
                    break
        except KeyboardInterrupt:
            self.kill_group(pgid)
            raise
        finally:
            if header:  # output ended before a newline
                data, header = header, None
                take_stderr(data)
        if timed_out:
            channel.close()
            return RunResult(-1, timed_out=True, stderr_tail=tail)
        status = channel.recv_exit_status() if channel.exit_status_ready() else -1
        lost = status == -1 and not self.is_active()
        channel.close()
        return RunResult(status, connection_lost=lost, stderr_tail=tail)

    def kill_group(self, pgid: Optional[int]) -> None:
        if not pgid or not self.is_active():
            return
        log.info("killing remote process group %d", pgid)
        command = (f"kill -TERM -- -{pgid} 2>/dev/null; i=0; while [ $i -lt 10 ] && kill -0 -- -{pgid} "
                   f"2>/dev/null; do sleep 0.2; i=$((i+1)); done; kill -KILL -- -{pgid} 2>/dev/null; true")
        with contextlib.suppress(Exception):
            self.exec(command, timeout=10)

    def has_command(self, name: str) -> bool:
        with contextlib.suppress(RemoteError):
            status, _, _ = self.exec(f"command -v {q(name)} >/dev/null 2>&1")
            return status == 0
        return False

    # -- files ----------------------------------------------------------------------------------
    @property
    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            try:
                self._sftp = self.client.open_sftp()
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise RemoteError(f"cannot start SFTP on {self.cfg.host}: {_cause(exc)}") from None
            self._sftp.get_channel().settimeout(max(SFTP_TIMEOUT, self.cfg.timeout))
        return self._sftp

    def home(self) -> str:
        return self.sftp.normalize(".")

    def stat(self, path: str):
        try:
            return self.sftp.stat(path)
        except FileNotFoundError:
            return None

    def makedirs(self, path: str, mode: int = 0o755) -> bool:
        """mkdir -p over SFTP; return True when ``path`` itself was created."""
        existing = self.stat(path)
        if existing is not None:
            if not stat.S_ISDIR(existing.st_mode):
                raise RemoteError(f"{path} exists on the board and is not a directory")
            return False
        parent = path.rstrip("/").rsplit("/", 1)[0]
        if parent and parent != path:
            self.makedirs(parent, mode)
        try:
            self.sftp.mkdir(path, mode)
        except OSError as exc:
            if self.stat(path) is None:
                raise RemoteError(f"cannot create {path} on the board: {_cause(exc)}") from None
            return False
        return True

    def free_bytes(self, path: str) -> Optional[int]:
        """Free space under ``path`` from ``df -Pk`` (None when df is missing or unparsable)."""
        with contextlib.suppress(RemoteError):
            status, out, _ = self.exec(f"df -Pk {q(path)} 2>/dev/null | tail -n 1")
            fields = out.decode("utf-8", "replace").split()
            if status == 0 and len(fields) >= 4 and fields[3].isdigit():
                return int(fields[3]) * 1024
        return None

    def out_of_space(self, path: str) -> bool:
        """Probe: can 64 KiB (and one more inode) still be written under ``path``?"""
        probe = f"{path.rstrip('/')}/.msprof-space-probe"
        command = (f"dd if=/dev/zero of={q(probe)} bs=1024 count=64 2>&1 >/dev/null; s=$?; "
                   f"rm -f {q(probe)}; exit $s")
        with contextlib.suppress(RemoteError):
            status, out, err = self.exec(command)
            text = (out + err).decode("utf-8", "replace").lower()
            return status != 0 and ("no space" in text or "quota" in text)
        return False

    def upload(self, files, remote_dir: str, progress: Callable[[int], None] = None) -> None:
        """Upload ``files`` — (local path, relative posix path, mode, mtime) — under ``remote_dir``.

        ``put(confirm=True)`` stats every file afterwards: on a full disk paramiko's pipelined writes
        otherwise truncate silently. Modes (the executable bit of main) and mtimes are restored.
        Raises OSError/SSHException for the caller to classify (disk full or not).
        """
        made = set()
        for local, rel, mode, mtime in files:
            target = f"{remote_dir}/{rel}"
            parent = target.rsplit("/", 1)[0]
            if parent not in made:
                self.makedirs(parent)
                made.add(parent)
            done = [0]

            def callback(sent, total, done=done):
                if progress is not None:
                    progress(sent - done[0])
                done[0] = sent

            self.sftp.put(str(local), target, callback=callback, confirm=True)
            self.sftp.chmod(target, mode & 0o1777)
            self.sftp.utime(target, (mtime, mtime))

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        with self.sftp.open(path, "wb") as handle:
            handle.write(data)
        size = self.sftp.stat(path).st_size
        if size != len(data):
            raise OSError(errno.EIO, f"size mismatch writing {path}: {size} != {len(data)}")
        self.sftp.chmod(path, mode)


# -- connect helpers ---------------------------------------------------------------------------------------
def _open_client(cfg: BoardConfig, creds: Credentials, accept_new_host_key: bool) -> paramiko.SSHClient:
    files = known_hosts_files(cfg)
    client = paramiko.SSHClient()
    keys = client.get_host_keys()
    for path in files:
        if path.is_file():
            try:
                keys.load(str(path))
            except (OSError, paramiko.SSHException, ValueError) as exc:
                raise SshError(f"cannot read known_hosts file {path}: {exc}") from None
    target = cfg.known_hosts if cfg.known_hosts is not None else user_known_hosts()
    client.set_missing_host_key_policy(_HostKeyPolicy(accept_new_host_key, target))
    where = f"{cfg.host}:{cfg.port}"
    try:
        sock = socket.create_connection((cfg.host, cfg.port), timeout=cfg.timeout)
    except socket.gaierror as exc:
        raise SshError(f"cannot connect to {where}: cannot resolve the address ({exc.strerror})") from None
    except socket.timeout:
        raise SshError(f"cannot connect to {where}: no answer within {cfg.timeout:g} s "
                       "(board off, wrong address or a firewall?)") from None
    except ConnectionRefusedError:
        raise SshError(f"cannot connect to {where}: connection refused (is sshd running on the board, "
                       "is the port right?)") from None
    except OSError as exc:
        raise SshError(f"cannot connect to {where}: {exc.strerror or exc} (board unreachable?)") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        client.connect(cfg.host, port=cfg.port, username=cfg.username, password=creds.password,
                       key_filename=creds.key_files or None, allow_agent=creds.allow_agent,
                       look_for_keys=creds.look_for_keys, sock=sock, timeout=cfg.timeout,
                       banner_timeout=cfg.timeout, auth_timeout=cfg.timeout, channel_timeout=cfg.timeout)
    except paramiko.AuthenticationException:
        _close(client, sock)
        raise
    except _UnknownHost as exc:
        _close(client, sock)
        raise SshError(
            f"the host key of {exc.name} is not known: {exc.key.get_name()} {fingerprint(exc.key)}; check it "
            f"on the board (ssh-keygen -lf /etc/ssh/ssh_host_{_short_type(exc.key)}_key.pub) and rerun with "
            f"--accept-new-host-key to add it to {target}") from None
    except paramiko.BadHostKeyException as exc:
        _close(client, sock)
        name = host_entry_name(cfg.host, cfg.port)
        lines = find_host_lines(files, name) or find_host_lines(files, cfg.host)
        where_lines = ", ".join(f"{p}:{n}" for p, n, _ in lines) or ", ".join(str(p) for p in files)
        raise SshError(
            f"the host key of {name} has CHANGED (now {exc.key.get_name()} {fingerprint(exc.key)}, known "
            f"{exc.expected_key.get_name()} {fingerprint(exc.expected_key)}). If the board was reflashed or "
            f"replaced this is expected: remove the old line from {where_lines} (or run ssh-keygen -R "
            f"'{name}'), then rerun with --accept-new-host-key. Otherwise someone may be intercepting the "
            f"connection. Not connecting.") from None
    except (socket.timeout, TimeoutError):
        _close(client, sock)
        raise SshError(f"SSH handshake with {where} timed out after {cfg.timeout:g} s") from None
    except paramiko.SSHException as exc:
        _close(client, sock)
        text = str(exc)
        if "No existing session" in text or "banner" in text.lower():
            text = (f"no SSH server answered on {where} within {cfg.timeout:g} s (wrong port, or the board's "
                    "sshd is stuck?)")
            if "reset" in str(exc).lower() or "EOF" in str(exc):
                text = f"{where} closed the connection before the SSH banner (not an SSH server, or overloaded)"
        else:
            text = f"SSH handshake with {where} failed: {_cause(exc)}"
        raise SshError(text) from None
    except (OSError, EOFError) as exc:
        _close(client, sock)
        raise SshError(f"connection to {where} failed: {_cause(exc)}") from None
    transport = client.get_transport()
    transport.set_keepalive(15)
    return client


def _short_type(key) -> str:
    name = key.get_name()
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(name, "ecdsa" if "ecdsa" in name else name)


def _close(client, sock) -> None:
    with contextlib.suppress(Exception):
        client.close()
    with contextlib.suppress(Exception):
        sock.close()


def _auth_message(cfg: BoardConfig, creds: Credentials, exc: Exception) -> str:
    text = f"authentication failed for {cfg.username}@{cfg.host}:{cfg.port} (tried: {creds.describe()})"
    allowed = getattr(exc, "allowed_types", None)
    if isinstance(exc, paramiko.BadAuthenticationType) and allowed:
        text += f"; the board accepts only: {', '.join(allowed)}"
    elif creds.password is None and not creds.key_files:
        text += "; set pwd or key_file in [ssh_config], or MSPROF_SSH_PASSWORD"
    return text


def _cause(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text.splitlines()[0][:300]
