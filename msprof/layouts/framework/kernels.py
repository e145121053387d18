"""Framework steps on the device, and kernel_details.csv (docs/framework-target.md §3–4).

A launch is a device task with its host launch (the HostToDevice flow of the CANN timeline: its task_track
time, on the epoch, to the task's start), as the PROF layout's task query gives it. Without op marks a launch
belongs to the first step (by start) whose host range ``[start, end]`` holds its time. A step's device range
runs from the earliest start among the kernels of its first launch to the latest end among those of its last
launch, or the step's host end when later. kernel_details is the op_summary's rows, their cells as the CANN
export prints them, with the step whose range holds the row's start compared as text, as torch_npu does.
"""
import bisect
import itertools
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.contract import Selection
from msprof.layouts.prof import tasks
from msprof.tables import TEXT, Column, Table

# op_summary's columns torch_npu renames in kernel_details (target §4); ``Block Dim`` is a CANN's whose
# op_summary says so (the reference's says ``Block Num``, which torch_npu leaves, so Block Dim stays empty)
RENAMED = {"Op Name": "Name", "OP Type": "Type", "Task Type": "Accelerator Core",
           "Task Start Time(us)": "Start Time(us)", "Task Duration(us)": "Duration(us)",
           "Task Wait Time(us)": "Wait Time(us)"}
WITHOUT_METRICS = ("Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                   "Wait Time(us)", "Block Dim")
NO_METRICS = "ACL_AICORE_NONE"
START = "Task Start Time(us)"
# the CANN export writes a task's start with a TAB after it (a spreadsheet keeps it text): torch_npu copies it
START_SUFFIX = "\t"


def launches(prof) -> Iterator[Tuple[int, int, int]]:
    """(launch ns, kernel start ns, kernel end ns) of a PROF device's launched tasks, on the epoch, by launch.
    Only the first execution of a (stream, task): the CANN timeline's HostToDevice flows of one task id share
    their id, and torch_npu keeps the first end of an id (a static graph's task links its first run only)."""
    time = prof.time.on_the_epoch()
    query = tasks.task_query(prof, ("track_ts", "start_ns", "end_ns", "exec_n"), selected=False)
    sql = (f"SELECT {time.host_ns_sql('track_ts')} AS launch, {time.relative_ns_sql('start_ns')},"
           f" {time.relative_ns_sql('end_ns')} FROM ({query}) WHERE track_ts IS NOT NULL AND exec_n = 0"
           " ORDER BY launch")
    return prof.conn.execute(sql, prof.params)


def device_ranges(steps: List[tuple], rows, counts: Optional[Dict[int, int]] = None) -> List[tuple]:
    """(step, device start ns, device end ns) of the steps that got a launch, in step order; ``steps``:
    (step, host start, host end) by start; ``rows``: ``launches`` (by launch time); ``counts``, when given:
    step → the kernels it launched, counted on the way."""
    starts = [start for _step, start, _end in steps]
    reach = list(itertools.accumulate((end for _step, _start, end in steps), max))
    first: Dict[int, Tuple[int, int]] = {}       # step index → (launch, earliest kernel start of that launch)
    last: Dict[int, Tuple[int, int]] = {}        # step index → (launch, latest kernel end of that launch)
    for launch, group in itertools.groupby(rows, key=lambda row: row[0]):
        kernels = list(group)
        index = _holding(steps, starts, reach, launch)
        if index is None:
            continue
        if counts is not None:
            counts[steps[index][0]] = counts.get(steps[index][0], 0) + len(kernels)
        if index not in first:
            first[index] = (launch, min(k[1] for k in kernels))
        last[index] = (launch, max(k[2] for k in kernels))
    return [(steps[i][0], first[i][1], max(last[i][1], steps[i][2])) for i in sorted(first)]


def _holding(steps: List[tuple], starts: List[int], reach: List[int], t: int) -> Optional[int]:
    """The first step by start whose host range holds ``t`` (both ends inclusive); ``reach``: the latest end
    of the steps up to each (no step before one whose reach ends before ``t`` holds it)."""
    found = None
    index = bisect.bisect_right(starts, t) - 1
    while index >= 0 and reach[index] >= t:
        if steps[index][2] >= t:
            found = index
        index -= 1
    return found


class StepOfText:
    """The step of a task by its start's text (as torch_npu compares them: strings, start inclusive)."""

    def __init__(self, ranges: List[tuple]):
        self.ranges = [(step, "%d.%03d" % divmod(lo, 1000), "%d.%03d" % divmod(hi, 1000)) for step, lo, hi in ranges]
        self.highest = list(itertools.accumulate((hi for _s, _lo, hi in self.ranges), max))

    def __call__(self, text: str) -> str:
        for step, lo, hi in itertools.islice(self.ranges, bisect.bisect_left(self.highest, text), None):
            if lo <= text <= hi:
                return str(step)
            if lo > text:
                break
        return ""


def kernel_details(prof, ranges: List[tuple], metrics: bool) -> Table:
    """The kernel_details table of one PROF device: its op_summary's cells as texts, renamed, ``Step Id`` first
    when a step has a device range."""
    summary = prof.op_summary(Selection(), pmu=metrics)
    names = [RENAMED.get(c.name, c.name) for c in summary.columns]
    wanted = list(range(len(names))) if metrics else [names.index(n) if n in names else None
                                                      for n in WITHOUT_METRICS]
    columns = ([Column("Step Id", TEXT)] if ranges else []) + [
        Column(names[i] if i is not None else name, TEXT) for i, name in zip(wanted, WITHOUT_METRICS if not metrics
                                                                             else names)]
    return Table("kernel_details", "kernel_details", columns,
                 _rows(summary, wanted, StepOfText(ranges) if ranges else None), line_end="\r\n")


def _rows(summary: Table, wanted: List[Optional[int]], step_of) -> Iterator[List[tuple]]:
    columns = summary.columns
    start = next(i for i, c in enumerate(columns) if c.name == START)
    for batch in summary.batches:
        texts = []
        values = iter(zip(*batch)) if batch else iter(())
        for column in columns:
            made = [column.kind.text(v) for v in next(values)] if column.varies else (
                [column.kind.text(column.constant)] * len(batch))
            texts.append(made)
        texts[start] = [text + START_SUFFIX for text in texts[start]]
        picked = [texts[i] if i is not None else [""] * len(batch) for i in wanted]
        if step_of is not None:
            picked.insert(0, [step_of(text) for text in texts[start]])
        yield list(zip(*picked))
