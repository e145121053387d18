"""The framework layout (msprof.layouts.framework) on torch_npu directories written by fixtures/fwkwrite.py:
recognised by content, its PROF_ imported by the PROF layout, FRAMEWORK/ into sqlite/framework.db, the op tree
and the steps against the generator's truth; bad input said, never a traceback."""
import shutil
import sqlite3
import subprocess
import sys

import pytest

from fixtures import fwkexpected, fwkscenarios, fwkwrite
from msprof.layouts import find_units

MSPROF = [sys.executable, "-m", "msprof"]


def run(*args, cwd=None):
    return subprocess.run(MSPROF + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    return fwkwrite.write(tmp_path_factory.mktemp("fw"), {"gc": True, "python_tracer": True, "syscnt": True,
                                                          "steps": 3, "first_step": 5})


def _db(root):
    return sqlite3.connect(str(root / "sqlite" / "framework.db"))


def test_a_framework_directory_gives_its_prof_units_and_one_of_its_own(eager):
    units = find_units(eager.root)
    assert [(u.layout.name, u.label) for u in units] == [
        ("PROF", f"{fwkwrite.PROF_NAME}/device_0"), ("FRAMEWORK", eager.root.name)]
    assert units[1].database.path == eager.root / "sqlite" / "framework.db"


def test_import_writes_the_framework_database_with_the_tree_and_the_steps(eager):
    proc = run("import", "-dir", eager.root)
    assert proc.returncode == 0, proc.stderr
    assert (eager.root / fwkwrite.PROF_NAME / "device_0" / "sqlite" / "msprof.db").is_file()
    conn = _db(eager.root)
    ops = eager.ops
    # every op in tree order: local epoch ns from the counter values (syscnt), depth, parent, subtree end
    got = conn.execute("SELECT o.start, o.end, o.depth, o.step, s.text FROM fw_op o JOIN fw_string s ON"
                       " s.id = o.name ORDER BY o.dfs").fetchall()
    assert got == [(eager.local_ns(op.start), eager.local_ns(op.end), op.depth, op.step, op.name) for op in ops]
    index = {id(op): i for i, op in enumerate(ops)}
    parents = conn.execute("SELECT parent FROM fw_op ORDER BY dfs").fetchall()
    assert [p for (p,) in parents] == [index[id(op.parent)] if op.parent else None for op in ops]
    ends = [e for (e,) in conn.execute("SELECT dfs_end FROM fw_op ORDER BY dfs")]
    assert ends == [index[id(op)] + len(list(op.walk())) - 1 for op in ops]
    steps = conn.execute("SELECT step, start, end FROM fw_step ORDER BY dfs").fetchall()
    assert steps == [(s.step, eager.local_ns(s.start), eager.local_ns(s.end)) for s in eager.steps]
    assert [s.step for s in eager.steps] == [5, 6, 7]
    counts = dict(conn.execute("SELECT kind, records FROM decode_count"))
    assert counts["torch_op_range"] == len(ops) and counts["torch_gc"] == len(eager.gc)


def test_query_lists_the_steps_with_their_host_ranges(eager):
    proc = run("query", "-dir", eager.root, "--wide")
    assert proc.returncode == 0, proc.stderr
    first = eager.steps[0]
    start, end = eager.local_ns(first.start), eager.local_ns(first.end)
    # the device range: the first kernel's start, the host end (the step outlasts its kernels: target §3)
    spans = [span for op in first.walk() for span in op.spans if span.kernel]
    device = (eager.local_ns(spans[0].task_start), max(eager.local_ns(spans[-1].task_end), end))
    line = next(line for line in proc.stdout.splitlines() if line.split()[:1] == ["5"])   # (right-aligned)
    assert line.split()[:5] == ["5"] + ["%d.%03d" % divmod(t, 1000) for t in (start, end) + device]
    assert "5-7" in proc.stdout
    assert "importing" not in proc.stderr          # (the import's database is current)


def test_iteration_id_selects_a_step_on_the_framework_unit_and_on_its_device(eager, tmp_path):
    """Eager data records no model execution: the device's iterations are the steps, and --iteration-id N
    selects the tasks starting in step N's device range (msprof.layouts.framework.stepprof)."""
    proc = run("show", "-dir", eager.root, "--iteration-id", 6, "--table", "op_summary", "--table", "steps",
               "--wide", "--top", 0)
    assert proc.returncode == 0, proc.stderr
    step = next(s for s in eager.steps if s.step == 6)
    kernels = [span for op in step.walk() for span in op.spans if span.kernel]
    starts = ["%d.%03d" % divmod(eager.local_ns(span.task_start), 1000) for span in kernels]
    shown = [word for line in proc.stdout.splitlines() for word in line.split() if word.startswith("1700000000")]
    assert sorted(set(starts) & set(shown)) == sorted(starts) and len(starts) == 7
    others = ["%d.%03d" % divmod(eager.local_ns(span.task_start), 1000) for s in eager.steps if s.step != 6
              for op in s.walk() for span in op.spans if span.kernel]
    assert not set(others) & set(shown)
    rows = [line.split()[0] for line in proc.stdout.splitlines() if line.split()[:1] == ["6"]]
    assert rows == ["6"]                                  # (the framework unit's steps table: step 6 alone)
    out = tmp_path / "out"
    done = run("export", "summary", "-dir", eager.root, "--iteration-id", 6, "--output", out)
    assert done.returncode == 0, done.stderr
    (summary,) = out.glob("*/PROF_*/device_0/summary/op_summary_model0_iter6.csv")
    lines = summary.read_text().splitlines()[1:]
    assert [line.split(",")[10] for line in lines] == starts
    assert run("show", "-dir", eager.root, "--iteration-id", 9).returncode == 2      # (no step 9: said)
    query = run("query", "-dir", eager.root)
    device = query.stdout.split("(FRAMEWORK)")[0]         # (the PROF_ device's section: its steps, model 0)
    assert any(line.split() == ["0", "1", "0", "steps", "3", "5-7"] for line in device.splitlines()), device


def test_results_alone_are_refused_naming_what_is_missing(tmp_path):
    (tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_text("Name\n")
    proc = run("import", "-dir", tmp_path / "x_ascend_pt")
    assert proc.returncode == 2
    assert "only ASCEND_PROFILER_OUTPUT/" in proc.stderr and "FRAMEWORK/ and a PROF_* directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_framework_data_without_a_prof_is_refused(tmp_path, eager):
    root = tmp_path / "y_ascend_pt"
    shutil.copytree(eager.root / "FRAMEWORK", root / "FRAMEWORK")
    proc = run("import", "-dir", root)
    assert proc.returncode == 2 and "a PROF_* directory with its host/ and device_N/ missing" in proc.stderr


def test_a_truncated_framework_file_is_a_counted_loss(tmp_path, eager):
    root = tmp_path / eager.root.name
    shutil.copytree(eager.root, root, ignore=shutil.ignore_patterns("sqlite", "log"))
    path = root / "FRAMEWORK" / "torch.op_range"
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    proc = run("import", "-dir", root)
    assert proc.returncode == 0, proc.stderr
    assert "the last torch.op_range record is cut short" in proc.stderr and "Traceback" not in proc.stderr
    lost = _db(root).execute("SELECT records, tail_lost FROM decode_count WHERE kind = 'torch_op_range'").fetchone()
    assert lost[1] > 0 and lost[0] == len(eager.ops) - 1


def test_two_ranks_info_in_one_directory_is_said(tmp_path, eager):
    root = tmp_path / eager.root.name
    shutil.copytree(eager.root, root, ignore=shutil.ignore_patterns("sqlite", "log"))
    shutil.copy(root / "profiler_info.json", root / "profiler_info_1.json")
    proc = run("import", "-dir", root)
    assert proc.returncode == 0, proc.stderr
    assert "2 profiler_info files" in proc.stderr


def test_two_ranks_under_a_parent_give_a_framework_unit_each(tmp_path):
    written = fwkscenarios.write_scenario("pt_l1_ranks", tmp_path)
    units = find_units(tmp_path)
    mine = [u for u in units if u.layout.name == "FRAMEWORK"]
    assert sorted(u.path for u in mine) == sorted(fw.root for fw in written)
    proc = run("import", "-dir", tmp_path)
    assert proc.returncode == 0, proc.stderr
    for fw in written:
        assert _db(fw.root).execute("SELECT count(*) FROM fw_step").fetchone()[0] == len(fw.steps)


# ------------------------------------------------------------------------------------------- torch_npu
def _oracle_or_skip():
    oracle = fwkexpected.oracle_path()
    if not oracle.is_file():
        pytest.skip("torch_npu oracle not found at %s (set MSPROF_TORCH_NPU_ORACLE)" % oracle)
    return oracle


BOTH = ("kernel_details.csv", "step_trace_time.csv")


def torch_npus_and_ours(tmp_path, scenario: str, files) -> tuple:
    """Writes ``scenario``, runs torch_npu's analysis (the oracle) on it and msprof's export summary on a copy,
    and asserts ``files`` of ASCEND_PROFILER_OUTPUT are the same bytes; (the generated Framework, our copy)."""
    oracle = _oracle_or_skip()
    fw = fwkscenarios.write_scenario(scenario, tmp_path / "in")[0]
    ours = tmp_path / "ours" / fw.root.name
    shutil.copytree(fw.root, ours)
    proc = subprocess.run([sys.executable, str(oracle), str(fw.root), "--backend", "reference", "--out",
                           str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600)
    if "reference analyser not found" in proc.stdout:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout
    theirs = tmp_path / "out" / fw.root.name / "ASCEND_PROFILER_OUTPUT"
    done = run("export", "summary", "-dir", ours)
    assert done.returncode == 0, done.stderr
    for name in files:
        assert (ours / "ASCEND_PROFILER_OUTPUT" / name).read_bytes() == (theirs / name).read_bytes(), name
    return fw, ours


# (a static graph's step_trace_time differs: the CANN Overlap Analysis msprof writes is the union of every task,
# the reference's only of the GE task list's first run, with Free stretched to the last task: not the framework
# layout's to mend, docs/framework-plan.md §7)
@pytest.mark.reference
@pytest.mark.oracles
@pytest.mark.parametrize("scenario, files", [("pt_l0_eager", BOTH), ("pt_l1_eager", BOTH), ("pt_l1_marks", BOTH),
                                             ("pt_l2_pmu", BOTH), ("pt_l1_graph", BOTH[:1])])
def test_kernel_details_and_step_trace_time_are_torch_npus_byte_for_byte(tmp_path, scenario, files):
    """torch_npu's own analysis (the oracle, the reference analyser as its CANN msprof) and msprof's export
    summary on copies of one generated directory: kernel_details.csv (Step Id, renamed columns, the start's TAB,
    CR LF) and step_trace_time.csv (float sums, Stage and Preparing at 0.25 µs) the same bytes."""
    fw, ours = torch_npus_and_ours(tmp_path, scenario, files)
    got = (ours / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_bytes()
    # (and what it holds, from the generator's truth: every kernel of step N has Step Id N)
    lines = got.decode().split("\r\n")
    assert lines[0].startswith("Step Id,Device_id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core"
                               if fw.desc["aic_metrics"] != "ACL_AICORE_NONE" else
                               "Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us)")
    ids = [line.split(",")[0] for line in lines[1:] if line]
    if not fw.desc["graph"]:
        kernels = [(step.step, span) for step in fw.steps for op in step.walk() for span in op.spans if span.kernel]
        assert ids == [str(step) for step, _span in kernels]


def test_two_prof_directories_fail_the_framework_unit_not_the_profs(tmp_path, eager):
    root = tmp_path / eager.root.name
    shutil.copytree(eager.root, root, ignore=shutil.ignore_patterns("sqlite", "log"))
    other = fwkwrite.PROF_NAME.replace("000001", "000002")
    shutil.copytree(root / fwkwrite.PROF_NAME, root / other)
    proc = run("import", "-dir", root)
    assert proc.returncode == 8, proc.stderr
    assert "2 PROF_ directories" in proc.stderr and "Traceback" not in proc.stderr
    for name in (fwkwrite.PROF_NAME, other):
        assert (root / name / "device_0" / "sqlite" / "msprof.db").is_file()
    assert not (root / "sqlite" / "framework.db").exists()


def _merged_ns(intervals):
    """Total length of the union of (start, end) intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def test_step_trace_time_sums_each_steps_busy_device_time(tmp_path):
    fw = fwkscenarios.write_scenario("pt_l1_eager", tmp_path)[0]
    done = run("export", "summary", "-dir", fw.root)
    assert done.returncode == 0, done.stderr
    lines = (fw.root / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").read_bytes().decode().split("\r\n")
    rows = [line.split(",") for line in lines[1:] if line]
    assert [row[1] for row in rows] == [str(step.step) for step in fw.steps]
    for row, step in zip(rows, fw.steps):
        spans = [span for op in step.walk() for span in op.spans if span.kernel]
        busy = _merged_ns((span.task_start, span.task_end) for span in spans)
        assert float(row[2]) == pytest.approx(busy / 1000, abs=1e-6)
        # Preparing: the first kernel's start after the step op's start (float µs of epoch times: 0.25 µs steps)
        assert float(row[10]) == pytest.approx((spans[0].task_start - step.start) / 1000, abs=0.25)
