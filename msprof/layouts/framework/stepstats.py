"""What each step did (docs/framework-plan.md §4–5), for show's steps table and advise's step rules: its kernels,
its device time in step_trace_time's lanes (Computing, Free, Preparing: msprof.layouts.framework.steptime) and
its memory peaks (the largest allocated and reserved totals among the memory records in its host range).

A step's kernels are those it launched (a launch belongs to the step whose host range holds it: target §3); the
lanes are summed over the unit's devices (one a rank, normally).
"""
import bisect
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional

from msprof.layouts.framework.clock import FrameworkClock
from msprof.layouts.framework.steptime import COLUMNS, step_rows

MB = 1024.0 ** 2
NPU = 20
_COMPUTING, _FREE, _PREPARING = (COLUMNS.index(name) for name in ("Computing", "Free", "Preparing"))


@dataclass
class StepStat:
    step: int
    kernels: int = 0
    computing_us: float = 0.0
    free_us: float = 0.0
    preparing_us: float = 0.0
    allocated_mb: Optional[float] = None
    reserved_mb: Optional[float] = None

    @property
    def waiting_us(self) -> float:
        """The device's wait for the host in the step: its Free time and the Preparing before its first task."""
        return self.free_us + self.preparing_us


def step_stats(devices: list, steps: List[tuple], ranges: List[tuple], kernels: Dict[int, int],
               first_op: Optional[int], memory: Iterable[tuple] = ()) -> List[StepStat]:
    """``devices``: PROF reports with tasks; ``steps``: (step, host start ns, host end ns) in step order;
    ``ranges``: the steps' (step, device start ns, device end ns); ``kernels``: step → the kernels it launched
    (kernels.device_ranges counts them); ``memory``: (local ns, allocated, reserved bytes) in time order. The
    steps without a device range have no kernels and no lanes."""
    stats = {step: StepStat(step, kernels.get(step, 0)) for step, _start, _end in steps}
    host_starts = {step: start for step, start, _end in steps}
    for row in step_rows(devices, ranges, host_starts, first_op) if ranges else []:
        stat = stats.get(row[1])
        if stat is not None:
            stat.computing_us += row[_COMPUTING]
            stat.free_us += row[_FREE]
            stat.preparing_us = max(stat.preparing_us, row[_PREPARING])
    _peaks(steps, memory, stats)
    return list(stats.values())


def _peaks(steps: List[tuple], memory: Iterable[tuple], stats: Dict[int, StepStat]) -> None:
    """One sweep of the records (time order) against the steps' host ranges (start order)."""
    order = sorted(steps, key=lambda s: s[1])
    starts = [start for _step, start, _end in order]
    for time, allocated, reserved in memory:
        index = bisect.bisect_right(starts, time) - 1
        if index < 0 or time > order[index][2]:
            continue
        stat = stats[order[index][0]]
        stat.allocated_mb = max(stat.allocated_mb or 0.0, allocated / MB)
        stat.reserved_mb = max(stat.reserved_mb or 0.0, reserved / MB)


def memory_sql(clock: FrameworkClock, schema: str = "main") -> str:
    """(local ns, allocated, reserved) of the NPU memory records (torch's, MindSpore's), in time order."""
    return (f"SELECT {clock.local_sql('time')} AS local, allocated, reserved FROM {schema}.torch_memory"
            f" WHERE device_type = {NPU} UNION ALL SELECT {clock.local_sql('time')}, allocated, reserved"
            f" FROM {schema}.ms_memory ORDER BY local")
