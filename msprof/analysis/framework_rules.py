"""advise rules on a torch_npu directory's framework ops (as data, like msprof.analysis.advise's RULES): what a
framework unit's facts give (``framework_ops``, ``ai_cpu_kernels``, and these rules as their ``rules``:
msprof.layouts.framework.opstats).

* ``framework_overhead``: ops whose host self time is many times the device time they launched — Python and
  dispatch cost the device waits for (small ops, views, shape work);
* ``ai_cpu_in_framework_op``: kernels that ran on the AI CPU under a torch op — an operator or dtype the AI Core
  has no kernel for, which falls back to the slow AI CPU.
"""
from dataclasses import dataclass
from typing import Iterator, List

from msprof.analysis.advise import register
from msprof.analysis.rule import Hit, Rule, grade as _grade, pct as _pct, us as _us

# an op is overhead when its host self time is at least this many times its device time
OVERHEAD_RATIO = 10.0
# and the ops that are make a finding from this share of the host time on
OVERHEAD_MIN_SHARE = 0.05
EVIDENCE = 20


@dataclass
class FrameworkOp:
    """The calls of one torch op name with one input shape list (over the selected steps): host and device
    time in all."""

    name: str
    shapes: str
    count: int
    device_total_us: float      # its kernels and those of the ops it called
    device_self_us: float       # its own kernels
    host_total_us: float
    host_self_us: float
    ai_core_us: float           # of device_total_us, on the AI Core


@dataclass
class CpuKernel:
    """The AI CPU kernels of one name under one torch op (name and shapes)."""

    op_name: str
    shapes: str
    kernel: str
    count: int
    total_us: float


def _op_key(op) -> dict:
    return {"op_name": op.name, "input_shapes": op.shapes}


def _framework_overhead(facts, selection) -> Iterator:
    ops: List[FrameworkOp] = facts.framework_ops(selection)
    if not ops:
        return
    host = facts.host_us(selection)
    heavy = sorted((op for op in ops if op.host_self_us > 0
                    and op.host_self_us >= OVERHEAD_RATIO * op.device_total_us),
                   key=lambda op: -op.host_self_us)
    time = sum(op.host_self_us for op in heavy)
    share = time / host if host else 0.0
    if share < OVERHEAD_MIN_SHARE:
        return
    evidence = [{"table": "framework_ops", "key": _op_key(op),
                 "values": {"count": op.count, "host_self_us": _us(op.host_self_us),
                            "device_total_us": _us(op.device_total_us),
                            "share_pct": _pct(op.host_self_us, host)}} for op in heavy[:EVIDENCE]]
    yield Hit(_grade(share, 0.30, 0.10), share,
              {"count": len(heavy), "time_us": _us(time), "share_pct": _pct(time, host),
               "ratio": f"{OVERHEAD_RATIO:g}", "ops": ", ".join(op.name for op in heavy[:5])
               + (f" and {len(heavy) - 5} more" if len(heavy) > 5 else "")}, evidence)


def _ai_cpu(facts, selection) -> Iterator:
    kernels: List[CpuKernel] = facts.ai_cpu_kernels(selection)
    if not kernels:
        return
    device = facts.device_us(selection)
    kernels = sorted(kernels, key=lambda k: -k.total_us)
    time = sum(k.total_us for k in kernels)
    share = time / device if device else 0.0
    evidence = [{"table": "fw_link", "key": {"op_name": k.op_name, "input_shapes": k.shapes, "kernel": k.kernel},
                 "values": {"count": k.count, "time_us": _us(k.total_us),
                            "share_pct": _pct(k.total_us, device)}} for k in kernels[:EVIDENCE]]
    names = list(dict.fromkeys(k.op_name for k in kernels))
    yield Hit(_grade(share, 0.20, 0.05), share,
              {"time_us": _us(time), "share_pct": _pct(time, device),
               "ops": ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else ""),
               "kernels": ", ".join(dict.fromkeys(k.kernel for k in kernels[:5]))}, evidence)


RULES = [
    Rule("framework_overhead", _framework_overhead,
     "{count} torch op(s) spend at least {ratio} times more host time in themselves than the device time they "
     "launch: {time_us} µs of host self time, {share_pct} % of the steps' host time ({ops}). The device waits "
     "for Python and the dispatcher: fuse small ops (torch.compile, fused optimisers and norms), avoid host "
     "work between them (.item(), shape changes, Python loops), or hide it behind the device with larger batches.",
     "{op_name} [{input_shapes}]: {count} call(s), host self {host_self_us} µs, device {device_total_us} µs, "
     "{share_pct} %"),
    Rule("ai_cpu_in_framework_op", _ai_cpu,
     "AI CPU kernels under torch ops take {time_us} µs, {share_pct} % of the device time ({ops}: {kernels}). "
     "The AI Core has no kernel for these operators or dtypes, so they fall back to the AI CPU, slow and "
     "serialising: change the dtype or the operator to one the AI Core runs, or move the work to the host.",
     "{op_name} [{input_shapes}] → {kernel}: {count} kernel(s), {time_us} µs, {share_pct} %"),
]
register(RULES)
