"""compare: two collections side by side — per model, op type, op and ACL/API name (issue 12).

Each side is read once into a ``Side`` (a few dictionaries of aggregates, from its facts), the two are
matched by name into one document — the JSON ``--format json`` writes — and the table and csv views are
drawn from that document (``comparison``, printed by msprof.renderers), so every view shows the same numbers.

Numbers: µs rounded to 3 decimals, percentages too; deltas are computed from the rounded values, so a
reader can check them by subtraction. ``None`` (JSON null, N/A in the tables) where a side has no value:
a model, op or API the other side lacks, and every op type of a side with no device task data (a PROF_ host
without devices: nothing was timed). An op type one side lacks otherwise is 0 on that side (it ran 0 times).
Everything is matched by name (models: see ``matched_models``); a framework's steps by number, and the median
steps of the two sides against each other.

``--spread`` adds each side's median and sample std dev (msprof.spread) of the durations a row averages:
of a model's iterations, an op's tasks, an API's calls (``SPREAD``). An op type's row is a time per iteration
summed over its ops, no average of durations: it has none.
"""
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from msprof.analysis import family_compare
from msprof.analysis.family_compare import minus as _minus, r3
from msprof.analysis.facts import ApiTime, OpAverage, TypeTime
from msprof.console import log, notice
from msprof.errors import RegressionError
from msprof.paths import printable
from msprof.renderers.documents import DEFAULT_TOP, Comparison
from msprof.spread import Spread, counted_spread
from msprof.tables import NUMBER, TEXT, Column, Table

# the document's sections: key → (its rows' keys, title of the table view)
SECTIONS = {
    "models": (["base_model_name", "new_model_name", "base_us", "new_us", "delta_us", "delta_pct"],
               "Models: device time per iteration (µs)"),
    "op_types": (["op_type", "base_us", "new_us", "delta_us", "base_count", "new_count"],
                 "Op types: time (µs) and count per iteration"),
    "ops": (["op_name", "base_op_type", "new_op_type", "base_us", "new_us", "delta_us"],
            "Ops: average duration (µs)"),
    "apis": (["name", "base_count", "new_count", "base_avg_us", "new_avg_us", "delta_avg_us", "base_total_us",
              "new_total_us"], "ACL/API calls: count, average and total (µs)"),
    # (two torch_npu directories: their framework ops by name and input shapes, framework_op_rows)
    "framework_ops": (["op_name", "input_shapes", "base_device_us", "new_device_us", "delta_device_us",
                       "base_host_us", "new_host_us", "delta_host_us", "base_count", "new_count"],
                      "Framework ops: device time (own kernels and callees') and host time per call (µs)"),
    # (only where a side has a framework's steps: a torch_npu/MindSpore directory's eager device)
    "steps": (["step", "base_us", "new_us", "delta_us", "delta_pct", "base_computing_us", "new_computing_us"],
              "Steps: device time (Computing, Free and Preparing) and Computing (µs), by number and the median"),
    **family_compare.SECTIONS,       # (only in the document of collections with those families)
}
# the terminal's columns that show a pair of the document's in one ("base → new" where they differ)
JOINED = {"model_name": ("base_model_name", "new_model_name"), "op_type": ("base_op_type", "new_op_type")}
_NAME_COLUMNS = {"model_name", "op_type", "op_name", "name", "input_shapes", "step", *JOINED["model_name"], *JOINED["op_type"]}
CUT = ("ops", "framework_ops")       # the sections --top cuts
# --spread: the sections whose rows average durations, and the field after which their spread goes
SPREAD = {"models": "delta_pct", "ops": "delta_us", "apis": "delta_avg_us"}
SPREAD_KEYS = ["base_median_us", "new_median_us", "base_stddev_us", "new_stddev_us"]


