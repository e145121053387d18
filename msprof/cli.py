"""The msprof command line: parse options, call the library, map exceptions to exit codes.

Nothing here decodes or computes; see msprof.api for the library entry points.
"""
import errno
import gc
import signal
import sqlite3
import sys
from pathlib import Path

import click

from msprof import __version__, cann, interrupts, outputs
from msprof.console import configure, discard_stdout, log
from msprof.outputs import restrict_umask
from msprof.verbosity import verbosity_options
from msprof.errors import EXIT_CODES, MsprofError
from msprof.paths import check_local_path, is_collection, newest_collection, one_line

EXIT_CODE_HELP = "\b\nExit codes:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _Directory(click.Path):
    """A directory argument: the shell completes it as one; msprof checks it (click's own check is a
    three-line usage message, and it would leave a path through a file to fail later)."""

    def __init__(self):
        super().__init__(file_okay=False)

    def convert(self, value, param, ctx):
        return value


DIRECTORY = _Directory()


def _path_arg(ctx, param, value):
    if value is None:
        return None
    return check_local_path(value, "/".join(param.opts))


def _output_arg(ctx, param, value):
    path = _path_arg(ctx, param, value)
    if path is not None:
        outputs.output_given = True     # a write refused under it: the advice is another --output
    return path


def output_options(func):
    """--output, -v, -q: what every analysis command takes."""
    func = click.option("--output", type=DIRECTORY, callback=_output_arg, metavar="DIR",
                        help="write databases and results under DIR/<result dir name>/ instead of into the "
                             "collection (for a read-only one); freshness is still checked against its files")(func)
    return verbosity_options(func)


def command_options(func):
    """The options of the commands that read one path: -dir, and output_options."""
    return click.option("-dir", "--dir", "--collection-dir", "collection_dir", callback=_path_arg,
                        type=DIRECTORY, metavar="DIR",
                        help="JOB or PROF_ directory, or a parent of several "
                             "(default: the current directory when it is one, else the newest JOB*/PROF_* in "
                             "it)")(output_options(func))


# ids are 64-bit in the databases: a larger one is a usage error, not an overflow
ID = click.IntRange(min=0, max=(1 << 63) - 1)


def selection_options(func):
    func = click.option("--iteration-id", "--step", "iteration_id", type=ID,
                        help="restrict to this iteration (of --model-id; alone where there is one model); in a "
                        "torch_npu/MindSpore directory, step N (--step N), on its device too when that ran no "
                        "model")(func)
    return click.option("--model-id", type=ID, help="restrict to this model (with --iteration-id)")(func)


def resolve_dir(collection_dir):
    if collection_dir is not None:
        return collection_dir
    here = Path.cwd()
    if is_collection(here):
        return here
    found = newest_collection(here)
    click.echo(one_line(f"msprof: using {found.name} (newest collection in {here})"), err=True)
    return found


def selection(model_id, iteration_id):
    from msprof.contract import Selection

    return Selection(model_id, iteration_id).check()


