"""advise's rules of the PROF_ data families (issue 37 item 4): the step time breakdown, communication that no
computation hides, the AI CPU kernels' overhead and the memory peak. They read ``facts.families()``, a
``FamilyFacts`` (msprof.layouts.prof.family_facts makes a PROF device's from its family files; a unit without
families has the empty one here), and cite those files as their evidence.

Thresholds are data (``THRESHOLDS``): the shares at which a finding is high or medium, and below which a rule
says nothing. The AI CPU's share of the device time is cpu_fallback's finding (msprof.analysis.advise); the
rule here adds what the aicpu file tells of those kernels: how much of their time is computing.
"""
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional

from msprof.analysis.rule import Hit, Rule, grade, pct, us
from msprof.contract import Selection

EVIDENCE_LIMIT = 20


@dataclass(frozen=True)
class Thresholds:
    high: float           # this share or more: high
    medium: float         # this share or more: medium (less: info)
    floor: float = 0.0    # less than this share: no finding


THRESHOLDS: Dict[str, Thresholds] = {
    # the share of an iteration spent waiting for data (Data Aug Bound): a training step that waits for its
    # input a tenth of the time is worth feeding better
    "step_time": Thresholds(0.30, 0.10),
    # the share of the device's time when only communication runs
    "communication_not_overlapped": Thresholds(0.20, 0.05, 0.01),
    # the share of the AI CPU kernels' time (submission to completion) that is not their computing
    "aicpu_overhead": Thresholds(0.50, 0.25),
}


@dataclass
class Step:
    """One row of step_trace (µs; None where the file has N/A)."""

    model_id: str
    iteration_id: str
    iteration_us: float
    fp_bp_us: Optional[float]
    refresh_us: Optional[float]
    data_aug_us: Optional[float]


@dataclass
class CommunicationType:
    """One row of communication_statistic."""

    op_type: str
    count: int
    total_us: float
    avg_us: float
    min_us: float
    max_us: float


@dataclass
class Exposed:
    """One communication op execution and the part of it no compute task overlaps (µs)."""

    name: str
    op_type: str
    duration_us: float
    exposed_us: float


@dataclass
class Overlap:
    """A device's communication against its computation over the whole run (µs)."""

    elapsed_us: float                 # first device task's start to the last one's end
    ops: List[Exposed] = field(default_factory=list)


@dataclass
class AicpuKernel:
    """The aicpu file's rows of one node (op), summed (µs)."""

    node: str
    runs: int
    total_us: float
    compute_us: float
    memcpy_us: float
    dispatch_us: float


@dataclass
class Peak:
    """The largest sample of one memory source, as its file prints it."""

    table: str                        # npu_mem or memory_record
    key: dict                         # what the sample is of: {"event": "APP"} or {"component": "GE"}
    kb: float
    time_us: float
    values: dict                      # the sample's other numbers (KB)


@dataclass
class Allocation:
    """An operator_memory row."""

    name: str
    kb: float
    time_us: float
    duration_us: Optional[float]      # None: not released while collected


class FamilyFacts:
    """What the rules read of the families; empty (a unit without them)."""

    def steps(self) -> List[Step]:
        return []

    def communication_types(self) -> List[CommunicationType]:
        return []

    def overlap(self) -> Optional[Overlap]:
        return None

    def aicpu_kernels(self) -> List[AicpuKernel]:
        return []

    def memory_peaks(self) -> List[Peak]:
        return []

    def allocations(self) -> List[Allocation]:
        return []


def _families(facts) -> FamilyFacts:
    return facts.families() or FamilyFacts()