@dataclass
class Side:
    """What compare needs of one collection."""

    path: str
    models: Dict[str, List[float]]             # model name → busy µs of each recorded iteration
    op_types: Optional[Dict[str, TypeTime]]   # None: no device task data (nothing timed)
    ops: Dict[Tuple[str, str], OpAverage]      # (model name, op name) → the op
    apis: Optional[Dict[str, ApiTime]]         # None: no ACL/API data collected
    families: dict                             # family_compare.read
    steps: Dict[int, Tuple[float, float]]      # a framework's step → (device µs, Computing µs); {} elsewhere
    # --spread: per section of SPREAD, its rows' keys (models: name, ops: (model, op), apis: name) → spread
    spread: Optional[Dict[str, Dict[object, Spread]]] = None

    def has_model(self, name: str) -> bool:
        """Whether this side ran the model: timed iterations or ops of it."""
        return name in self.models or any(model == name for model, _op in self.ops)

    @classmethod
    def read(cls, facts, spread: bool = False) -> "Side":
        """``spread``: with the median and std dev of the durations (a second pass over the tasks)."""
        side = cls(printable(facts.path), dict(facts.model_iterations()),
                   {t.type: t for t in facts.op_types()} if facts.report.has_tasks else None,
                   {(o.model_name, o.name): o for o in facts.ops()},
                   {a.name: a for a in facts.apis()} if facts.has_api else None,
                   family_compare.read(facts.families()),
                   {s.step: (s.computing_us + s.free_us + s.preparing_us, s.computing_us) for s in facts.steps()
                    if s.kernels})
        if spread:
            side.spread = {
                "models": counted_spread((name, us, 1) for name, times in side.models.items() for us in times),
                "ops": counted_spread(((model, name), us, n) for model, name, us, n in facts.op_durations()),
                "apis": counted_spread(facts.api_durations()) if facts.has_api else {}}
        return side


def _count(value: Optional[float]):
    """A count per iteration: 3 decimals, an int when whole."""
    value = r3(value)
    return int(value) if value is not None and float(value).is_integer() else value


def _type_values(side: Side, name: str) -> tuple:
    """(µs, count) per iteration of an op type on one side: 0 where the side ran none, None where it timed
    nothing at all."""
    if side.op_types is None:
        return None, None
    found = side.op_types.get(name)
    return (r3(found.us_per_iteration), _count(found.count_per_iteration)) if found else (0.0, 0)


def section_keys(section: str, spread: bool = False) -> List[str]:
    """The keys of a section's rows, in order: SECTIONS', with ``spread`` SPREAD_KEYS after SPREAD's field."""
    keys = SECTIONS[section][0]
    if not spread or section not in SPREAD:
        return keys
    at = keys.index(SPREAD[section]) + 1
    return keys[:at] + SPREAD_KEYS + keys[at:]


def _spread(row: dict, section: str, base: Side, new: Side, base_key, new_key) -> dict:
    """The row with each side's median and std dev of ``section`` by its key, when both sides have them."""
    if base.spread is None or new.spread is None:
        return row
    (b_median, b_dev), (n_median, n_dev) = (side.spread[section].get(key, (None, None))
                                            for side, key in ((base, base_key), (new, new_key)))
    row.update(zip(SPREAD_KEYS, (b_median, n_median, b_dev, n_dev)))
    return {key: row[key] for key in section_keys(section, True)}


def _mean(values: Optional[List[float]]) -> Optional[float]:
    return r3(sum(values) / len(values)) if values else None


def matched_models(base: Side, new: Side) -> List[tuple]:
    """(label, base name, new name) of each model row: models are matched by name. One exception: when each
    side has one model and the names differ, those two are the same network converted again under another
    name (yolov3_tiny_mish → yolov3_tiny_leaky, the guide's case) and are compared, labelled "base → new" —
    if they have an op name in common: two networks that share none are not one converted again (a gate
    must not fail on them)."""
    if len(base.models) == 1 == len(new.models) and set(base.models) != set(new.models):
        [base_name], [new_name] = base.models, new.models
        if {name for _model, name in base.ops} & {name for _model, name in new.ops}:
            notice(f"models matched as the only one of each side: {base_name} (base) and {new_name} (new)")
            return [(f"{base_name} → {new_name}", base_name, new_name)]
        notice(f"models not matched: {base_name} (base) and {new_name} (new) have other names and no op name in "
               "common")
    names = set(base.models) | set(new.models) | {model for model, _op in base.ops} | {model for model, _op in new.ops}
    return [(name, name, name) for name in sorted(names)]


