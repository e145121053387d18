"""advise's step rules (docs/framework-plan.md §5): findings on the steps of a torch_npu or MindSpore directory,
from each step's time in step_trace_time's lanes (``Facts.steps``: msprof.layouts.framework.stepstats).

* host_bound_steps: steps whose device waits for the host (Free, and Preparing before its first task) at least
  half as long as it computes: the host does not launch work fast enough.
* slow_steps: steps taking more than 1.5 times the median step (three steps or more).

A step's device time is its Computing, Free and Preparing. Each check is a function of the steps alone; advise
makes its rules of ``RULES`` (id, check, message, evidence line), the checks giving (severity, impact, message
fields, evidence) as advise's other rules do. Numbers: µs rounded to 3 decimals, percentages to 2.
"""
import statistics
from typing import Iterator, List

WAITING = 0.5         # Free + Preparing at least this share of Computing: the step is host-bound
SLOW = 1.5            # a step longer than this many medians is slow
TABLE = "step_trace_time"


def _round(value: float, digits: int = 3) -> float:
    return round(value, digits) or 0.0


def _device_us(step) -> float:
    return step.computing_us + step.free_us + step.preparing_us


def _evidence(step) -> dict:
    return {"table": TABLE, "key": {"step": step.step},
            "values": {"computing_us": _round(step.computing_us), "free_us": _round(step.free_us),
                       "preparing_us": _round(step.preparing_us), "device_us": _round(_device_us(step))}}


def host_bound_steps(steps: List) -> Iterator[tuple]:
    ran = [step for step in steps if step.kernels]
    bound = [step for step in ran if step.waiting_us >= WAITING * step.computing_us]
    if not bound:
        return
    waiting, computing = sum(s.waiting_us for s in bound), sum(s.computing_us for s in bound)
    share = waiting / sum(_device_us(s) for s in ran)
    severity = "high" if share >= 0.5 else "medium" if share >= 0.2 else "info"
    fields = {"count": len(bound), "steps": len(ran), "waiting_us": _round(waiting), "computing_us": _round(computing),
              "share_pct": _round(share * 100, 2)}
    yield severity, share, fields, [_evidence(s) for s in sorted(bound, key=lambda s: -s.waiting_us)]


def slow_steps(steps: List) -> Iterator[tuple]:
    ran = [step for step in steps if step.kernels]
    if len(ran) < 3:
        return
    median = statistics.median(_device_us(s) for s in ran)
    slow = sorted((s for s in ran if _device_us(s) > SLOW * median), key=lambda s: -_device_us(s))
    if not slow:
        return
    excess = sum(_device_us(s) - median for s in slow)
    share = excess / sum(_device_us(s) for s in ran)
    fields = {"count": len(slow), "steps": len(ran), "median_us": _round(median), "worst": slow[0].step,
              "worst_us": _round(_device_us(slow[0])), "excess_us": _round(excess), "share_pct": _round(share * 100, 2)}
    yield "medium" if share >= 0.1 else "info", share, fields, [_evidence(s) for s in slow]


RULES = [
    ("host_bound_steps", host_bound_steps,
     "In {count} of the {steps} step(s) the device waits for the host at least half as long as it computes: "
     "{waiting_us} µs of Free and Preparing against {computing_us} µs of Computing ({share_pct} % of the steps' "
     "device time). The host does not launch work fast enough: fewer, larger operations (fused ops, larger "
     "batches), torch_npu's task queue on, no synchronisation (.item(), .cpu(), prints) inside the step.",
     "step {step}: Computing {computing_us} µs, Free {free_us} µs, Preparing {preparing_us} µs"),
    ("slow_steps", slow_steps,
     "{count} of the {steps} step(s) take more than 1.5 times the median step ({median_us} µs); the longest, "
     "step {worst}, {worst_us} µs. Together {excess_us} µs above the median ({share_pct} % of the steps' device "
     "time). A first step is often slow (compilation, first allocations): leave it out with the profiler's "
     "schedule (wait, warmup); a later one points to data loading, a synchronisation or garbage collection.",
     "step {step}: {device_us} µs (Computing {computing_us}, Free {free_us}, Preparing {preparing_us})"),
]
