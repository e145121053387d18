"""Where and how msprof writes: the one place every writer goes through (databases, summaries, timelines,
the log).

* **Directories** (``output_dir``): msprof's own directories (``sqlite/``, ``summary/``, ``timeline/``,
  ``log/``, and --output) are created as real directories; one that exists as a symlink or as a file of
  another type is refused with a clear error (exit 7), never followed — a collection received from someone
  else may hold ``log -> ~/.ssh``.
* **Never half-written** (``atomic_path``): a result is written to a temporary beside it and renamed into
  place only when complete. Temporaries (``temporary``: created new, never through a link someone put
  there) carry the writer's pid (``.<name>.<pid>.<random>.tmp``; ``.part-<pid>-<name>.db`` from older
  versions), so a later run can tell the leftovers of a killed process from a live writer's files and
  remove them (``remove_stale``).
* **Permissions**: files at most 0640 and directories 0750 (the SS928 tool's umask 0027 rule), narrower
  when the user's umask is narrower (``effective_umask``; temporaries made 0600 are opened up to that) —
  from the CLI and from the library alike.
* **Errors named** (``naming_errors``): a full disk, a read-only directory or a refused permission becomes
  one line naming the path and a documented exit code (6, 7) instead of a traceback.
"""
import contextlib
import errno
import json
import logging
import os
import re
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

try:                        # (imported with the module: when no file can be opened, no module can be either)
    import resource
except ImportError:         # not POSIX
    resource = None
try:
    import fcntl
except ImportError:         # not POSIX: no locks
    fcntl = None

from msprof import trust
from msprof.errors import DataError, DiskSpaceError, OutputError, ResourceError

# msprof's logger (msprof.console's ``log``: console is above this module)
_log = logging.getLogger("msprof")

# The SS928 tool writes its results with umask 0027.
UMASK = 0o027
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# (ENOTDIR: a file where a directory of the path should be, e.g. --output naming a file)
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR)
_TOO_MANY_FILES = (errno.EMFILE, errno.ENFILE)
# msprof's temporaries: ".<name>.<pid>.<random>.tmp" (and ".part-<pid>-<name>.db", written by earlier versions)
_TEMPORARY = re.compile(r"^\..*\.(?P<pid>\d+)\.[^.]*\.tmp$|^\.part-(?P<part>\d+)-.*\.db$")


def restrict_umask() -> int:
    """Make the process umask at least 0027 (narrower stays narrower); return it."""
    mask = effective_umask()
    os.umask(mask)
    return mask


def effective_umask() -> int:
    """The process umask, narrowed to at least UMASK: what every file and directory msprof makes is held to,
    called from the CLI (which narrows the process umask itself) or as a library (which leaves it alone)."""
    current = os.umask(0)
    os.umask(current)
    return current | UMASK


def file_mode() -> int:
    return 0o666 & ~effective_umask()


def dir_mode() -> int:
    return 0o777 & ~effective_umask()


def output_dir(path: Path) -> Path:
    """``path`` as a real directory of msprof's, created when missing (its parents too, as they are: a
    --output the user names may well lie behind a link); a symlink or a non-directory at ``path`` itself is
    refused (OutputError, exit 7)."""
    path = Path(path)
    with naming_errors(path):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            os.makedirs(path.parent, exist_ok=True)
            try:
                os.mkdir(path, dir_mode())
                return path
            except FileExistsError:
                info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OutputError(f"{path} is a symbolic link: msprof does not write through links in a collection "
                          f"(remove it, or {elsewhere()})")
    if not stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{path} exists and is not a directory (remove it, or {elsewhere()})")
    return path


def refuse_links_below(root: Path, path: Path) -> None:
    """The directories from ``root`` (exclusive: a --output the user names may lie behind a link) down to
    ``path`` are msprof's own: one that exists as a symlink or a non-directory is refused (OutputError)."""
    root, path = Path(root), Path(path)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return
    for depth in range(1, len(parts) + 1):
        below = root.joinpath(*parts[:depth])
        try:
            info = os.lstat(below)
        except OSError:
            return                     # (made as a real directory when written)
        if stat.S_ISLNK(info.st_mode):
            raise OutputError(f"{below} is a symbolic link: msprof does not write through links under --output "
                              f"(remove it, or {elsewhere()})")
        if not stat.S_ISDIR(info.st_mode):
            raise OutputError(f"{below} exists and is not a directory (remove it, or {elsewhere()})")