def compare_sides(base: Side, new: Side) -> dict:
    """The document of ``--format json`` (issue 12, keys in this order)."""
    models = []
    matched = matched_models(base, new)
    for _label, base_name, new_name in matched:
        b, n = _mean(base.models.get(base_name)), _mean(new.models.get(new_name))
        delta = _minus(n, b)
        models.append(_spread({"base_model_name": base_name if base.has_model(base_name) else None,
                               "new_model_name": new_name if new.has_model(new_name) else None,
                               "base_us": b, "new_us": n, "delta_us": delta,
                               "delta_pct": r3(delta / b * 100) if delta is not None and b else None},
                              "models", base, new, base_name, new_name))

    op_types = []
    for name in set(base.op_types or ()) | set(new.op_types or ()):
        (b_us, b_count), (n_us, n_count) = _type_values(base, name), _type_values(new, name)
        op_types.append({"op_type": name, "base_us": b_us, "new_us": n_us, "delta_us": _minus(n_us, b_us),
                         "base_count": b_count, "new_count": n_count})
    # (a type one side has no value for changed by its whole time, as an op does)
    op_types.sort(key=lambda r: (-abs((r["new_us"] or 0.0) - (r["base_us"] or 0.0)), r["op_type"]))

    # an op is matched by its name within a matched model: two models' ops of one name are two ops (averaged
    # together, one's slowdown hid behind the other's speed-up), named "model: op" — only those, so that other
    # names stay issue 12's op names; a type that changed is said as both
    per_model = []
    for label, base_name, new_name in matched:
        mine = {name: op for (model, name), op in base.ops.items() if model == base_name}
        theirs = {name: op for (model, name), op in new.ops.items() if model == new_name}
        per_model.append((label, mine, theirs, base_name, new_name))
    labels: Dict[str, int] = {}
    for _label, mine, theirs, _base_name, _new_name in per_model:
        for name in mine.keys() | theirs.keys():
            labels[name] = labels.get(name, 0) + 1
    ops = []
    for label, mine, theirs, base_name, new_name in per_model:
        for name in mine.keys() | theirs.keys():
            b, n = mine.get(name), theirs.get(name)
            b_us, n_us = (r3(b.avg_us) if b else None), (r3(n.avg_us) if n else None)
            ops.append(_spread({"op_name": f"{label}: {name}" if labels[name] > 1 else name,
                                "base_op_type": b.type if b else None, "new_op_type": n.type if n else None,
                                "base_us": b_us, "new_us": n_us, "delta_us": _minus(n_us, b_us)},
                               "ops", base, new, (base_name, name), (new_name, name)))
    # the largest changes first; an op on one side only changed by its whole time
    ops.sort(key=lambda r: (-abs((r["new_us"] or 0.0) - (r["base_us"] or 0.0)), r["op_name"]))

    document = {"base": base.path, "new": new.path, "models": models, "op_types": op_types, "ops": ops,
                "apis": _apis(base, new)}
    if base.steps or new.steps:
        document["steps"] = _steps(base, new)
    return {**document, **family_compare.sections(base.families, new.families)}


