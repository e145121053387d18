"""advise: findings — where the milliseconds go and what to do about it — from rules kept as data.

A rule is one ``Rule`` in ``RULES``: an id, a check (facts, selection → hits) and two templates (the
finding's message, one line per evidence item in the table view), so a rule is added in one place. A hit
carries its severity (graded on the share of the time it concerns), its impact, the message's fields and
its evidence: ``{"table", "key", "values"}`` items naming where a user finds the numbers (an output table,
or a database table for what no output shows). Impact orders the findings of one severity: the share of
the time following the advice could save, at best — all of it for a decomposed activation, a CPU
fallback or idle gaps, a memory-bound layer's time above its compute time (time / Memory Bound).

Layer rules (decomposed activations, memory-bound layers) read one iteration per model — the selected one,
else the last recorded (the one ``show`` prints) — so their numbers are those of its AA Core metrics /
op_summary table. The other device rules use every recorded iteration (or the selected one).

Numbers in findings: µs rounded to 3 decimals, percentages to 2.
"""
import heapq
from collections import deque
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from msprof import progress
from msprof.analysis import step_rules
from msprof.analysis.facts import SINGLE_OP, Facts, Layer, LayerIteration
from msprof.analysis.family_rules import FAMILY_RULES
from msprof.analysis.rule import Hit, Rule, grade as _grade, pct as _pct, us as _us
from msprof.console import notice
from msprof.contract import Selection
from msprof.renderers.documents import Findings

SEVERITIES = ("high", "medium", "info")
EVIDENCE_LIMIT = 20          # evidence items per finding (the largest first); the message gives the count


def _where(iteration: LayerIteration) -> str:
    return iteration.model_name if iteration.index_id is None else \
        f"{iteration.model_name} (iteration {iteration.index_id})"


def _iteration_key(iteration: LayerIteration) -> dict:
    return {"model_name": iteration.model_name, "iteration": iteration.index_id}


class _Summed:
    """An iterator of layers that adds up their time as it is consumed (the iteration's device time)."""

    def __init__(self, layers: Iterable[Layer]):
        self.layers, self.total, self.count = iter(layers), 0.0, 0

    def __iter__(self) -> Iterator[Layer]:
        for layer in self.layers:
            self.total += layer.us or 0.0
            self.count += 1
            yield layer


# --- decomposed_activation ---------------------------------------------------------------------------------
# Activations an accelerator without them runs as a chain of elementwise layers: (name, the chain's layer
# types, normalised: lower case, letters and digits only). At each layer the first chain that matches is
# taken (they start with different types, so none hides another).
ACTIVATIONS: List[Tuple[str, Tuple[str, ...]]] = [
    ("Mish", ("softplus", "tanh", "mul")),
    ("GELU", ("erf", "add", "mul")),
    ("GELU (tanh approximation)", ("tanh", "add", "mul")),
    ("HardSwish", ("hardsigmoid", "mul")),
    ("SiLU/Swish", ("sigmoid", "mul")),
]
_LONGEST = max(len(chain) for _name, chain in ACTIVATIONS)


def _type_key(layer_type: str) -> str:
    return "".join(ch for ch in (layer_type or "").lower() if ch.isalnum())


def _reported_ori(layer: Layer) -> Optional[str]:
    """The original layer name the board reports for a layer (None when it is just the layer's own)."""
    return layer.ori_name if layer.ori_name and layer.ori_name != layer.name else None


def _match(window) -> Optional[Tuple[str, List[Layer]]]:
    for activation, chain in ACTIVATIONS:
        if len(window) < len(chain):
            continue
        layers = [window[i] for i in range(len(chain))]
        if [_type_key(layer.type) for layer in layers] != list(chain):
            continue
        ori = _reported_ori(layers[0])          # one original layer: the chain must not cross into another
        if ori is None or all(layer.ori_name == ori for layer in layers):
            return activation, layers
    return None


def activation_chains(layers: Iterable[Layer]) -> Iterator[Tuple[str, List[Layer]]]:
    """(activation, its layers) for each chain in execution order, leftmost first, never overlapping —
    streaming (an iteration of single ops may hold a million tasks)."""
    source, window = iter(layers), deque()
    while True:
        while len(window) < _LONGEST:
            layer = next(source, None)
            if layer is None:
                break
            window.append(layer)
        if not window:
            return
        found = _match(window)
        if found is None:
            window.popleft()
            continue
        for _ in found[1]:
            window.popleft()
        yield found


