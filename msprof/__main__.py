"""``python -m msprof`` and the ``msprof`` console script.

Interrupts are quiet from the first line: until the command line is parsed (importing click and the rest
takes ~70 ms) a Ctrl-C, TERM or HUP just ends the process with 130 — nothing is written yet. msprof.cli
then turns them into KeyboardInterrupt, so that what is being written is cleaned up on the way out.
"""
import os
import signal


def _quit(signum, frame):
    os._exit(130)


for _signal in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
    if _signal is not None:
        signal.signal(_signal, _quit)


def main(argv=None):
    from msprof.cli import main as run

    return run(argv)


if __name__ == "__main__":
    main()
