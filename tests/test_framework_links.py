"""Framework ops linked to the kernels they launched (msprof.layouts.framework.links) and operator_details.csv
(msprof.layouts.framework.operators), on torch_npu directories written by fixtures/fwkwrite.py: every kernel to
the op and step the generator launched it from (eager, with and without the task queue; a static graph's first
run), the device sums per op from the generator's kernel durations, and — with the oracle — operator_details
byte for byte as torch_npu writes it."""
import collections
import json
import shutil
import sqlite3
import subprocess
import sys

import pytest

from fixtures import fwkexpected, fwkscenarios, fwkwrite

MSPROF = [sys.executable, "-m", "msprof"]


def run(*args):
    return subprocess.run(MSPROF + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)


def _imported(tmp_path, scenario):
    fw = fwkscenarios.write_scenario(scenario, tmp_path)[0]
    proc = run("import", "-dir", fw.root)
    assert proc.returncode == 0, proc.stderr
    return fw, sqlite3.connect(str(fw.root / "sqlite" / "framework.db"))


def _truth(fw):
    """(launch ns, kernel start ns, duration µs, task type, op's place in tree order, step) of every launched
    kernel the generator made, by launch."""
    rows = []
    for dfs, op in enumerate(fw.ops):
        for span in op.spans:
            if span.kernel:
                rows.append((fw.local_ns(span.track), fw.local_ns(span.task_start),
                             (span.task_end - span.task_start) / 1000,
                             int(span.kernel.get("task_type", "AI_CORE") == "AI_CORE"), dfs, op.step))
    return sorted(rows)


@pytest.mark.parametrize("scenario", ["pt_l1_eager", "pt_l1_marks", "pt_l0_eager"])
def test_every_kernel_is_linked_to_the_op_that_launched_it_and_its_step(tmp_path, scenario):
    fw, conn = _imported(tmp_path, scenario)
    got = conn.execute("SELECT launch, start, dur, task_type = 'AI_CORE', op, step FROM fw_link"
                       " ORDER BY launch, start").fetchall()
    assert got == _truth(fw)
    queue = conn.execute("SELECT kind, count(*), count(op) FROM fw_queue GROUP BY kind").fetchall()
    if fw.desc["op_marks"]:
        # (each launching op enqueues once and the queue thread dequeues it once; every enqueue lies in its op)
        launching = sum(1 for op in fw.ops if any(s.kernel for s in op.spans))
        assert queue == [(0, launching, launching), (1, launching, 0)]
        ids = conn.execute("SELECT count(DISTINCT corr_id) FROM fw_link").fetchone()[0]
        assert ids == launching
    else:
        assert queue == []


def test_the_links_are_made_again_when_the_prof_databases_are(tmp_path):
    """The framework database reads its PROF_'s: built after them, and again when one of them is rebuilt
    (by this command or another), never left with links to tasks that are gone."""
    fw, conn = _imported(tmp_path, "pt_l0_eager")
    links = conn.execute("SELECT * FROM fw_link ORDER BY seq").fetchall()
    conn.close()
    again = run("query", "-dir", fw.root)
    assert again.returncode == 0 and "importing" not in again.stderr          # (current: nothing to do)
    shutil.rmtree(fw.root / fwkwrite.PROF_NAME / "device_0" / "sqlite")
    proc = run("query", "-dir", fw.root)
    assert proc.returncode == 0, proc.stderr
    # (the PROF_ device's unit holds the framework database too, for its steps: it rebuilds both, the framework
    # one after and because of its PROF_ database)
    assert f"device_0: importing its {fw.root.name} data (its PROF_ data is imported again)" in proc.stderr
    conn = sqlite3.connect(str(fw.root / "sqlite" / "framework.db"))
    assert conn.execute("SELECT * FROM fw_link ORDER BY seq").fetchall() == links