def _decomposed_activation(facts: Facts, selection: Selection) -> Iterator[Hit]:
    for iteration in facts.layer_iterations(selection):
        layers = _Summed(facts.layers(iteration))
        groups: Dict[str, List[dict]] = {}
        chains: Dict[str, str] = {}
        for activation, chain in activation_chains(layers):
            chains.setdefault(activation, " → ".join(layer.type for layer in chain))
            groups.setdefault(activation, []).append({
                "group": _reported_ori(chain[0]) or chain[0].name,
                "layers": ";".join(layer.name for layer in chain),
                "layer_types": ";".join(layer.type for layer in chain),
                "time": sum(layer.us or 0.0 for layer in chain)})
        for activation, found in groups.items():
            time = sum(g["time"] for g in found)
            share = time / layers.total if layers.total else 0.0
            found.sort(key=lambda g: -g["time"])
            evidence = [{"table": facts.table_names["layers"],
                         "key": dict(_iteration_key(iteration), group=g["group"]),
                         "values": {"activation": activation, "layers": g["layers"], "layer_types": g["layer_types"],
                                    "time_us": _us(g["time"]), "share_pct": _pct(g["time"], layers.total)}}
                        for g in found[:EVIDENCE_LIMIT]]
            yield Hit(_grade(share, 0.10, 0.02), share,
                      {"activation": activation, "chain": chains[activation], "places": len(found),
                       "where": _where(iteration), "time_us": _us(time), "share_pct": _pct(time, layers.total),
                       "processor": facts.processor, "native": facts.native_activations}, evidence)


# --- memory_bound ------------------------------------------------------------------------------------------
def _memory_bound(facts: Facts, selection: Selection) -> Iterator[Hit]:
    if not facts.has_pmu:
        if not facts.report.has_tasks:      # (no device tasks at all: said once, by find)
            return
        pmu = facts.pmu_description
        what = "no PMU data" if pmu is None else f"PMU data of {pmu}, no memory-bound value"
        notice(f"{facts.label}: {what}: memory_bound not checked ({facts.memory_bound_source})")
        return
    for iteration in facts.layer_iterations(selection):
        layers = _Summed(facts.layers(iteration))
        longest: List[tuple] = []                # a heap of the EVIDENCE_LIMIT longest memory-bound layers
        count, time, excess = 0, 0.0, 0.0
        for position, layer in enumerate(layers):
            if layer.memory_bound is not None and layer.memory_bound > 1:
                count += 1
                time += layer.us or 0.0
                excess += (layer.us or 0.0) * (1 - 1 / layer.memory_bound)   # the time beyond its compute
                item = (layer.us or 0.0, -position, layer)
                (heapq.heappush if len(longest) < EVIDENCE_LIMIT else heapq.heappushpop)(longest, item)
        if not count:
            continue
        ranked = [layer for _us_, _p, layer in sorted(longest, key=lambda item: (-item[0], -item[1]))]
        share = time / layers.total if layers.total else 0.0
        evidence = [{"table": facts.table_names["layers"],
                     "key": dict(_iteration_key(iteration), layer_name=layer.name),
                     "values": {"layer_type": layer.type, "memory_bound": layer.memory_bound,
                                "time_us": _us(layer.us or 0.0), "share_pct": _pct(layer.us or 0.0, layers.total)}}
                    for layer in ranked]
        top = ranked[0]
        yield Hit(_grade(share, 0.25, 0.05), excess / layers.total if layers.total else 0.0,
                  {"count": count, "layers": layers.count, "where": _where(iteration), "time_us": _us(time),
                   "share_pct": _pct(time, layers.total), "top": top.name, "top_us": _us(top.us or 0.0),
                   "top_value": top.memory_bound}, evidence)


# --- cpu_fallback ------------------------------------------------------------------------------------------
def _per(model: str) -> str:
    # single ops have no iterations: their one "iteration" is the whole run, and a time of it is a total
    return "in all" if model == SINGLE_OP else "per iteration"


