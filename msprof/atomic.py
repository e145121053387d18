"""Never half-write a result: write to a temporary sibling, then rename into place."""
import contextlib
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(target: Path):
    """Yield a temporary path beside ``target``; it replaces ``target`` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_open(target: Path, mode: str = "w", **kwargs):
    """Open a temporary sibling of ``target`` for writing; rename it into place on success."""
    with atomic_path(target) as tmp:
        with open(tmp, mode, **kwargs) as handle:
            yield handle
