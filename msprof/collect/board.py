"""One SSH session to the board (paramiko): run commands, move files. Connecting (host keys, the login) is
:mod:`msprof.collect.connect`'s; every failure to reach or log in to the board is an :class:`SshError` (exit 3)
with a one-line cause.
"""
import contextlib
import errno
import stat
import time
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import paramiko

from msprof.collect.config import BoardConfig, can_prompt, credentials, prompt_password
from msprof.collect.connect import auth_message, cause, open_client, q
from msprof.console import log
from msprof.errors import RemoteError, SshError

SFTP_TIMEOUT = 30.0  # seconds without progress on an SFTP or transfer channel before giving up
PID_MARK = b"@@PID "
POLL_MIN, POLL_MAX = 0.001, 0.05  # seconds between looks at a running command's channel
EXIT_GRACE = 2.0  # seconds to wait for the rest of a command's output after its exit status
DRAIN_CHUNKS = 8  # chunks read from each of a command's outputs between two looks at the clock


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


class _Running:
    """A running command's channel: its output passed to the callbacks, the ``@@PID`` line taken off stderr."""

    def __init__(self, channel: paramiko.Channel, on_stdout, on_stderr, track_pid: bool):
        self.channel = channel
        self.on_stdout = on_stdout or (lambda data: None)
        self.on_stderr = on_stderr or (lambda data: None)
        self.header = b"" if track_pid else None  # bytes of stderr before the @@PID line is complete
        self.pgid = None
        self.tail = b""

    def take_stderr(self, data: bytes) -> None:
        if self.header is not None:
            self.header += data
            if b"\n" not in self.header and len(self.header) < 256:
                return
            first, _, rest = self.header.partition(b"\n")
            self.header = None
            if first.startswith(PID_MARK) and first[len(PID_MARK):].strip().isdigit():
                self.pgid = int(first[len(PID_MARK):].strip())
                data = rest
            else:
                data = first + b"\n" + rest
        if data:
            self.tail = (self.tail + data)[-4096:]
            self.on_stderr(data)

    def end_header(self) -> None:
        """Output that ended before the header's newline is output all the same."""
        if self.header:
            data, self.header = self.header, None
            self.take_stderr(data)

    def drain(self) -> bool:
        """Read a few chunks of each output: a command writing faster than the callbacks take its output still
        meets its deadline, and its stderr is read while stdout flows."""
        channel, got = self.channel, False
        for _ in range(DRAIN_CHUNKS):
            more = False
            if channel.recv_ready():
                self.on_stdout(channel.recv(65536))
                more = True
            if channel.recv_stderr_ready():
                self.take_stderr(channel.recv_stderr(65536))
                more = True
            if not more:
                break
            got = True
        return got


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
            return cls(cfg, open_client(cfg, creds, accept_new_host_key), creds.describe())
        except paramiko.AuthenticationException as exc:
            if creds.password is None and can_prompt():
                log.info("authentication with %s failed; asking for the password", creds.describe())
                creds = prompt_password(cfg, creds)
                try:
                    return cls(cfg, open_client(cfg, creds, accept_new_host_key), creds.describe())
                except paramiko.AuthenticationException as again:
                    exc = again
            raise SshError(auth_message(cfg, creds, exc)) from None

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
            raise RemoteError(f"cannot open a channel to {self.cfg.host}: {cause(exc)}") from None

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
        channel = self._session()
        full = (f'echo "@@PID $$" >&2; {command}') if track_pid else command
        channel.exec_command(self.wrap(full))
        if stdin:
            channel.sendall(stdin)
        channel.shutdown_write()
        running = _Running(channel, on_stdout, on_stderr, track_pid)
        deadline = time.monotonic() + timeout if timeout else None
        try:
            timed_out = self._follow(running, deadline)
        except KeyboardInterrupt:
            self.kill_group(running.pgid)
            raise
        finally:
            running.end_header()
        if timed_out:
            channel.close()
            return RunResult(-1, timed_out=True, stderr_tail=running.tail)
        status = channel.recv_exit_status() if channel.exit_status_ready() else -1
        lost = status == -1 and not self.is_active()
        channel.close()
        return RunResult(status, connection_lost=lost, stderr_tail=running.tail)

    def _follow(self, running: "_Running", deadline: Optional[float]) -> bool:
        """Pass on the command's output until it ends (True: its deadline passed, and its group was killed).

        The channel is polled, never select()ed: select() makes paramiko give the channel a pipe, which close()
        closes while the transport thread may still be writing to it for data arriving late; the EBADF that
        thread gets kills the whole connection (the SFTP session with it).
        """
        channel = running.channel
        pause, exited, ended = POLL_MIN, None, False
        while True:
            got = running.drain()
            if channel.closed or (channel.eof_received and channel.exit_status_ready()):
                ended = True        # nothing more will come: what is buffered is read below
                break
            if not self.is_active():
                break
            now = time.monotonic()
            if channel.exit_status_ready():
                # sshd reports the exit when the command ends and sends what its pipes still hold after it:
                # wait for that rest (EOF), but not forever, as a daemon the command started may keep the
                # pipes open
                exited = exited or now
                if now - exited > EXIT_GRACE:
                    break
            if deadline is not None and now > deadline:
                self.kill_group(running.pgid)
                return True
            if got:
                pause = POLL_MIN
                continue
            # status_event wakes us at once for the exit; output is picked up within ``pause``
            if exited is None:
                channel.status_event.wait(pause)
            else:
                time.sleep(pause)
            pause = min(pause * 2, POLL_MAX)
        while running.drain() and ended:    # (what the last pass left; all of it once the channel has ended)
            pass
        return False

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
                raise RemoteError(f"cannot start SFTP on {self.cfg.host}: {cause(exc)}") from None
            self._sftp.get_channel().settimeout(max(SFTP_TIMEOUT, self.cfg.timeout))
        return self._sftp

    def home(self) -> str:
        return self.sftp.normalize(".")

    def stat(self, path: str):
        """``path``'s attributes on the board, None when it does not exist; a path the login may not look at is
        a RemoteError naming it (exit 4)."""
        try:
            return self.sftp.stat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RemoteError(f"cannot look at {path} on the board: {cause(exc)}") from None

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
                raise RemoteError(f"cannot create {path} on the board: {cause(exc)}") from None
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
