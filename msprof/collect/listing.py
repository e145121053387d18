"""What the board says a JOB directory holds (its *listing*), and how that compares with what is local.

The listing is taken over SFTP (lstat semantics), checked against the board's own ``find``, and bounded: a
JOB of more than :data:`MAX_JOB_ENTRIES` files and directories or :data:`MAX_JOB_BYTES` is not pulled. Every
byte and every file a pull writes locally must be in the listing (:mod:`msprof.collect.pull`), so the
listing is also what the local free space is checked against.
"""
import filecmp
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import paramiko

from msprof.collect.board import Board, q
from msprof.collect.connect import cause
from msprof.collect.names import Unpullable, check_job_name, check_name
from msprof.console import log
from msprof.errors import RemoteError
from msprof.paths import printable

# Far above any real JOB (a million tasks make about 20 files and a few hundred MB), low enough that a board
# cannot make us walk, hold or write without end.
MAX_JOB_ENTRIES = 100_000
MAX_JOB_BYTES = 64 << 30


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

    @property
    def entries(self) -> int:
        return len(self.dirs) + len(self.files) + len(self.others)


def _listdir(board: Board, path: str):
    try:
        return board.sftp.listdir_attr(path)
    except UnicodeDecodeError as exc:  # paramiko decodes names as UTF-8; exc.object holds the raw name
        raise Unpullable(f"the board has a file name that is not UTF-8 in {printable(path)}: "
                         f"'{printable(exc.object)}'; refused") from None
    except (OSError, paramiko.SSHException, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise RemoteError(f"cannot list {printable(path)} on the board: {cause(exc)}") from None


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
    total = 0
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
                total += entry.st_size or 0
            else:
                result.others.append(rel)
                log.warning("skipping %s on the board: not a regular file or directory", rel)
            _check_bounds(result, total)
    cross_check(board, profiling_dir, result)
    return result


def _check_bounds(found: Manifest, total: int) -> None:
    if found.entries > MAX_JOB_ENTRIES:
        raise Unpullable(f"{found.job} on the board holds more than {MAX_JOB_ENTRIES:,} files and directories; "
                         "not pulled")
    if total > MAX_JOB_BYTES:
        raise Unpullable(f"{found.job} on the board holds more than {MAX_JOB_BYTES >> 30} GiB; not pulled")


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
