"""No SQLite statement outlives Ctrl-C, TERM or HUP.

Python runs a signal's handler between two of its own instructions, never inside a C call: one SQLite
statement that does not return (an endless recursive view) would hold msprof forever. Once the CLI has
called ``watch``, every connection made by ``connect`` has SQLite look, every STEPS steps of its virtual
machine, whether a signal came — a byte that Python's C-level handler writes into a pipe
(``signal.set_wakeup_fd``) — and end the statement when one did. The look is a built-in (``poll``), not
Python code: Python's own handler then runs right after the statement, raising KeyboardInterrupt as usual
(inside SQLite's callback, SQLite would swallow it). The handler calls ``seen`` to empty the pipe, so that
what runs on the way out runs to its end.

The KeyboardInterrupt can land where Python cannot raise it: SQLite's ``executemany`` drops the generator
feeding it once its statement ended, and the handler then runs inside the generator's clean-up, where
Python only reports it ("Exception ignored"). The statement's "interrupted" error is what reaches the
command then; ``signalled`` tells it a signal came, and such a report is kept quiet.
"""
import contextlib
import functools
import os
import signal
import sqlite3
import sys

# SQLite's virtual-machine steps between two looks at the pipe (a look is one poll(2) of it)
STEPS = 100_000
_watch = None            # (a poll of the pipe, the pipe's read end) once ``watch`` was called
_signalled = False


def connect(database: str, **kwargs) -> sqlite3.Connection:
    """``sqlite3.connect``, whose statements end when a signal comes."""
    return watched(sqlite3.connect(database, **kwargs))


def watched(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn``, its statements ending when a signal comes (its progress handler, again after another one)."""
    if _watch is not None:
        conn.set_progress_handler(functools.partial(_watch[0].poll, 0), STEPS)
    return conn


def watch() -> None:
    """From now on a signal with a Python handler ends the statement SQLite is running (the module's doc)."""
    global _watch
    try:
        import select

        read, write = os.pipe()
        for fd in (read, write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        poll = select.poll()
        poll.register(read, select.POLLIN)
    except (ImportError, AttributeError, OSError, ValueError):     # (no poll, or not the main thread)
        return
    _watch = (poll, read)
    sys.unraisablehook = functools.partial(_unraisable, sys.unraisablehook)


def _unraisable(default, report) -> None:
    """An interrupt Python could not raise (the module's doc) is no error to print: ``signalled`` has it."""
    if not (_signalled and isinstance(report.exc_value, KeyboardInterrupt)):
        default(report)


def seen() -> None:
    """Empty the pipe: a signal's handler calls it."""
    global _signalled
    _signalled = True
    if _watch is not None:
        with contextlib.suppress(OSError):
            while os.read(_watch[1], 512):
                pass


def signalled() -> bool:
    """Whether a signal came (its handler called ``seen``)."""
    return _signalled
