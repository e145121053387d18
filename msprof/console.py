"""Where messages go: data to stdout, notices/warnings to stderr, and a per-result-dir log file.

Every module logs through ``log`` (the "msprof" logger). The CLI sets the stderr verbosity;
``result_log`` additionally appends everything said while working on a result directory to
``<result dir>/log/msprof.log`` (outputs.md §5).
"""
import codecs
import contextlib
import errno
import logging
import os
import re
import stat
import sys
import time
import unicodedata
from pathlib import Path

from msprof import progress
from msprof.outputs import file_mode
from msprof.paths import one_line

log = logging.getLogger("msprof")
log.setLevel(logging.DEBUG)
log.propagate = False

_stderr_handler = None


def configure(verbosity: int = 0, quiet: bool = False) -> None:
    """verbosity 0: notices and warnings; 1: info detail; 2+: debug. quiet: errors only."""
    global _stderr_handler
    if _stderr_handler is not None:
        log.removeHandler(_stderr_handler)
    _stderr_handler = _StderrHandler(sys.stderr)
    _stderr_handler.setFormatter(_StderrFormatter())
    if quiet:
        level = logging.ERROR
    elif verbosity >= 2:
        level = logging.DEBUG
    elif verbosity == 1:
        level = logging.INFO
    else:
        level = NOTICE
    _stderr_handler.setLevel(level)
    log.addHandler(_stderr_handler)
    progress.enable(level <= NOTICE and progress.wanted())


# Between INFO and WARNING: what a user sees by default ("wrote X", "using JOB…").
NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")


def notice(message: str, *args) -> None:
    log.log(NOTICE, message, *args)


class _StderrHandler(logging.StreamHandler):
    def emit(self, record):
        progress.clear()           # the message gets the line the progress bar was drawn on
        super().emit(record)


class _StderrFormatter(logging.Formatter):
    def format(self, record):
        text = one_line(record.getMessage())
        if record.levelno >= logging.ERROR:
            return f"msprof: error: {text}"
        if record.levelno >= logging.WARNING:
            return f"msprof: warning: {text}"
        return text


# what may need escaping on a terminal: anything but a tab, a line break and printable ASCII
_SUSPECT = re.compile("[^\t\n\x20-\x7e]")
# Unicode's invisible format characters (U+202E right-to-left override, the other bidi controls, zero-width
# spaces), line and paragraph separators, and lone surrogates: what reorders, hides or breaks a line
_INVISIBLE = frozenset({"Cf", "Zl", "Zp", "Cs"})


def emit(text: str, nl: bool = True, file=None) -> None:
    """Print results on stdout (or ``file``): byte for byte into a pipe or a file (click would strip escape
    sequences there, so a csv printed would differ from the file written), and on a terminal through
    ``terminal_safe``: a name from the data must not drive the terminal."""
    import click        # (the library's other users print nothing: no click to import for them)

    out = file or sys.stdout
    if getattr(out, "isatty", lambda: False)():
        text = terminal_safe(text)
    click.echo(text, nl=nl, file=file, color=True)


class Passthrough:
    """Another program's output (a board's app) passed on to ``stream``, a binary stream, as it arrives: byte
    for byte into a pipe or a file, and on a terminal read as UTF-8 (other bytes as ``\\xff``) with
    :func:`terminal_safe`, so that it cannot drive the terminal (clear it, set its title, move the cursor,
    reorder text)."""

    def __init__(self, stream):
        self.stream = stream
        terminal = getattr(stream, "isatty", lambda: False)()
        # (incremental: a character split between two chunks is decoded whole)
        self.decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace") if terminal else None

    def write(self, data: bytes, final: bool = False) -> None:
        if self.decoder is not None:
            data = terminal_safe(self.decoder.decode(data, final)).encode("utf-8")
        if data:
            self.stream.write(data)
            self.stream.flush()

    def close(self) -> None:
        self.write(b"", final=True)


def terminal_safe(text: str) -> str:
    """``text`` as a terminal may be given it: control characters but tab and line feed (``\\x1b``, C1 as
    ``\\u009b``), and invisible format characters that would reorder or hide what is shown (``\\u202e``)
    escaped — JSON escapes, so a JSON document stays valid."""
    return _SUSPECT.sub(_escaped, text)


def _escaped(match) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20:
        return f"\\x{code:02x}"
    if code < 0xA0 or unicodedata.category(char) in _INVISIBLE:
        if code > 0xFFFF:       # (beyond the BMP: as JSON writes it, a surrogate pair)
            code -= 0x10000
            return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
        return f"\\u{code:04x}"
    return char


def discard_stdout() -> None:
    """What is still written to stdout goes nowhere: its reader went away (``msprof show | head -1``), and
    Python would otherwise complain when it flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _LogFileFormatter(logging.Formatter):
    """One line per message, names from the data escaped: a file named "x\nssh-ed25519 ..." cannot add a
    line of its own to the log."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def formatMessage(self, record):
        record.message = one_line(record.message)
        return super().formatMessage(record)


def _open_log(path: Path):
    """The log opened for appending, never through a symlink nor onto anything but a regular file (opened
    without waiting: a FIFO would wait for a reader)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_NONBLOCK", 0), file_mode())
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


_unwritable: set = set()


@contextlib.contextmanager
def result_log(result_dir: Path, command: str, folder: str = "log"):
    """Append every message logged inside the block to <result_dir>/<folder>/msprof.log."""
    from msprof.errors import MsprofError
    from msprof.outputs import output_dir

    path = Path(result_dir) / folder / "msprof.log"
    try:
        output_dir(path.parent)
        stream = _open_log(path)
    except (OSError, MsprofError) as exc:  # a read-only collection can still be analysed (elsewhere)
        reason = {errno.ELOOP: "a symbolic link", errno.ENXIO: "not a regular file"}.get(
            getattr(exc, "errno", None)) or getattr(exc, "strerror", None) or getattr(exc, "message", str(exc))
        # said once per run: a command enters a result dir's log several times (import, then export)
        level = logging.DEBUG if path in _unwritable else logging.WARNING
        log.log(level, "not writing the log %s: %s", path, reason)
        _unwritable.add(path)
        yield
        return
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(_LogFileFormatter())
    log.addHandler(handler)
    started = time.monotonic()
    log.debug("begin: %s (msprof %s)", command, _version())
    try:
        yield
    except Exception as exc:
        log.debug("failed: %s: %s", command, getattr(exc, "message", exc))
        raise
    finally:
        log.debug("end: %s (%.3f s)", command, time.monotonic() - started)
        log.removeHandler(handler)
        handler.close()
        stream.close()


def _version() -> str:
    from msprof import __version__

    return __version__
