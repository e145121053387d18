"""memory_record.csv, operator_memory.csv, op_statistic.csv and api_statistic.csv of a framework directory
(msprof.layouts.framework.memory; docs/framework-target.md §8): their rows against the generator's truth (the
allocator's totals, the op each allocation is named after, the task queue's workspace), and the same bytes as
torch_npu's own analysis."""
import pytest

from fixtures import fwkscenarios
from fixtures.fwkhost import STREAM_PTR
from tests.test_framework_layout import run, torch_npus_and_ours

FILES = ("memory_record.csv", "operator_memory.csv", "op_statistic.csv", "api_statistic.csv")
MB = 1024.0 ** 2


def _us(ns: int) -> str:
    return "%d.%03d\t" % divmod(ns, 1000)


def _rows(path) -> list:
    lines = path.read_bytes().decode().split("\r\n")
    assert lines[-1] == ""                      # (CR LF after every line, the last too)
    return [line.split(",") for line in lines[1:-1]]


@pytest.fixture(scope="module")
def marks(tmp_path_factory):
    """pt_l1_marks: the task queue on (allocations on the main thread, a workspace on the queue thread)."""
    fw = fwkscenarios.write_scenario("pt_l1_marks", tmp_path_factory.mktemp("mem"))[0]
    done = run("export", "summary", "-dir", fw.root)
    assert done.returncode == 0, done.stderr
    return fw


def test_memory_record_has_a_pta_and_a_pta_ge_row_per_record_and_one_row_per_workspace(marks):
    rows = _rows(marks.root / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")
    expected = []
    for m in sorted(marks.memory, key=lambda m: m.time):
        cells = [_us(marks.local_ns(m.time)), repr(m.allocated / MB), repr(m.reserved / MB), repr(m.active / MB),
                 str(STREAM_PTR), "NPU:0"]
        expected += [["WORKSPACE"] + cells] if m.component == 1 else [["PTA"] + cells, ["PTA+GE"] + cells]
    assert rows == expected
    assert sum(row[0] == "WORKSPACE" for row in rows) == 2     # (the workspace's malloc and its free)


def test_operator_memory_names_each_allocation_after_its_op_and_pairs_its_frees(marks):
    rows = _rows(marks.root / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv")
    records = sorted(marks.memory, key=lambda m: m.time)
    expected = []
    for k, m in enumerate(records):
        if m.data_type != 0:
            continue
        later = [r for r in records[k + 1:] if r.ptr == m.ptr]
        nxt = next((i for i, r in enumerate(later) if r.data_type == 0), len(later))
        free = next((r for r in later[:nxt] if r.data_type == 1), None)
        active = next((r for r in later[:nxt] if r.data_type == 2), None)
        released = free
        expected.append([m.op_name, repr(m.size / 1024.0), _us(marks.local_ns(m.time)),
                         _us(marks.local_ns(free.time)) if free else "",
                         _us(marks.local_ns(active.time)) if active else "",
                         _us(free.time - m.time) if free else "", _us(active.time - m.time) if active else "",
                         repr(m.allocated / MB), repr(m.reserved / MB), repr(m.active / MB),
                         repr(released.allocated / MB) if released else "",
                         repr(released.reserved / MB) if released else "",
                         repr(released.active / MB) if released else ""])
    assert [row[:13] for row in rows] == expected
    # (the workspace taken on the queue thread is named after the op that enqueued the work: the truth's op_name)
    assert {(row[13], row[14]) for row in rows} == {(str(STREAM_PTR), "NPU:0")}
    assert len(rows) == sum(m.data_type == 0 for m in records) >= 10


def test_level0_writes_no_statistics_and_a_run_without_memory_records_no_memory_files(tmp_path):
    fw = fwkscenarios.write_scenario("pt_l0_marks", tmp_path)[0]
    done = run("export", "summary", "-dir", fw.root)
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in (fw.root / "ASCEND_PROFILER_OUTPUT").iterdir())
    assert written == ["kernel_details.csv", "operator_details.csv", "step_trace_time.csv"]


@pytest.mark.reference
@pytest.mark.oracles
@pytest.mark.parametrize("scenario", ["pt_l1_eager", "pt_l1_marks", "pt_l2_pmu", "pt_l1_syscnt"])
def test_memory_and_statistics_files_are_torch_npus_byte_for_byte(tmp_path, scenario):
    """torch_npu's own analysis (the oracle, the reference analyser as its CANN msprof) and msprof's export
    summary on copies of one generated directory write the same bytes in the four files."""
    torch_npus_and_ours(tmp_path, scenario, FILES)


# ------------------------------------------------------------------------------------------- MindSpore
def test_mindspore_steps_come_from_the_records_step_numbers_and_memory_record_is_mindsporess(tmp_path):
    """A MindSpore PyNative directory: its steps (the records' step numbers, counter times on the epoch) in
    query, no notice that torch.op_range is missing, and the file family with MindSpore's memory_record."""
    fw = fwkscenarios.write_scenario("ms_pynative", tmp_path)[0]
    done = run("export", "summary", "-dir", fw.root)
    assert done.returncode == 0, done.stderr
    assert "torch.op_range" not in done.stderr
    written = sorted(p.name for p in (fw.root / "ASCEND_PROFILER_OUTPUT").iterdir())
    assert written == ["api_statistic.csv", "kernel_details.csv", "memory_record.csv", "op_statistic.csv",
                       "step_trace_time.csv"]
    query = run("query", "-dir", fw.root, "--wide")
    assert query.returncode == 0, query.stderr
    assert "torch.op_range" not in query.stdout and "MindSpore" in query.stdout
    for step in fw.steps:
        line = next(line for line in query.stdout.splitlines() if line.split()[:1] == [str(step.step)])
        assert line.split()[1:3] == [_us(fw.local_ns(t)).strip() for t in (step.start, step.end)]
    rows = _rows(fw.root / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")
    expected = []
    for m in sorted(fw.memory, key=lambda m: m.time):
        raw = fw.raw(m.time)                # (MindSpore prints the file's time as written, ns / 1000)
        text = ("%d.%03d" % divmod(raw, 1000)).rstrip("0").rstrip(".")
        cells = [text, repr(m.allocated / 1024 / 1000), repr(m.reserved / 1024 / 1000),
                 repr(m.active / 1024 / 1000), "NPU:0"]
        expected += [["MindSpore"] + cells, ["MindSpore+GE"] + cells]
    assert rows == expected
    kernels = _rows(fw.root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    truth = [str(step.step) for step in fw.steps for op in step.walk() for span in op.spans if span.kernel]
    assert [row[0] for row in kernels] == truth
