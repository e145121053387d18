"""Connecting to the board: the TCP connection, host-key checking against our reading of known_hosts, the
login; every failure becomes an :class:`SshError` (exit 3) with a one-line cause, except a refused login,
which :meth:`msprof.collect.board.Board.connect` may answer with a password prompt.
"""
import contextlib
import logging
import os
import shlex
import socket
from pathlib import Path
from typing import List

import paramiko

from msprof.collect import knownhosts
from msprof.collect.config import BoardConfig, Credentials, FileRefused, encrypted_key
from msprof.console import log, notice
from msprof.errors import SshError

# paramiko's transport thread logs errors ("Exception (client): Error reading SSH protocol banner") that
# would reach stderr through logging's last-resort handler; our one-line errors say it better.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


def q(text: str) -> str:
    return shlex.quote(str(text))


def fingerprint(key: paramiko.PKey) -> str:
    """SHA256 fingerprint as OpenSSH prints it (``SHA256:base64-without-padding``)."""
    return knownhosts.fingerprint_blob(key.asbytes())


def user_known_hosts() -> Path:
    return Path(os.path.expanduser("~")) / ".ssh" / "known_hosts"


def known_hosts_files(cfg: BoardConfig) -> List[Path]:
    files = [user_known_hosts()]
    if cfg.known_hosts is not None and cfg.known_hosts not in files:
        files.append(cfg.known_hosts)
    return files


class _HostKeyRefused(Exception):
    def __init__(self, verdict: knownhosts.Verdict, name: str, key: paramiko.PKey):
        super().__init__(name)
        self.verdict, self.name, self.key = verdict, name, key


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Every host key is judged here, against our own reading of the known_hosts files (paramiko's HostKeys
    keeps one key per type and host and does not know patterns or markers, so it is left empty and paramiko
    asks this policy each time). An unknown host is refused, or with ``--accept-new-host-key`` its key is
    appended, like OpenSSH's StrictHostKeyChecking=accept-new; a changed or revoked key is always refused."""

    def __init__(self, lines: List[knownhosts.HostLine], accept_new: bool, target: Path):
        self.lines, self.accept_new, self.target = lines, accept_new, target

    def missing_host_key(self, client, hostname, key):
        verdict = knownhosts.check(self.lines, hostname, key.get_name(), key.asbytes())
        if verdict.status == "known":
            log.info("host key of %s: %s %s (%s)", hostname, key.get_name(), fingerprint(key),
                     knownhosts.describe(verdict.lines))
            return
        if verdict.status != "unknown" or not self.accept_new:
            raise _HostKeyRefused(verdict, hostname, key)
        knownhosts.append(self.target, hostname, key.get_name(), key.get_base64())
        notice("msprof: added the host key of %s (%s %s) to %s", hostname, key.get_name(), fingerprint(key),
               self.target)