def _cpu_fallback(facts: Facts, selection: Selection) -> Iterator[Hit]:
    busy = {name: sum(times) for name, times in facts.model_iterations(selection).items()}
    by_model: Dict[str, list] = {}
    for op in facts.cpu_ops(selection):
        by_model.setdefault(op.model_name, []).append(op)
    for model, ops in by_model.items():
        ops.sort(key=lambda op: -op.total_us)
        time = sum(op.total_us for op in ops)
        iterations = ops[0].iterations
        share = time / busy[model] if busy.get(model) else 0.0
        evidence = [{"table": facts.table_names["ops"], "key": {"model_name": model, "op_name": op.name},
                     "values": {"op_type": op.type, "count_per_iteration": round(op.count / op.iterations, 3),
                                "time_us": _us(op.total_us / op.iterations),
                                "share_pct": _pct(op.total_us, busy.get(model, 0.0))}}
                    for op in ops[:EVIDENCE_LIMIT]]
        yield Hit(_grade(share, 0.20, 0.05), share,
                  {"model": model, "cpu": facts.cpu, "processor": facts.processor, "share_pct": _pct(time, busy[model]),
                   "time_us": _us(time / iterations), "per": _per(model),
                   "ops": ", ".join(f"{op.name} ({op.type})" for op in ops[:5])
                   + (f" and {len(ops) - 5} more" if len(ops) > 5 else "")}, evidence)


# --- acl_hotspot -------------------------------------------------------------------------------------------
# what an API name does to a model, by a part of its name normalised (lower case, no '_'): svp_acl_mdl_…, aclmdl…
API_ROLES = {"load": ("mdlload",), "unload": ("mdlunload",), "execute": ("mdlexecute",)}
HOTSPOTS = 5


def _role(name: str) -> Optional[str]:
    key = name.lower().replace("_", "")
    return next((role for role, parts in API_ROLES.items() if any(p in key for p in parts)), None)


def _acl_hotspot(facts: Facts, selection: Selection) -> Iterator[Hit]:
    apis = [api for api in facts.apis() if api.top]
    if not apis:
        notice(f"{facts.label}: no ACL/API data: acl_hotspot not checked")
        return
    apis.sort(key=lambda api: (-api.total_us, api.name))
    total = sum(api.total_us for api in apis)
    roles: Dict[str, float] = {}
    calls: Dict[str, int] = {}
    for api in apis:
        role = _role(api.name)
        if role:
            roles[role] = roles.get(role, 0.0) + api.total_us
            calls[role] = calls.get(role, 0) + api.count
    model_setup, execute = roles.get("load", 0.0) + roles.get("unload", 0.0), roles.get("execute", 0.0)
    detail, severity = "", "info"
    setup = f" Model load and unload ({_us(model_setup)} µs) outweigh execute ({_us(execute)} µs)"
    # (the run's models, as its loads are the run's: not the selected or this device's models — against them
    # a run that loaded each model once looked like one that loaded a model again and again)
    if model_setup > execute and calls.get("load", 0) > max(1, len(facts.report.models())):
        detail, severity = (f"{setup}, with {calls['load']} loads: load the model once, outside the timed loop, and"
                            " reuse it for every execution."), "medium"
    elif model_setup > execute:
        # (each model loaded once: what a short profiling run looks like, not something the application does
        # wrong — telling it to load once was wrong advice, found by a newcomer's trial)
        detail = (f"{setup}, but each model is loaded once: a short run ({calls.get('execute', 0)} execute call(s));"
                  " profile more executions to see the steady state.")
    top = apis[0]
    evidence = [{"table": facts.table_names["apis"], "key": {"name": api.name},
                 "values": {"level": api.level, "count": api.count, "total_us": _us(api.total_us),
                            "avg_us": _us(api.avg_us), "share_pct": _pct(api.total_us, total)}}
                for api in apis[:HOTSPOTS]]
    yield Hit(severity, top.total_us / total if total else 0.0,
              {"name": top.name, "total_us": _us(top.total_us), "count": top.count, "avg_us": _us(top.avg_us),
               "share_pct": _pct(top.total_us, total), "detail": detail}, evidence)


# --- host_bound --------------------------------------------------------------------------------------------
def _host_bound(facts: Facts, selection: Selection) -> Iterator[Hit]:
    for model in facts.idle(selection):
        ratio = model.idle_us / model.busy_us if model.busy_us else 0.0
        if ratio < 0.10:                     # a few µs between tasks is the scheduler's normal cost
            continue
        per = max(model.iterations, 1)
        values = {"iterations": model.iterations, "busy_us": _us(model.busy_us / per),
                  "idle_us": _us(model.idle_us / per), "idle_pct": _pct(model.idle_us, model.busy_us)}
        yield Hit(_grade(ratio, 0.50, 0.10), ratio, dict(values, model=model.model_name),
                  [{"table": facts.table_names["idle"], "key": {"model_name": model.model_name}, "values": values}])


