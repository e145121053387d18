"""Steps as the unit (docs/framework-plan.md §4–5): show's steps table (kernels, device time in the Overlap
Analysis lanes, memory peaks) and advise's step rules (msprof.analysis.step_rules), against the generator's
truth."""
import json

import pytest

from fixtures import fwkscenarios, fwkwrite
from tests.test_framework_layout import _merged_ns, run

MB = 1024.0 ** 2


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    fw = fwkscenarios.write_scenario("pt_l1_eager", tmp_path_factory.mktemp("steps"))[0]
    assert run("import", "-dir", fw.root).returncode == 0
    return fw


def _kernels(step):
    return [span for op in step.walk() for span in op.spans if span.kernel]


def test_show_steps_has_each_steps_kernels_busy_time_and_memory_peaks(eager):
    proc = run("show", "-dir", eager.root, "--table", "steps", "--wide")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.split()[:1] in (
        [str(s.step)] for s in eager.steps)}
    for step in eager.steps:
        row = rows[str(step.step)]
        kernels = _kernels(step)
        busy = _merged_ns((k.task_start, k.task_end) for k in kernels)
        inside = [m for m in eager.memory if step.start <= m.time <= step.end]
        assert row[5:7] == [str(len(list(step.walk()))), str(len(kernels))]
        assert float(row[7]) == round(busy / 1000, 3)
        assert [float(v) for v in row[10:]] == [round(max(m.allocated for m in inside) / MB, 3),
                                                round(max(m.reserved for m in inside) / MB, 3)]
        # (Preparing: the first kernel's start after the step's start, in float µs of epoch times)
        assert float(row[9]) == pytest.approx((kernels[0].task_start - step.start) / 1000, abs=0.25)
