"""The board ini (``[ssh_config]``) and where the SSH credentials come from.

Keys of ``[ssh_config]``::

    ip           board address (IPv4/IPv6 literal or host name)            required
    username     login user                                                 required
    pwd          password (optional; see the auth order below)
    port         TCP port, default 22
    key_file     private key file (optional)
    known_hosts  extra known_hosts file, checked after ~/.ssh/known_hosts; new keys accepted with
                 --accept-new-host-key are appended to it when given
    timeout      seconds for TCP connect, SSH banner, authentication and channel opens (default 15)
    remote_path  directories prepended to PATH for every remote command (boards whose non-interactive
                 PATH lacks the tools, e.g. /sbin for mount)
    transfer     how JOB directories are pulled: auto (tar when the board has it, else SFTP), tar, sftp

The password is kept in :class:`BoardConfig` with ``repr=False`` and is never logged or written anywhere.
"""
import configparser
import getpass
import os
import re
import shlex
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from msprof.console import log
from msprof.errors import ConfigError

SECTION = "ssh_config"
KNOWN_KEYS = ("ip", "username", "pwd", "port", "key_file", "known_hosts", "timeout", "remote_path", "transfer")
PASSWORD_ENV = "MSPROF_SSH_PASSWORD"
DEFAULT_TIMEOUT = 15.0
MAX_INI_BYTES = 1 << 20  # a board ini is a dozen lines; anything bigger is the wrong file


@dataclass
class BoardConfig:
    host: str
    username: str
    port: int = 22
    password: Optional[str] = field(default=None, repr=False)
    key_file: Optional[Path] = None
    known_hosts: Optional[Path] = None
    timeout: float = DEFAULT_TIMEOUT
    remote_path: Optional[str] = None
    transfer: str = "auto"
    source: Optional[Path] = None

    @property
    def address(self) -> str:
        return f"{self.username}@{self.host}:{self.port}"


class FileRefused(Exception):
    """A local file msprof will not read: not a regular file, or too large. The message says which."""


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    A FIFO, a device (``/dev/zero``) or a huge file is refused (:class:`FileRefused`) before anything is
    read: the type is checked with stat before opening, and again on the descriptor, which is opened
    non-blocking so that a FIFO swapped in between cannot hang us. OSErrors (missing, permission, is a
    directory) pass through for the caller to word.
    """
    _check_regular(os.stat(path), limit)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        _check_regular(os.fstat(fd), limit)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(65536, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:  # grew while we read it
        raise FileRefused(f"is larger than {_mib(limit)}")
    return b"".join(chunks)


def _check_regular(st: os.stat_result, limit: int) -> None:
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "is a directory")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
                else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a file")
        raise FileRefused(f"is not a regular file ({kind})")
    if st.st_size > limit:
        raise FileRefused(f"is too large ({_mib(st.st_size)}; at most {_mib(limit)} is read)")


def _mib(size: int) -> str:
    return f"{size / 1048576:.1f} MiB" if size % 1048576 else f"{size // 1048576} MiB"


# Plain ASCII numbers: int() and float() also take '3_5857' and non-ASCII digits such as '٢٢'.
_PORT = re.compile(r"[0-9]{1,5}")
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def _is_public_key(path: Path) -> bool:
    """An OpenSSH public key line ("ssh-ed25519 AAAA…", "ecdsa-sha2-…", "sk-…"): what key_file must not be."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
    except OSError:               # (the connection says why it cannot be read)
        return False
    return head.startswith((b"ssh-", b"ecdsa-", b"sk-")) and b" AAAA" in head


