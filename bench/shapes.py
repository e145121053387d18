"""The data bench/run.py measures: the JOB's description and the PROF_ shapes (--prof-shape), each a
fixtures/profgen description or the independent generator's arguments, with their words for the report and
the marker that tells a cached set from a changed description."""
import json

import stars_families

LAYERS = 1000  # tasks per iteration; iterations = tasks / LAYERS
PROF_OPS = 1000  # ops of the PROF_ model; iterations = tasks / PROF_OPS
# How the host launches the ops: once at model load (a static graph: how training graphs run, nearly every
# record a device one), or every op of every iteration (node, runtime call, node info and task_track each).
PROF_SHAPES = {
    "static": ({"static_graph": True}, "a static graph: launched once at model load, run each iteration"),
    # (every launch's host calls with their own durations, as a host's are: api_statistic then groups many
    # distinct durations per API, not one)
    "per-launch": ({"static_graph": False, "host_jitter": 1},
                   "launched by the host every iteration (4 host records a task, host calls of varied duration)"),
    # tasks that start at the same moment (docs/prof-format.md "Ties"): their order is the reference's, not SQL's
    "tied": ({"static_graph": True, "jitter": None, "streams": 2},
             "a static graph on two streams whose tasks start together (every task ties with another)"),
    "stars-families": ({"static_graph": True, "stars_families": True}, stars_families.TEXT),
}
# Shapes of the independent generator (fixtures/indepgen.py, written without reading msprof): its arguments.
# Its data are closer to what an outside check feeds msprof than profgen's, and the reference runs faster on
# them (its task ids do not make the reference multiply rows: docs/prof.md difference 5), so the ratio is lower.
INDEP_SHAPES = {
    "indep-launch": (["--mode", "launch", "--platform", "1"],
                     "the independent generator's per-launch run (chip 2, HWTS, PipeUtilization)"),
    "indep-streams": (["--mode", "launch", "--platform", "1", "--streams", "2"],
                      "the independent generator's per-launch run on two streams (chip 2; some tasks of the two "
                      "start at the same moment: ties)"),
    "indep-many-streams": (["--mode", "launch", "--platform", "1", "--streams", "16"],
                           "the independent generator's per-launch run on 16 streams (chip 2; as many (stream, "
                           "task) keys as tasks, 1M at 1M tasks; some tasks start at the same moment: ties)"),
    "indep-stars": (["--mode", "launch", "--platform", "5"],
                    "the independent generator's per-launch run on a STARS chip (platform 5; its aicore.data "
                    "unread, as by the reference)"),
}


def text(shape: str) -> str:
    """What the PROF_ data of ``shape`` are, in words."""
    if shape in INDEP_SHAPES:
        return f"{INDEP_SHAPES[shape][1]}; one model of {PROF_OPS} ops; iterations = tasks / {PROF_OPS}"
    if PROF_SHAPES[shape][0].get("stars_families"):
        return f"{stars_families.TEXT}; iterations = tasks / {PROF_OPS}"
    runs = ("every run of an op alike" if PROF_SHAPES[shape][0].get("jitter", 1) is None
            else "every run its own duration and PMU counters")
    return (f"chip 3, one model of {PROF_OPS} AI_CORE ops (Conv2D, MatMul, Relu, Add), "
            f"{PROF_SHAPES[shape][1]}; {runs}; PMU PipeUtilization; iterations = tasks / {PROF_OPS}")


def indep_arguments(tasks: int, shape: str) -> list:
    ops = min(PROF_OPS, tasks)
    return ["--seed", "1", "--models", "1", "--ops", str(ops), "--iters", str(max(1, tasks // ops)),
            *INDEP_SHAPES[shape][0]]


def marker(tasks: int, shape: str) -> str:
    """What the cached data were generated from (a changed description regenerates them)."""
    if shape in INDEP_SHAPES:
        return json.dumps({"indepgen": indep_arguments(tasks, shape)})
    return json.dumps(prof_description(tasks, shape), sort_keys=True)


def job_description(tasks: int) -> dict:
    layers = min(LAYERS, tasks)
    executions = max(1, tasks // layers)
    return {
        "seed": f"bench-{tasks}",
        "slice_bytes": 64 << 20,  # like a board's slice files; records straddle slices
        "models": [{"name": "bench", "id": 1, "stream_id": 3, "executions": executions, "gap_us": 1,
                    "layers": [{"name": f"layer{i}", "type": ("Convolution", "Mish", "Pooling")[i % 3],
                                "task_id": i + 1, "duration_us": 5 + i % 11} for i in range(layers)]}],
        # ~1 ACL call per task, as an app calling single-op APIs would make
        "extra_acl_calls": [{"name": "svp_acl_op_execute", "api_type": 1, "duration_us": 2}] * (layers * executions),
    }


def prof_description(tasks: int, shape: str) -> dict:
    """The fixtures/profgen description of ``shape`` (``text`` says it in words): chip 3 as the issue's
    data; every execution with its own duration and counters (jitter), so that no output value repeats more than a device's would. A
    shape with ``streams`` spreads the ops over that many threads, one stream each, starting together."""
    ops = min(PROF_OPS, tasks)
    options = dict(PROF_SHAPES[shape][0])
    streams = options.pop("streams", 1)
    stars = options.pop("stars_families", False)
    each = max(1, ops // streams)
    desc = {
        "platform_version": "3",
        "jitter": 1,
        "models": [{"id": 1, "name": "bench"}],
        "iterations": max(1, tasks // (each * streams)),
        **options,
        "pmu": "PipeUtilization",
        "threads": [{**({"tid": 100 + k, "stream": 3 + 2 * k, "start_us": 10} if streams > 1 else {}),
                     "ops": [{"name": f"op{i}" if streams == 1 else f"s{k}_op{i}",
                              "type": ("Conv2D", "MatMul", "Relu", "Add")[i % 4],
                              "task_type": "AI_CORE", "block_dim": 8, "dur_us": 5 + i % 11} for i in range(each)]}
                    for k in range(streams)],
    }
    return stars_families.describe(desc) if stars else desc