def test_a_static_graph_links_the_first_run_of_each_task_only(tmp_path):
    fw, conn = _imported(tmp_path, "pt_l1_graph")
    (tasks,) = conn.execute("SELECT count(*) FROM fw_link").fetchone()
    kernels = len(fw.prof.tasks)
    per_run = kernels // fw.desc["steps"]
    assert tasks == per_run and kernels == per_run * 3
    first = sorted(fw.local_ns(x.start_ns) for x in fw.prof.tasks if x.iteration == 1)
    assert [s for (s,) in conn.execute("SELECT start FROM fw_link ORDER BY start")] == first
    # (launched by the graph's load in step 1, inside GeGraph::compile)
    ops = conn.execute("SELECT DISTINCT s.text, l.step FROM fw_link l JOIN fw_op o ON o.dfs = l.op"
                       " JOIN fw_string s ON s.id = o.name").fetchall()
    assert ops == [("GeGraph::compile", 1)]


def _sums(fw):
    """op → (self µs, total µs, self AI Core µs, total AI Core µs) from the generator's kernels, summed in
    launch order as torch_npu sums them."""
    truth = _truth(fw)
    ops = fw.ops
    index = {id(op): i for i, op in enumerate(ops)}
    sums = {}
    for i, op in enumerate(ops):
        inside = set(index[id(o)] for o in op.walk())
        own = [(d, a) for _l, _s, d, a, dfs, _st in truth if dfs == i]
        every = [(d, a) for _l, _s, d, a, dfs, _st in truth if dfs in inside]
        sums[i] = tuple(sum(d for d, _a in part) if part else 0 for part in (own, every)) + tuple(
            sum(d if a else 0 for d, a in part) if part else 0 for part in (own, every))
    return sums


def _cell(value):
    return "0" if value == 0 and isinstance(value, int) else repr(value)


def test_operator_details_holds_each_ops_host_and_device_time(tmp_path):
    fw, _conn = _imported(tmp_path, "pt_l0_eager")
    done = run("export", "summary", "-dir", fw.root)
    assert done.returncode == 0, done.stderr
    text = (fw.root / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv").read_bytes().decode()
    import csv
    import io
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0][:3] == ["Name", "Input Shapes", "Call Stack"]
    sums = _sums(fw)
    expected = []
    for i, op in enumerate(fw.ops):
        if op.name.startswith("ProfilerStep#"):
            continue
        children = sum(c.end - c.start for c in op.children)
        shapes = ";\r\n".join(",".join(map(str, s)) for s in op.template.get("shapes", []))
        stack = ";\r\n".join(op.template.get("stack", []))
        expected.append([op.name, shapes, stack, repr((op.end - op.start - children) / 1000),
                         repr((op.end - op.start) / 1000), *map(_cell, sums[i])])
    assert rows[1:] == expected
    # (the model's matmul ran 25 µs under aten::linear; gelu is an AI_VECTOR_CORE kernel: not AI Core time)
    linear = next(r for r in rows if r[0] == "aten::linear")
    assert linear[5:] == ["0", "25.0", "0", "25.0"]
    gelu = next(r for r in rows if r[0] == "aten::gelu")
    assert gelu[5:] == ["7.0", "7.0", "0", "0"]


def _events(path):
    """(metadata, other events) of a trace_view.json, each a multiset of canonical JSON texts."""
    events = json.loads(path.read_text())
    texts = [json.dumps(e, sort_keys=True) for e in events]
    return (collections.Counter(t for t, e in zip(texts, events) if e["ph"] == "M"),
            collections.Counter(t for t, e in zip(texts, events) if e["ph"] != "M"))


