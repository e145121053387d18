"""The derived tables of a framework database, made once at import (docs/framework-plan.md §2):

* ``fw_op``: every torch op in tree order (``dfs``: its place in a pre-order walk; ``dfs_end``: the last place
  of its subtree), with local epoch ns times, its depth, parent and step. The tree is torch_npu's (target §3):
  ops sorted by start (file order breaks ties), an op the child of the last open op unless it starts after
  that op's end. One pass in start order with a stack: memory holds the open ops only.
* ``fw_step``: the steps, the top-level ops named ``ProfilerStep#N`` (N: the text after the last ``#``). MindSpore
  gives every op range record its step number instead (target §9): a step is then the range from the earliest
  start to the latest end of its records, and ``dfs`` its place in start order (MindSpore's records make no
  ``fw_op`` tree).
"""
from typing import List, Optional

from msprof.decode.base import insert_rows
from msprof.layouts.framework.clock import FrameworkClock
from msprof.store import Notices

STEP_MARK = "ProfilerStep#"
OP_COLUMNS = ("dfs", "seq", "start", "end", "tid", "depth", "parent", "dfs_end", "step", "name")
BATCH = 10_000


class _Tree:
    """The open ops (a stack) and the ops closed, waiting to be inserted."""

    def __init__(self, conn, step_names: dict):
        self.conn, self.step_names = conn, step_names
        self.stack: List[list] = []         # [dfs, seq, start, end, tid, depth, parent, step, name]
        self.done: List[tuple] = []
        self.steps: List[tuple] = []
        self.bad_steps = 0
        self.count = 0

    def add(self, seq: int, start: int, end: int, tid: int, name: Optional[int]) -> None:
        while self.stack and start > self.stack[-1][3]:
            self._close()
        parent = self.stack[-1] if self.stack else None
        step = parent[7] if parent is not None else None
        if parent is None and name in self.step_names:
            step = self._step(self.step_names[name], start, end)
        self.stack.append([self.count, seq, start, end, tid, len(self.stack), parent[0] if parent else None, step,
                           name])
        self.count += 1

    def _step(self, text: str, start: int, end: int) -> Optional[int]:
        number = text.rsplit("#", 1)[1].strip()
        if not number.isdigit() or len(number) > 18:
            self.bad_steps += 1
            return None
        self.steps.append((int(number), self.count, start, end))
        return int(number)

    def _close(self) -> None:
        dfs, seq, start, end, tid, depth, parent, step, name = self.stack.pop()
        self.done.append((dfs, seq, start, end, tid, depth, parent, self.count - 1, step, name))
        if len(self.done) >= BATCH:
            self.flush()

    def flush(self) -> None:
        insert_rows(self.conn, "fw_op", OP_COLUMNS, self.done)
        self.done = []

    def finish(self) -> None:
        while self.stack:
            self._close()
        self.flush()
        insert_rows(self.conn, "fw_step", ("step", "dfs", "start", "end"), self.steps)


def derive_ops(conn, clock: FrameworkClock, notices: Notices) -> None:
    """Fill fw_op and fw_step from torch_op (rows streamed in start order)."""
    step_names = dict(conn.execute("SELECT id, text FROM fw_string WHERE instr(text, ?) > 0", (STEP_MARK,)))
    tree = _Tree(conn, step_names)
    start, end = clock.local_sql("start"), clock.local_sql("end")
    rows = conn.execute(f"SELECT seq, {start}, {end}, tid, name FROM torch_op ORDER BY start, seq")
    for seq, begin, finish, tid, name in rows:
        tree.add(seq, begin, finish, tid, name)
    tree.finish()
    if tree.bad_steps:
        notices.warn(f"{tree.bad_steps} {STEP_MARK} op(s) with no step number after the '#': not steps")
    if tree.count and not tree.steps:
        notices.notice(f"no {STEP_MARK}N op: the run has no steps (the whole run is one range)")


def derive_ms_steps(conn, clock: FrameworkClock) -> None:
    """Fill fw_step from the step numbers of MindSpore's op range records."""
    start, end = clock.local_sql("start"), clock.local_sql("end")
    rows = conn.execute(f"SELECT step, min({start}) AS first, max({end}) FROM ms_op GROUP BY step ORDER BY first,"
                        " step").fetchall()
    insert_rows(conn, "fw_step", ("step", "dfs", "start", "end"),
                [(step, n, first, last) for n, (step, first, last) in enumerate(rows)])
