"""Download one JOB directory from the board into ``<output>/.partial/JOB…``, verified, then renamed.

The board's listing (:mod:`msprof.collect.listing`) is the contract: nothing is written locally that it does
not hold. Every tar member is checked before any of it is written: its name (validated component by
component, inside the one expected JOB), its type (directories, regular files and hard links to files
already extracted; symlinks and devices the listing showed are skipped, others refused) and its size (the
listing's). A name may come once. The stream as a whole may not be larger than the listing's data and
headers, so a header cannot make us read without end either. Over SFTP no file is read past its listed size.
So a pull writes at most the listing's bytes and files, which the local free space (bytes and inodes) is
checked against before it starts; whatever stops a pull, what it wrote in ``.partial`` is removed.
The tar stream is extracted by this module (Python 3.9 has no ``tarfile`` extraction filters), with files
created ``O_EXCL|O_NOFOLLOW``.
"""
import contextlib
import os
import shutil
import socket
import tarfile
from pathlib import Path
from typing import Callable, Iterable, Optional

import paramiko

from msprof.collect.board import SFTP_TIMEOUT, Board, q
from msprof.collect.connect import cause
from msprof.collect.listing import Manifest
from msprof.collect.names import Unpullable, check_relpath
from msprof.console import log
from msprof.errors import DiskSpaceError, RemoteError
from msprof.outputs import effective_umask
from msprof.paths import printable

SMALL_FILE = 64 * 1024
CHUNK = 1 << 20
BLOCK = tarfile.BLOCKSIZE
# What an honest tar adds to the listing's data: per member a header, maybe a long-name or pax header and
# the name itself twice; at the end two zero blocks and the padding to a whole record. tarfile also reads a
# chunk ahead.
HEADER_ROOM = 4 * BLOCK
END_ROOM = (1 << 20) + CHUNK


def kib(size: int) -> str:
    """A size for people: KiB below 10 MiB (a few JOB files: "0.0 MB" said nothing), MiB above."""
    return f"{size / 1024:.0f} KiB" if size < 10 * 1024 * 1024 else f"{size / 1048576:.1f} MiB"


