"""What ``collect`` uploads: the directory that holds ``main`` (the *project*), minus what must not leave
this machine.

Never uploaded, and each said on stderr (names escaped, never contents):

* the ini given with ``--config`` and the ``key_file`` it names (they hold the password and the private key);
* anything reached through a symbolic link that leads outside the project (a link to ``~/.ssh/id_rsa``
  must not land on the board), and symlinked directories (not followed at all);
* FIFOs, sockets and devices (reading them would block or never end);
* the local ``acl.json`` (a merged one is written instead) and ``--output`` with its ``.partial``.

Before anything is walked the project is checked: a system directory (``-m /bin/true`` means uploading
``/usr/bin``) or a project of more than :data:`MAX_ENTRIES` files and directories or :data:`MAX_BYTES` is
refused unless ``--force``; counting stops at the limit, so a huge tree is not walked to the end first.
"""
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from msprof.paths import inside, printable
from msprof.console import log
from msprof.errors import UsageError

MAX_BYTES = 512 << 20
MAX_ENTRIES = 10_000

# Directories no project lives in directly; every top-level directory, the home directory and its parents
# are added by :func:`system_directory`.
_SYSTEM_DIRS = {
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/include",
    "/usr/share", "/usr/src", "/usr/games", "/usr/local", "/usr/local/bin", "/usr/local/sbin", "/usr/local/lib",
    "/usr/local/share", "/var/lib", "/var/log", "/var/tmp", "/var/cache", "/var/spool",
}
_PSEUDO_FS = ("/proc", "/sys", "/dev")

File = Tuple[Path, str, int, int]  # local path, relative posix path, mode, mtime


@dataclass
class Project:
    root: Path
    files: List[File] = field(default_factory=list)
    total: int = 0
    skipped: List[str] = field(default_factory=list)  # what was left out and why, for the user


def system_directory(path: Path) -> bool:
    """Is ``path`` (resolved) a directory whose upload would copy part of the operating system or a whole
    home: ``/``, any top-level directory, ``/usr/bin``-like ones, ``$HOME`` and its parents, /proc…"""
    path = Path(path).resolve()
    if len(path.parts) <= 2 or str(path) in _SYSTEM_DIRS:
        return True
    if any(path == Path(p) or Path(p) in path.parents for p in _PSEUDO_FS):
        return True
    try:
        home = Path.home().resolve()
    except (KeyError, RuntimeError, OSError):
        return False
    return path == home or path in home.parents


def check_project(root: Path, force: bool) -> None:
    if system_directory(root) and not force:
        raise UsageError(f"refusing to upload {printable(root)}: it is a system or home directory (the directory "
                         "of --main is uploaded whole). Put main and what it needs in a project directory of its "
                         "own, or pass --force")


def walk(root: Path, secrets: Dict[Path, str], leave_out: Iterable[Path] = (), force: bool = False) -> Project:
    """The files to upload under ``root`` (resolved). ``secrets``: {resolved path: what it is} never uploaded
    and reported; ``leave_out``: directories (or files) silently not uploaded (the output dir)."""
    check_project(root, force)
    secrets = {_resolved(p): what for p, what in secrets.items() if p is not None}
    leave_out = {_resolved(p) for p in leave_out}
    project = Project(root)
    entries = 0
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            iterator = os.scandir(directory)
        except OSError as exc:
            _skip(project, directory, f"cannot be read ({exc.strerror})")
            continue
        with iterator:
            for entry in iterator:
                entries += 1
                if not force and (entries > MAX_ENTRIES or project.total > MAX_BYTES):
                    _too_large(project, entries)
                path = Path(entry.path)
                rel = path.relative_to(root).as_posix()
                _take(project, path, rel, entry, secrets, leave_out, pending)
    if not force and project.total > MAX_BYTES:
        _too_large(project, entries)
    for line in project.skipped:
        log.warning("not uploading %s", line)
    return project


def _take(project, path: Path, rel: str, entry, secrets, leave_out, pending) -> None:
    try:
        is_link = entry.is_symlink()
        st = path.stat()  # follows a symlink: what would be uploaded
    except OSError:
        _skip(project, rel, "a broken symbolic link" if os.path.islink(path) else "unreadable")
        return
    if is_link and not inside(path, project.root):
        _skip(project, rel, "a symbolic link that leads outside the project")
        return
    resolved = _resolved(path)
    if resolved in secrets:
        _skip(project, rel, secrets[resolved])
        return
    if resolved in leave_out or (stat.S_ISDIR(st.st_mode) and entry.name == ".partial"):
        return
    if stat.S_ISDIR(st.st_mode):
        if is_link:
            _skip(project, rel + "/", "a symlinked directory (not followed)")
        else:
            pending.append(path)
        return
    if not stat.S_ISREG(st.st_mode):
        _skip(project, rel, "not a regular file")
        return
    if rel == "acl.json":  # a merged one is written instead
        return
    project.files.append((path, rel, st.st_mode, int(st.st_mtime)))
    project.total += st.st_size


def _skip(project: Project, rel, why: str) -> None:
    project.skipped.append(f"{printable(rel)}: {why}")


def _resolved(path: Path) -> Optional[Path]:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return None


def _too_large(project: Project, entries: int) -> None:
    if entries > MAX_ENTRIES:
        what = f"more than {MAX_ENTRIES:,} files and directories ({_mib(project.total)} in the first {entries - 1:,})"
    else:
        what = f"more than {_mib(MAX_BYTES)} ({_mib(project.total)} in {len(project.files):,} files counted so far)"
    raise UsageError(f"refusing to upload {printable(project.root)}: {what}; counting stopped there. The directory "
                     "of --main is uploaded whole: put main and what it needs in a directory of its own, or pass "
                     "--force")


def _mib(size: int) -> str:
    return f"{size / 1048576:.1f} MiB"

