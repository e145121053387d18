"""The data families' facts of one PROF device (msprof.analysis.family_rules.FamilyFacts), read from the
family files export summary writes (msprof.layouts.prof.family_files: the numbers advise and compare print are
those of the files they cite), and the communication that no computation overlaps, from the communication op
executions (msprof.layouts.prof.families.hccl) against the device's tasks.
"""
import bisect
from typing import Dict, Iterator, List, Optional

from msprof.analysis.family_rules import (AicpuKernel, Allocation, CommunicationType, Exposed, FamilyFacts,
                                          Overlap, Peak, Step)
from msprof.contract import Selection
from msprof.layouts.prof import tasks
from msprof.layouts.prof.families import hccl
from msprof.layouts.prof.family_files import FILES, Clocks, family_table, present


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None          # (N/A)


class ProfFamilyFacts(FamilyFacts):
    def __init__(self, report):
        self.report = report

    def _rows(self, name: str) -> Iterator[Dict[str, str]]:
        """The rows of the family file ``name`` as {column: text}; none when the unit has no such file."""
        if not present(self.report, FILES[name]):
            return
        table = family_table(self.report, name)
        names = [c.name for c in table.columns if c.varies]
        for batch in table.batches:
            for row in batch:
                yield dict(zip(names, row))

    def steps(self) -> List[Step]:
        return [Step(row["Model ID"], row["Iteration ID"], _number(row["Iteration Time(us)"]) or 0.0,
                     _number(row["FP to BP Time(us)"]), _number(row["Iteration Refresh(us)"]),
                     _number(row["Data Aug Bound(us)"])) for row in self._rows("step_trace")]

    def communication_types(self) -> List[CommunicationType]:
        return [CommunicationType(row["OP Type"], int(row["Count"]), *(float(row[c]) for c in (
            "Total Time(us)", "Avg Time(us)", "Min Time(us)", "Max Time(us)")))
            for row in self._rows("communication_statistic")]

    def aicpu_kernels(self) -> List[AicpuKernel]:
        kernels: Dict[str, AicpuKernel] = {}
        for row in self._rows("aicpu"):
            kernel = kernels.setdefault(row["Node"], AicpuKernel(row["Node"], 0, 0.0, 0.0, 0.0, 0.0))
            kernel.runs += 1
            kernel.total_us += _number(row["Total_time(us)"]) or 0.0
            kernel.compute_us += _number(row["Compute_time(us)"]) or 0.0
            kernel.memcpy_us += _number(row["Memcpy_time(us)"]) or 0.0
            kernel.dispatch_us += _number(row["Dispatch_time(us)"]) or 0.0
        return list(kernels.values())

    def memory_peaks(self) -> List[Peak]:
        """The largest npu_mem sample of each event (ddr + hbm) and memory_record's largest reservation of
        each component (the earliest of equal ones)."""
        peaks: Dict[tuple, Peak] = {}
        for row in self._rows("npu_mem"):
            kb = _number(row["memory(KB)"]) or 0.0
            key = ("npu_mem", row["event"])
            if key not in peaks or kb > peaks[key].kb:
                peaks[key] = Peak("npu_mem", {"event": row["event"]}, kb, _number(row["timestamp(us)"]) or 0.0,
                                  {"ddr_kb": _number(row["ddr(KB)"]), "hbm_kb": _number(row["hbm(KB)"])})
        for row in self._rows("memory_record"):
            kb = _number(row["Total Reserved(KB)"]) or 0.0
            key = ("memory_record", row["Component"])
            if key not in peaks or kb > peaks[key].kb:
                peaks[key] = Peak("memory_record", {"component": row["Component"]}, kb,
                                  _number(row["Timestamp(us)"]) or 0.0,
                                  {"allocated_kb": _number(row["Total Allocated(KB)"])})
        return list(peaks.values())

    def allocations(self) -> List[Allocation]:
        return [Allocation(row["Name"], _number(row["Size(KB)"]) or 0.0, _number(row["Allocation Time(us)"]) or 0.0,
                           _number(row["Duration(us)"])) for row in self._rows("operator_memory")]

    def overlap(self) -> Optional[Overlap]:
        """Each communication op execution (op_summary's COMMUNICATION row: its master tasks' span) and the part
        of it that no compute task (any other device task) overlaps; the device's span, first task to last."""
        if not present(self.report, FILES["communication_statistic"]):
            return None
        context = Clocks(self.report).device
        ops = sorted(({"name": name, "op_type": op_type, "start": start, "end": start + duration}
                      for name, op_type, start, duration, _count in hccl.op_rows(self.report.conn, context)),
                     key=lambda op: op["start"])
        if not ops:
            return None
        communication = {(task["stream"], task["task"]) for task in hccl.communication_tasks(self.report.conn, context)}
        conditions, args = tasks.where(self.report, Selection())
        query = tasks.task_query(self.report, ("stream_id", "task_id", "start_ns", "end_ns", "model_id", "iteration"))
        cover = _Cover(ops)
        first = last = None
        for stream, task, start, end in self.report.conn.execute(
                f"SELECT stream_id, task_id, start_ns, end_ns FROM ({query}) WHERE {conditions}", args):
            first = start if first is None else min(first, start)
            last = end if last is None else max(last, end)
            if (stream, task) not in communication:
                cover.add(start, end)
        exposed = [Exposed(op["name"], op["op_type"], (op["end"] - op["start"]) / 1000,
                           (op["end"] - op["start"] - cover.covered[k]) / 1000) for k, op in enumerate(ops)]
        return Overlap(((last or 0) - (first or 0)) / 1000, exposed)


class _Cover:
    """How much of each op execution (sorted by start) the compute tasks cover, their union counted once: the
    tasks come in start order, so the part of a task inside an op that is new is what lies past the end of
    the compute seen in that op so far (``reach``)."""

    def __init__(self, ops: List[dict]):
        self.ops, self.starts = ops, [op["start"] for op in ops]
        self.reach = [op["start"] for op in ops]
        self.covered = [0.0] * len(ops)
        # the latest end among the ops up to each one: no op at or before k reaches past it
        self.far, far = [], float("-inf")
        for op in ops:
            far = max(far, op["end"])
            self.far.append(far)

    def add(self, start: float, end: float) -> None:
        for k in range(bisect.bisect_left(self.starts, end) - 1, -1, -1):
            if self.far[k] <= start:
                break
            lo, hi = max(start, self.reach[k]), min(end, self.ops[k]["end"])
            if hi > lo:
                self.covered[k] += hi - lo
                self.reach[k] = hi
