"""The record of an unfinished pull, ``<output>/.partial/collect-state.json``, the command that finishes it,
and the lock that lets one collect at a time use them.

The record holds where the data is on the board (host, port, user, work dir, the JOB directories that existed
before the run), the options of the run and the acl.json it wrote: never a secret. It is written before main
runs and removed once every new JOB is local; ``msprof collect --resume`` reads it. A run holds
:func:`exclusive` on its ``--output`` from before it reads the record until its pull has ended, so two runs
into one directory never share ``.partial`` or the record: the second waits, and says so.
"""
import contextlib
import datetime
import functools
import json
import os
import shlex
from pathlib import Path
from typing import List, Optional

from msprof.collect.config import BoardConfig
from msprof.console import log, notice
from msprof.outputs import atomic_open, directory_lock

PARTIAL = ".partial"
STATE_FILE = "collect-state.json"
PROFILING_SUBDIR = "msprof_output"


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")


def partial_dir(output: Path) -> Path:
    return Path(output) / PARTIAL


def new_record(cfg: BoardConfig, workdir: str, options: dict, created: bool = False, nfs_mounted: bool = False,
               before: Optional[List[str]] = None, acl_json: Optional[dict] = None,
               started: Optional[str] = None) -> dict:
    return {"version": 1, "host": cfg.host, "port": cfg.port, "username": cfg.username,
            "remote_dir": workdir, "profiling_dir": f"{workdir}/{PROFILING_SUBDIR}", "created_remote_dir": created,
            "nfs_mounted": nfs_mounted, "before": before or [], "acl_json": acl_json, "options": options,
            "started": started, "main_status": None}


def save(partial: Path, state: dict) -> None:
    partial.mkdir(parents=True, exist_ok=True)
    with atomic_open(partial / STATE_FILE, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)


def load(partial: Path) -> Optional[dict]:
    path = partial / STATE_FILE
    if not os.path.exists(path):        # (never raises, where the user may not look)
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.warning("ignoring unreadable %s", path)
        return None
    if not isinstance(state, dict) or not state.get("profiling_dir") or not state.get("remote_dir"):
        return None
    return state


def clear(partial: Path) -> None:
    with contextlib.suppress(OSError):
        (partial / STATE_FILE).unlink()
    with contextlib.suppress(OSError):
        partial.rmdir()  # only when empty


def warn_pending(partial: Path, config_path: Path) -> None:
    state = load(partial)
    if state is not None:
        log.warning("an earlier download from %s:%s is unfinished; finish it with: %s --remote-dir %s (this run "
                    "replaces the record)", state.get("host"), state.get("profiling_dir"),
                    resume_command(config_path, partial.parent, state.get("options")),
                    shlex.quote(state.get("remote_dir", "")))


def resume_command(config_path: Path, output: Path, options: Optional[dict] = None) -> str:
    """The command that finishes an interrupted pull (with the original run's --keep-remote and --all: a resume
    takes them from the record anyway, the command shows what it will do)."""
    flags = "".join(f" {flag}" for key, flag in (("keep_remote", "--keep-remote"), ("all", "--all"))
                    if (options or {}).get(key))
    return (f"msprof collect --resume --config {shlex.quote(str(config_path))} --output {shlex.quote(str(output))}"
            f"{flags}")


def resume_hint(config_path: Path, output: Path, options: Optional[dict] = None) -> str:
    return f"Finish with: {resume_command(config_path, output, options)}"


def exclusive(output: Path):
    """Hold a lock on the directory ``output`` while another collect pulls into it, waiting, saying so."""
    return directory_lock(output, functools.partial(
        notice, "msprof: another msprof collect is pulling into %s; waiting for it to finish (Ctrl-C to stop)",
        output))
