"""A collection from someone else's machine (docs/security.md "Trusting nothing a collection ships"): its
bookkeeping files, databases and names, through the real CLI on real files. Nothing it ships is believed,
opened when it is not a regular file, read beyond a bound, or allowed to make msprof delete, run or show what
its sender chose."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.board import jobgen
from fixtures.networks import small_job

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")


def no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


def named_job(tmp_path, name: str) -> Path:
    """small_job with its first layer renamed."""
    desc = small_job()
    desc["models"][0]["layers"][0]["name"] = name
    return jobgen.write_job(tmp_path, desc)


def on_a_terminal(*args) -> str:
    """What msprof prints on stdout when stdout is a terminal (a pseudo-terminal here)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "msprof", *map(str, args)], stdout=slave,
                            stderr=subprocess.DEVNULL, env=dict(ENV, COLUMNS="300"))
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:               # (Linux: EIO once the other side is closed)
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return out.decode("utf-8", "replace")


# --- names ---------------------------------------------------------------------------------------------------
def test_bidi_and_invisible_characters_in_names_are_escaped_on_a_terminal(tmp_path, msprof_cli):
    """U+202E (right-to-left override) would show "conv\u202ecod.exe" as "convexe.doc"; zero-width and other
    format characters hide text. On a terminal they are escaped as JSON would write them; into a pipe the
    bytes are the data's."""
    name = "c\u202eexe\u200b\u2066x\u2069"
    job = named_job(tmp_path, name)
    for fmt in ("table", "csv", "json"):
        shown = on_a_terminal("show", "-dir", job, "--table", "op_statistic", "--format", fmt)
        assert "c\\u202eexe\\u200b\\u2066x\\u2069" in shown, fmt
        assert not {"\u202e", "\u200b", "\u2066", "\u2069"} & set(shown), fmt
    piped = msprof_cli("show", "-dir", job, "--table", "op_statistic", "--format", "csv")
    assert piped.returncode == 0 and name in piped.stdout