def load_config(path: Path) -> BoardConfig:
    """Read and validate the ini; raise ConfigError (exit 5) naming the file and key on any problem."""
    path = Path(path)
    values = _read_section(path)

    def fail(key, what):        # (``what`` begins with its own space or colon)
        raise ConfigError(f"config file {path}: [{SECTION}] key '{key}'{what}")

    host = _required(values, "ip", fail)
    if any(c.isspace() or ord(c) < 32 for c in host) or host.startswith("-"):
        fail("ip", f" is not a valid address: {host!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    username = _required(values, "username", fail)
    if any(c.isspace() or ord(c) < 32 for c in username) or username.startswith("-"):
        fail("username", " is not a valid user name")
    port, timeout = _port(values, fail), _timeout(values, fail)
    key_file, known_hosts = _key_file(values, path, fail), _known_hosts(values, path, fail)
    transfer = (values.get("transfer") or "auto").lower()
    if transfer not in ("auto", "tar", "sftp"):
        fail("transfer", f" must be auto, tar or sftp, not {transfer!r}")
    remote_path = _remote_path(values, fail)
    password = values.get("pwd") or None
    if password is not None:
        _warn_if_readable(path)
    return BoardConfig(host=host, username=username, port=port, password=password, key_file=key_file,
                       known_hosts=known_hosts, timeout=timeout, remote_path=remote_path, transfer=transfer,
                       source=path)


def _read_section(path: Path) -> dict:
    """The keys of [ssh_config], stripped; a file that cannot be read or parsed is a ConfigError naming it."""
    # raw: a '%' in a password is not interpolation. Inline comments need whitespace before ';' or '#', so a
    # password such as 'a;b' is kept whole (docs/collect.md uses '; comments' after values).
    parser = configparser.RawConfigParser(inline_comment_prefixes=(";", "#"))
    try:
        text = read_small_file(path, MAX_INI_BYTES).decode("utf-8-sig")
        parser.read_string(text, source=str(path))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory") from None
    except PermissionError:
        raise ConfigError(f"config file {path} is not readable (permission denied)") from None
    except FileRefused as exc:
        raise ConfigError(f"config file {path} {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except configparser.Error as exc:
        raise ConfigError(_parse_error(path, exc)) from None
    if not parser.has_section(SECTION):
        raise ConfigError(f"config file {path} has no [{SECTION}] section")
    values = {k.lower(): v.strip() for k, v in parser.items(SECTION)}
    for key, value in values.items():
        # configparser takes an indented line for the value above it continued ("pwd = ..." under ip would
        # become part of the address, and be printed in its message): no key of ours spans lines
        if "\n" in value:
            raise ConfigError(f"config file {path}: [{SECTION}] key '{key}' runs over several lines (an indented "
                              "line continues the value above it): remove the indent")
    for key in values:
        if key not in KNOWN_KEYS:
            log.warning("%s: unknown key %r in [%s] ignored (known: %s)", path, key, SECTION, ", ".join(KNOWN_KEYS))
    return values


def _parse_error(path: Path, exc: configparser.Error) -> str:
    """configparser's messages can quote the offending line, which may hold the password: say less (a key's
    name, never a value or a line)."""
    line = getattr(exc, "lineno", None) or next((n for n, _ in getattr(exc, "errors", None) or ()), None)
    where = f" (line {line})" if line else ""
    if isinstance(exc, configparser.DuplicateOptionError):
        what = f"key '{exc.option}' is given twice"
    elif isinstance(exc, configparser.DuplicateSectionError):
        what = f"section [{exc.section}] is given twice"
    elif isinstance(exc, configparser.MissingSectionHeaderError):
        what = f"a key before the first [section] (expected [{SECTION}] first)"
    elif isinstance(exc, configparser.ParsingError):
        what = "a line that is neither [section], key = value nor a comment"
    else:
        what = type(exc).__name__.replace("Error", " error")
    return f"config file {path} is not a valid ini file{where}: {what}"


def _required(values: dict, key: str, fail) -> str:
    value = values.get(key, "")
    if not value:
        fail(key, " is missing or empty")
    return value


def _port(values: dict, fail) -> int:
    text = values.get("port") or "22"
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        fail("port", f" must be a number 1-65535, not {text!r}")
    return int(text)


def _timeout(values: dict, fail) -> float:
    text = values.get("timeout") or str(DEFAULT_TIMEOUT)
    if not _SECONDS.fullmatch(text) or not 0 < float(text) <= 3600:
        fail("timeout", f" must be seconds (0-3600], not {text!r}")
    return float(text)


def _local_path(value: str, ini: Path) -> Path:
    """A path from the ini: ``~`` expanded, relative to the ini's directory."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else ini.parent / path


def _key_file(values: dict, ini: Path, fail) -> Optional[Path]:
    if not values.get("key_file"):
        return None
    key_file = _local_path(values["key_file"], ini)
    if not key_file.is_file():
        fail("key_file", f": {key_file} is not a file")
    if _is_public_key(key_file):
        fail("key_file", f": {key_file} is a public key; give its private key (the file without .pub)")
    return key_file


def _known_hosts(values: dict, ini: Path, fail) -> Optional[Path]:
    if not values.get("known_hosts"):
        return None
    known_hosts = _local_path(values["known_hosts"], ini)
    if known_hosts.exists() and not known_hosts.is_file():
        fail("known_hosts", f": {known_hosts} is not a file")
    return known_hosts


def _remote_path(values: dict, fail) -> Optional[str]:
    remote_path = values.get("remote_path") or None
    if remote_path and any(ord(c) < 32 for c in remote_path):
        fail("remote_path", " contains a control character")
    if remote_path and not all(part.startswith("/") for part in remote_path.split(":")):
        fail("remote_path", f" must be absolute directories joined by ':', not {remote_path!r}")
    return remote_path


def _warn_if_readable(path: Path) -> None:
    if os.name != "posix":
        return
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return
    if mode & 0o044:
        who = "group and others" if mode & 0o044 == 0o044 else ("group" if mode & 0o040 else "others")
        log.warning("%s holds a password and is readable by %s (mode %04o); run: chmod 600 %s",
                    path, who, mode, shlex.quote(str(path)))


@dataclass
class Credentials:
    """What to offer the server, in order (cli.md: ini pwd / key_file, agent and default keys, env, prompt)."""

    password: Optional[str] = field(default=None, repr=False)
    password_source: Optional[str] = None  # "ini", "env", "prompt"
    key_files: List[str] = field(default_factory=list)
    # what opens an encrypted key file (asked for on a terminal): never offered to the board as a password
    passphrase: Optional[str] = field(default=None, repr=False)
    allow_agent: bool = False
    look_for_keys: bool = False

    def describe(self) -> str:
        parts = []
        if self.key_files:
            parts.append("key_file" + (" (passphrase from the prompt)" if self.passphrase is not None else ""))
        if self.allow_agent:
            parts.append("SSH agent/default keys")
        if self.password is not None:
            parts.append(f"password ({self.password_source})")
        return ", ".join(parts) or "none"


def credentials(cfg: BoardConfig) -> Credentials:
    """The first attempt. An explicit ini credential (pwd or key_file) is tried alone, so that a long
    list of agent keys cannot exhaust the board's MaxAuthTries before the password is offered."""
    env_password = os.environ.get(PASSWORD_ENV) or None
    if cfg.password is not None or cfg.key_file is not None:
        password, source = (cfg.password, "ini") if cfg.password is not None else (env_password, "env")
        return Credentials(password=password, password_source=source if password is not None else None,
                           key_files=[str(cfg.key_file)] if cfg.key_file else [])
    return Credentials(password=env_password, password_source="env" if env_password else None,
                       allow_agent=True, look_for_keys=True)


def can_prompt() -> bool:
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def encrypted_key(creds: Credentials) -> Optional[str]:
    """The key file of ``creds`` that needs a passphrase (paramiko takes the password for it), if any."""
    import paramiko

    for path in creds.key_files:
        for kind in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
            try:
                kind.from_private_key_file(path)
                break
            except paramiko.PasswordRequiredException:
                return path
            except (paramiko.SSHException, OSError, ValueError):
                continue
    return None


def prompt_password(cfg: BoardConfig, tried: Credentials) -> Credentials:
    """Last resort on a terminal: ask for the password (not echoed) — or, when the key file of the first
    attempt is encrypted, for its passphrase, and offer the key again with it."""
    key = encrypted_key(tried)
    if key is not None:
        passphrase = getpass.getpass(f"passphrase for {key}: ", stream=sys.stderr)
        return Credentials(key_files=tried.key_files, passphrase=passphrase)
    password = getpass.getpass(f"password for {cfg.username}@{cfg.host}: ", stream=sys.stderr)
    return Credentials(password=password, password_source="prompt")
