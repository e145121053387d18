"""The CANN msprof's own syntax, ``msprof --export=on --output=DIR`` and ``msprof --analyze=on``: what
torch_npu, MindSpore and Ascend users run. Options of the program itself, never with a command."""
import click

from msprof.paths import check_local_path

ON_OFF = click.Choice(["on", "off"])


def options(directory: click.ParamType, ids: click.ParamType):
    """The CANN msprof's own syntax (``msprof --export=on --output=DIR``), what torch_npu, MindSpore and Ascend
    users run: options of the program itself, never with a command (docs/cli-reference.md). ``directory``
    and ``ids``: the types the commands' own -dir and --model-id take."""
    flags = [
        click.option("--export", "cann_export", type=ON_OFF, help="CANN syntax: --export=on exports every "
                     "collection under --output (a PROF_'s into PROF_x/mindstudio_profiler_output/)"),
        click.option("--analyze", "cann_analyze", type=ON_OFF, help="CANN syntax: --analyze=on runs the "
                     "communication analyses (HCCL data) of every PROF_ under --output"),
        click.option("--output", "cann_output", type=directory, metavar="DIR",
                     help="CANN syntax: the PROF_ directory, or a parent of several, for --export/--analyze "
                          "(a command's own --output, after its name, means where results go)"),
        click.option("--type", "cann_type", type=click.Choice(["text", "db"]), hidden=True),
        click.option("--rule", "cann_rule", metavar="RULES", help="CANN syntax, with --analyze=on: "
                     "communication,communication_matrix (the default: both)"),
        click.option("--model-id", "cann_model", type=ids, help="CANN syntax, with --export=on: this model's "
                     "execution only (with --iteration-id)"),
        click.option("--iteration-id", "cann_iteration", type=ids, help="CANN syntax, with --export=on: that "
                     "execution (with --model-id)"),
        click.option("--iteration-count", "cann_count", type=click.IntRange(min=1), help="CANN syntax: how "
                     "many executions from --iteration-id (1 only, for now)"),
        click.option("--summary-format", "cann_format", type=click.Choice(["csv", "json"]), help="CANN syntax: "
                     "the summary files' format (json: the CANN msprof's arrays of rows)"),
    ]

    def decorate(func):
        for option in reversed(flags):
            func = option(func)
        return func

    return decorate


# the CANN options' names, in the order ``options`` declares them
_CANN_NAMES = ("export", "analyze", "output", "type", "rule", "model-id", "iteration-id", "iteration-count",
               "summary-format")


def refuse_with_command(given: dict, command: str) -> None:
    """The CANN options belong to the program alone: given with a command, they are a usage error."""
    named = [f"--{name}" for name, value in zip(_CANN_NAMES, given.values()) if value is not None]
    if named:
        raise click.UsageError(f"{named[0]}: CANN syntax, not with a command ({command})")


def run(given: dict, selection) -> None:
    """``msprof --export=on|--analyze=on --output=DIR``: export, then analyse (docs/cli-reference.md);
    ``given``: the options of ``options`` by their names, ``selection``: --model-id/--iteration-id, checked."""
    from msprof import cannapi

    cann_export, cann_analyze, cann_output = given["cann_export"], given["cann_analyze"], given["cann_output"]
    cann_type, cann_rule, cann_count, cann_format = (given["cann_type"], given["cann_rule"], given["cann_count"],
                                                     given["cann_format"])

    if "on" not in (cann_export, cann_analyze):
        raise click.UsageError("--export=on or --analyze=on, or a command (msprof --help)")
    if cann_output is None:
        raise click.UsageError("--output=DIR: the PROF_ directory (or a parent of several) to work on")
    if cann_type == "db":
        raise click.UsageError("--type=db: the unified database (msprof_<ts>.db) is not written yet; use "
                               "--type=text (the default)")
    if (cann_count or 1) > 1:
        raise click.UsageError("--iteration-count: msprof exports one execution (--iteration-id) at a time for now")
    path = check_local_path(cann_output, "--output")
    if cann_export == "on":
        cannapi.cann_export(path, selection, cann_format or "csv")
    if cann_analyze == "on":
        rules = [r for r in (cann_rule or ",".join(cannapi.ANALYZE_RULES)).split(",") if r]
        cannapi.cann_analyze(path, rules)