# --- device_idle -------------------------------------------------------------------------------------------
def _device_idle(facts: Facts, selection: Selection) -> Iterator[Hit]:
    if not selection.everything:        # (one iteration has no "between")
        return
    between = facts.between(selection)
    ratio = between.idle_us / between.elapsed_us if between.elapsed_us else 0.0
    if between.iterations < 2 or ratio < 0.25:     # a gap for the next execute call is the normal cost
        return
    evidence = [{"table": facts.table_names["idle"], "key": {"model_name": gap.model_name, "index_id": gap.index_id},
                 "values": {"gap_us": _us(gap.gap_us)}} for gap in between.gaps[:EVIDENCE_LIMIT]]
    yield Hit(_grade(ratio, 0.50, 0.25), ratio,
              {"idle_pct": _pct(between.idle_us, between.elapsed_us), "idle_us": _us(between.idle_us),
               "elapsed_us": _us(between.elapsed_us), "iterations": between.iterations, "gaps": len(between.gaps),
               "gap_us": _us(between.idle_us / len(between.gaps))}, evidence)


# --- data_loss ---------------------------------------------------------------------------------------------
def _data_loss(facts: Facts, selection: Selection) -> Iterator[Hit]:
    losses, warnings = facts.data_loss()
    untimed, tasks = facts.untimed()
    if not losses and not warnings and not untimed:
        return
    evidence = [{"table": "decode_count", "key": {"stream": loss.stream},
                 "values": {"kind": loss.kind, "records": loss.records, "skipped": loss.skipped,
                            "head_lost": loss.head_lost, "tail_lost": loss.tail_lost}} for loss in losses]
    evidence += [{"table": "notice", "key": {"level": "warning"}, "values": {"message": message}}
                 for message in warnings]
    # lost records make every figure uncertain, and a fifth of the records or tasks lost makes them wrong (a
    # few bytes cut inside a task log misread every record after them); warnings alone (e.g. no layer.info) are
    # for information
    # (decode_count's records are every record read, the skipped ones among them)
    skipped, records = sum(loss.skipped for loss in losses), sum(loss.records for loss in losses)
    share = max(skipped / records if records else 0.0, untimed / tasks if tasks else 0.0)
    severity = "high" if share >= 0.20 else "medium" if losses or untimed else "info"
    yield Hit(severity, share, {"skipped": skipped, "bytes": sum(loss.head_lost + loss.tail_lost for loss in losses),
                                "streams": len(losses), "warnings": len(warnings),
                                "untimed": f" {untimed} of the {tasks} device task(s) expected are missing or lack a "
                                           f"start or an end ({_pct(untimed, tasks)} %)." if untimed else ""},
              evidence)


RULES: List[Rule] = [
    Rule("decomposed_activation", _decomposed_activation,
         "{activation} is computed as {chain} in {places} place(s) of {where}: {time_us} µs, {share_pct} % of "
         "the iteration's device time. The {processor} has no {activation} {layer_word}, so the model converter "
         "split it into separate elementwise {layers_word}, each reading and writing the whole tensor. Use an activation "
         "the {processor} runs natively ({native}); LeakyRelu is the usual replacement.",
         "{group}: {layers} — {time_us} µs, {share_pct} %"),
    Rule("memory_bound", _memory_bound,
         "{count} of the {layers} {layers_word} of {where} are memory-bound (Memory Bound > 1: they wait for data "
         "more than they compute): {time_us} µs, {share_pct} % of the iteration's device time; the longest is "
         "{top} ({top_us} µs, {top_value}). Cut their memory traffic: fuse them with a neighbour, use smaller "
         "tensors (fewer channels, lower precision) or remove {layers_word} that only move data.",
         "{layer_name} ({layer_type}): Memory Bound {memory_bound}, {time_us} µs, {share_pct} %"),
    Rule("cpu_fallback", _cpu_fallback,
         "{share_pct} % of the device time of {model} runs on the {cpu} ({time_us} µs {per}): {ops}. "
         "The {processor} cannot run these {layers_word}; use an equivalent it supports where one exists, or move the "
         "work out of the model (e.g. post-processing on the host).",
         "{op_name} ({op_type}): {time_us} µs {per}, {share_pct} %"),
    Rule("acl_hotspot", _acl_hotspot,
         "{name} takes the most ACL/API time: {total_us} µs in {count} call(s) ({avg_us} µs each), {share_pct} % "
         "of the time in the application's own ACL calls.{detail}",
         "{name}: {total_us} µs, {count} call(s), {avg_us} µs each, {share_pct} %"),
    Rule("host_bound", _host_bound,
         "The device idles between the tasks of {model}: {idle_us} µs per iteration, {idle_pct} % of its busy "
         "time ({busy_us} µs). It is waiting — for the host to launch the next task, or for a synchronisation: "
         "launch work ahead (asynchronous execution, fewer host calls between layers).",
         "{model_name}: idle {idle_us} µs of busy {busy_us} µs per iteration ({idle_pct} %), {iterations} "
         "iteration(s)"),
    Rule("device_idle", _device_idle,
         "The device is idle {idle_pct} % of the time across its recorded iterations: {idle_us} µs "
         "of {elapsed_us} µs lie between iterations ({iterations} iterations, {gaps} gap(s) of {gap_us} µs on "
         "average), when no inference runs. Between inferences it waits for the host — preparing the next input, "
         "post-processing the last, a synchronous execute: keep it fed by overlapping that work with the device's "
         "(several inferences in flight: asynchronous execution, a second thread or stream; pre- and "
         "post-processing pipelined with the next inference).",
         "after {model_name} iteration {index_id}: idle {gap_us} µs"),
    Rule("data_loss", _data_loss,
         "The import skipped or lost data, or warned about it: {skipped} record(s) skipped and {bytes} "
         "byte(s) lost in {streams} stream(s); {warnings} warning(s).{untimed} The figures miss what was lost; collect "
         "again if it matters for what you measure.",
         {"decode_count": "{stream} ({kind}): {records} record(s) read, {skipped} skipped, {head_lost} byte(s) lost "
                          "at the head, {tail_lost} at the tail",
          "notice": "warning: {message}"}),
] + FAMILY_RULES