def open_client(cfg: BoardConfig, creds: Credentials, accept_new_host_key: bool) -> paramiko.SSHClient:
    files = known_hosts_files(cfg)
    lines = []
    for path in files:
        try:
            lines.extend(knownhosts.read_lines(path))
        except (OSError, FileRefused) as exc:
            raise SshError(f"cannot read known_hosts file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    name = knownhosts.host_entry_name(cfg.host, cfg.port)

    def transport_factory(sock, **kwargs):
        transport = paramiko.Transport(sock, **kwargs)
        options = transport.get_security_options()
        options.key_types = knownhosts.preferred_key_types(lines, name, options.key_types)
        return transport

    client = paramiko.SSHClient()
    target = cfg.known_hosts if cfg.known_hosts is not None else user_known_hosts()
    client.set_missing_host_key_policy(_HostKeyPolicy(lines, accept_new_host_key, target))
    where = f"{cfg.host}:{cfg.port}"
    sock = _tcp_connect(cfg)
    try:
        client.connect(cfg.host, port=cfg.port, username=cfg.username, password=creds.password,
                       passphrase=creds.passphrase, key_filename=creds.key_files or None, allow_agent=creds.allow_agent,
                       look_for_keys=creds.look_for_keys, sock=sock, timeout=cfg.timeout,
                       banner_timeout=cfg.timeout, auth_timeout=cfg.timeout, channel_timeout=cfg.timeout,
                       transport_factory=transport_factory)
    except paramiko.AuthenticationException:
        _close(client, sock)
        raise
    except _HostKeyRefused as exc:
        _close(client, sock)
        raise SshError(_host_key_message(exc, target)) from None
    except (socket.timeout, TimeoutError):
        _close(client, sock)
        raise SshError(f"SSH handshake with {where} timed out after {cfg.timeout:g} s") from None
    except paramiko.SSHException as exc:
        _close(client, sock)
        if "No authentication methods available" in str(exc):
            # nothing to offer (no pwd, key_file or agent key): an authentication failure, which a terminal may
            # still answer with a password
            raise paramiko.AuthenticationException(str(exc)) from None
        raise SshError(_handshake_message(exc, where, cfg.timeout)) from None
    except (OSError, EOFError) as exc:
        _close(client, sock)
        raise SshError(f"connection to {where} failed: {cause(exc)}") from None
    transport = client.get_transport()
    transport.set_keepalive(15)
    return client


def _tcp_connect(cfg: BoardConfig) -> socket.socket:
    """The TCP connection to the board, with TCP_NODELAY: without it about one small SFTP exchange in ten
    stalls on Nagle's algorithm and the peer's delayed ACK."""
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
    return sock


def _handshake_message(exc: paramiko.SSHException, where: str, timeout: float) -> str:
    text = str(exc)
    if "No existing session" in text or "banner" in text.lower():
        if "reset" in text.lower() or "EOF" in text:
            return f"{where} closed the connection before the SSH banner (not an SSH server, or overloaded)"
        return f"no SSH server answered on {where} within {timeout:g} s (wrong port, or the board's sshd is stuck?)"
    return f"SSH handshake with {where} failed: {cause(exc)}"


def _host_key_message(exc: _HostKeyRefused, target: Path) -> str:
    name, key, verdict = exc.name, exc.key, exc.verdict
    now = f"{key.get_name()} {fingerprint(key)}"
    where = knownhosts.describe(verdict.lines)
    if verdict.status == "revoked":
        return (f"the host key of {name} ({now}) is marked @revoked in {where}: it must never be accepted "
                f"(its private key may have been stolen). Not connecting.")
    if verdict.status == "changed":
        old_type, old_print = knownhosts.first_type(verdict.lines)
        # (-f: the file that holds the old line, which need not be ~/.ssh/known_hosts, ssh-keygen's default)
        remove = "; ".join(f"ssh-keygen -R {q(name)} -f {q(str(path))}"
                           for path in dict.fromkeys(line.path for line in verdict.lines))
        return (f"the host key of {name} has CHANGED (now {now}, known {old_type} {old_print}). If the board "
                f"was reflashed or replaced this is expected: remove the old line from {where} (or run "
                f"{remove}), then rerun with --accept-new-host-key. Otherwise someone may be "
                f"intercepting the connection. Not connecting.")
    return (f"the host key of {name} is not known: {now}; check it on the board (ssh-keygen -lf "
            f"/etc/ssh/ssh_host_{_short_type(key)}_key.pub; on a dropbear board: dropbearkey -y -f "
            f"/etc/dropbear/dropbear_{_short_type(key)}_host_key) and rerun with --accept-new-host-key to add it "
            f"to {target}")


def _short_type(key) -> str:
    name = key.get_name()
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(name, "ecdsa" if "ecdsa" in name else name)


def _close(client, sock) -> None:
    with contextlib.suppress(Exception):
        client.close()
    with contextlib.suppress(Exception):
        sock.close()


def auth_message(cfg: BoardConfig, creds: Credentials, exc: Exception) -> str:
    text = f"authentication failed for {cfg.username}@{cfg.host}:{cfg.port} (tried: {creds.describe()})"
    allowed = getattr(exc, "allowed_types", None)
    if isinstance(exc, paramiko.BadAuthenticationType) and allowed:
        text += f"; the board accepts only: {', '.join(allowed)}"
    elif creds.password is None and not creds.key_files:
        text += "; set pwd or key_file in [ssh_config], or MSPROF_SSH_PASSWORD"
    elif creds.password is None and creds.passphrase is None:
        key = encrypted_key(creds)
        if key is not None:
            text += (f"; the key_file {key} is encrypted: run on a terminal to be asked its passphrase, or load it "
                     "into an SSH agent")
    return text


def cause(exc: BaseException) -> str:
    """An exception as a short cause for a one-line message: the system's words for an OSError."""
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text.splitlines()[0][:300]
