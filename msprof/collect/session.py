"""One collect run on the board, and its resume.

Flow (cli.md "collect"): ini → connect → remote work dir → upload → acl.json → [--nfs mount] → run ./main
→ pull new JOB* via <output>/.partial (:mod:`msprof.collect.download`) → collect.json → cleanup → [--all]
analyse. An unfinished pull is recorded in ``<output>/.partial`` (:mod:`msprof.collect.state`) until it
completes; :func:`resume` finishes it.
"""
import contextlib
import os
import secrets
import shlex
import time
from pathlib import Path
from typing import List, Optional, Tuple

import click
import paramiko

from msprof import outputs, progress
from msprof.collect import acljson
from msprof.collect import state as record
from msprof.collect.board import Board, q
from msprof.collect.config import BoardConfig, load_config
from msprof.collect.download import finish_pull, remove_remote
from msprof.collect.project import walk
from msprof.collect.listing import list_jobs
from msprof.collect.pull import kib
from msprof.console import Passthrough, log, notice
from msprof.errors import DiskSpaceError, MsprofError, OutputError, RemoteError, SeveralFailed, UsageError
from msprof.outputs import elsewhere, output_dir
from msprof.paths import inside


class Collector:
    def __init__(self, main: Path, config: Path, output: Path, profiler: dict, options: dict,
                 remote_dir: Optional[str], timeout: float, accept_new: bool, nfs, keep_remote: bool,
                 run_all: bool, force: bool = False):
        self.main, self.config_path, self.output = main, config, output
        self.profiler, self.options = profiler, options
        self.remote_dir_arg, self.timeout, self.accept_new = remote_dir, timeout, accept_new
        self.nfs, self.keep_remote, self.run_all, self.force = nfs, keep_remote, run_all, force
        self.partial = record.partial_dir(output)

    def run(self) -> None:
        made_output = not os.path.lexists(self.output)
        try:
            self._run()
        except BaseException:
            if made_output:     # a run that failed before it pulled anything leaves no empty --output behind
                with contextlib.suppress(OSError):
                    self.output.rmdir()
            raise

    def _run(self) -> None:
        project = self._project()
        cfg = load_config(self.config_path)
        existing_acl = _project_acl(project)
        self._check_output()
        with record.exclusive(self.output):
            record.warn_pending(self.partial, self.config_path)
            state, jobs, unpulled, failure = self._collect(cfg, project, existing_acl)
        self._conclude(jobs, unpulled, failure, state["profiling_dir"])

    def _collect(self, cfg: BoardConfig, project: Path, existing_acl):
        """Connect, prepare the work dir, run main, pull: (record, JOBs pulled, JOBs left, main's failure)."""
        started = record.now()
        # Connect before looking at the project: a wrong address or password is reported at once, not after
        # walking a large tree.
        board = Board.connect(cfg, self.accept_new)
        with board:
            log.info("connected to %s (auth: %s)", cfg.address, board.auth)
            state = self._prepare(board, cfg, project, existing_acl, started)
            result = self._run_main_recorded(board, state)
            failure = _main_failure(result, self.main.name, self.timeout)
            if result.connection_lost:
                raise RemoteError(f"{failure}; the data stays on the board: "
                                  f"{record.resume_hint(self.config_path, self.output, self.options)}")
            try:
                jobs, unpulled = finish_pull(board, cfg, state, self.output, self.config_path, self.keep_remote)
            except MsprofError as exc:
                if failure:         # (main's failure first: it is why the run failed, and exit 4)
                    raise RemoteError(f"{failure}; then: {exc.message}") from None
                raise
        return state, jobs, unpulled, failure

    def _project(self) -> Path:
        main = self.main
        if not main.exists():
            raise UsageError(f"--main {main}: no such file")
        if not main.is_file():
            raise UsageError(f"--main {main}: not a regular file")
        return main.resolve().parent

    def _check_output(self) -> None:
        """A file, a link or a directory this user may not write is said now (exit 7), not after the upload."""
        outputs.output_given = True        # (collect always writes under its --output: the advice is another)
        output_dir(self.output)
        if not os.access(self.output, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write {self.output}: Permission denied ({elsewhere()})")

    def _prepare(self, board: Board, cfg: BoardConfig, project: Path, existing_acl, started: str) -> dict:
        """The work dir made and filled (the project, acl.json), the profiling dir ready: the run's record."""
        secret_files = {self.config_path: "the --config file (it may hold the password)",
                        cfg.key_file: "the key_file named in the --config file"}
        found = walk(project, secret_files, leave_out=[self.output], force=self.force)
        workdir = resolve_remote_dir(self.remote_dir_arg, board.home())
        created = board.makedirs(workdir, 0o700)
        profiling_dir = f"{workdir}/{record.PROFILING_SUBDIR}"
        notice("msprof: remote work dir %s:%s", cfg.host, workdir)
        try:
            self._upload(board, found.files, found.total, workdir)
            acl = acljson.merge(existing_acl, dict(self.profiler, output=profiling_dir),
                                source=str(project / "acl.json"))
            try:
                board.write_file(f"{workdir}/acl.json", acljson.dumps(acl))
            except OSError as exc:
                _upload_failed(board, workdir, "acl.json", exc)
        except BaseException:
            if created and not self.keep_remote:
                remove_remote(board, workdir)
            raise
        board.makedirs(profiling_dir)
        mounted = self._mount(board, profiling_dir) if self.nfs else False
        return record.new_record(cfg, workdir, self.options, created=created, nfs_mounted=mounted,
                                 before=list_jobs(board, profiling_dir), acl_json=acl, started=started)

    def _run_main_recorded(self, board: Board, state: dict):
        """Run main with the record saved before (a Ctrl-C then leaves what is needed to resume) and after."""
        record.save(self.partial, state)
        try:
            result = self._run_main(board, state["remote_dir"], self.main.name)
        except KeyboardInterrupt:
            notice("msprof: ./%s was stopped on the board; to download what it wrote: %s",
                   self.main.name, record.resume_command(self.config_path, self.output, self.options))
            raise
        state["main_status"] = result.status
        state["main_ended"] = record.now()
        record.save(self.partial, state)
        return result

    def _conclude(self, jobs: List[Path], unpulled: List[str], failure: Optional[str], profiling_dir: str):
        if failure:
            if jobs:            # what main wrote before it failed is listed, and analysed with --all
                notice("msprof: pulled %d JOB director%s despite the failure: %s", len(jobs),
                       "y" if len(jobs) == 1 else "ies", ", ".join(str(j) for j in jobs))
                report(jobs, unpulled, self.run_all, failure)
            raise RemoteError(failure)
        if not jobs and not unpulled and self.profiler["switch"] == "on":
            raise RemoteError(f"{self.main.name} finished but wrote no JOB directory in {profiling_dir} "
                              "(does the app call aclInit with the acl.json in its working directory?)")
        report(jobs, unpulled, self.run_all)

    def _upload(self, board: Board, files, total: int, workdir: str) -> None:
        free = board.free_bytes(workdir)
        if free is not None and total > free:
            raise DiskSpaceError(f"not enough space on the board in {workdir}: the project needs "
                                 f"{kib(total)}, {kib(free)} free")
        log.info("uploading %d files (%s) to %s", len(files), kib(total), workdir)
        began = time.monotonic()
        with progress.step("upload", total or None, "bytes") as shown:
            try:
                board.upload(files, workdir, progress=shown.advance)
            except (OSError, EOFError, paramiko.SSHException) as exc:
                _upload_failed(board, workdir, "", exc)
        log.info("upload took %.2f s", time.monotonic() - began)

    def _mount(self, board: Board, profiling_dir: str) -> bool:
        server, export = self.nfs
        server = server or board.local_address()
        source = f"[{server}]:{export}" if ":" in server else f"{server}:{export}"
        command = f"mount -t nfs -o nolock,tcp {q(source)} {q(profiling_dir)}"
        notice("msprof: on the board: %s", command)
        status, out, err = board.exec(command, timeout=max(60.0, board.cfg.timeout))
        if status != 0:
            lines = [ln for ln in (err + out).decode("utf-8", "replace").splitlines() if ln.strip()]
            raise RemoteError(f"mounting {source} on {profiling_dir} failed (exit {status})"
                              f"{': ' + lines[-1].strip() if lines else ''}")
        return True

    def _run_main(self, board: Board, workdir: str, name: str):
        # main's output as it is into a pipe or a file, and made harmless on a terminal
        out = Passthrough(click.get_binary_stream("stdout"))
        err = Passthrough(click.get_binary_stream("stderr"))
        command = f"cd {q(workdir)} && exec ./{q(name)}"
        notice("msprof: running ./%s on %s", name, board.cfg.host)
        began = time.monotonic()
        try:
            result = board.run(command, timeout=self.timeout or None, on_stdout=out.write, on_stderr=err.write)
        finally:
            out.close()
            err.close()
        log.info("./%s ended with status %d after %.2f s", name, result.status, time.monotonic() - began)
        return result


def _project_acl(project: Path):
    """The project's own acl.json (its other keys are kept), unless it is a link that leads outside."""
    acl_path = project / "acl.json"
    if os.path.lexists(acl_path) and not inside(acl_path, project):
        log.warning("not using %s: a symbolic link that leads outside the project", acl_path)
        return None
    return acljson.read_project_acl(acl_path)


def _upload_failed(board: Board, workdir: str, what: str, exc: BaseException):
    cause = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if board.is_active() and board.out_of_space(workdir):
        raise DiskSpaceError(f"no space left on the board in {workdir} while uploading the project "
                             f"({cause})") from None
    if not board.is_active():
        raise RemoteError(f"connection to {board.cfg.host} lost during the upload ({cause})") from None
    raise RemoteError(f"upload {what + ' ' if what else ''}to {workdir} failed: {cause}") from None


def _main_failure(result, name: str, timeout: float) -> Optional[str]:
    if result.timed_out:
        return f"./{name} did not finish within {timeout:g} s; its process group on the board was killed"
    if result.connection_lost:
        return f"the connection to the board was lost while ./{name} was running"
    status = result.status
    detail = f": {result.last_stderr_line}" if result.last_stderr_line else ""
    if status == 0:
        return None
    if status == 126:
        return f"./{name} could not be executed on the board (exit 126: not executable?){detail}"
    if status == 127:
        return f"./{name} or its interpreter was not found on the board (exit 127){detail}"
    if status == -1:
        return f"./{name} was killed on the board (no exit status){detail}"
    return f"./{name} exited with status {status} on the board{detail}"


def resume(config_path: Path, output: Path, remote_dir: Optional[str], accept_new: bool, run_all: bool,
           keep_remote: bool, options: dict) -> None:
    cfg = load_config(Path(config_path))
    with record.exclusive(output):
        _resume(cfg, config_path, output, remote_dir, accept_new, run_all, keep_remote, options)


def _resume(cfg: BoardConfig, config_path: Path, output: Path, remote_dir: Optional[str], accept_new: bool,
            run_all: bool, keep_remote: bool, options: dict) -> None:
    state = _recorded(cfg, output, remote_dir)
    board = Board.connect(cfg, accept_new)
    with board:
        if remote_dir is not None:
            workdir = resolve_remote_dir(remote_dir, board.home())
            if state is None or state.get("remote_dir") != workdir:
                state = record.new_record(cfg, workdir, options)
        if board.stat(state["profiling_dir"]) is None:
            raise RemoteError(f"{state['profiling_dir']} does not exist on the board (already cleaned up?)")
        notice("msprof: resuming the pull from %s:%s", cfg.host, state["profiling_dir"])
        output.mkdir(parents=True, exist_ok=True)
        state["resumed"] = record.now()
        # the board is cleaned up (or kept) and the JOBs analysed as the interrupted run would have
        recorded = state.get("options") or {}
        keep_remote = keep_remote or bool(recorded.get("keep_remote"))
        run_all = run_all or bool(recorded.get("all"))
        jobs, unpulled = finish_pull(board, cfg, state, output, Path(config_path), keep_remote)
    if not jobs and not unpulled:
        notice("msprof: no JOB directory to pull in %s", state["profiling_dir"])
        return
    report(jobs, unpulled, run_all)


def _recorded(cfg: BoardConfig, output: Path, remote_dir: Optional[str]) -> Optional[dict]:
    """The record of the interrupted pull to finish (None: ``--remote-dir`` names what to pull)."""
    partial = record.partial_dir(output)
    state = record.load(partial)
    if state is not None and (state.get("host"), state.get("port")) != (cfg.host, cfg.port):
        if remote_dir is None:
            raise UsageError(f"the unfinished pull in {partial} is from {state.get('host')}:{state.get('port')}, "
                             f"not {cfg.host}:{cfg.port}; use the matching --config")
        state = None
    if state is None and remote_dir is None:        # (said before connecting: nothing on the board can help)
        raise UsageError(f"nothing to resume: no unfinished pull recorded in {partial}; "
                         "pass --remote-dir DIR (the work dir on the board) to pull its JOB directories")
    return state


def report(jobs: List[Path], unpulled: List[str], run_all: bool, failure: Optional[str] = None) -> None:
    """Print the pulled JOBs (stdout); with --all analyse every one of them, even after one failed. Then
    fail with the highest exit code of what went wrong (main failing (``failure``) or a JOB left on the
    board: 4; analysis: its own)."""
    failed = _analyse(jobs) if run_all else []  # (exit code, JOB name)
    for job in jobs:
        click.echo(str(job))
    if jobs and not run_all:
        notice("msprof: analyse with: msprof export summary -dir %s (or rerun collect with --all)",
               shlex.quote(str(jobs[0])))
    problems, codes = ([failure], [RemoteError.exit_code]) if failure else ([], [])
    if unpulled:
        problems.append(f"{_count(len(unpulled), 'JOB directory', 'JOB directories')} not pulled (see above)")
        codes.append(RemoteError.exit_code)
    if failed:
        others = len(jobs) - len(failed)
        problems.append(f"analysis failed for {', '.join(name for _, name in failed)} (see above"
                        + (f"; the other {_count(others, 'JOB was', 'JOBs were')} analysed)" if others else ")"))
        codes.extend(code for code, _ in failed)
    if problems:
        # main's failure is the run's (exit 4, cli.md), whatever else failed after it
        raise SeveralFailed("; ".join(problems), RemoteError.exit_code if failure else max(codes))


def _analyse(jobs: List[Path]) -> List[Tuple[int, str]]:
    """--all: import and export every JOB, also after one failed; return the (exit code, name) of failures."""
    from msprof import api

    failed = []
    for job in jobs:
        notice("msprof: analysing %s", job)
        try:
            written = api.analyse(job)
        except MsprofError as exc:
            log.error("analysis of %s failed: %s", job.name, exc.message)
            failed.append((exc.exit_code, job.name))
            continue
        dirs = sorted({str(Path(p).parent) for p in written})
        notice("msprof: results of %s in %s", job.name, ", ".join(dirs) if dirs else str(job))
    return failed


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def resolve_remote_dir(value: Optional[str], home: str) -> str:
    if value is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"{home.rstrip('/')}/msprof-{stamp}-{secrets.token_hex(3)}"
    text = value.strip()
    if text in ("~", "") or text.startswith("~/"):
        text = home.rstrip("/") + text[1:]
    elif not text.startswith("/"):
        text = f"{home.rstrip('/')}/{text}"
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        raise UsageError(f"--remote-dir {value!r}: give a directory without '..' (and not /)")
    return "/" + "/".join(parts)