def _apis(base: Side, new: Side) -> List[dict]:
    """The ACL/API calls matched by name, the largest total first (none when a side has no API data)."""
    apis: List[dict] = []
    if base.apis is None or new.apis is None:
        missing = " and ".join(side.path for side in (base, new) if side.apis is None)
        notice(f"no ACL/API data in {missing}: apis not compared")
        return apis
    for name in set(base.apis) | set(new.apis):
        b, n = base.apis.get(name), new.apis.get(name)
        b_avg, n_avg = (r3(b.avg_us) if b else None), (r3(n.avg_us) if n else None)
        apis.append(_spread({"name": name, "base_count": b.count if b else None,
                             "new_count": n.count if n else None, "base_avg_us": b_avg, "new_avg_us": n_avg,
                             "delta_avg_us": _minus(n_avg, b_avg), "base_total_us": r3(b.total_us) if b else None,
                             "new_total_us": r3(n.total_us) if n else None}, "apis", base, new, name, name))
    apis.sort(key=lambda r: (-max(r["base_total_us"] or 0.0, r["new_total_us"] or 0.0), r["name"]))
    return apis


def framework_op_rows(base: list, new: list) -> List[dict]:
    """The framework ops of two torch_npu directories (msprof.analysis.framework_rules.FrameworkOp lists)
    matched by name and input shapes: calls, and device and host time per call; the largest change of device
    time first (an op on one side only changed by its whole time)."""
    def per_call(op, field):
        return r3(getattr(op, field) / op.count) if op is not None and op.count else None

    mine, theirs = ({(op.name, op.shapes): op for op in side} for side in (base, new))
    rows = []
    for key in mine.keys() | theirs.keys():
        b, n = mine.get(key), theirs.get(key)
        row = {"op_name": key[0], "input_shapes": key[1], "base_count": b.count if b else None,
               "new_count": n.count if n else None}
        for what, field in (("device", "device_total_us"), ("host", "host_total_us")):
            row[f"base_{what}_us"], row[f"new_{what}_us"] = per_call(b, field), per_call(n, field)
            row[f"delta_{what}_us"] = _minus(row[f"new_{what}_us"], row[f"base_{what}_us"])
        rows.append(row)
    rows.sort(key=lambda r: (-abs((r["new_device_us"] or 0.0) - (r["base_device_us"] or 0.0)), r["op_name"],
                             r["input_shapes"]))
    return rows


def _steps(base: Side, new: Side) -> List[dict]:
    """The steps matched by number, then a row comparing the two sides' median steps."""
    keys = sorted(base.steps.keys() | new.steps.keys())
    pairs = [(key, base.steps.get(key), new.steps.get(key)) for key in keys]
    medians = [tuple(statistics.median(values) for values in zip(*side.steps.values())) if side.steps else None
               for side in (base, new)]
    rows = []
    for key, b, n in pairs + [("median", *medians)]:
        b_us, n_us = (r3(b[0]) if b else None), (r3(n[0]) if n else None)
        delta = _minus(n_us, b_us)
        rows.append({"step": str(key), "base_us": b_us, "new_us": n_us, "delta_us": delta,
                     "delta_pct": r3(delta / b_us * 100) if delta is not None and b_us else None,
                     "base_computing_us": r3(b[1]) if b else None, "new_computing_us": r3(n[1]) if n else None})
    return rows


# --- verdict and gate ----------------------------------------------------------------------------------------
def _signed_pct(pct: float) -> str:
    return ("−" if pct < 0 else "+") + f"{abs(pct):.1f} %"


def verdict(document: dict) -> str:
    """One line: each model both sides have, base → new per iteration ("det_net: 3255.4 → 2643.0 µs per
    iteration, −18.8 %"); or which models are timed on one side only."""
    parts, only = [], []
    for row in document["models"]:
        if row["base_us"] is not None and row["new_us"] is not None:
            change = "" if row["delta_pct"] is None else ", " + _signed_pct(row["delta_pct"])
            parts.append(f"{joined(row, 'model_name')}: {row['base_us']:.1f} → {row['new_us']:.1f} µs per "
                         f"iteration{change}")
        else:       # (a model may be on both sides with recorded iterations on one only: a device log lost)
            only.append(f"{joined(row, 'model_name')} (timed in {'base' if row['new_us'] is None else 'new'} only)")
    if parts:       # a model that vanished or appeared is part of the answer too
        return "; ".join(parts + only)
    return ("no model timed in both collections (models are matched by name): " + ", ".join(only)) if only else \
        "no model's device time per iteration recorded on either side"


