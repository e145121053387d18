"""``msprof collect``: upload the project, run main with profiling on, pull the JOB directories back.

Flow (cli.md "collect"): ini → connect → remote work dir → upload → acl.json → [--nfs mount] → run ./main
→ pull new JOB* via <output>/.partial → collect.json → cleanup → [--all] analyse.

An unfinished pull is recorded in ``<output>/.partial/collect-state.json`` (no secrets) until it completes;
``msprof collect --resume --config board.ini --output DIR`` finishes it (see docs/collect.md).
"""
import contextlib
import datetime
import json
import os
import secrets
import shlex
import time
from pathlib import Path
from typing import List, Optional, Tuple

import click
from click.shell_completion import CompletionItem

from msprof import __version__, outputs, progress
from msprof.outputs import atomic_open, elsewhere, output_dir
from msprof.collect import acljson
from msprof.collect.board import Board, q
from msprof.collect.config import BoardConfig, FileRefused, load_config, read_small_file
from msprof.collect.project import walk
from msprof.collect.pull import (Unpullable, check_local_space, kib, list_jobs, local_state, manifest, pull_job,
                                 remove_tree, same_contents)
from msprof.console import log, notice
from msprof.verbosity import verbosity_options
from msprof.errors import EXIT_CODES, DiskSpaceError, MsprofError, OutputError, RemoteError, SeveralFailed, UsageError
from msprof.paths import check_path_argument, inside

