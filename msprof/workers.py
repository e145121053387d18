"""Worker processes for the large steps (import, export summary, export timeline).

Workers never outlive the command: each asks the kernel to kill it when its parent dies (Linux
PR_SET_PDEATHSIG) and, everywhere, watches its parent's pid; they leave Ctrl-C to the parent, which stops
them (``process_pool`` as a context manager terminates them when the block fails or is interrupted instead
of waiting for their work). Whatever a killed worker leaves behind carries its pid and is removed by a
later run (msprof.outputs.remove_stale).
"""
import contextlib
import ctypes
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1


def several_cores() -> bool:
    """True when a second process can run beside this one."""
    return (os.cpu_count() or 1) > 1


class _Pool(ProcessPoolExecutor):
    def __exit__(self, kind, value, traceback):
        if kind is None:
            return super().__exit__(kind, value, traceback)
        stop(self)
        return False


def process_pool(workers: int, initializer=None, initargs=()) -> ProcessPoolExecutor:
    """A pool that forks where the platform can: a forked worker starts at once, without a new
    interpreter and its own imports. Workers open their own SQLite connections and never use the
    parent's."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return _Pool(workers, mp_context=multiprocessing.get_context(method), initializer=_start_worker,
                 initargs=(os.getpid(), initializer, initargs))


def stop(executor: ProcessPoolExecutor) -> None:
    """Stop a pool now: pending work cancelled, running workers killed (an interrupted command must not
    wait for them, nor leave them running; what they were writing is removed by msprof.outputs)."""
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(2)
    # The pool's manager thread closes its wake-up pipe as it ends; at exit, Python (3.11) wakes every pool's
    # manager through that pipe, and if both happen at once it prints "Exception ignored … Bad file
    # descriptor" after "msprof: interrupted" (seen under load). With its workers gone the thread ends at once.
    manager = getattr(executor, "_executor_manager_thread", None)
    if manager is not None:
        with contextlib.suppress(Exception):
            manager.join(2)


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
    """The value of ``getattr(report, method)(*args)``, made by a worker process (its own connection) while this
    process goes on: a table's batches (show has op_statistic's GROUP BY over a million tasks made while it picks
    op_summary's rows). ``start`` submits the work (show: once the table is selected and the timeline written);
    iterating yields the value once, waiting for it (a failure is raised there). The report's close stops a
    worker whose value was not read (an error, an interrupt, a table left out), so that nothing waits for it."""

    def __init__(self, report, method: str, args: tuple = ()):
        self.call = (report.unit, method, args)
        self.executor = self.future = None
        report.on_close(self.close)

    def start(self) -> None:
        if self.future is None:
            self.executor = process_pool(1)
            self.future = self.executor.submit(_report_call, *self.call)    # (close stops a pool it failed in)

    def __iter__(self):
        self.start()
        yield self.future.result()

    def close(self) -> None:
        if self.executor is not None:
            if self.future is not None and self.future.done():
                self.executor.shutdown(wait=True)
            else:
                stop(self.executor)
            self.executor = None


def _report_call(unit, method: str, args: tuple):
    with unit.open() as report:
        return getattr(report, method)(*args)
