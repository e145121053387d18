"""-v/-q after a command's name, as before it (``msprof show -dir X -v``): one decorator for every command
(the analysis commands in msprof.cli, collect in msprof.collect.command)."""
import click

from msprof.console import configure


def _verbosity(ctx, param, value):
    if value:
        state = ctx.find_root().meta.setdefault("msprof.verbosity", {"verbose": 0, "quiet": False})
        state["verbose" if param.name == "verbose" else "quiet"] = value if param.name == "verbose" else True
        configure(state["verbose"], state["quiet"])


def verbosity_options(func):
    func = click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_verbosity,
                        help="only errors on stderr")(func)
    return click.option("-v", "--verbose", count=True, expose_value=False, callback=_verbosity,
                        help="more detail on stderr; -vv also shows tracebacks")(func)
