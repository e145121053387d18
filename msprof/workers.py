"""Worker processes for the large steps (import, export summary, export timeline)."""
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor


def several_cores() -> bool:
    """True when a second process can run beside this one."""
    return (os.cpu_count() or 1) > 1


def process_pool(workers: int, **kwargs) -> ProcessPoolExecutor:
    """A pool that forks where the platform can: a forked worker starts at once, without a new
    interpreter and its own imports. Workers open their own SQLite connections and never use the
    parent's."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method), **kwargs)