def _mean(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


# --- step_time ------------------------------------------------------------------------------------------------
def _step_time(facts, selection: Selection) -> Iterator[Hit]:
    by_model: Dict[str, List[Step]] = {}
    for step in _families(facts).steps():
        if selection.model_id is not None and step.model_id != str(selection.model_id):
            continue
        if selection.iteration_id is not None and step.iteration_id != str(selection.iteration_id):
            continue
        by_model.setdefault(step.model_id, []).append(step)
    limits = THRESHOLDS["step_time"]
    for model, steps in by_model.items():
        iteration = _mean(s.iteration_us for s in steps)
        parts = {name: _mean(getattr(s, name + "_us") for s in steps) for name in ("fp_bp", "refresh", "data_aug")}
        share = (parts["data_aug"] or 0.0) / iteration if iteration else 0.0
        severity = grade(share, limits.high, limits.medium)
        fields = {"model": model, "iterations": len(steps), "iteration_us": us(iteration or 0.0),
                  "advice": "" if severity == "info" else
                  " Training waits for its input: prepare it ahead (more data-loading workers, prefetching, the "
                  "dataset on the device, lighter augmentation) so that each step starts when the last ends."}
        for name, value in parts.items():
            fields[name + "_us"] = "N/A" if value is None else us(value)
            fields[name + "_pct"] = "N/A" if value is None else pct(value, iteration or 0.0)
        evidence = [{"table": "step_trace", "key": {"model_id": s.model_id, "iteration_id": s.iteration_id},
                     "values": {name: "N/A" if value is None else value for name, value in (
                         ("iteration_us", s.iteration_us), ("fp_bp_us", s.fp_bp_us), ("refresh_us", s.refresh_us),
                         ("data_aug_us", s.data_aug_us))}}
                    for s in sorted(steps, key=lambda s: -s.iteration_us)[:EVIDENCE_LIMIT]]
        yield Hit(severity, share, fields, evidence)


# --- communication_not_overlapped ---------------------------------------------------------------------------
def _communication_not_overlapped(facts, selection: Selection) -> Iterator[Hit]:
    overlap = _families(facts).overlap()
    if overlap is None or not overlap.ops or not overlap.elapsed_us:
        return
    exposed = sum(op.exposed_us for op in overlap.ops)
    communication = sum(op.duration_us for op in overlap.ops)
    share = exposed / overlap.elapsed_us
    limits = THRESHOLDS["communication_not_overlapped"]
    if share < limits.floor:
        return
    ops = sorted(overlap.ops, key=lambda op: -op.exposed_us)
    evidence = [{"table": "op_summary", "key": {"op_name": op.name},
                 "values": {"op_type": op.op_type, "duration_us": us(op.duration_us), "exposed_us": us(op.exposed_us),
                            "exposed_pct": pct(op.exposed_us, op.duration_us)}} for op in ops[:EVIDENCE_LIMIT]]
    yield Hit(grade(share, limits.high, limits.medium), share,
              {"exposed_us": us(exposed), "communication_us": us(communication), "count": len(ops),
               "exposed_pct": pct(exposed, communication), "share_pct": pct(exposed, overlap.elapsed_us),
               "elapsed_us": us(overlap.elapsed_us)}, evidence)


# --- aicpu_overhead -----------------------------------------------------------------------------------------
def _aicpu_overhead(facts, selection: Selection) -> Iterator[Hit]:
    kernels = sorted(_families(facts).aicpu_kernels(), key=lambda k: (-k.total_us, k.node))
    total = sum(k.total_us for k in kernels)
    if not total:
        return
    compute, memcpy, dispatch = (sum(getattr(k, name) for k in kernels)
                                 for name in ("compute_us", "memcpy_us", "dispatch_us"))
    share = (total - compute) / total
    limits = THRESHOLDS["aicpu_overhead"]
    severity = grade(share, limits.high, limits.medium)
    evidence = [{"table": "aicpu", "key": {"node": k.node},
                 "values": {"runs": k.runs, "total_us": us(k.total_us), "compute_us": us(k.compute_us),
                            "memcpy_us": us(k.memcpy_us), "dispatch_us": us(k.dispatch_us)}}
                for k in kernels[:EVIDENCE_LIMIT]]
    yield Hit(severity, share,
              {"runs": sum(k.runs for k in kernels), "nodes": len(kernels), "total_us": us(total),
               "compute_us": us(compute), "compute_pct": pct(compute, total), "memcpy_us": us(memcpy),
               "memcpy_pct": pct(memcpy, total), "dispatch_us": us(dispatch), "dispatch_pct": pct(dispatch, total),
               "advice": "" if severity == "info" else
               " Most of it is not computing but moving data to and from the AI CPU and waiting to be dispatched: "
               "replace these ops by ones the AI Core runs (cpu_fallback names them) or merge them into fewer."},
              evidence)


# --- memory_peak --------------------------------------------------------------------------------------------
def _memory_peak(facts, selection: Selection) -> Iterator[Hit]:
    families = _families(facts)
    peaks = families.memory_peaks()
    if not peaks:
        return
    evidence = [{"table": p.table, "key": p.key, "values": dict(p.values, kb=p.kb, time_us=p.time_us)}
                for p in peaks]
    top = max(peaks, key=lambda p: p.kb)
    live = [a for a in families.allocations()
            if a.time_us <= top.time_us and (a.duration_us is None or top.time_us < a.time_us + a.duration_us)]
    live.sort(key=lambda a: (-a.kb, a.name))
    evidence += [{"table": "operator_memory", "key": {"name": a.name},
                  "values": {"kb": a.kb, "time_us": a.time_us, "duration_us": a.duration_us}}
                 for a in live[:5]]
    source = ", ".join(f"{k} {v}" for k, v in top.key.items())
    held = ("; the largest allocations then: " + ", ".join(f"{a.name} ({a.kb} KB)" for a in live[:5])) if live \
        else ""
    yield Hit("info", 0.0, {"kb": top.kb, "mb": round(top.kb / 1024, 3), "table": top.table, "source": source,
                            "time_us": top.time_us, "held": held}, evidence)


FAMILY_RULES: List[Rule] = [
    Rule("step_time", _step_time,
         "Model {model}: {iterations} training iteration(s) of {iteration_us} µs on average: FP to BP "
         "{fp_bp_us} µs ({fp_bp_pct} %), iteration refresh {refresh_us} µs ({refresh_pct} %), data loading "
         "(Data Aug Bound) {data_aug_us} µs ({data_aug_pct} %).{advice}",
         "model {model_id} iteration {iteration_id}: {iteration_us} µs, FP to BP {fp_bp_us}, refresh "
         "{refresh_us}, data aug {data_aug_us}"),
    Rule("communication_not_overlapped", _communication_not_overlapped,
         "{exposed_us} µs of the {communication_us} µs of communication ({count} op execution(s), {exposed_pct} %) "
         "run while no compute task does: {share_pct} % of the device's {elapsed_us} µs. Overlap communication "
         "with computation: start each gradient's all-reduce as soon as back-propagation produced it (bucketed, "
         "asynchronous communication), and prefer fewer, larger communication ops.",
         "{op_name} ({op_type}): {exposed_us} µs of {duration_us} µs not overlapped ({exposed_pct} %)"),
    Rule("aicpu_overhead", _aicpu_overhead,
         "AI CPU kernels ran {runs} time(s) ({nodes} op(s)), {total_us} µs from submission to completion: "
         "computing {compute_us} µs ({compute_pct} %), memory copies {memcpy_us} µs ({memcpy_pct} %), "
         "dispatch {dispatch_us} µs ({dispatch_pct} %).{advice}",
         "{node}: {runs} run(s), {total_us} µs, computing {compute_us}, copies {memcpy_us}, dispatch {dispatch_us}"),
    Rule("memory_peak", _memory_peak,
         "Memory peaks at {kb} KB ({mb} MB; {table}: {source}) at {time_us} µs{held}.",
         {"npu_mem": "{event}: {kb} KB at {time_us} µs (ddr {ddr_kb}, hbm {hbm_kb})",
          "memory_record": "{component}: reserved {kb} KB at {time_us} µs (allocated {allocated_kb})",
          "operator_memory": "{name}: {kb} KB allocated at {time_us} µs for {duration_us} µs"}),
]