class _Commands(click.Group):
    """``collect`` is loaded only when asked for: it brings in paramiko, whose import alone takes about
    as long as importing a small JOB, and the analysis commands never need it."""

    LAZY = {"collect": ("msprof.collect.command", "collect")}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.LAZY))

    def get_command(self, ctx, name):
        if name in self.LAZY and name not in self.commands:
            module, attribute = self.LAZY[name]
            self.add_command(getattr(__import__(module, fromlist=[attribute]), attribute), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        # click takes a broken pipe for an error (exit 1); for us the reader simply had enough
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _PipeClosed() from None
        except KeyboardInterrupt:          # (click would print an empty line first, even where no ^C was)
            raise _Interrupted() from None


class _PipeClosed(Exception):
    """The reader of stdout went away (``msprof show | head -1``)."""


class _Interrupted(Exception):
    """Ctrl-C, TERM or HUP while a command ran."""


@click.group(cls=_Commands, context_settings=CONTEXT, epilog=EXIT_CODE_HELP, invoke_without_command=True,
             subcommand_metavar="[COMMAND] [ARGS]...",
             no_args_is_help=True)
@click.version_option(__version__, "--version", prog_name="msprof")
@click.option("-v", "--verbose", count=True, help="more detail on stderr; -vv also shows tracebacks")
@click.option("-q", "--quiet", is_flag=True, help="only errors on stderr")
@cann.options(DIRECTORY, ID)
@click.pass_context
def cli(ctx, verbose, quiet, **options):
    """Profile AI inference on SS928/SS927 boards (svp_acl) and analyse Ascend CANN PROF data.

    \b
    msprof collect -m main --config board.ini --all
    msprof import -dir JOBxxx
    msprof export timeline -dir JOBxxx
    msprof export summary -dir JOBxxx --format csv
    msprof show -dir JOBxxx
    """
    configure(verbose, quiet)
    ctx.obj = {"verbose": verbose}
    if ctx.invoked_subcommand is not None:
        cann.refuse_with_command(options, ctx.invoked_subcommand)
        return
    cann.run(options, selection(options["cann_model"], options["cann_iteration"]))


@cli.command("import", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@command_options
def import_cmd(collection_dir, output):
    """Decode raw records into SQLite (<result dir>/sqlite/), always rebuilding."""
    from msprof import api

    api.import_collection(resolve_dir(collection_dir), output)


@cli.group(context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@verbosity_options
def export():
    """Write timeline (Chrome trace) or summary (csv/json) files."""


@export.command("timeline", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@command_options
@selection_options
@click.option("--check", "check_all", is_flag=True,
              help="Validate every file before it replaces the old one (default: files up to 100,000 events).")
def export_timeline_cmd(collection_dir, output, model_id, iteration_id, check_all):
    """Chrome traces into <result dir>/timeline/ (JOB: task_time_*, acl_*; PROF_: msprof*), for
    chrome://tracing or ui.perfetto.dev."""
    from msprof import api

    api.export_timeline(resolve_dir(collection_dir), selection(model_id, iteration_id), check_all=check_all,
                        output=output, hint=True)


@export.command("summary", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@command_options
@selection_options
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True,
              help="file format of the summary files")
def export_summary_cmd(collection_dir, output, model_id, iteration_id, fmt):
    """Summary tables into <result dir>/summary/ (JOB: op_summary, op_statistic, acl_statistic; PROF_:
    op_summary, op_statistic, task_time, api_statistic — with --model-id/--iteration-id, op_summary and
    op_statistic: the other two cover the whole run)."""
    from msprof import api

    api.export_summary(resolve_dir(collection_dir), fmt=fmt, selection=selection(model_id, iteration_id),
                       output=output, hint=True)


class _Styles(click.Choice):
    """tabulate's table formats, looked up when click first needs them (help, completion, a value to
    check): importing tabulate costs every other command 20-30 ms."""

    def __init__(self):
        self.case_sensitive = True

    @property
    def choices(self):
        from tabulate import tabulate_formats

        return tuple(sorted(tabulate_formats))


# the table keys show and query print (msprof.layouts: each layout's show_tables/query_tables)
SHOW_TABLES = ["op_summary", "op_statistic", "acl_statistic", "api_statistic", "frequency", "step_trace",
               "communication_statistic", "msprof_tx", "aicpu", "npu_mem", "operator_memory", "l2_cache", "steps",
               "framework_ops"]
QUERY_TABLES = ["collection", "data", "families", "steps", "notices"]
COMPARE_TABLES = ["models", "op_types", "ops", "apis", "framework_ops", "steps", "step_trace",
                  "communication"]   # (msprof.analysis.compare.SECTIONS)


def view_options(tables):
    """The output options of show and query (msprof.show.View)."""
    def decorate(func):
        func = click.option("--style", type=_Styles(), default="simple", show_default=True,
                            metavar="STYLE", help="table style (tabulate's: github, grid, plain, …)")(func)
        func = click.option("--wide", is_flag=True,
                            help="every column, however wide (default: fit the terminal, leaving out "
                                 "the columns of least value and naming them)")(func)
        func = click.option("--table", "tables", type=click.Choice(tables), multiple=True,
                            help="only this table (repeatable); csv prints one table, the first by default")(func)
        return click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
                            show_default=True, help="table for people; csv or json for scripts "
                            "(docs/user-guide.md: output for scripts)")(func)
    return decorate


@cli.command("show", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@command_options
@selection_options
@click.option("--top", type=click.IntRange(min=0), metavar="N",
              help="the N longest rows of each table (table format: 20 unless given; 0: all rows)")
@click.option("--sort", metavar="COLUMN", help="rank rows by this column, by its title or key (\"Time(us)\", "
              "time_us): numbers largest first, start times earliest first, text A to Z (default: each "
              "table's time)")
@click.option("-r", "--reverse", is_flag=True, help="the other way round")
@click.option("--spread", is_flag=True, help="statistics: the median and sample std dev of each row's durations "
              "too (a second pass over the tasks)")
@view_options(SHOW_TABLES)
def show_cmd(collection_dir, output, model_id, iteration_id, top, sort, reverse, spread, fmt, tables, wide, style):
    """Print AA Core metrics (op summary), op statistic, ACL/API statistic and frequency tables."""
    from msprof import api
    from msprof.show import View

    view = View(fmt=fmt, style=style, top=top, sort=sort, reverse=reverse, wide=wide, tables=tables, spread=spread)
    api.show(resolve_dir(collection_dir), selection(model_id, iteration_id), view, output=output)


@cli.command("query", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@command_options
@view_options(QUERY_TABLES)
def query_cmd(collection_dir, output, fmt, tables, wide, style):
    """List devices, models, iterations and the data present (values for --model-id/--iteration-id)."""
    from msprof import api
    from msprof.show import View

    api.query(resolve_dir(collection_dir), View(fmt=fmt, style=style, top=0, wide=wide, tables=tables), output)


@cli.command("compare", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@click.argument("base", type=DIRECTORY, callback=_path_arg)
@click.argument("new", type=DIRECTORY, callback=_path_arg)
@output_options
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="table (verdict first) for people; csv (one table) or json (one document) for scripts "
              "(docs/user-guide.md: output for scripts)")
@click.option("--top", type=click.IntRange(min=0), metavar="N",
              help="ops: only the N largest changes (table format: 20 unless given; csv and json: all unless "
                   "given; 0: all)")
@click.option("--table", "tables", type=click.Choice(list(COMPARE_TABLES)), multiple=True,
              help="only this section (repeatable); csv prints one table, models by default")
@click.option("--wide", is_flag=True, help="table view: every column, however wide (default: fit the terminal, "
              "leaving out the columns of least value and naming them)")
@click.option("--fail-if-slower", type=click.FloatRange(min=0), metavar="PCT",
              help="exit 9 when a model's time per iteration grew by more than PCT %, or when no model is timed "
              "on both sides (nothing could be checked)")
@click.option("--spread", is_flag=True, help="models, ops and apis: each side's median and sample std dev of the "
              "durations averaged too (a second pass over the tasks)")
def compare_cmd(base, new, output, fmt, top, tables, wide, fail_if_slower, spread):
    """Compare two collections: time per iteration per model, per op type, per op, per ACL/API call.

    BASE and NEW are each a JOB or PROF_ directory (or a directory holding exactly one); two PROF_ directories
    of several devices are compared device by device (device_N with device_N). Models are matched by name.
    With --output, two collections of one name go to DIR/base/ and DIR/new/.

    \b
    Examples:
      msprof compare runs/mish runs/leaky             # side by side, verdict first
      msprof compare base/ new/ --fail-if-slower 5    # CI: exit 9 when a model got >5 % slower
    """
    from msprof import api

    api.compare(base, new, fmt=fmt, top=top, fail_if_slower=fail_if_slower, output=output, wide=wide, tables=tables,
                spread=spread)


@cli.command("analyze", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@command_options
@click.option("-r", "--rule", "rules", default="communication,communication_matrix", show_default=True,
              metavar="RULES", help="the analyses to run, comma-separated")
def analyze_cmd(collection_dir, output, rules):
    """Communication analyses of a PROF_'s HCCL data: PROF_x/analyze/communication.json and
    communication_matrix.json, as the CANN msprof writes them (msprof --analyze=on does the same)."""
    from msprof import cannapi

    cannapi.cann_analyze(resolve_dir(collection_dir), [r for r in rules.split(",") if r], output)


@cli.command("advise", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@command_options
@selection_options
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table (short paragraphs, most important first) or json ({\"findings\": [...]})")
def advise_cmd(collection_dir, output, model_id, iteration_id, fmt):
    """Findings: decomposed activations, memory-bound layers, CPU fallbacks, ACL hotspots, idle device, lost data.

    On a PROF_ device with them, also: the step time breakdown, communication no computation hides, the AI
    CPU kernels' overhead and the memory peak. Each result directory under the path is advised on (each device of a PROF_). Layer findings read the
    last complete iteration of each model (said when it is not the last recorded: a run cut off) unless
    --model-id/--iteration-id select one.

    \b
    Example:
      msprof advise -dir JOBxxx
      msprof advise -dir PROF_xxx/device_0 --format json
    """
    from msprof import api

    api.advise(resolve_dir(collection_dir), fmt=fmt, selection=selection(model_id, iteration_id), output=output)


@cli.command("demo", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@click.option("--output", default="msprof-demo", show_default=True, callback=_path_arg, metavar="DIR",
              help="where to copy the bundled sample")
@click.option("--prof", is_flag=True,
              help="the bundled Ascend PROF_ directory (what torch_npu or pyACL write) instead of the SS928 JOB")
@verbosity_options
def demo_cmd(output, prof):
    """Copy a bundled sample (an SS928 JOB of a detection network, or with --prof an Ascend PROF_
    directory) and run import, export and show on it."""
    from msprof import api

    api.demo(output, "PROF_" if prof else "JOB")


@cli.command("cann-tree", context_settings=CONTEXT, epilog=EXIT_CODE_HELP)
@click.argument("directory", callback=_path_arg, metavar="DIR")
@verbosity_options
def cann_tree_cmd(directory):
    """Write CANN's two msprof entry points under DIR (tools/profiler/bin/msprof and
    tools/profiler/profiler_tool/analysis/msprof/msprof.py), each running this msprof, so that torch_npu's and
    MindSpore's analysis use it without a CANN install; prints the line that puts DIR/tools/profiler/bin first
    on PATH (docs/prof.md)."""
    from msprof import canntree

    print(canntree.export_line(canntree.write(directory)))


def _is_disk_full(exc: Exception) -> bool:
    return getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or "disk is full" in str(exc)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _end_interrupted(own_line: bool = False) -> None:
    """One line, exit 130; ``own_line``: on a terminal, after the ^C it echoed."""
    click.echo(("\n" if own_line and _isatty(sys.stderr) else "") + "msprof: interrupted", err=True)
    # A KeyboardInterrupt that went through code exec() ran from a string (a dataclass's methods, made when a
    # module is first imported) makes ``python -m`` end by SIGINT, however it was caught (CPython 3.9-3.13 keep
    # a flag for it); the flag is reset when exec() runs a string again.
    exec("")
    sys.exit(130)


def _interrupted(signum, frame):
    interrupts.seen()          # (a statement SQLite was running has ended: msprof.interrupts)
    raise KeyboardInterrupt


def _caused_by_interrupt(exc: BaseException) -> bool:
    """An exception raised because a Ctrl-C/TERM landed inside code that wraps what it catches (Python
    turns a KeyboardInterrupt in a class body's __set_name__ into a RuntimeError): an interrupt, not a bug."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _out_of_files(exc: BaseException) -> bool:
    """Whether an error comes from a process that may open no more files (wherever it met it: a pipe for a
    worker, a module to import), itself or what caused it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if getattr(exc, "errno", None) in (errno.EMFILE, errno.ENFILE):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _internal_error(exc: Exception, verbose: int) -> None:
    """Exit for an exception that is no user error: a full disk or too few open files (6), else an internal
    error (1)."""
    if isinstance(exc, (OSError, sqlite3.OperationalError)) and _is_disk_full(exc):
        log.error("not enough disk space: %s", exc)
        sys.exit(6)
    if _out_of_files(exc):
        log.error("%s", outputs.too_many_open_files().message)
        sys.exit(6)
    if verbose >= 2:
        raise exc
    log.error("internal error: %s: %s (run with -vv for details)", type(exc).__name__, exc)
    sys.exit(1)


def main(argv=None):
    """Console-script entry: run the click program and turn errors into exit codes, never tracebacks."""
    args = sys.argv[1:] if argv is None else argv
    verbose = sum(a.count("v") for a in args if a.startswith("-") and set(a[1:]) == {"v"}) + args.count("--verbose")
    try:
        # TERM and HUP are handled like Ctrl-C: what is being written is cleaned up, workers are stopped. A
        # signal msprof was started ignoring stays ignored (nohup: a hang-up must not end the command).
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) != signal.SIG_IGN:
                signal.signal(getattr(signal, name), _interrupted)
        interrupts.watch()
        restrict_umask()
        configure(verbose)
        # A million rows handed from SQLite to Python are millions of short-lived tuples, none in a reference
        # cycle; the cycle collector's default pass every 700 allocations cost ~5% of a large export. What
        # start-up made is frozen (never scanned again) and young objects are scanned every 100,000.
        gc.freeze()
        gc.set_threshold(100_000, 50, 50)
        cli.main(args=argv, prog_name="msprof", standalone_mode=False)
    except _Interrupted:
        _end_interrupted(own_line=True)
    except (click.exceptions.Abort, KeyboardInterrupt):       # (click printed the line's end already)
        _end_interrupted()
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code == 2 else exc.exit_code)
    except MsprofError as exc:
        log.error(exc.message)
        sys.exit(exc.exit_code)
    except (BrokenPipeError, _PipeClosed):
        _quiet_broken_pipe()
    except Exception as exc:
        try:
            if not (_caused_by_interrupt(exc) or interrupts.signalled()):
                _internal_error(exc, verbose)
        except KeyboardInterrupt:       # (the signal behind ``exc``, whose handler ran only now)
            pass
        _end_interrupted(own_line=True)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()
    sys.exit(0)


def _quiet_broken_pipe():
    """The reader of our output went away (``msprof show | head -1``): a normal end, as for other tools.
    Python would flush stdout again at exit and complain; point it at /dev/null first."""
    discard_stdout()
    sys.exit(0)