def test_trace_view_holds_the_ops_the_queue_and_a_flow_to_every_kernel(tmp_path):
    fw, conn = _imported(tmp_path, "pt_l1_marks")
    done = run("export", "timeline", "-dir", fw.root)
    assert done.returncode == 0, done.stderr
    events = json.loads((fw.root / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    ops = [(e["name"], e["ts"]) for e in events if e.get("cat") == "cpu_op"]
    assert ops == [(op.name, "%d.%03d" % divmod(fw.local_ns(op.start), 1000))
                   for op in sorted(fw.ops, key=lambda op: op.start)]
    flows = sorted((e["ph"], e["id"], e["ts"]) for e in events if e.get("name") == "torch_to_npu")
    truth = _truth(fw)
    ops_start = {i: fw.local_ns(op.start) for i, op in enumerate(fw.ops)}
    assert flows == sorted([("f", start, "%d.%03d" % divmod(start, 1000)) for _l, start, *_rest in truth]
                           + [("s", start, "%d.%03d" % divmod(ops_start[dfs], 1000))
                              for _l, start, _d, _a, dfs, _st in truth])
    queue = collections.Counter(e["cat"] for e in events if e.get("cat") in ("enqueue", "dequeue"))
    launching = sum(1 for op in fw.ops if any(s.kernel for s in op.spans))
    assert queue == {"enqueue": launching, "dequeue": launching}
    # (the queue thread only dequeues: sorted after every other thread, as torch_npu sorts it)
    sorts = {e["tid"]: e["args"]["sort_index"] for e in events if e.get("name") == "thread_sort_index"
             and e["pid"] == fw.desc["pid"]}
    assert sorts == {fw.desc["main_tid"]: fw.desc["main_tid"], fw.desc["queue_tid"]: fw.desc["queue_tid"] + 1}


def test_trace_view_is_one_file_above_the_slice_limit(tmp_path, monkeypatch):
    """Other timelines are cut at trace.SLICE_EVENTS; trace_view.json stays whole (the tools read it by name), and
    the same events as uncut."""
    from msprof import api, trace

    fw, _conn = _imported(tmp_path, "pt_l1_marks")
    api.export_timeline(fw.root)
    whole = _events(fw.root / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    monkeypatch.setattr(trace, "SLICE_EVENTS", 50)
    (fw.root / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").unlink()
    api.export_timeline(fw.root)
    assert sorted(p.name for p in (fw.root / "ASCEND_PROFILER_OUTPUT").iterdir()) == ["trace_view.json"]
    again = _events(fw.root / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    assert again == whole and sum(again[1].values()) > 50
    slices = list((fw.root / fwkwrite.PROF_NAME / "device_0" / "timeline").glob("*slice*"))
    assert slices            # (the PROF_ device's own timeline is cut)


def _with_backward_ops(tmp_path):
    """pt_l1_eager with, after its steps, a backward op on another thread for each step's aten::add (the same
    autograd sequence number, forward thread id the main thread's): torch_npu draws a fwdbwd flow from the
    latest forward op of a number to its latest backward op."""
    from fixtures import fwkrecords

    fw = fwkscenarios.write_scenario("pt_l1_eager", tmp_path)[0]
    adds = sorted((op for op in fw.ops if op.name == "aten::add"), key=lambda op: op.start)
    path = fw.root / "FRAMEWORK" / "torch.op_range"
    start = fw.steps[-1].end + 1000
    records = []
    for k, op in enumerate(adds):
        begin = start + 2000 * k
        records.append(fwkrecords.op_range(fw.raw(begin), fw.raw(begin + 1000), op.seq, fw.desc["pid"], 4400,
                                           "autograd::engine::evaluate_function: AddBackward0",
                                           fwd_tid=fw.desc["main_tid"]))
    path.write_bytes(path.read_bytes() + b"".join(records))
    return fw, adds, start


def test_trace_view_draws_a_flow_from_each_forward_op_to_its_backward_op(tmp_path):
    fw, adds, start = _with_backward_ops(tmp_path)
    done = run("export", "timeline", "-dir", fw.root)
    assert done.returncode == 0, done.stderr
    events = json.loads((fw.root / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    flows = sorted((e["id"], e["ph"], e["tid"], e["ts"]) for e in events if e.get("cat") == "fwdbwd")
    text = "%d.%03d"
    assert flows == sorted(x for k, op in enumerate(adds) for x in (
        (op.seq, "s", fw.desc["main_tid"], text % divmod(fw.local_ns(op.start), 1000)),
        (op.seq, "f", 4400, text % divmod(fw.local_ns(start + 2000 * k), 1000))))


# ------------------------------------------------------------------------------------------- torch_npu
# the scenarios whose trace_view.json msprof writes event for event as torch_npu does (metadata included)
TRACE_SAME = ("pt_l1_marks", "pt_l2_pmu", "pt_l1_syscnt", "pt_l1_indep", "pt_l1_ranks")


def _framework_side(events, fw):
    """The events of the framework's process and the torch_to_npu flows."""
    return collections.Counter({text: n for text, n in events.items() if json.loads(text)["pid"] == fw.desc["pid"]
                                or '"torch_to_npu"' in text})


@pytest.mark.reference
@pytest.mark.oracles
def test_fwdbwd_flows_are_torch_npus(tmp_path):
    """torch_npu's trace_view of the directory with backward ops: every event of ours is its, and what it has
    that ours lacks is the Python tracer's calls (not written yet)."""
    oracle = fwkexpected.oracle_path()
    if not oracle.is_file():
        pytest.skip("torch_npu oracle not found at %s (set MSPROF_TORCH_NPU_ORACLE)" % oracle)
    fw, adds, _start = _with_backward_ops(tmp_path / "in")
    ours = tmp_path / "ours" / fw.root.name
    shutil.copytree(fw.root, ours)
    out = tmp_path / "out"
    ok, _written, _missing = fwkexpected.run_one(fw, out, oracle, 600)
    said = (out / "oracle.log").read_text()
    if "reference analyser not found" in said:
        pytest.skip(said.strip())
    assert ok, said
    assert run("export", "timeline", "-dir", ours).returncode == 0
    meta, events = _events(ours / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    their_meta, theirs = _events(out / fw.root.name / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    assert sum(1 for text in events if '"cat": "fwdbwd"' in text) == 2 * len(adds)
    assert not events - theirs and {json.loads(t)["cat"] for t in theirs - events} == {"python_function"}
    assert meta == their_meta


@pytest.mark.reference
@pytest.mark.oracles
@pytest.mark.parametrize("scenario", ["pt_l0_eager", "pt_l1_eager", "pt_l1_marks", "pt_l0_marks", "pt_l2_pmu",
                                      "pt_l1_graph", "pt_l1_syscnt", "pt_l1_indep", "pt_l1_ranks"])
def test_operator_details_and_trace_view_are_torch_npus(tmp_path, scenario):
    """operator_details.csv byte for byte; trace_view.json event for event where msprof writes every event
    torch_npu does (TRACE_SAME), else but what Level0's pruning, the Python tracer's calls (not written yet) and a
    static graph's CANN timeline (the PROF layout's) make differ: docs/framework-plan.md §7."""
    oracle = fwkexpected.oracle_path()
    if not oracle.is_file():
        pytest.skip("torch_npu oracle not found at %s (set MSPROF_TORCH_NPU_ORACLE)" % oracle)
    for fw in fwkscenarios.write_scenario(scenario, tmp_path / "in"):       # (each rank)
        ours = tmp_path / "ours" / fw.root.name
        shutil.copytree(fw.root, ours)
        out = tmp_path / "out" / fw.root.name
        ok, _written, _missing = fwkexpected.run_one(fw, out, oracle, 600)
        said = (out / "oracle.log").read_text()
        if "reference analyser not found" in said:
            pytest.skip(said.strip())
        assert ok, said
        results = out / fw.root.name / "ASCEND_PROFILER_OUTPUT"
        for command in ("summary", "timeline"):
            done = run("export", command, "-dir", ours)
            assert done.returncode == 0, done.stderr
        name = "operator_details.csv"
        assert (ours / "ASCEND_PROFILER_OUTPUT" / name).read_bytes() == (results / name).read_bytes()
        _same_trace(scenario, fw, ours / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", results / "trace_view.json")


def _same_trace(scenario, fw, path, their_path):
    meta, events = _events(path)
    their_meta, theirs = _events(their_path)
    if scenario in TRACE_SAME:
        assert (meta, events) == (their_meta, theirs)
        return
    missing = {json.loads(t).get("cat") for t in theirs - events}
    if fw.desc["level"] == "Level0":
        # (every event of theirs but the HostToDevice flows, which start on the host calls Level0 prunes, and
        # the metadata of the CANN process those flows alone make)
        assert not events - theirs and missing == {"HostToDevice"}
        assert not meta - their_meta
        assert {json.loads(t)["pid"] for t in their_meta - meta} == {fw.desc["pid"] << 10 | 7 << 5 | 31}
    elif fw.desc["python_tracer"]:
        # (the Python tracer's calls are not written yet; the GC records are, with their process)
        assert not events - theirs and missing == {"python_function"} and meta == their_meta
        assert sum(1 for text in events if '"cat": "GC"' in text) == len(fw.gc) > 0
    else:
        assert fw.desc["graph"] and _framework_side(events, fw) == _framework_side(theirs, fw)