STATE_FILE = "collect-state.json"
PROFILING_SUBDIR = "msprof_output"
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
EPILOG = ("\b\nExit codes:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items()))


def _path(ctx, param, value):
    if value is None:
        return None
    return check_path_argument(value, "/".join(param.opts))


def _text(ctx, param, value):
    if value is not None:
        check_path_argument(str(value), "/".join(param.opts))
    return value


# Shell completion (click's protocol, e.g. _MSPROF_COMPLETE=bash_complete): the values stay plain strings
# checked by the callbacks above, so only the completion is declared here.
def _complete_file(ctx, param, incomplete):
    return [CompletionItem(incomplete, type="file")]


def _complete_dir(ctx, param, incomplete):
    return [CompletionItem(incomplete, type="dir")]


def _complete_from(choices):
    def complete(ctx, param, incomplete):
        return [CompletionItem(c) for c in choices if c.lower().startswith(incomplete.lower())]
    return complete


@click.command("collect", context_settings=CONTEXT, epilog=EPILOG)
@click.option("-m", "--main", "main_path", callback=_path, metavar="FILE", shell_complete=_complete_file,
              help="the executable to run on the board; its directory is the project that is uploaded "
                   "(required unless --resume)")
@click.option("--config", "config_path", required=True, callback=_path, metavar="FILE",
              shell_complete=_complete_file,
              help="ini file with [ssh_config]: ip, username, and optionally pwd, port, key_file, known_hosts, "
                   "timeout, remote_path, transfer (docs/collect.md)")
@click.option("--interval", default="0", show_default=True, help="acl.json profiler interval")
@click.option("--acl_api", "--acl-api", "acl_api", default="on", show_default=True, metavar="on|off",
              shell_complete=_complete_from(acljson.ON_OFF), help="trace ACL API calls")
@click.option("--aacpu", default="on", show_default=True, metavar="on|off",
              shell_complete=_complete_from(acljson.ON_OFF), help="AA CPU task profiling")
@click.option("--switch", default="on", show_default=True, metavar="on|off",
              shell_complete=_complete_from(acljson.ON_OFF), help="profiler switch")
@click.option("--aac_metrics", "--aac-metrics", "aac_metrics", default="ArithmeticUtilization",
              show_default=True, metavar="NAME", shell_complete=_complete_from(acljson.AAC_METRICS),
              help="AA core metric set: " + ", ".join(acljson.AAC_METRICS))
@click.option("--output", default="output", show_default=True, callback=_path, metavar="DIR",
              shell_complete=_complete_dir,
              help="local directory that receives the JOB directories")
@click.option("--all", "run_all", is_flag=True, help="then run import + export timeline + export summary on each JOB")
@click.option("--keep-remote", is_flag=True, help="leave the remote work dir on the board")
@click.option("--remote-dir", callback=_text, metavar="DIR",
              help="remote work dir (default: a fresh ~/msprof-<time>-<random>); relative = under the home dir")
@click.option("--timeout", type=click.FloatRange(min=0), default=0, show_default=True, metavar="SECONDS",
              help="kill main (its whole process group) after this long; 0 = no limit")
@click.option("--accept-new-host-key", is_flag=True,
              help="trust an unknown board's host key and add it to known_hosts (never a changed key)")
@click.option("--nfs", callback=_text, metavar="[SERVER]:/EXPORT",
              help="mount this NFS export on the board's profiling dir first (default SERVER: this host's "
                   "address as the board sees it)")
@click.option("--resume", is_flag=True,
              help="finish an interrupted pull (recorded in OUTPUT/.partial) without running main again")
@click.option("--force", is_flag=True,
              help="upload the directory of main even when it is a system or home directory, or larger than "
                   "512 MiB or 10,000 files")
@verbosity_options
def collect(main_path, config_path, interval, acl_api, aacpu, switch, aac_metrics, output, run_all, keep_remote,
            remote_dir, timeout, accept_new_host_key, nfs, resume, force):
    """Push the app to the board over SSH, run it with profiling on, pull the JOB directories back.

    \b
    msprof collect -m build/main --config board.ini --all
    msprof collect --resume --config board.ini        # finish an interrupted download
    """
    options = {
        "main": str(main_path) if main_path else None, "interval": interval, "acl_api": acl_api, "aacpu": aacpu,
        "switch": switch, "aac_metrics": aac_metrics, "output": str(output), "all": run_all,
        "keep_remote": keep_remote, "remote_dir": remote_dir, "timeout": timeout, "nfs": nfs, "resume": resume,
        "force": force,
    }
    if resume:
        if main_path is not None:
            log.info("--main is ignored with --resume (main is not run again)")
        return _resume(config_path, Path(output), remote_dir, accept_new_host_key, run_all, keep_remote, options)
    if main_path is None:
        raise UsageError("missing option -m/--main (the executable to run on the board)")
    profiler = acljson.profiler_section("", switch=switch, interval=interval, acl_api=acl_api, aacpu=aacpu,
                                        aac_metrics=aac_metrics)
    options.update({k: profiler[k] for k in ("switch", "interval", "acl_api", "aacpu", "aac_metrics")})
    nfs_spec = parse_nfs(nfs) if nfs else None
    Collector(Path(main_path), Path(config_path), Path(output), profiler, options, remote_dir, timeout,
              accept_new_host_key, nfs_spec, keep_remote, run_all, force).run()


def parse_nfs(value: str):
    """``[SERVER]:/EXPORT`` → (server or None, export)."""
    server, sep, rest = value.partition(":/")
    if not sep:
        if value.startswith("/"):
            server, rest = "", value[1:]
        else:
            raise UsageError(f"--nfs must look like SERVER:/EXPORT or :/EXPORT, not {value!r}")
    export = "/" + rest
    if server.startswith("[") and server.endswith("]"):
        server = server[1:-1]
    if any(c.isspace() for c in server + export) or server.startswith("-"):
        raise UsageError(f"--nfs: invalid server or export in {value!r}")
    return (server or None), export


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")


@contextlib.contextmanager
def _progress(total: int, label: str):
    """The transfer's progress line (msprof.progress: a terminal only, after a second), fed in bytes."""
    with progress.step(label, total or None, "bytes") as shown:
        yield shown.advance


class Collector:
    def __init__(self, main: Path, config: Path, output: Path, profiler: dict, options: dict,
                 remote_dir: Optional[str], timeout: float, accept_new: bool, nfs, keep_remote: bool,
                 run_all: bool, force: bool = False):
        self.main, self.config_path, self.output = main, config, output
        self.profiler, self.options = profiler, options
        self.remote_dir_arg, self.timeout, self.accept_new = remote_dir, timeout, accept_new
        self.nfs, self.keep_remote, self.run_all, self.force = nfs, keep_remote, run_all, force

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
        main = self.main
        if not main.exists():
            raise UsageError(f"--main {main}: no such file")
        if not main.is_file():
            raise UsageError(f"--main {main}: not a regular file")
        project = main.resolve().parent
        cfg = load_config(self.config_path)
        acl_path = project / "acl.json"
        existing_acl = None
        if os.path.lexists(acl_path) and not inside(acl_path, project):
            log.warning("not using %s: a symbolic link that leads outside the project", acl_path)
        else:
            existing_acl = acljson.read_project_acl(acl_path)
        partial = self.output / ".partial"
        # a file, a link or a directory this user may not write is said now (exit 7), not after the upload
        outputs.output_given = True        # (collect always writes under its --output: the advice is another)
        output_dir(self.output)
        if not os.access(self.output, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write {self.output}: Permission denied ({elsewhere()})")
        _warn_pending(partial, self.config_path)
        started = _now()

        # Connect before looking at the project: a wrong address or password is reported at once, not after
        # walking a large tree.
        board = Board.connect(cfg, self.accept_new)
        with board:
            log.info("connected to %s (auth: %s)", cfg.address, board.auth)
            secrets = {self.config_path: "the --config file (it may hold the password)",
                       cfg.key_file: "the key_file named in the --config file"}
            found = walk(project, secrets, leave_out=[self.output], force=self.force)
            files, total = found.files, found.total
            home = board.home()
            workdir = resolve_remote_dir(self.remote_dir_arg, home)
            created = board.makedirs(workdir, 0o700)
            profiling_dir = f"{workdir}/{PROFILING_SUBDIR}"
            notice("msprof: remote work dir %s:%s", cfg.host, workdir)
            try:
                self._upload(board, files, total, workdir)
                acl = acljson.merge(existing_acl, dict(self.profiler, output=profiling_dir),
                                    source=str(project / "acl.json"))
                try:
                    board.write_file(f"{workdir}/acl.json", acljson.dumps(acl))
                except OSError as exc:
                    self._upload_failed(board, workdir, "acl.json", exc)
            except BaseException:
                if created and not self.keep_remote:
                    _remove_remote(board, workdir)
                raise
            board.makedirs(profiling_dir)
            mounted = False
            if self.nfs:
                mounted = self._mount(board, profiling_dir)
            before = list_jobs(board, profiling_dir)
            state = {
                "version": 1, "host": cfg.host, "port": cfg.port, "username": cfg.username,
                "remote_dir": workdir, "profiling_dir": profiling_dir, "created_remote_dir": created,
                "nfs_mounted": mounted, "before": before, "acl_json": acl, "options": self.options,
                "started": started, "main_status": None,
            }
            _save_state(partial, state)
            try:
                result = self._run_main(board, workdir, main.name)
            except KeyboardInterrupt:
                notice("msprof: ./%s was stopped on the board; to download what it wrote: %s",
                       main.name, _resume_command(self.config_path, self.output, self.options))
                raise
            state["main_status"] = result.status
            state["main_ended"] = _now()
            _save_state(partial, state)
            failure = _main_failure(result, main.name, self.timeout)
            if result.connection_lost:
                raise RemoteError(f"{failure}; the data stays on the board: "
                                  f"{_resume_hint(self.config_path, self.output, self.options)}")
            try:
                jobs, unpulled = finish_pull(board, cfg, state, self.output, self.config_path, self.keep_remote)
            except MsprofError as exc:
                if failure:         # (main's failure first: it is why the run failed, and exit 4)
                    raise RemoteError(f"{failure}; then: {exc.message}") from None
                raise
        if failure:
            if jobs:            # what main wrote before it failed is listed, and analysed with --all
                notice("msprof: pulled %d JOB director%s despite the failure: %s", len(jobs),
                       "y" if len(jobs) == 1 else "ies", ", ".join(str(j) for j in jobs))
                _report(jobs, unpulled, self.run_all, failure)
            raise RemoteError(failure)
        if not jobs and not unpulled and self.profiler["switch"] == "on":
            raise RemoteError(f"{main.name} finished but wrote no JOB directory in {profiling_dir} "
                              "(does the app call aclInit with the acl.json in its working directory?)")
        _report(jobs, unpulled, self.run_all)

    def _upload(self, board: Board, files, total: int, workdir: str) -> None:
        free = board.free_bytes(workdir)
        if free is not None and total > free:
            raise DiskSpaceError(f"not enough space on the board in {workdir}: the project needs "
                                 f"{kib(total)}, {kib(free)} free")
        log.info("uploading %d files (%s) to %s", len(files), kib(total), workdir)
        began = time.monotonic()
        with _progress(total, "upload") as update:
            try:
                board.upload(files, workdir, progress=update)
            except (OSError, EOFError) as exc:
                self._upload_failed(board, workdir, "", exc)
            except Exception as exc:
                import paramiko

                if isinstance(exc, paramiko.SSHException):
                    self._upload_failed(board, workdir, "", exc)
                raise
        log.info("upload took %.2f s", time.monotonic() - began)

    def _upload_failed(self, board: Board, workdir: str, what: str, exc: BaseException):
        cause = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        if board.is_active() and board.out_of_space(workdir):
            raise DiskSpaceError(f"no space left on the board in {workdir} while uploading the project "
                                 f"({cause})") from None
        if not board.is_active():
            raise RemoteError(f"connection to {board.cfg.host} lost during the upload ({cause})") from None
        raise RemoteError(f"upload {what + ' ' if what else ''}to {workdir} failed: {cause}") from None

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
        stdout = click.get_binary_stream("stdout")
        stderr = click.get_binary_stream("stderr")

        def out(data):
            stdout.write(data)
            stdout.flush()

        def err(data):
            stderr.write(data)
            stderr.flush()

        command = f"cd {q(workdir)} && exec ./{q(name)}"
        notice("msprof: running ./%s on %s", name, board.cfg.host)
        began = time.monotonic()
        result = board.run(command, timeout=self.timeout or None, on_stdout=out, on_stderr=err)
        log.info("./%s ended with status %d after %.2f s", name, result.status, time.monotonic() - began)
        return result


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


def finish_pull(board: Board, cfg: BoardConfig, state: dict, output: Path, config_path: Path,
                keep_remote: bool) -> Tuple[List[Path], List[str]]:
    """Pull every JOB of ``state`` not yet local, write collect.json, rename; then clean up the board.

    Returns the local JOB directories and the JOBs that could not be pulled safely or completely (unsafe
    names, an incomplete listing: each logged as an error). Those stay on the board, and so does the work dir.
    """
    partial = output / ".partial"
    profiling_dir = state["profiling_dir"]
    unpulled = []
    try:
        jobs = [j for j in list_jobs(board, profiling_dir) if j not in set(state.get("before") or [])]
        found = []
        for job in jobs:
            try:
                found.append(manifest(board, profiling_dir, job))
            except Unpullable as exc:
                log.error("%s", exc.message)
                unpulled.append(job)
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
        check_local_space(output, sum(item.total for item in todo))
        method = cfg.transfer
        if method == "auto":
            method = "tar" if todo and board.has_command("tar") else "sftp"
        total = sum(item.total for item in todo)
        began = time.monotonic()
        pulled = []
        try:
            with _progress(total, "download") as update:
                for item in todo:
                    log.info("pulling %s (%d files, %s) with %s", item.job, len(item.files), kib(item.total),
                             method)
                    staged = pull_job(board, profiling_dir, item, partial, method, update)
                    final = output / item.job
                    if os.path.lexists(final):  # never overwritten: the same JOB, or a conflict
                        same = same_contents(partial, output, item)
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
            log.info("download: %s in %.2f s (%.1f MB/s, %s)", kib(total), seconds,
                     total / 1e6 / max(seconds, 1e-6), method)
    except BaseException as exc:
        if not isinstance(exc, UsageError):
            notice("msprof: the download is unfinished; the data stays on the board. %s",
                   _resume_hint(config_path, output, state.get("options")))
        raise
    if conflicts:
        raise UsageError(f"{output / conflicts[0]} already exists and differs from the board's {conflicts[0]}; "
                         f"not overwritten. Move it away (or use another --output) and finish with: "
                         f"{_resume_command(config_path, output, state.get('options'))}")
    _cleanup(board, state, keep_remote or bool(unpulled))  # what was not pulled stays on the board
    _clear_state(partial)
    return ready, unpulled


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
        _remove_remote(board, workdir)
    elif not state.get("nfs_mounted"):
        # a work dir the user gave us: remove only what this run made — the profiling output dir, or, where
        # an earlier run left JOBs in it (--keep-remote, never pulled by this run), this run's JOBs alone
        earlier = set(state.get("before") or [])
        if not earlier:
            _remove_remote(board, state["profiling_dir"])
            return
        for job in list_jobs(board, state["profiling_dir"]):
            if job not in earlier:
                _remove_remote(board, f"{state['profiling_dir']}/{job}")
        notice("msprof: kept %d earlier JOB director%s in %s:%s", len(earlier), "y" if len(earlier) == 1 else "ies",
               board.cfg.host, state["profiling_dir"])


def _remove_remote(board: Board, path: str) -> None:
    if not path.startswith("/") or path.rstrip("/").count("/") < 2 and not path.startswith("/tmp/"):
        log.warning("not removing %s on the board (too close to /)", path)
        return
    with contextlib.suppress(Exception):
        status, _, err = board.exec(f"rm -rf -- {q(path)}")
        if status == 0:
            log.info("removed %s on the board", path)
            return
        log.warning("could not remove %s on the board: %s", path, err.decode("utf-8", "replace").strip()[:200])


def _resume(config_path, output: Path, remote_dir, accept_new, run_all, keep_remote, options) -> None:
    cfg = load_config(Path(config_path))
    partial = output / ".partial"
    state = _load_state(partial)
    if state is not None and (state.get("host"), state.get("port")) != (cfg.host, cfg.port):
        if remote_dir is None:
            raise UsageError(f"the unfinished pull in {partial} is from {state.get('host')}:{state.get('port')}, "
                             f"not {cfg.host}:{cfg.port}; use the matching --config")
        state = None
    if state is None and remote_dir is None:        # (said before connecting: nothing on the board can help)
        raise UsageError(f"nothing to resume: no unfinished pull recorded in {partial}; "
                         "pass --remote-dir DIR (the work dir on the board) to pull its JOB directories")
    board = Board.connect(cfg, accept_new)
    with board:
        home = board.home()
        if remote_dir is not None:
            workdir = resolve_remote_dir(remote_dir, home)
            if state is None or state.get("remote_dir") != workdir:
                state = {"version": 1, "host": cfg.host, "port": cfg.port, "username": cfg.username,
                         "remote_dir": workdir, "profiling_dir": f"{workdir}/{PROFILING_SUBDIR}",
                         "created_remote_dir": False, "nfs_mounted": False, "before": [], "acl_json": None,
                         "options": options, "started": None, "main_status": None}
        st = board.stat(state["profiling_dir"])
        if st is None:
            raise RemoteError(f"{state['profiling_dir']} does not exist on the board (already cleaned up?)")
        notice("msprof: resuming the pull from %s:%s", cfg.host, state["profiling_dir"])
        output.mkdir(parents=True, exist_ok=True)
        state["resumed"] = _now()
        # the board is cleaned up (or kept) and the JOBs analysed as the interrupted run would have
        recorded = state.get("options") or {}
        keep_remote = keep_remote or bool(recorded.get("keep_remote"))
        run_all = run_all or bool(recorded.get("all"))
        jobs, unpulled = finish_pull(board, cfg, state, output, Path(config_path), keep_remote)
    if not jobs and not unpulled:
        notice("msprof: no JOB directory to pull in %s", state["profiling_dir"])
        return
    _report(jobs, unpulled, run_all)


def _report(jobs: List[Path], unpulled: List[str], run_all: bool, failure: Optional[str] = None) -> None:
    """Print the pulled JOBs (stdout); with --all analyse every one of them, even after one failed. Then
    fail with the highest exit code of what went wrong (main failing (``failure``) or a JOB left on the
    board: 4; analysis: its own)."""
    failed = []  # (exit code, JOB name)
    if run_all:
        from msprof import api

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


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _pulled_by(job_dir: Path, state: dict) -> bool:
    """Whether ``job_dir`` is what this very run pulled, by its collect.json: the same board, work dir and
    start of main (a resume finds the JOBs pulled before the interruption so: downloading them again only to
    compare them would cost the whole transfer again)."""
    if not state.get("started"):        # (a resume given --remote-dir alone: no run to be the one of)
        return False
    try:
        record = json.loads(read_small_file(job_dir / "collect.json", 1 << 20))
        board = record["board"]
        return (board["host"], board["port"], record["profiling_dir"], record["started"]) == (
            state.get("host"), state.get("port"), state.get("profiling_dir"), state["started"])
    except (OSError, FileRefused, ValueError, KeyError, TypeError):
        return False


def _write_collect_json(job_dir: Path, cfg: BoardConfig, state: dict, method: str) -> None:
    record = {
        "tool": "msprof", "version": __version__,
        "board": {"host": cfg.host, "port": cfg.port, "username": cfg.username},
        "remote_dir": state.get("remote_dir"), "profiling_dir": state.get("profiling_dir"),
        "options": state.get("options"), "acl_json": state.get("acl_json"),
        "main_exit_status": state.get("main_status"),
        "started": state.get("started"), "main_ended": state.get("main_ended"),
        "resumed": state.get("resumed"), "pulled": _now(), "transfer": method,
    }
    with atomic_open(job_dir / "collect.json", "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=2)
        handle.write("\n")


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


def _resume_command(config_path: Path, output: Path, options: Optional[dict] = None) -> str:
    """The command that finishes an interrupted pull (with the original run's --keep-remote and --all: a resume
    takes them from the record anyway, the command shows what it will do)."""
    flags = "".join(f" {flag}" for key, flag in (("keep_remote", "--keep-remote"), ("all", "--all"))
                    if (options or {}).get(key))
    return (f"msprof collect --resume --config {shlex.quote(str(config_path))} --output {shlex.quote(str(output))}"
            f"{flags}")


def _resume_hint(config_path: Path, output: Path, options: Optional[dict] = None) -> str:
    return f"Finish with: {_resume_command(config_path, output, options)}"


def _save_state(partial: Path, state: dict) -> None:
    partial.mkdir(parents=True, exist_ok=True)
    with atomic_open(partial / STATE_FILE, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)


def _load_state(partial: Path) -> Optional[dict]:
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


def _clear_state(partial: Path) -> None:
    with contextlib.suppress(OSError):
        (partial / STATE_FILE).unlink()
    with contextlib.suppress(OSError):
        partial.rmdir()  # only when empty


def _warn_pending(partial: Path, config_path: Path) -> None:
    state = _load_state(partial)
    if state is not None:
        log.warning("an earlier download from %s:%s is unfinished; finish it with: %s --remote-dir %s (this run "
                    "replaces the record)", state.get("host"), state.get("profiling_dir"),
                    _resume_command(config_path, partial.parent, state.get("options")),
                    shlex.quote(state.get("remote_dir", "")))
