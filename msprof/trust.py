"""What msprof signs, so that it believes only what it made itself, on this machine, for this user.

A collection comes from elsewhere, with whatever its sender put in it: a ``sqlite/msprof.db`` whose
bookkeeping says it is current, a list of files an export "wrote". Sizes, times and hashes are all the
sender's to choose. What the sender cannot make is a signature with a key they do not have: msprof keeps a
secret key per user (``key``: 32 random bytes in ``$XDG_CACHE_HOME/msprof/key``, by default
``~/.cache/msprof/key``, mode 0600, made on first use) and signs with it (HMAC-SHA256) what it records — with
the identity (device and inode) of the file it records it for, so that even a copy of a file this user
signed, put in another place, is not believed. A cache: when the key is removed, a new one is made and every
database is rebuilt once, from its raw data.

A key file that is not this user's alone (a link, another owner, readable or writable by others) is not
used: msprof says so once and signs with a key of its own process only (databases are then rebuilt by every
command until the file is removed). docs/security.md says what this guards against, and what not.
"""
import errno
import hashlib
import hmac
import logging
import os
import stat
from pathlib import Path
from typing import Optional

KEY_BYTES = 32
_key: Optional[bytes] = None


def key_path() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "msprof" / "key"


def sign(*parts) -> str:
    """The signature of ``parts`` (their texts, in order) with this user's key."""
    message = "\0".join(map(str, parts)).encode("utf-8", "surrogateescape")
    return hmac.new(_the_key(), message, hashlib.sha256).hexdigest()


def signed(signature, *parts) -> bool:
    """Whether ``signature`` is this user's signature of ``parts``."""
    return isinstance(signature, str) and hmac.compare_digest(signature, sign(*parts))


def identity(info: os.stat_result) -> str:
    """What tells a file from its copies: its device and inode (a rename keeps them, a copy does not)."""
    return f"{info.st_dev}:{info.st_ino}"


def _the_key() -> bytes:
    global _key
    if _key is None:
        _key = _load_or_make(key_path())
    return _key


def _load_or_make(path: Path) -> bytes:
    log = logging.getLogger("msprof")          # (msprof.console's log; console is above this module)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        log.warning("%s: not used (%s): msprof's databases are rebuilt by every command until it is removed",
                    path, getattr(exc, "strerror", None) or exc)
        return os.urandom(KEY_BYTES)
    try:
        return _make(path)
    except OSError as exc:
        log.warning("cannot keep msprof's key in %s (%s): its databases are rebuilt by every command", path,
                    exc.strerror)
        return os.urandom(KEY_BYTES)


def _read(path: Path) -> bytes:
    """The key in ``path``, if it is this user's alone (a regular file, not a link, mode 0600 or narrower)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise ValueError("another user's")
        if info.st_mode & 0o077:
            raise ValueError(f"others may read or change it: mode {stat.S_IMODE(info.st_mode):04o}")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise ValueError(f"{len(data)} bytes, not {KEY_BYTES}")
    return data


def _make(path: Path) -> bytes:
    """A new key, written whole to a temporary and linked into place: of two processes making it at once, the
    second reads the first's."""
    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    data = os.urandom(KEY_BYTES)
    tmp = path.with_name(f".key.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            return _read(path)
        os.replace(tmp, path)            # (a file system without hard links)
        return data
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return data
