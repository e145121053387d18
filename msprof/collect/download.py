"""The end of a collect run: pull every new JOB directory into ``--output``, write its ``collect.json``, clean up
the board. The transfer of one JOB (names, listings, tar or SFTP) is :mod:`msprof.collect.pull`'s."""
import contextlib
import json
import os
import time
from pathlib import Path
from typing import List, Tuple

from msprof import __version__, progress
from msprof.collect import state as record
from msprof.collect.board import Board, q
from msprof.collect.config import BoardConfig, FileRefused, read_small_file
from msprof.collect.listing import Manifest, list_jobs, local_state, manifest, same_contents
from msprof.collect.names import Unpullable
from msprof.collect.pull import check_local_space, kib, pull_job, remove_tree
from msprof.console import log, notice
from msprof.errors import UsageError
from msprof.outputs import atomic_open


def finish_pull(board: Board, cfg: BoardConfig, state: dict, output: Path, config_path: Path,
                keep_remote: bool) -> Tuple[List[Path], List[str]]:
    """Pull every JOB of ``state`` not yet local, write collect.json, rename; then clean up the board.

    Returns the local JOB directories and the JOBs that could not be pulled safely or completely (unsafe
    names, an incomplete listing: each logged as an error). Those stay on the board, and so does the work dir.
    """
    try:
        found, unpulled = _listings(board, state)
        todo, ready, conflicts = _sort_out(found, output, state)
        check_local_space(output, todo)
        _download(board, cfg, state, todo, output, ready, conflicts, unpulled)
    except BaseException as exc:
        if not isinstance(exc, UsageError):
            notice("msprof: the download is unfinished; the data stays on the board. %s",
                   record.resume_hint(config_path, output, state.get("options")))
        raise
    if conflicts:
        raise UsageError(f"{output / conflicts[0]} already exists and differs from the board's {conflicts[0]}; "
                         f"not overwritten. Move it away (or use another --output) and finish with: "
                         f"{record.resume_command(config_path, output, state.get('options'))}")
    _cleanup(board, state, keep_remote or bool(unpulled))  # what was not pulled stays on the board
    record.clear(record.partial_dir(output))
    return ready, unpulled


def _listings(board: Board, state: dict) -> Tuple[List[Manifest], List[str]]:
    """The listing of every JOB that appeared during the run, and the JOBs that cannot be pulled (said)."""
    profiling_dir = state["profiling_dir"]
    before = set(state.get("before") or [])
    found, unpulled = [], []
    for job in list_jobs(board, profiling_dir):
        if job in before:
            continue
        try:
            found.append(manifest(board, profiling_dir, job))
        except Unpullable as exc:
            log.error("%s", exc.message)
            unpulled.append(job)
    return found, unpulled


def _sort_out(found: List[Manifest], output: Path, state: dict):
    """(to pull, already local, conflicting): a local JOB of the same name is never overwritten."""
    todo, ready, conflicts = [], [], []
    for item in found:
        local = local_state(output, item)
        if local == "different":
            conflicts.append(item.job)
        elif local == "same sizes" and _pulled_by(output / item.job, state):
            notice("msprof: %s was pulled before the interruption; not pulled again", item.job)
            ready.append(output / item.job)
        else:               # absent, or of the same sizes: pulled, then compared byte for byte
            todo.append(item)
    return todo, ready, conflicts


def _download(board: Board, cfg: BoardConfig, state: dict, todo: List[Manifest], output: Path,
              ready: List[Path], conflicts: List[str], unpulled: List[str]) -> None:
    method = cfg.transfer
    if method == "auto":
        method = "tar" if todo and board.has_command("tar") else "sftp"
    total = sum(item.total for item in todo)
    began = time.monotonic()
    pulled = []
    try:
        with progress.step("download", total or None, "bytes") as shown:
            for item in todo:
                log.info("pulling %s (%d files, %s) with %s", item.job, len(item.files), kib(item.total), method)
                try:
                    staged = pull_job(board, state["profiling_dir"], item, record.partial_dir(output), method,
                                      shown.advance)
                except Unpullable as exc:     # (a stream its listing does not hold: nothing of it was kept)
                    log.error("%s", exc.message)
                    unpulled.append(item.job)
                    continue
                final = output / item.job
                if os.path.lexists(final):  # never overwritten: the same JOB, or a conflict
                    same = same_contents(record.partial_dir(output), output, item)
                    remove_tree(staged)
                    if same:
                        notice("msprof: %s already in %s (the same bytes); not pulled again", item.job, output)
                        ready.append(final)
                    else:
                        conflicts.append(item.job)
                    continue
                _write_collect_json(staged, cfg, state, method)
                os.rename(staged, final)
                ready.append(final)
                pulled.append(final)
    finally:
        for final in pulled:  # after the progress bar is gone
            notice("msprof: pulled %s", final)
    if todo:
        seconds = time.monotonic() - began
        log.info("download: %s in %.2f s (%.1f MB/s, %s)", kib(total), seconds, total / 1e6 / max(seconds, 1e-6),
                 method)