def _nearest_existing(path: Path) -> Path:
    """The closest of ``path`` and its parents that this user can see exists."""
    for candidate in (path, *path.parents):
        try:
            os.lstat(candidate)
            return candidate
        except OSError:
            continue
    return path


def temporary(directory: Path, name: str) -> Path:
    """A new empty temporary file for ``name`` in ``directory`` (readable like a result: see file_mode)."""
    with naming_errors(Path(directory)):
        fd, path = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=directory)
        os.fchmod(fd, file_mode())
        os.close(fd)
    return Path(path)


@contextlib.contextmanager
def atomic_path(target: Path):
    """Yield a temporary path beside ``target``; it replaces ``target`` only if the block succeeds, and is
    removed on every error path."""
    target = Path(target)
    refuse_directory(target)
    tmp = temporary(output_dir(target.parent), target.name)
    try:
        with naming_errors(target):
            yield tmp
            os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def refuse_directory(target: Path) -> None:
    """A directory where msprof writes a file is refused (exit 7) before anything is written for it."""
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(target).st_mode):
            raise OutputError(f"{target} is a directory where msprof writes a file (remove it, or {elsewhere()})")


@contextlib.contextmanager
def atomic_open(target: Path, mode: str = "w", **kwargs):
    """Open a temporary sibling of ``target`` for writing; rename it into place on success."""
    with atomic_path(target) as tmp:
        with open(tmp, mode, **kwargs) as handle:
            yield handle


@contextlib.contextmanager
def naming_errors(path: Path):
    """Turn a full disk, a read-only directory or a refused permission while writing ``path`` into an
    error naming it (exit 6 or 7)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _DISK_FULL:
            raise DiskSpaceError(f"not enough disk space to write {path}: {exc.strerror}") from None
        if exc.errno in _TOO_MANY_FILES:
            raise too_many_open_files(path) from None
        if exc.errno == errno.EISDIR:
            raise OutputError(f"{path} is a directory where msprof writes a file (remove it, or {elsewhere()})") \
                from None
        if exc.errno in (errno.EACCES, errno.EPERM) and _is_input(exc.filename, path):
            raise DataError.unreadable(exc.filename, exc) from None
        if exc.errno in _NOT_WRITABLE:
            # what refused: the nearest existing of the path that failed and its parents (the directory
            # that would not take a new file or subdirectory, or could not be entered), not a missing
            # path, a random temporary's name or the file that was meant
            refused = _nearest_existing(Path(exc.filename) if isinstance(exc.filename, str) else Path(path))
            raise OutputError(f"cannot write {refused}: {exc.strerror} ({elsewhere()})") from None
        raise
    except sqlite3.OperationalError as exc:     # SQLite says it in words
        if "disk is full" in str(exc):
            raise DiskSpaceError(f"not enough disk space to write {path}: {exc}") from None
        if "unable to open" in str(exc) and not _can_open_a_file():
            raise too_many_open_files(path) from None
        if "readonly" in str(exc) or "unable to open" in str(exc):
            raise OutputError(f"cannot write {path}: {exc} ({elsewhere()})") from None
        raise


def too_many_open_files(path=None) -> ResourceError:
    """The error of a process that may open no more files: the limit named (``ulimit -n``), exit 6."""
    try:
        limit = f" (the limit is {resource.getrlimit(resource.RLIMIT_NOFILE)[0]})"
    except (AttributeError, OSError, ValueError):
        limit = ""
    where = f" while writing {path}" if path is not None else ""
    return ResourceError(f"too many open files{where}{limit}: allow more with ulimit -n, e.g. ulimit -n 1024")


def _can_open_a_file() -> bool:
    """Whether this process may open one more file (SQLite says only "unable to open" when it may not)."""
    try:
        os.close(os.open(os.devnull, os.O_RDONLY))
        return True
    except OSError as exc:
        return exc.errno not in _TOO_MANY_FILES


def _is_input(name, path: Path) -> bool:
    """Whether a refused file is one msprof reads (raw data an import decodes while it writes ``path``): it
    exists, outside the directory being written."""
    if not isinstance(name, str) or not os.path.exists(name):
        return False
    written = os.path.abspath(Path(path).parent)
    return os.path.commonpath([written, os.path.abspath(name)]) != written


# Set when the user named an output directory already (--output): then the way out is another one.
output_given = False


def elsewhere() -> str:
    return "choose another --output DIR" if output_given else "write the results elsewhere with --output DIR"


def remove_stale(directory: Path) -> int:
    """Remove the temporaries of msprof processes that no longer run from ``directory``; return how many."""
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        match = _TEMPORARY.match(name)
        if not match:
            continue
        pid = int(match.group("pid") or match.group("part"))
        if pid != os.getpid() and not _alive(pid):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))
                removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:         # another user's process: alive
        return True
    try:                            # a zombie (killed, not yet reaped by init) writes nothing any more
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


# ---------------------------------------------------------------------------------------------------------
# Bookkeeping files a collection holds, and outputs of several files
# ---------------------------------------------------------------------------------------------------------
BOOKKEEPING_LIMIT = 1 << 20


def read_bookkeeping(path: Path, limit: int = BOOKKEEPING_LIMIT) -> Optional[bytes]:
    """The bytes of a file msprof keeps beside its results (a manifest), read as what it may be: someone
    else's. A symbolic link or anything but a regular file is never opened (a FIFO would block, /dev/zero never
    end), nor more than ``limit`` bytes read; such a file is said and taken as absent (None, as a missing one)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file")
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"over {limit} bytes")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                raise OSError(errno.EAGAIN, "replaced while read")
            data = os.read(fd, limit + 1)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _log.warning("%s: not read (%s)", path, exc.strerror)
        return None
    return data if len(data) <= limit else None


