"""advise on a PROF_ device whose task log was cut off (issue 38 #2, as the JOB's test_advise
test_a_run_cut_off_reads_its_last_complete_iteration): the default iteration is the last complete one, said on
stderr, and the loss is counted against the tasks every recorded iteration should have, not the ones left.

Before, a PROF_ device read its last recorded iteration whatever it held: with that iteration's tasks lost,
the layer findings (memory bound) vanished without a word, and the loss was a few bytes."""
import json
import shutil

import pytest

from fixtures import profgen

OPS = [{"name": "conv1", "type": "Conv2D", "block_dim": 8, "dur_us": 30},
       {"name": "relu1", "type": "Relu", "task_type": "AI_VECTOR_CORE", "dur_us": 5},
       {"name": "topk", "type": "TopK", "task_type": "AI_CPU", "dur_us": 12},
       {"name": "mul1", "type": "Mul", "dur_us": 9}]
HWTS_RECORD = 64          # a start and an end record per task (docs/prof-format.md)


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    prof = profgen.build({"iterations": 3, "pmu": "PipeUtilization", "jitter": 3, "threads": [{"ops": OPS}]})
    return prof, profgen.write_built(tmp_path_factory.mktemp("intact"), prof)


def cut(intact_dir, to, tasks: int, extra: int):
    """A copy whose hwts.data keeps the records of its first ``tasks`` tasks and ``extra`` bytes more."""
    path = to / intact_dir.name
    shutil.copytree(intact_dir, path, ignore=shutil.ignore_patterns("sqlite", "log"))
    [hwts] = (path / "device_0" / "data").glob("hwts.data*")
    data = hwts.read_bytes()
    hwts.write_bytes(data[:tasks * 2 * HWTS_RECORD + extra])
    return path


def findings(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    found = {}
    for finding in json.loads(proc.stdout)["findings"]:
        found.setdefault(finding["id"], []).append(finding)
    return found


def test_prof_run_cut_off_reads_its_last_complete_iteration(intact, tmp_path, msprof_cli):
    prof, intact_dir = intact
    per_iteration = len(OPS)
    assert len(prof.tasks) == 3 * per_iteration
    path = cut(intact_dir, tmp_path, 2 * per_iteration, 20)        # iteration 3 lost, a partial record
    proc = msprof_cli("advise", "-dir", path, "--format", "json")
    assert (f"resnet50: iteration 3, the last recorded, has 0 of its {per_iteration} task(s) timed: the layer "
            "findings read iteration 2, the last complete one") in proc.stderr
    found = findings(proc)
    expected = findings(msprof_cli("advise", "-dir", intact_dir, "--format", "json", "--model-id", "1",
                                   "--iteration-id", "2"))
    assert found["memory_bound"] == expected["memory_bound"] and found["memory_bound"]
    [loss] = found["data_loss"]
    assert (f" {per_iteration} of the {3 * per_iteration} device task(s) expected are missing or lack a start or "
            "an end (33.33 %).") in loss["message"] and loss["severity"] == "high"
    # the intact run: nothing said, nothing lost, the last iteration read
    whole = msprof_cli("advise", "-dir", intact_dir, "--format", "json")
    assert "the last recorded" not in whole.stderr and "data_loss" not in findings(whole)


def test_prof_last_iteration_with_one_task_left(intact, tmp_path, msprof_cli):
    """One task of iteration 3 kept: it is said as 1 of 4, and 3 tasks are lost."""
    prof, intact_dir = intact
    per_iteration = len(OPS)
    path = cut(intact_dir, tmp_path, 2 * per_iteration + 1, 0)
    proc = msprof_cli("advise", "-dir", path, "--format", "json")
    assert (f"resnet50: iteration 3, the last recorded, has 1 of its {per_iteration} task(s) timed: the layer "
            "findings read iteration 2, the last complete one") in proc.stderr
    [loss] = findings(proc)["data_loss"]
    assert f" {per_iteration - 1} of the {3 * per_iteration} device task(s) expected are missing" in loss["message"]