def _cleanup(board: Board, state: dict, keep_remote: bool) -> None:
    workdir = state["remote_dir"]
    if state.get("nfs_mounted"):
        status, _, err = board.exec(f"umount {q(state['profiling_dir'])}")
        if status != 0:
            log.warning("could not unmount %s on the board (%s); the work dir %s is left in place",
                        state["profiling_dir"], err.decode("utf-8", "replace").strip()[:200], workdir)
            return
    if keep_remote:
        notice("msprof: kept the remote work dir %s:%s", board.cfg.host, workdir)
        return
    if state.get("created_remote_dir"):
        remove_remote(board, workdir)
    elif not state.get("nfs_mounted"):
        _remove_this_runs_jobs(board, state)


def _remove_this_runs_jobs(board: Board, state: dict) -> None:
    """A work dir the user gave us: remove only what this run made. That is the profiling output dir, or, where
    an earlier run left JOBs in it (--keep-remote, never pulled by this run), this run's JOBs alone."""
    earlier = set(state.get("before") or [])
    if not earlier:
        remove_remote(board, state["profiling_dir"])
        return
    for job in list_jobs(board, state["profiling_dir"]):
        if job not in earlier:
            remove_remote(board, f"{state['profiling_dir']}/{job}")
    notice("msprof: kept %d earlier JOB director%s in %s:%s", len(earlier), "y" if len(earlier) == 1 else "ies",
           board.cfg.host, state["profiling_dir"])


def remove_remote(board: Board, path: str) -> None:
    if not path.startswith("/") or path.rstrip("/").count("/") < 2 and not path.startswith("/tmp/"):
        log.warning("not removing %s on the board (too close to /)", path)
        return
    with contextlib.suppress(Exception):
        status, _, err = board.exec(f"rm -rf -- {q(path)}")
        if status == 0:
            log.info("removed %s on the board", path)
            return
        log.warning("could not remove %s on the board: %s", path, err.decode("utf-8", "replace").strip()[:200])


def _pulled_by(job_dir: Path, state: dict) -> bool:
    """Whether ``job_dir`` is what this very run pulled, by its collect.json: the same board, work dir and
    start of main. A resume finds the JOBs pulled before the interruption so; downloading them again only to
    compare them would cost the whole transfer again."""
    if not state.get("started"):        # (a resume given --remote-dir alone: no run to be the one of)
        return False
    try:
        written = json.loads(read_small_file(job_dir / "collect.json", 1 << 20))
        board = written["board"]
        return (board["host"], board["port"], written["profiling_dir"], written["started"]) == (
            state.get("host"), state.get("port"), state.get("profiling_dir"), state["started"])
    except (OSError, FileRefused, ValueError, KeyError, TypeError):
        return False


def _write_collect_json(job_dir: Path, cfg: BoardConfig, state: dict, method: str) -> None:
    written = {
        "tool": "msprof", "version": __version__,
        "board": {"host": cfg.host, "port": cfg.port, "username": cfg.username},
        "remote_dir": state.get("remote_dir"), "profiling_dir": state.get("profiling_dir"),
        "options": state.get("options"), "acl_json": state.get("acl_json"),
        "main_exit_status": state.get("main_status"),
        "started": state.get("started"), "main_ended": state.get("main_ended"),
        "resumed": state.get("resumed"), "pulled": record.now(), "transfer": method,
    }
    with atomic_open(job_dir / "collect.json", "w", encoding="utf-8") as handle:
        json.dump(written, handle, indent=2)
        handle.write("\n")
