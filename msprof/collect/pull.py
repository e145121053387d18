"""Download JOB directories from the board: into ``<output>/.partial/JOB…``, verified, then renamed.

Names coming from the board are validated before they touch the local disk: no ``/`` or ``\\``, no ``.`` or
``..``, no control characters, valid UTF-8 (a JOB directory name also only ``[A-Za-z0-9_.-]``, see
:mod:`msprof.collect.names`). The SFTP listing is checked against the board's own ``find``: an SFTP server
silently leaves out what it cannot stat (OpenSSH's does for paths longer than PATH_MAX). The tar stream is
extracted member by member by this module (Python 3.9 has no ``tarfile`` extraction filters): only
directories and regular files (plus hard links to files already extracted) inside the one expected JOB
directory are written, with files created ``O_EXCL|O_NOFOLLOW``.
"""
import contextlib
import filecmp
import os
import re
import shutil
import socket
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import paramiko

from msprof.collect.board import SFTP_TIMEOUT, Board, q
from msprof.collect.names import is_job_name
from msprof.paths import printable
from msprof.console import log
from msprof.errors import DiskSpaceError, RemoteError
from msprof.outputs import effective_umask

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
SMALL_FILE = 64 * 1024
CHUNK = 1 << 20


class Unpullable(RemoteError):
    """This JOB directory cannot be pulled safely or completely (a name, a listing); the others can."""


def check_name(name: str, where: str = "") -> str:
    """Refuse a remote file name that could escape or confuse the local tree."""
    bad = None
    if not name or name in (".", ".."):
        bad = "empty, '.' or '..'"
    elif "/" in name or "\\" in name:
        bad = "a path separator"
    elif _CONTROL.search(name):
        bad = "a control character"
    elif any(0xDC80 <= ord(c) <= 0xDCFF for c in name):
        bad = "bytes that are not UTF-8"
    elif len(name.encode("utf-8", "surrogateescape")) > 255:
        bad = "more than 255 bytes"
    if bad:
        raise Unpullable(f"the board sent an unsafe file name '{printable(name)}'"
                         f"{' in ' + printable(where) if where else ''} ({bad}); refused")
    return name


def check_job_name(name: str) -> str:
    if not is_job_name(name):
        raise Unpullable(f"the board wrote a JOB directory named '{printable(name)}': only letters, digits and "
                         "_ . - are accepted in a JOB name; not pulled")
    return name


def check_relpath(path: str) -> List[str]:
    """Split a relative posix path from the board into validated components."""
    text = path
    while text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/")
    if not text or text.startswith("/"):
        raise Unpullable(f"the board sent an unsafe path '{printable(path)}' (absolute or empty); refused")
    parts = text.split("/")
    for part in parts:
        check_name(part, path)
    return parts


@dataclass
class RemoteFile:
    rel: str  # posix path relative to the profiling dir, starting with the JOB name
    size: int
    mode: int
    mtime: int


@dataclass
class Manifest:
    job: str
    dirs: List[str] = field(default_factory=list)
    files: Dict[str, RemoteFile] = field(default_factory=dict)
    others: List[str] = field(default_factory=list)  # symlinks, devices…: listed, not pulled

    @property
    def total(self) -> int:
        return sum(f.size for f in self.files.values())