def check_local_space(output: Path, found: Iterable[Manifest]) -> None:
    """Refuse (exit 6) before anything is written when the JOBs' listings do not fit: their bytes, each file
    rounded up to the file system's block, and their files and directories against the free inodes."""
    st = os.statvfs(output)
    block = st.f_frsize or 4096
    needed, entries = 0, 0
    for item in found:
        needed += sum(-(-f.size // block) * block for f in item.files.values()) + len(item.dirs) * block
        entries += len(item.dirs) + len(item.files) + 1      # (+1: its collect.json)
    free = st.f_bavail * block
    if needed > free:
        raise DiskSpaceError(f"not enough local disk space in {output}: the JOB directories need {kib(needed)}, "
                             f"{kib(free)} free")
    if st.f_files and entries > st.f_favail:    # (f_files 0: a file system without an inode limit)
        raise DiskSpaceError(f"not enough free inodes in {output}: the JOB directories need {entries:,} files and "
                             f"directories, {st.f_favail:,} can still be made")


def pull_job(board: Board, profiling_dir: str, found: Manifest, partial_root: Path, method: str,
             progress: Optional[Callable[[int], None]] = None) -> Path:
    """Download one JOB into ``partial_root/JOB`` (replacing an earlier partial copy) and verify it. When the
    pull fails or is interrupted, what it wrote is removed: a partial copy is fetched again from the start
    anyway, and must not keep a full disk full."""
    target = partial_root / found.job
    if os.path.lexists(target):
        remove_tree(target)
    partial_root.mkdir(parents=True, exist_ok=True)
    try:
        _pull(board, profiling_dir, found, partial_root, method, progress)
        verify(partial_root, found)
    except BaseException:
        with contextlib.suppress(OSError):
            if os.path.lexists(target):
                remove_tree(target)
        raise
    return target


def _pull(board: Board, profiling_dir: str, found: Manifest, partial_root: Path, method: str, progress) -> None:
    target = partial_root / found.job
    try:
        if method == "tar":
            _pull_tar(board, profiling_dir, found, partial_root, progress)
        else:
            _pull_sftp(board, profiling_dir, found, partial_root, progress)
    except OSError as exc:
        if exc.errno in (28, 122):  # ENOSPC, EDQUOT on the local side
            raise DiskSpaceError(f"local disk full while writing {target}: {exc.strerror}") from None
        if isinstance(exc, (socket.timeout, TimeoutError)) or not board.is_active():
            raise RemoteError(f"connection to the board lost while pulling {found.job}: {cause(exc)}") from None
        raise RemoteError(f"pulling {found.job} failed: {cause(exc)}") from None
    except (paramiko.SSHException, EOFError, tarfile.TarError) as exc:
        lost = "" if board.is_active() else "connection to the board lost; "
        raise RemoteError(f"{lost}pulling {found.job} failed: {cause(exc)}") from None


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
        with sftp.open(f"{profiling_dir}/{rel}", "rb") as handle, _create(local) as out:
            if remote.size > SMALL_FILE:     # (small files: one read, about twice as fast as a prefetch)
                handle.prefetch(remote.size)
            left = remote.size
            while True:         # (one byte more than listed is asked for: a file that grew is noticed)
                block = handle.read(min(left + 1, CHUNK))
                if not block:
                    break
                if len(block) > left:
                        raise RemoteError(f"{printable(rel)} grew on the board while it was pulled (listed with "
                                      f"{remote.size} bytes); pull {found.job} again when the app has finished")
                out.write(block)
                left -= len(block)
                if progress:
                    progress(len(block))
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
        why = lines[-1] if lines else ("connection lost" if status == -1 else f"exit status {status}")
        raise RemoteError(f"tar on the board failed while sending {found.job}: {why}")


class _Bounded:
    """The tar stream, read no further than an honest tar of the listing would go."""

    def __init__(self, raw, found: Manifest):
        self.raw, self.job = raw, found.job
        names = found.dirs + list(found.files) + found.others
        self.left = (sum(-(-f.size // BLOCK) * BLOCK for f in found.files.values()) + END_ROOM
                     + sum(HEADER_ROOM + 2 * len(name.encode("utf-8", "surrogateescape")) for name in names))

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.left -= len(data)
        if self.left < 0:
            raise Unpullable(f"the board's tar stream of {self.job} is larger than its listing allows; refused")
        return data


def extract_tar(fileobj, found: Manifest, root: Path, progress=None) -> None:
    """Extract a tar stream of one JOB under ``root``, each member checked against the listing before any of
    it is written (:func:`_admit`); files created O_EXCL|O_NOFOLLOW; no setuid bits."""
    dir_modes, written, seen = {}, {}, set()
    listed = _Listed(found)
    with tarfile.open(fileobj=_Bounded(fileobj, found), mode="r|", bufsize=CHUNK) as archive:
        for member in archive:
            parts = _admit(member, listed, seen, written)
            if parts is None:
                continue
            rel, local = "/".join(parts), root.joinpath(*parts)
            _mkdirs(root, parts if member.isdir() else parts[:-1])
            if member.isdir():
                dir_modes[local] = (member.mode, member.mtime)
                continue
            if member.isreg():
                _copy(archive.extractfile(member), local, progress)
            else:           # a hard link to a file of this JOB: a copy of it
                with open(written["/".join(check_relpath(member.linkname))], "rb") as source:
                    _copy(source, local, None)
            _finish(local, member.mode, member.mtime)
            written[rel] = local
    for path, (mode, mtime) in dir_modes.items():
        with contextlib.suppress(OSError):
            os.chmod(path, ((mode & 0o777) | 0o700) & ~effective_umask())
            os.utime(path, (mtime, mtime))


class _Listed:
    """A listing's entries by kind, for a look-up per tar member."""

    def __init__(self, found: Manifest):
        self.job, self.files = found.job, found.files
        self.dirs, self.others = set(found.dirs), set(found.others)

    def described(self, rel: str) -> str:
        if rel in self.files:
            return f"a file of {self.files[rel].size} bytes"
        if rel in self.dirs:
            return "a directory"
        return "neither a file nor a directory" if rel in self.others else "not there at all"


def _admit(member: tarfile.TarInfo, listed: _Listed, seen: set, written: dict):
    """The path of a member to write, None for one the listing showed as neither file nor directory (skipped);
    anything the listing does not hold as it is (name, type, size), or a name given twice, is refused."""
    parts = check_relpath(member.name)
    rel, shown, job = "/".join(parts), printable(member.name), listed.job
    if parts[0] != job:
        raise Unpullable(f"the board's tar stream holds '{shown}' outside {job}; refused")
    if rel in seen:
        raise Unpullable(f"the board's tar stream holds '{shown}' twice; refused")
    seen.add(rel)
    file = listed.files.get(rel)
    if member.isdir() and rel in listed.dirs:
        return parts
    if member.isreg() and file is not None and member.size == file.size:
        return parts
    if member.islnk() and file is not None:
        target = "/".join(check_relpath(member.linkname))
        if target in written and listed.files[target].size == file.size:
            return parts
        raise Unpullable(f"the board's tar stream has a hard link '{shown}' to '{printable(member.linkname)}', "
                         "which is not a file of this JOB of the same size; refused")
    if not (member.isdir() or member.isreg() or member.islnk()) and rel in listed.others:
        log.warning("skipping %s from the board: not a regular file or directory", rel)
        return None
    size = f" of {member.size} bytes" if member.isreg() else ""
    raise Unpullable(f"the board's tar stream holds '{shown}'{size}, which its listing of {job} shows as "
                     f"{listed.described(rel)}; refused")


def _copy(source, local: Path, progress) -> None:
    with _create(local) as out:
        while True:
            block = source.read(CHUNK)
            if not block:
                break
            out.write(block)
            if progress:
                progress(len(block))


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
