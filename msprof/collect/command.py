"""``msprof collect``: the command line (options, their checks and shell completion).

The run itself is :mod:`msprof.collect.session`; the record an interrupted pull leaves for ``--resume`` is
:mod:`msprof.collect.state` (see docs/collect.md).
"""
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from msprof.collect import acljson
from msprof.collect import session
from msprof.console import log
from msprof.errors import EXIT_CODES, UsageError
from msprof.paths import check_path_argument
from msprof.verbosity import verbosity_options

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
        return session.resume(config_path, Path(output), remote_dir, accept_new_host_key, run_all, keep_remote, options)
    if main_path is None:
        raise UsageError("missing option -m/--main (the executable to run on the board)")
    profiler = acljson.profiler_section("", switch=switch, interval=interval, acl_api=acl_api, aacpu=aacpu,
                                        aac_metrics=aac_metrics)
    options.update({k: profiler[k] for k in ("switch", "interval", "acl_api", "aacpu", "aac_metrics")})
    nfs_spec = parse_nfs(nfs) if nfs else None
    session.Collector(Path(main_path), Path(config_path), Path(output), profiler, options, remote_dir, timeout,
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