def _listdir(board: Board, path: str):
    try:
        return board.sftp.listdir_attr(path)
    except UnicodeDecodeError as exc:  # paramiko decodes names as UTF-8; exc.object holds the raw name
        raise Unpullable(f"the board has a file name that is not UTF-8 in {printable(path)}: "
                         f"'{printable(exc.object)}'; refused") from None
    except (OSError, paramiko.SSHException, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise RemoteError(f"cannot list {printable(path)} on the board: {_why(exc)}") from None


def list_jobs(board: Board, profiling_dir: str) -> List[str]:
    """Names of the JOB* directories directly under ``profiling_dir`` (not yet checked: see check_job_name)."""
    try:
        entries = _listdir(board, profiling_dir)
    except FileNotFoundError:
        return []
    return sorted(e.filename for e in entries if e.filename.startswith("JOB") and stat.S_ISDIR(e.st_mode or 0))


def manifest(board: Board, profiling_dir: str, job: str) -> Manifest:
    """Walk one JOB directory over SFTP (lstat semantics): its directories and regular files with sizes,
    checked against the board's own listing (:func:`cross_check`)."""
    check_job_name(job)
    result = Manifest(job, dirs=[job])
    pending = [job]
    while pending:
        rel_dir = pending.pop()
        try:
            entries = _listdir(board, f"{profiling_dir}/{rel_dir}")
        except FileNotFoundError:
            raise RemoteError(f"{printable(profiling_dir)}/{printable(rel_dir)} disappeared from the board "
                              "while it was listed") from None
        for entry in entries:
            name = check_name(entry.filename, f"{profiling_dir}/{rel_dir}")
            rel = f"{rel_dir}/{name}"
            mode = entry.st_mode or 0
            if stat.S_ISDIR(mode):
                result.dirs.append(rel)
                pending.append(rel)
            elif stat.S_ISREG(mode):
                result.files[rel] = RemoteFile(rel, entry.st_size or 0, stat.S_IMODE(mode), int(entry.st_mtime or 0))
            else:
                result.others.append(rel)
                log.warning("skipping %s on the board: not a regular file or directory", rel)
    cross_check(board, profiling_dir, result)
    return result


def cross_check(board: Board, profiling_dir: str, found: Manifest) -> None:
    """Compare the SFTP walk with ``find`` run on the board. OpenSSH's sftp-server leaves out, without an
    error, every entry whose path is too long to stat (deeper than PATH_MAX), so a whole subtree could
    otherwise be missing from a pull that reports success."""
    # Plain POSIX find (no -print0, which small busybox builds lack): one path per line is exact here, as a
    # name with a newline that the SFTP walk saw was refused already, and one it did not see is missing anyway.
    status, out, err = board.exec(f"cd {q(profiling_dir)} && find {q(found.job)}")
    if status == 127:
        log.info("no find on the board: the SFTP listing of %s is not cross-checked", found.job)
        return
    if status != 0:
        lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        raise Unpullable(f"the board cannot list all of {found.job} (find exit {status}"
                         f"{': ' + printable(lines[-1].strip()[:300]) if lines else ''}); not pulled")
    listed = {name.decode("utf-8", "surrogateescape") for name in out.split(b"\n") if name}
    missing = sorted(listed - set(found.dirs) - set(found.files) - set(found.others), key=lambda p: (len(p), p))
    if missing:
        first = missing[0]
        shown = printable(first if len(first) <= 160 else first[:70] + " … " + first[-70:])
        raise Unpullable(f"{found.job} is incomplete over SFTP: {len(missing)} of the {len(listed)} entries "
                         f"find lists on the board were not listed by its SFTP server, e.g. {shown} "
                         f"(a path of {len(profiling_dir.encode()) + 1 + len(first.encode('utf-8', 'surrogateescape'))}"
                         " bytes on the board: deeper than its PATH_MAX?); not pulled")


def same_contents(staged_root: Path, output: Path, found: Manifest) -> bool:
    """Whether every file of the manifest, just pulled under ``staged_root``, has the same bytes under
    ``output`` (names and sizes alone say nothing: a second run of a simulator or a board whose clock was
    reset writes a JOB of the same name, with files of the same sizes and other records)."""
    try:
        return all(filecmp.cmp(staged_root / rel, output / rel, shallow=False) for rel in found.files)
    except OSError:         # a local file that cannot be read: not known to be the same, so not replaced
        return False


def local_state(output: Path, found: Manifest) -> str:
    """'absent', 'same sizes' (every remote file present with its size: maybe the same JOB, to be compared once
    pulled) or 'different'."""
    local = output / found.job
    if not os.path.lexists(local):
        return "absent"
    if local.is_symlink() or not local.is_dir():
        return "different"
    for rel, remote in found.files.items():
        path = output / rel
        try:
            st = os.lstat(path)
        except OSError:
            return "different"
        if not stat.S_ISREG(st.st_mode) or st.st_size != remote.size:
            return "different"
    return "same sizes"


def kib(size: int) -> str:
    """A size for people: KiB below 10 MiB (a few JOB files: "0.0 MB" said nothing), MiB above."""
    return f"{size / 1024:.0f} KiB" if size < 10 * 1024 * 1024 else f"{size / 1048576:.1f} MiB"


def check_local_space(output: Path, needed: int) -> None:
    free = shutil.disk_usage(output).free
    if needed > free:
        raise DiskSpaceError(f"not enough local disk space in {output}: the JOB directories need {kib(needed)}, "
                             f"{kib(free)} free")


def pull_job(board: Board, profiling_dir: str, found: Manifest, partial_root: Path, method: str,
             progress: Optional[Callable[[int], None]] = None) -> Path:
    """Download one JOB into ``partial_root/JOB`` (replacing an earlier partial copy) and verify it."""
    target = partial_root / found.job
    if os.path.lexists(target):
        remove_tree(target)
    partial_root.mkdir(parents=True, exist_ok=True)
    try:
        if method == "tar":
            _pull_tar(board, profiling_dir, found, partial_root, progress)
        else:
            _pull_sftp(board, profiling_dir, found, partial_root, progress)
    except OSError as exc:
        if exc.errno in (28, 122):  # ENOSPC, EDQUOT on the local side
            raise DiskSpaceError(f"local disk full while writing {target}: {exc.strerror}") from None
        if isinstance(exc, (socket.timeout, TimeoutError)) or not board.is_active():
            raise RemoteError(f"connection to the board lost while pulling {found.job}: {_why(exc)}") from None
        if exc.filename and not str(exc.filename).startswith(str(partial_root)):
            raise RemoteError(f"pulling {found.job} failed: {_why(exc)}") from None
        raise RemoteError(f"pulling {found.job} failed: {_why(exc)}") from None
    except (paramiko.SSHException, EOFError, tarfile.TarError) as exc:
        lost = "" if board.is_active() else "connection to the board lost; "
        raise RemoteError(f"{lost}pulling {found.job} failed: {_why(exc)}") from None
    verify(partial_root, found)
    return target


def verify(root: Path, found: Manifest) -> None:
    """Every file of the manifest is there with its size; nothing else was written."""
    seen = set()
    for dirpath, dirnames, filenames in os.walk(root / found.job):
        for name in filenames:
            seen.add(Path(dirpath, name).relative_to(root).as_posix())
    for rel, remote in found.files.items():
        path = root / rel
        try:
            size = os.lstat(path).st_size
        except OSError:
            raise RemoteError(f"pull of {found.job} incomplete: {rel} is missing") from None
        if size != remote.size:
            raise RemoteError(f"pull of {found.job} incomplete: {rel} has {size} bytes, the board has "
                              f"{remote.size}")
    extra = seen - set(found.files)
    if extra:
        raise RemoteError(f"pull of {found.job}: unexpected file {printable(sorted(extra)[0])}")


def _pull_sftp(board, profiling_dir, found, root, progress):
    sftp = board.sftp
    for rel in found.dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel, remote in found.files.items():
        local = root / rel
        source = f"{profiling_dir}/{rel}"
        if remote.size <= SMALL_FILE:  # one open/read/close: about twice as fast as get() for small files
            with sftp.open(source, "rb") as handle:
                data = handle.read(remote.size) + handle.read()
            with _create(local) as out:
                out.write(data)
            if progress:
                progress(len(data))
        else:
            done = [0]

            def callback(got, total, done=done):
                if progress:
                    progress(got - done[0])
                done[0] = got

            with _create(local) as out:
                sftp.getfo(source, out, callback=callback)
        _finish(local, remote.mode, remote.mtime)


def _pull_tar(board, profiling_dir, found, root, progress):
    channel = board._session()
    channel.settimeout(max(SFTP_TIMEOUT, board.cfg.timeout))
    channel.exec_command(board.wrap(f"tar -C {q(profiling_dir)} -cf - {q(found.job)}"))
    channel.shutdown_write()
    stream = channel.makefile("rb", CHUNK)
    try:
        extract_tar(stream, found, root, progress)
    except BaseException:
        with contextlib.suppress(Exception):
            channel.close()
        raise
    finally:
        with contextlib.suppress(Exception):
            stream.close()
    status = channel.recv_exit_status()
    err = b""
    with contextlib.suppress(Exception):
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
    channel.close()
    if status != 0:
        lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        cause = lines[-1] if lines else ("connection lost" if status == -1 else f"exit status {status}")
        raise RemoteError(f"tar on the board failed while sending {found.job}: {cause}")


def extract_tar(fileobj, found: Manifest, root: Path, progress=None) -> None:
    """Extract a tar stream of one JOB under ``root`` safely (works on Python 3.9: no ``filter=``).

    Only directories, regular files and hard links to files already extracted, all inside ``found.job``;
    names validated component by component; files created O_EXCL|O_NOFOLLOW; no setuid bits.
    """
    dir_modes = {}
    written = {}
    with tarfile.open(fileobj=fileobj, mode="r|", bufsize=CHUNK) as archive:
        for member in archive:
            parts = check_relpath(member.name)
            if parts[0] != found.job:
                raise RemoteError(f"the board's tar stream holds '{printable(member.name)}' outside {found.job}; "
                                  "refused")
            rel = "/".join(parts)
            local = root.joinpath(*parts)
            if member.isdir():
                _mkdirs(root, parts)
                dir_modes[local] = (member.mode, member.mtime)
            elif member.isreg():
                _mkdirs(root, parts[:-1])
                source = archive.extractfile(member)
                with _create(local) as out:
                    while True:
                        block = source.read(CHUNK)
                        if not block:
                            break
                        out.write(block)
                        if progress:
                            progress(len(block))
                _finish(local, member.mode, member.mtime)
                written[rel] = local
            elif member.islnk():
                link_rel = "/".join(check_relpath(member.linkname))
                if link_rel not in written:
                    raise RemoteError(f"the board's tar stream has a hard link '{printable(rel)}' to "
                                      f"'{printable(member.linkname)}', which is not a file of this JOB; refused")
                _mkdirs(root, parts[:-1])
                with open(written[link_rel], "rb") as src, _create(local) as out:
                    shutil.copyfileobj(src, out, CHUNK)
                _finish(local, member.mode, member.mtime)
                written[rel] = local
            else:
                log.warning("skipping %s from the board: not a regular file or directory", rel)
    for path, (mode, mtime) in dir_modes.items():
        with contextlib.suppress(OSError):
            os.chmod(path, ((mode & 0o777) | 0o700) & ~effective_umask())
            os.utime(path, (mtime, mtime))


def _mkdirs(root: Path, parts) -> None:
    """Create root/parts… one level at a time, refusing to pass through anything but a real directory."""
    path = root
    for part in parts:
        path = path / part
        try:
            os.mkdir(path, 0o750)
        except FileExistsError:
            if path.is_symlink() or not path.is_dir():
                raise RemoteError(f"the board's tar stream would write through {path}; refused") from None


@contextlib.contextmanager
def _create(path: Path):
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as handle:
        yield handle


def _finish(path: Path, mode: int, mtime) -> None:
    # never setuid/setgid/sticky from the board; always readable by us; never more open than our umask allows
    # (a board's 0777 would let any local user change what is analysed)
    os.chmod(path, ((mode & 0o777) | 0o600) & ~effective_umask())
    os.utime(path, (mtime, mtime))


def remove_tree(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
