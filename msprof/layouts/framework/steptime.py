"""step_trace_time.csv (docs/framework-target.md §7): the Overlap Analysis lanes of the CANN timeline
(msprof.layouts.prof.cann_trace.OverlapSource: "Computing" sections and the "Free" gaps between them) summed per
device and step, in torch_npu's float arithmetic: times are float µs of the ns the timeline prints, each lane
event goes to the first step whose device range ``[start, end)`` holds its start, its duration is added to its
lane in time order, and a step's Stage and Preparing come from the earliest and latest of its events. Sums start
as the integer 0, so a lane no event reached prints ``0`` and one that did a float, as torch_npu's do.

msprof decodes no HCCL data yet: the Communication lanes and Bubble are 0.
"""
import bisect
import itertools
from dataclasses import dataclass
from typing import Dict, List, Optional

from msprof.contract import Selection
from msprof.layouts.prof.cann_trace import OVERLAP_THREADS, OverlapSource
from msprof.tables import TEXT, Column, Table

COLUMNS = ("Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
           "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing")
LANES = {"Computing": "compute", "Free": "free"}     # (the lanes msprof's Overlap Analysis has)
UNSET = -1                 # torch_npu's "not seen yet" for a step's first and last times


@dataclass
class _Step:
    step: Optional[int]
    start: float            # device range, float µs
    end: float
    host_start: float       # the step op's start, float µs
    first: float = UNSET    # earliest lane event start
    last: float = UNSET     # latest lane event end
    task: float = UNSET     # earliest Computing start


class _Sums(dict):
    def __missing__(self, key):
        value = self[key] = {"compute": 0, "free": 0}
        return value


def _us(ns: int) -> float:
    return float(ns / 1000)


def step_trace_time(devices: list, ranges: List[tuple], host_starts: Dict[int, int], first_op: Optional[int]
                    ) -> Table:
    """The table over ``devices`` (PROF reports with tasks); ``ranges``: (step, device start ns, device end
    ns); ``host_starts``: step → its op's start ns; ``first_op``: the earliest framework op's start ns (Preparing
    without steps)."""
    rows = step_rows(devices, ranges, host_starts, first_op)
    texts = [tuple("" if v is None else str(v) for v in row) for row in rows]
    return Table("step_trace_time", "step_trace_time", [Column(name, TEXT) for name in COLUMNS], [texts],
                 line_end="\r\n")


def step_rows(devices: list, ranges: List[tuple], host_starts: Dict[int, int], first_op: Optional[int]
              ) -> List[tuple]:
    """step_trace_time's rows as numbers (COLUMNS), sorted by device and step."""
    rows = []
    for device in devices:
        steps = [_Step(step, _us(lo), _us(hi), _us(host_starts[step])) for step, lo, hi in ranges] or [
            _Step(None, UNSET, UNSET, UNSET)]
        sums, holding = _Sums(), _Holding(steps)
        for batch in OverlapSource(device, Selection()).batches():
            for tid, start, end in batch:
                _count(OVERLAP_THREADS[tid], _us(start), _us(end - start), steps, holding, sums)
        rows += [_row(device.device_number, step, sums[step.step], first_op) for step in steps
                 if step.step in sums and (step.step is not None or not ranges)]
    rows.sort(key=lambda row: (row[0], -1 if row[1] is None else row[1]))
    return rows


class _Holding:
    """The first step (in step order) whose device range holds a time: the steps whose ranges all end by then
    are passed over at once (a bisection over the latest end so far), then the rest in order until one starts
    after it (steps start in order)."""

    def __init__(self, steps: List[_Step]):
        self.steps = steps
        self.reach = list(itertools.accumulate((s.end for s in steps), max))

    def __call__(self, t: float) -> Optional[_Step]:
        for step in itertools.islice(self.steps, bisect.bisect_right(self.reach, t), None):
            if step.start <= t < step.end:
                return step
            if step.start > t:
                break
        return None


def _count(name: str, start: float, duration: float, steps: List[_Step], holding: _Holding, sums: _Sums) -> None:
    step = holding(start)
    if step is None and steps[0].step is None:          # (no steps: every event is the one unnamed step's)
        step = steps[0]
    if step is not None:
        if start < step.first or step.first == UNSET:
            step.first = start
        if start + duration > step.last or step.last == UNSET:
            step.last = start + duration
        if name == "Computing" and (start < step.task or step.task == UNSET):
            step.task = start
    lane = sums[step.step if step is not None else "none"]
    lane[LANES[name]] += duration


def _row(device, step: _Step, sums: dict, first_op: Optional[int]) -> tuple:
    stage = step.last - step.first
    if step.step is None:
        prepare = step.task - _us(first_op) if first_op is not None else 0
    else:
        prepare = step.task - step.host_start
    return (device, step.step, sums["compute"], 0, 0, 0, sums["free"], stage, 0, 0, prepare)
