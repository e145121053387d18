"""compare's tables of the PROF_ data families (issue 37 item 4; msprof.analysis.compare): step times per
model (the step_trace file: iterations, mean, min and max iteration time, mean FP to BP, refresh and Data Aug
Bound) and communication per op type (the communication_statistic file: count, total and average), base
against new. A collection without these families has no such section: the document of one without them on
either side is what it was before them.
"""
from typing import Dict, List, Optional

from msprof.analysis.family_rules import FamilyFacts
from msprof.analysis.rule import us

# (the mean and its change first: the terminal keeps the first columns when it cannot show them all)
STEP_COLUMNS = ["model_id", "base_mean_us", "new_mean_us", "delta_mean_us", "base_iterations", "new_iterations",
                "base_min_us", "new_min_us", "base_max_us", "new_max_us", "base_fp_bp_us", "new_fp_bp_us",
                "base_refresh_us", "new_refresh_us", "base_data_aug_us", "new_data_aug_us"]
COMMUNICATION_COLUMNS = ["op_type", "base_total_us", "new_total_us", "delta_total_us", "base_count", "new_count",
                         "base_avg_us", "new_avg_us", "delta_avg_us"]
# compare.SECTIONS's entries of these tables: their rows' keys and titles
SECTIONS = {
    "step_trace": (STEP_COLUMNS, "Step trace: iterations and their times per model (µs)"),
    "communication": (COMMUNICATION_COLUMNS, "Communication per op type: count, total and average (µs)"),
}

# what a side lacks when it has no such section
MISSING = {"step_trace": "no step trace (step_trace)", "communication": "no communication (HCCL) data"}


def r3(value: Optional[float]) -> Optional[float]:
    """Rounded to 3 decimals (never -0.0), as findings print µs; compare's rounding too."""
    return None if value is None else us(value)


def minus(new: Optional[float], base: Optional[float]) -> Optional[float]:
    return None if new is None or base is None else r3(new - base)


def _mean(values: List[Optional[float]]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return r3(sum(values) / len(values)) if values else None


def read(families: Optional[FamilyFacts]) -> dict:
    """What compare needs of one side: {"steps": {model id: its values}, "communication": {op type: (count,
    total µs, average µs)}}, each empty without the family."""
    families = families or FamilyFacts()
    steps: Dict[str, list] = {}
    for step in families.steps():
        steps.setdefault(step.model_id, []).append(step)
    return {"steps": {model: {"iterations": len(rows), "mean_us": _mean([s.iteration_us for s in rows]),
                              "min_us": r3(min(s.iteration_us for s in rows)),
                              "max_us": r3(max(s.iteration_us for s in rows)),
                              "fp_bp_us": _mean([s.fp_bp_us for s in rows]),
                              "refresh_us": _mean([s.refresh_us for s in rows]),
                              "data_aug_us": _mean([s.data_aug_us for s in rows])} for model, rows in steps.items()},
            "communication": {t.op_type: (t.count, r3(t.total_us), r3(t.avg_us))
                              for t in families.communication_types()}}


def sections(base: dict, new: dict) -> dict:
    """The document's sections of the families either side has: step_trace by model id, communication by the
    largest change of total time first."""
    out = {}
    if base["steps"] or new["steps"]:
        rows = []
        for model in sorted(set(base["steps"]) | set(new["steps"]), key=lambda m: (len(m), m)):
            b, n = base["steps"].get(model, {}), new["steps"].get(model, {})
            row = {"model_id": model}
            for name in ("iterations", "mean_us", "min_us", "max_us", "fp_bp_us", "refresh_us", "data_aug_us"):
                row["base_" + name], row["new_" + name] = b.get(name), n.get(name)
            row["delta_mean_us"] = minus(row["new_mean_us"], row["base_mean_us"])
            rows.append({key: row[key] for key in STEP_COLUMNS})
        out["step_trace"] = rows
    if base["communication"] or new["communication"]:
        rows = []
        for op_type in set(base["communication"]) | set(new["communication"]):
            (b_count, b_total, b_avg), (n_count, n_total, n_avg) = (
                side["communication"].get(op_type, (None, None, None)) for side in (base, new))
            rows.append({"op_type": op_type, "base_count": b_count, "new_count": n_count, "base_total_us": b_total,
                         "new_total_us": n_total, "delta_total_us": minus(n_total, b_total), "base_avg_us": b_avg,
                         "new_avg_us": n_avg, "delta_avg_us": minus(n_avg, b_avg)})
        rows.sort(key=lambda r: (-abs((r["new_total_us"] or 0.0) - (r["base_total_us"] or 0.0)), r["op_type"]))
        out["communication"] = rows
    return out
