"""The report of a framework unit: its framework database (steps, ops), read-only."""
from typing import List

from msprof.contract import Iteration, Report, Selection

# the framework's one "model" (--iteration-id N alone selects step N: docs/cli-reference.md)
STEPS_MODEL = 0
STEPS_MODEL_NAME = "steps"


class FrameworkReport(Report):
    """Read-only view of one framework directory's database."""

    @property
    def has_tasks(self) -> bool:
        return False        # (the device tasks are its PROF_ units')

    @property
    def has_ops(self) -> bool:
        return self.count("fw_op") > 0

    def steps(self) -> List[tuple]:
        """(step, host start ns, host end ns, ops) of every step, in tree order."""
        return list(self.conn.execute(
            "SELECT s.step, s.start, s.end, (SELECT count(*) FROM fw_op o WHERE o.dfs BETWEEN s.dfs AND"
            " (SELECT dfs_end FROM fw_op WHERE dfs = s.dfs)) FROM fw_step s ORDER BY s.dfs"))

    def iterations(self, selection: Selection = Selection()) -> List[Iteration]:
        if selection.model_id not in (None, STEPS_MODEL):
            return []
        return [Iteration(STEPS_MODEL, STEPS_MODEL_NAME, step) for step, *_rest in self.steps()
                if selection.iteration_id in (None, step)]
