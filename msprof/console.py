"""Where messages go: data to stdout, notices/warnings to stderr, and a per-result-dir log file.

Every module logs through ``log`` (the "msprof" logger). The CLI sets the stderr verbosity;
``result_log`` additionally appends everything said while working on a result directory to
``<result dir>/log/msprof.log`` (outputs.md §5).
"""
import contextlib
import logging
import os
import sys
import time
from pathlib import Path

log = logging.getLogger("msprof")
log.setLevel(logging.DEBUG)
log.propagate = False

_stderr_handler = None


def configure(verbosity: int = 0, quiet: bool = False) -> None:
    """verbosity 0: notices and warnings; 1: info detail; 2+: debug. quiet: errors only."""
    global _stderr_handler
    if _stderr_handler is not None:
        log.removeHandler(_stderr_handler)
    _stderr_handler = logging.StreamHandler(sys.stderr)
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


# Between INFO and WARNING: what a user sees by default ("wrote X", "using JOB…").
NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")


def notice(message: str, *args) -> None:
    log.log(NOTICE, message, *args)


class _StderrFormatter(logging.Formatter):
    def format(self, record):
        text = record.getMessage()
        if record.levelno >= logging.ERROR:
            return f"msprof: error: {text}"
        if record.levelno >= logging.WARNING:
            return f"msprof: warning: {text}"
        return text


def color_enabled(stream=None) -> bool:
    stream = stream or sys.stderr
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


@contextlib.contextmanager
def result_log(result_dir: Path, command: str):
    """Append every message logged inside the block to <result_dir>/log/msprof.log."""
    log_dir = Path(result_dir) / "log"
    try:
        log_dir.mkdir(exist_ok=True)
        handler = logging.FileHandler(log_dir / "msprof.log", encoding="utf-8")
    except OSError as exc:  # a read-only collection can still be analysed elsewhere
        log.warning("cannot write %s: %s", log_dir / "msprof.log", exc.strerror)
        yield
        return
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
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


def _version() -> str:
    from msprof import __version__

    return __version__
