"""``msprof cann-tree DIR``: a CANN toolkit's two msprof entry points, standing in for CANN's, so that torch_npu
and MindSpore run their analysis with this msprof on a machine without CANN (docs/ecosystem-target.md §6.3).

torch_npu takes ``realpath(which msprof)``, cuts it at the first ``tools`` and requires
``tools/profiler/profiler_tool/analysis/msprof/msprof.py`` below what is left; MindSpore runs that msprof.py
with ``python3``. Both files are programs (never links: a link's realpath leads out of the tree) that run this
Python with this msprof, whatever PATH holds later. They are written under temporary names and renamed.
"""
import os
import shlex
import shutil
import sys
from pathlib import Path

from msprof.console import notice
from msprof.errors import OutputError, UsageError
from msprof.outputs import atomic_path, file_mode, naming_errors, output_dir

BIN = Path("tools", "profiler", "bin")
ANALYSIS = Path("tools", "profiler", "profiler_tool", "analysis", "msprof")
MARK = "written by msprof cann-tree"       # (a file without it is someone else's: never replaced)

# The start of both programs: this msprof's package directory is appended to the path, so that a msprof run
# from a source tree (PYTHONPATH) is found too; an installed one is found first, as it is the same.
_BOOT = "import sys; sys.path.append({root!r}); from msprof.__main__ import main; main()"

_WRAPPER = """#!/bin/sh
# msprof standing in for the CANN msprof ({mark}): this Python, this msprof
exec {python} -c {boot} "$@"
"""

_ANALYSIS = '''#!{python}
"""The CANN analysis entry point ({mark}): ``msprof.py export timeline|summary -dir D [--model-id M
--iteration-id I --iteration-count 1]``, as MindSpore runs it (with any python3): msprof's Python runs it."""
import os
import sys

args = sys.argv[1:]
for i, arg in enumerate(args):
    if arg == "--iteration-count" or arg.startswith("--iteration-count="):
        count = arg.partition("=")[2] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
        if count != "1":
            sys.stderr.write("msprof.py: --iteration-count " + count + ": msprof exports one execution at a time\\n")
            sys.exit(2)
        del args[i:i + (1 if "=" in arg else 2)]
        break
os.execv({python!r}, [{python!r}, "-c", {boot!r}] + args)
'''


def write(directory: Path) -> Path:
    """Write the two programs under ``directory``; return the ``bin`` directory to put first on PATH."""
    real = os.path.realpath(directory)
    if "tools" in real:
        raise UsageError(f"{directory}: its path ({real}) holds 'tools', where torch_npu cuts msprof's path to "
                         "find the CANN tree: choose a directory without it")
    root = str(Path(__file__).resolve().parent.parent)
    python = sys.executable
    boot = _BOOT.format(root=root)
    bin_dir = Path(directory) / BIN
    programs = {bin_dir / "msprof": _WRAPPER.format(mark=MARK, python=shlex.quote(python), boot=shlex.quote(boot)),
                Path(directory) / ANALYSIS / "msprof.py": _ANALYSIS.format(mark=MARK, python=python, boot=boot)}
    for path in programs:           # (both checked before either is written: never half a tree)
        _refuse_foreign(path)
    for path, text in programs.items():
        _program(path, text)
    return bin_dir


def _refuse_foreign(path: Path) -> None:
    """A file at ``path`` that cann-tree did not write (a link or a special file included) is never replaced."""
    if not os.path.lexists(path):
        return
    ours = False
    if os.path.isfile(path) and not os.path.islink(path):      # (a link or a FIFO is never opened)
        with naming_errors(path):
            with open(path, "rb") as handle:
                ours = MARK.encode() in handle.read(4096)
    if not ours:
        raise OutputError(f"{path} exists and was not written by msprof cann-tree: left as it is")


def _program(path: Path, text: str) -> None:
    """``text`` as an executable at ``path`` (rwx for its owner, as the umask allows the rest)."""
    output_dir(path.parent)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
        os.chmod(tmp, file_mode() | (file_mode() & 0o444) >> 2)       # (executable by whoever may read it)


def export_line(bin_dir: Path) -> str:
    """The shell line that makes ``bin_dir``'s msprof the one torch_npu, MindSpore and a shell run; what runs
    until then (the first msprof on PATH: CANN's set_env.sh puts CANN's there) is said on stderr."""
    now = shutil.which("msprof")
    notice(f"msprof first on PATH now: {now or 'none'}; after the line below: {bin_dir.resolve() / 'msprof'} "
           "(msprof --version tells them apart)")
    return f"export PATH={shlex.quote(str(bin_dir.resolve()))}:$PATH"