# the rules of other facts (msprof.analysis.framework_rules: a framework unit's ops), which those facts name
# (``rules``): what the findings' evidence lines are written with
OTHER_RULES: Dict[str, Rule] = {}


def register(rules: List[Rule]) -> None:
    OTHER_RULES.update((rule.id, rule) for rule in rules)


# the step rules read the steps of a torch_npu/MindSpore directory's device (Facts.steps; none elsewhere)
RULES += [Rule(rule_id, lambda facts, selection, check=check: (Hit(*hit) for hit in check(facts.steps(selection))),
               message, line) for rule_id, check, message, line in step_rules.RULES]


def find(facts: Facts, selection: Selection = Selection(), rules: List[Rule] = RULES) -> List[dict]:
    """Every rule's findings, most important first (severity, then impact, then rule order)."""
    rules = getattr(facts, "rules", rules)
    facts.report.check(selection)            # a selection naming no iteration is a usage error, first
    device = rules is RULES           # (a framework unit's rules read its ops, not recorded iterations)
    if device and not facts.report.has_tasks:
        notice(f"{facts.label}: no device task data: the device rules have no task to read")
    elif device and not facts.model_iterations(selection):
        notice(f"{facts.label}: no recorded iteration (step trace / model executions): the device rules have "
               "no task to read")
    ranked = []
    with progress.step("advise", len(rules)) as shown:
        for order, rule in enumerate(rules):
            shown.phase(f"advise: {rule.id}")
            ranked += _ranked(rule, order, facts, selection)
            shown.advance()
    ranked.sort(key=lambda item: item[:3])
    return [finding for *_order, finding in ranked]


def _ranked(rule: Rule, order: int, facts: Facts, selection: Selection) -> list:
    ranked = []
    for hit in rule.check(facts, selection):
        ranked.append((SEVERITIES.index(hit.severity), -hit.impact, order, {
            "id": rule.id, "severity": hit.severity, "message": rule.message.format(**facts.words, **hit.fields),
            "evidence": hit.evidence}))
    return ranked


# --- views ---------------------------------------------------------------------------------------------------
class _Blank(dict):
    def __missing__(self, key):
        return ""


def evidence_line(rule: Rule, item: dict) -> str:
    template = rule.evidence_line
    if isinstance(template, dict):
        template = template[item["table"]]
    fields = _Blank(item["key"], **item["values"])
    if "model_name" in fields:          # (a time of single ops is a total: their one iteration is the whole run)
        fields.setdefault("per", _per(fields["model_name"]))
    return template.format_map(fields)


def findings_document(findings: List[dict], label: str = "") -> Findings:
    """What advise prints in every format (msprof.renderers): the findings, with their evidence in words."""
    rules = dict({rule.id: rule for rule in RULES}, **OTHER_RULES)
    evidence = [[evidence_line(rules[finding["id"]], item) for item in finding["evidence"]] for finding in findings]
    return Findings(label, findings, evidence, EVIDENCE_LIMIT)
