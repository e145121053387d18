"""A progress line on stderr for the long steps (import, export summary, export timeline), for a person
watching a terminal — and for nobody else.

It is drawn only when ``console.configure`` enabled it: stderr is a terminal, TERM is not "dumb" and
notices are shown (not ``-q``); never into a pipe, a file or a CI log, and never by a library caller that
did not ask. A step shows up once it has run for DELAY seconds (short commands stay quiet), is redrawn at
most every INTERVAL, and is erased when the step ends and before any message is printed (the console's
stderr handler calls ``clear``), so messages never land in the middle of the line.

Updates come from the work itself (``advance`` per chunk, batch or file), not from a thread: msprof
forks worker processes, and a thread holding the stderr lock at a fork would leave the child a lock
nobody releases. Only the process that started a step draws it.
"""
import concurrent.futures
import contextlib
import os
import shutil
import struct
import sys
import time
from typing import List, Optional



def _delay() -> float:
    """MSPROF_PROGRESS_DELAY: seconds before a step is shown (tests set 0 to see it on small data)."""
    try:
        value = float(os.environ.get("MSPROF_PROGRESS_DELAY", "1"))
    except ValueError:
        return 1.0
    return value if 0 <= value <= 3600 else 1.0


DELAY = _delay()
INTERVAL = 0.1
BAR = 24

_enabled = False
_owner = 0                        # the process that draws (forked workers never do)
_steps: List["Step"] = []         # nested steps; the innermost is drawn
_shown = False                    # a line is on the screen
# During ``relayed``: the pipe the worker processes forked meanwhile write the bytes they decode into (their
# steps counting "bytes"), for the parent to show on its line; and the parent's pid.
_relay: Optional[int] = None
_relay_parent = 0


def enable(on: bool) -> None:
    global _enabled, _owner
    _enabled, _owner = on, os.getpid()


def wanted(stream=None) -> bool:
    """Whether a person is watching ``stream`` (default stderr) on a terminal that can redraw a line."""
    stream = stream or sys.stderr
    return (hasattr(stream, "isatty") and stream.isatty() and os.environ.get("TERM", "") != "dumb")


class Step:
    def __init__(self, label: str, total: Optional[float], unit: str):
        self.label, self.total, self.unit = label, total, unit
        self.done = 0.0
        self.started = time.monotonic()
        self.next_draw = self.started + DELAY

    def advance(self, n: float = 1) -> None:
        self.done += n
        if _relay is not None and self.unit == "bytes" and os.getpid() != _relay_parent:
            os.write(_relay, struct.pack("=q", int(n)))     # (8 bytes: one atomic write into a pipe)
        if _enabled and time.monotonic() >= self.next_draw:
            self._draw()

    def phase(self, label: str) -> None:
        """Say what the step is doing now (a part without a count of its own)."""
        self.label = label
        self.advance(0)

    def _draw(self) -> None:
        global _shown
        if os.getpid() != _owner or not _steps or _steps[-1] is not self:
            return
        now = time.monotonic()
        self.next_draw = now + INTERVAL
        width = shutil.get_terminal_size((80, 24)).columns
        try:
            sys.stderr.write("\r" + self.text(now)[:max(10, width - 1)] + "\x1b[K")
            sys.stderr.flush()
        except (OSError, ValueError):      # a closed or broken terminal: the work matters, not the line
            return
        _shown = True

    def text(self, now: float) -> str:
        elapsed = f"{now - self.started:.0f} s"
        if self.total:
            fraction = min(1.0, self.done / self.total)
            filled = int(BAR * fraction)
            # (the percentage rounded down, as the bar: 100 % is said only of work that is done)
            return f"{self.label} [{'#' * filled}{'.' * (BAR - filled)}] {int(fraction * 100):3d}%  {elapsed}"
        spinner = "|/-\\"[int(now / INTERVAL) % 4]
        count = f" {self.done:,.0f} {self.unit}" if self.unit else ""
        return f"{self.label} {spinner}{count}  {elapsed}"


@contextlib.contextmanager
def step(label: str, total: Optional[float] = None, unit: str = ""):
    """A step of work: ``label`` says what (e.g. "importing hwts"), ``total`` how much there is in the
    units ``advance`` counts (None: a spinner with the count so far, in ``unit``)."""
    current = Step(label, total, unit)
    if _steps:            # inside a step already under way: shown at once when that one is
        current.next_draw = _steps[0].next_draw if _steps[0].next_draw > current.started else current.started
    _steps.append(current)
    try:
        yield current
    finally:
        _steps.remove(current)
        clear()


def phase(label: str) -> None:
    """Say what the innermost step is doing now."""
    if _steps:
        _steps[-1].phase(label)


class Relay:
    """The bytes the worker processes forked during ``relayed`` decoded so far (``value``), read from their
    pipe. A pipe, not shared memory: nothing to import in the middle of a run (a user's run may no longer
    read the interpreter's files) and no lock to hold at a fork."""

    def __init__(self, fd: int):
        self.fd, self.value = fd, 0

    def read(self) -> int:
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                break
            self.value += sum(n for (n,) in struct.iter_unpack("=q", data))
        return self.value


@contextlib.contextmanager
def relayed():
    """The bytes the worker processes forked in the block decode (a ``Relay``), for ``wait``."""
    global _relay, _relay_parent
    read, write = os.pipe()
    os.set_blocking(read, False)
    _relay, _relay_parent = write, os.getpid()
    try:
        yield Relay(read)
    finally:
        _relay = None
        os.close(write)
        os.close(read)


def wait(futures, shown: Step, weights=None, relay=None) -> None:
    """Wait for worker processes' ``futures``, advancing ``shown`` by each one's weight (default 1) as it
    completes — or, with ``relay``, by the bytes the workers decoded so far (the futures done count their
    whole weight) — and keeping the line alive meanwhile; the first failure is raised at once."""
    weight = dict(zip(futures, weights or [1] * len(futures)))
    pending = set(futures)
    finished = 0
    while pending:
        done, pending = concurrent.futures.wait(pending, timeout=INTERVAL,
                                                return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            future.result()
        finished += sum(weight[f] for f in done)
        shown.advance(finished - shown.done if relay is None else max(finished, relay.read()) - shown.done)


def clear() -> None:
    """Erase the line (before a message, or when a step ends)."""
    global _shown
    if _shown:
        _shown = False
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
