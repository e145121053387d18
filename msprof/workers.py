"""The one way msprof runs work in other processes (``Pool``): importing several databases, the large
families of one import and its launch association, the parts of export summary, the second timeline (or
half of one), compare's two sides, and show's op_statistic (``Later``).

Workers never outlive the command: each asks the kernel to kill it when its parent dies (Linux
PR_SET_PDEATHSIG) and, everywhere, watches its parent's pid; they leave Ctrl-C to the parent, which stops
them (a pool whose block fails or is interrupted kills them instead of waiting for their work). Whatever a
killed worker leaves behind carries its pid and is removed by a later run (msprof.outputs.remove_stale), or
at once by the pool's ``on_stop``.
"""
import contextlib
import ctypes
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Callable, List, Optional, Sequence

from msprof import progress

PR_SET_PDEATHSIG = 1


def several_cores() -> bool:
    """True when a second process can run beside this one."""
    return (os.cpu_count() or 1) > 1


class Pool(ProcessPoolExecutor):
    """``workers`` processes beside this one, forked where the platform can (a forked worker starts at once,
    without a new interpreter and its own imports); ``initializer(*initargs)`` runs in each as it starts.
    Work goes in with ``submit`` (a future) or ``each``, and comes back with ``results``, the progress line
    kept alive meanwhile. Used as a context manager, or ended with ``close``, the pool waits for its workers
    when the work went well, and stops them at once when it failed or was interrupted: pending work
    cancelled, running workers killed, then ``on_stop`` (what they were writing removed). Workers open their
    own SQLite connections and never use the parent's."""

    def __init__(self, workers: int, initializer: Optional[Callable] = None, initargs: tuple = (),
                 on_stop: Optional[Callable[[], None]] = None):
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        super().__init__(workers, mp_context=multiprocessing.get_context(method), initializer=_start_worker,
                         initargs=(os.getpid(), initializer, initargs))
        self.on_stop = on_stop

    def results(self, label: str, futures: List[Future], weights: Optional[Sequence[int]] = None,
                relay=None) -> list:
        """The values of ``futures``, in their order, once every one is done (the first failure is raised at
        once); meanwhile a progress line ``label`` counts them by ``weights`` (None: a spinner), or the bytes
        the workers decode (``relay``: progress.relayed)."""
        with progress.step(label, sum(weights) if weights is not None else None) as shown:
            progress.wait(futures, shown, weights, relay)
        return [future.result() for future in futures]

    def each(self, label: str, function: Callable, *iterables) -> list:
        """``function`` called on each set of arguments (``map``), the calls counted on a progress line."""
        futures = [self.submit(function, *args) for args in zip(*iterables)]
        return self.results(label, futures, [1] * len(futures))

    def close(self, failed: bool = False) -> None:
        """Wait for the workers (``failed``: stop them)."""
        if failed:
            self.stop()
        else:
            self.shutdown(wait=True)

    def stop(self) -> None:
        """Stop the pool now: pending work cancelled, running workers killed (an interrupted command must not
        wait for them, nor leave them running), then ``on_stop``."""
        processes = list((getattr(self, "_processes", None) or {}).values())
        self.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()
        for process in processes:
            with contextlib.suppress(Exception):
                process.join(2)
        # The pool's manager thread closes its wake-up pipe as it ends; at exit, Python (3.11) wakes every pool's
        # manager through that pipe, and if both happen at once it prints "Exception ignored … Bad file
        # descriptor" after "msprof: interrupted" (seen under load). With its workers gone the thread ends at once.
        manager = getattr(self, "_executor_manager_thread", None)
        if manager is not None:
            with contextlib.suppress(Exception):
                manager.join(2)
        if self.on_stop is not None:
            self.on_stop()

    def __exit__(self, kind, value, traceback):
        self.close(failed=kind is not None)
        return False


def _start_worker(parent: int, initializer, initargs) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # Ctrl-C is the parent's to handle
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) != signal.SIG_IGN:      # (ignored by the parent, as nohup has it: by its workers too)
            signal.signal(sig, signal.SIG_DFL)
    if not _die_with_parent(parent):                       # the parent died before it could be watched
        os._exit(1)
    if initializer is not None:
        initializer(*initargs)


def _die_with_parent(parent: int) -> bool:
    """Linux: the kernel kills this worker when its parent dies, whatever kills it. Elsewhere a thread
    watches the parent. (Only where it must: a worker that forks a pool of its own while it has a second
    thread risks a lock held at the fork, which Python 3.12+ warns of.)"""
    with contextlib.suppress(Exception):
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) == 0:
            return os.getppid() == parent
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    return os.getppid() == parent


def _watch_parent(parent: int) -> None:
    """Where the kernel cannot be asked to: leave as soon as the parent is gone."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


class Later:
    """The value of ``function(report, *args)`` (a report method), made by a worker process (its own connection)
    while this process goes on: a table's batches (show has op_statistic's GROUP BY over a million tasks made
    while it picks op_summary's rows). ``start`` submits the work (show: once the table is selected);
    iterating yields the value once, waiting for it (a failure is raised there). The
    report's close stops a worker whose value was not read (an error, an interrupt, a table left out), so that
    nothing waits for it."""

    def __init__(self, report, function, args: tuple = ()):
        self.call = (report.unit, function, args)
        self.pool: Optional[Pool] = None
        self.future: Optional[Future] = None
        report.on_close(self.close)

    def start(self) -> None:
        if self.future is None:
            self.pool = Pool(1)
            self.future = self.pool.submit(_report_call, *self.call)

    def __iter__(self):
        self.start()
        yield self.future.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close(failed=self.future is None or not self.future.done())   # (a failed submit too)
            self.pool = None


def _report_call(unit, function, args: tuple):
    with unit.open() as report:
        return function(report, *args)