def _identity(path: Path) -> Optional[list]:
    """What tells the file msprof wrote at ``path`` from any other put there since: device, inode, size, mtime."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns] if stat.S_ISREG(info.st_mode) else None


class FileSet:
    """An output of several files (a timeline's slices, an export's summary files), replaced as a whole or not
    at all.

    Each file is written to a temporary beside where it goes (``stage``, ``open``; ``adopt`` takes those a
    worker process made). ``commit`` renames them all into place with Ctrl-C, TERM and HUP held off for those
    few renames, removes the files of the set it replaces that it does not write again, and records what it
    wrote in its ``manifest`` (a bookkeeping file beside the database, signed with the user's key:
    msprof.trust). Until then the earlier set is untouched; leaving the block without a commit (an error, an
    interrupt) removes the temporaries. A file of the earlier set is removed only when the manifest proves msprof
    wrote it and no one changed it since (the identity it records: device, inode, size, mtime), or when its name
    is one ``replaces`` matches (a timeline's slices: names msprof gives its own files in its own directory).
    A set that is not ``whole`` (a selection's)
    replaces only the files it writes: the earlier set's others stay, and stay listed, as do the files it
    writes again (they are msprof's still); its other files are not listed."""

    def __init__(self, directory: Path, manifest: Optional[Path] = None, replaces: Optional["re.Pattern"] = None,
                 whole: bool = True):
        self.directory, self.manifest = Path(directory), manifest
        self.replaces, self.whole = replaces, whole
        self.staged: List[Tuple[Path, str]] = []
        self.removed: List[str] = []

    def __enter__(self) -> "FileSet":
        return self

    def __exit__(self, *exc) -> bool:
        self.discard()
        return False

    def stage(self, name: str) -> Path:
        """A new temporary for the file ``name``."""
        refuse_directory(self.directory / name)
        tmp = temporary(output_dir(self.directory), name)
        self.staged.append((tmp, name))
        return tmp

    @contextlib.contextmanager
    def staging(self, name: str):
        """The file ``name``'s temporary (as ``atomic_path``, put in place by the commit)."""
        tmp = self.stage(name)
        with naming_errors(self.directory / name):
            yield tmp

    @contextlib.contextmanager
    def open(self, name: str, mode: str = "w", **kwargs):
        """The file ``name``'s temporary, open for writing."""
        with self.staging(name) as tmp, open(tmp, mode, **kwargs) as handle:
            yield handle

    def adopt(self, staged) -> None:
        """Temporaries (path, name) of this set another process wrote."""
        self.staged += [(Path(tmp), name) for tmp, name in staged]

    def hand_over(self) -> List[Tuple[str, str]]:
        """The staged temporaries (path, name), for another process's set to ``adopt``: this one forgets them."""
        staged, self.staged = self.staged, []
        return [(str(tmp), name) for tmp, name in staged]

    def discard(self) -> None:
        for tmp, _name in self.staged:
            with contextlib.suppress(OSError):
                tmp.unlink()
        self.staged = []

    def commit(self) -> List[Path]:
        """Put the staged files in place of the earlier set; return their paths."""
        earlier = self._earlier()
        names = [name for _tmp, name in self.staged]
        for name in names:
            refuse_directory(self.directory / name)
        with _signals_held():
            for tmp, name in self.staged:
                with naming_errors(self.directory / name):
                    os.replace(tmp, self.directory / name)
            self.staged = []
            self._remove(earlier if self.whole else {}, set(names))
            if self.manifest is not None:
                self._record(names if self.whole else [
                    name for name, identity in earlier.items()
                    if name in names or _identity(self.directory / name) == identity])
        return [self.directory / name for name in names]

    def removed_notice(self, what: str) -> Optional[str]:
        """What to tell of the files the commit removed ("removed N <what>: a, b, …", five named), None if none."""
        gone = self.removed
        listed = ", ".join(gone[:5]) + (", …" if len(gone) > 5 else "")
        return f"removed {len(gone)} {what}: {listed}" if gone else None

    def _earlier(self) -> Dict[str, list]:
        """The files of the earlier set its manifest proves msprof wrote: name → identity."""
        found = _read_manifest(self.manifest) if self.manifest is not None else None
        return found["files"] if found else {}

    def _remove(self, earlier: Dict[str, list], keep: set) -> None:
        try:
            present = os.listdir(self.directory)
        except OSError:
            return
        for name in sorted(present):
            if name in keep:
                continue
            path = self.directory / name
            ours = _identity(path)
            if ours is not None and (earlier.get(name) == ours or self.replaces and self.replaces.fullmatch(name)):
                with naming_errors(path):
                    path.unlink()
                self.removed.append(name)

    def _record(self, names: List[str]) -> None:
        files = {name: _identity(self.directory / name) for name in names}
        body = {"files": files}
        document = dict(body, signature=trust.sign("msprof manifest", json.dumps(body, sort_keys=True)))
        with atomic_open(self.manifest, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(document, sort_keys=True) + "\n")


def _read_manifest(path: Path) -> Optional[dict]:
    """A manifest msprof signed here for this user ({"files"}), else None (said at -v)."""
    data = read_bookkeeping(path)
    if data is None:
        return None
    try:
        document = json.loads(data)
        # (the signed body is every field but the signature: earlier versions also recorded an "about")
        body = {key: value for key, value in document.items() if key != "signature"}
        if trust.signed(document.get("signature"), "msprof manifest", json.dumps(body, sort_keys=True)) and \
                isinstance(body["files"], dict) and all(isinstance(n, str) and "/" not in n for n in body["files"]):
            return body
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    _log.info("%s: not a list msprof wrote here for this user: the files it names are left as they are", path)
    return None


@contextlib.contextmanager
def _signals_held():
    """Ctrl-C, TERM and HUP that come during the block take effect right after it (a set's renames are one
    step): their handlers are put back and the first signal raised again."""
    import signal
    import threading

    held, previous = [], {}
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None and signal.getsignal(sig) not in (signal.SIG_IGN, None):
                previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            signal.raise_signal(held[0])


@contextlib.contextmanager
def directory_lock(directory: Path, on_wait: Callable[[], None]):
    """An exclusive flock on ``directory`` for the block: one msprof at a time, released by the kernel if the
    holder dies. ``on_wait`` says that another holds it, before waiting. Where no lock can be had (no such
    directory, a file system without locks, not POSIX) the block runs without one."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield
        return
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                on_wait()
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                pass
        yield
    finally:
        os.close(fd)