def regressions(document: dict, pct: float) -> List[dict]:
    """The models both sides have whose time per iteration grew by more than ``pct`` %."""
    return [row for row in document["models"] if row["delta_pct"] is not None and row["delta_pct"] > pct]


def check_gate(document: dict, pct: Optional[float]) -> None:
    """``--fail-if-slower PCT``: raise RegressionError (exit 9) naming each model that grew too much — or when
    no model could be checked: a gate that passes on nothing would pass a renamed model or a lost device log
    unseen. Models of the base that the new side does not time are warned about."""
    if pct is None:
        return
    if not any(r["delta_pct"] is not None for r in document["models"]):
        raise RegressionError(f"--fail-if-slower {pct:g}: no model could be checked: {verdict(document)}")
    unchecked = [joined(r, "model_name") for r in document["models"]
                 if r["base_us"] is not None and r["new_us"] is None]
    if unchecked:
        log.warning("--fail-if-slower %g: not checked, no time per iteration in %s: %s", pct, document["new"],
                    ", ".join(unchecked))
    slower = regressions(document, pct)
    if slower:
        raise RegressionError("performance regression: " + "; ".join(
            f"{joined(r, 'model_name')}: {r['base_us']:.1f} → {r['new_us']:.1f} µs per iteration "
            f"({_signed_pct(r['delta_pct'])}, more than {pct:g} %)" for r in slower))


# --- views ---------------------------------------------------------------------------------------------------
def joined(row: dict, column: str) -> Optional[str]:
    """A terminal column of ``JOINED`` in one row: the base's and the new side's value, one when they are the
    same or one side has none, "base → new" when they differ."""
    base, new = (row[key] for key in JOINED[column])
    return new if base is None or base == new else base if new is None else f"{base} → {new}"


def comparison(document: dict, top: Optional[int] = DEFAULT_TOP, sections: Sequence[str] = (),
               spread: bool = False) -> Comparison:
    """What compare prints in every format (msprof.renderers): the document, its verdict, and its sections
    (``sections``: only those; every one by default) as tables, ops cut to the ``top`` largest changes (None:
    all) — in the table view ("base → new" in one column) and in the document's (each value in its field).
    ``spread``: the document's rows have SPREAD_KEYS (compare_sides of sides read with spread)."""
    out, script, cut = [], [], {}
    shown = dict(document)
    for key, (_names, title) in SECTIONS.items():
        names = section_keys(key, spread)
        if (sections and key not in sections) or key not in document:
            if key in sections:
                notice(f"{family_compare.MISSING.get(key, 'no ' + key)} on either side: {key} not compared")
            shown.pop(key, None)
            continue
        rows = document[key]
        if key in CUT and top is not None and len(rows) > top:
            title += f", the {top} largest changes of {len(rows)}"
            cut[key] = (top, len(rows))
            rows = shown[key] = rows[:top]
        pairs = {pair[0]: column for column, pair in JOINED.items() if pair[0] in names}
        seconds = {JOINED[column][1] for column in pairs.values()}
        view = [pairs.get(name, name) for name in names if name not in seconds]
        table_rows = [tuple(joined(row, pairs[name]) if name in pairs else row[name]
                            for name in names if name not in seconds) for row in rows]
        # (a model's label is wrapped, not cut: "yolov3_tin…h → yolov3_tiny_leaky" hid what tells them apart)
        out.append(Table(key, title, _columns(view), [table_rows], cut=key != "models"))
        script.append(Table(key, title, _columns(names), [[tuple(row[name] for name in names) for row in rows]]))
    return Comparison(shown, verdict(document), out, cut, script)


def _columns(names: List[str]) -> List[Column]:
    return [Column(name, TEXT if name in _NAME_COLUMNS else NUMBER) for name in names]
