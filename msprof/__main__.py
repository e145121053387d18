"""``python -m msprof`` and the ``msprof`` console script.

Interrupts are quiet from the first line: until the command line is parsed (importing click and the rest
takes ~70 ms) a Ctrl-C, TERM or HUP just ends the process with 130 — nothing is written yet. msprof.cli
then turns them into KeyboardInterrupt, so that what is being written is cleaned up on the way out.
(``_signal``, the interpreter's built-in module, is there at once; ``signal`` takes a moment to import.)
A signal msprof was started ignoring (``nohup msprof …`` ignores HUP, a shell's ``msprof … &`` INT) stays
ignored, here, in msprof.cli and in the worker processes.
"""
import _signal
import os


def _quit(signum, frame):
    os._exit(130)


for _name in ("SIGINT", "SIGTERM", "SIGHUP"):
    if hasattr(_signal, _name) and _signal.getsignal(getattr(_signal, _name)) != _signal.SIG_IGN:
        _signal.signal(getattr(_signal, _name), _quit)


def main(argv=None):
    try:
        from msprof.cli import main as run

        return run(argv)
    except KeyboardInterrupt:          # a second Ctrl-C while msprof was already on its way out
        os._exit(130)
    finally:
        # The command is done (its exit code set): a signal from now on is ignored, also while the interpreter
        # shuts down, which puts back the default handlers of those it had (a signal then ended msprof).
        try:
            _ignore_signals()
        except KeyboardInterrupt:       # (one came as the command ended: ignored too)
            _ignore_signals()


def _ignore_signals() -> None:
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_IGN)


if __name__ == "__main__":
    main()
