"""What the families add to the tables and the timeline msprof had before them (marker ``reference``):
op_summary's COMMUNICATION rows (one per execution of a communication op, merged with the tasks by start and
waits computed over both), against the reference analyser's files row for row and cell for cell. The
families' timeline processes are compared event for event in tests/test_cann_timeline.py."""
from __future__ import annotations

import pytest

from famtest import _rows, generate, need_reference, reference
from reference_runner import read_csv_header
from test_families_reference import HCCL, TOGETHER

COMMUNICATION = {
    "hccl_stars_per_launch": HCCL["stars_per_launch"],
    "hccl_hwts_static_two_ops": HCCL["hwts_static_two_ops"],
    "together_stars": TOGETHER["stars_per_launch"],
    "together_hwts_static": TOGETHER["hwts_static_graph"],
}


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(COMMUNICATION))
def test_op_summary_has_the_communication_rows(tmp_path, msprof_cli, name):
    """op_summary, task_time and op_statistic as the reference's: the COMMUNICATION rows in op_summary only
    (Model ID 4294967295, N/A in a task's columns, Block Num 0), each where its start puts it, the row after
    it waiting from its end."""
    need_reference()
    written = generate(tmp_path, COMMUNICATION[name])
    tables = ["op_summary", "task_time", "op_statistic"]
    ref = reference(written, tmp_path, tables)
    result = msprof_cli("export", "summary", "-dir", written.path)
    assert result.returncode == 0, result.stderr
    summary = written.path / ("device_%d" % written.prof.desc["device_id"]) / "summary"
    for table in tables:
        assert read_csv_header(summary / (table + ".csv")) == ref["headers"][table], table
        assert _rows(summary / (table + ".csv")) == ref["rows"][table], table
    header = ref["headers"]["op_summary"]
    kinds = [row[header.index("Task Type")] for row in ref["rows"]["op_summary"]]
    communication = [row for row in ref["rows"]["op_summary"] if row[header.index("Task Type")] == "COMMUNICATION"]
    assert communication and kinds[-1] == "COMMUNICATION" and kinds[0] != "COMMUNICATION"
    assert {tuple(row[header.index(c)] for c in ("Model ID", "Task ID", "Stream ID", "OP State", "Block Num"))
            for row in communication} == {("4294967295", "N/A", "N/A", "N/A", "0")}
    print("%s: op_summary %d rows (%d COMMUNICATION) matched" % (name, len(kinds), len(communication)))


@pytest.mark.reference
def test_an_iterations_op_summary_has_no_communication_rows_outside_it(tmp_path, msprof_cli):
    """``--model-id 1 --iteration-id 2``: the generator's HCCL ops run outside the model: the reference's file of
    the iteration has none of them, nor has msprof's."""
    need_reference()
    written = generate(tmp_path, dict(TOGETHER["stars_per_launch"], families={"step_trace": {}, "hccl": {}}))
    selection = ["--model-id", "1", "--iteration-id", "2"]
    ref = reference(written, tmp_path, ["op_summary"], export_args=selection)
    result = msprof_cli("export", "summary", "-dir", written.path, *selection)
    assert result.returncode == 0, result.stderr
    summary = written.path / ("device_%d" % written.prof.desc["device_id"]) / "summary"
    ours = _rows(summary / "op_summary_model1_iter2.csv")
    assert ours == ref["rows"]["op_summary"] and len(ours) == 6


@pytest.mark.parametrize("computing, communication, bounds, expected", [
    # communication bridging two computing sections: not overlapped between them only
    ([(0, 10), (20, 30)], [(5, 25)], None, [(0, 0, 10), (1, 5, 25), (0, 20, 30), (2, 10, 20)]),
    # communication inside computing: all of it overlapped
    ([(0, 100)], [(10, 20)], None, [(0, 0, 100), (1, 10, 20)]),
    # communication first, a gap, then computing; a non-computing task ending after both: Free to its end
    ([(10, 20)], [(0, 5)], (0, 40), [(1, 0, 5), (0, 10, 20), (3, 5, 10), (2, 0, 5), (3, 20, 40)]),
    # communication running past the last computing section: its tail not overlapped
    ([(0, 10)], [(5, 30)], None, [(0, 0, 10), (1, 5, 30), (2, 10, 30)]),
])
def test_overlap_walk(computing, communication, bounds, expected):
    """The Overlap Analysis sections with communication, worked out by hand from the reference's rules
    (docs/prof-format.md §11.4): (tid, start, end), tid 0 Computing, 1 Communication, 2 Not Overlapped, 3 Free."""
    from msprof.layouts.prof.family_trace import with_communication

    assert list(with_communication(iter(computing), communication, bounds)) == expected
