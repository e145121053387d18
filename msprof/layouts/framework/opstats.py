"""Per framework op, what show, advise and compare read (docs/framework-plan.md §5): the torch ops of one name
and input shapes over the run or one step — calls, device time (their kernels and their callees', through
msprof.layouts.framework.links), host time — and the AI CPU kernels they launched. One SQL aggregate each.

``FrameworkFacts`` is a framework unit's facts for advise: the framework rules (msprof.analysis.framework_rules)
read these; the device rules have no iteration to read here (they read the PROF_ devices' units).
"""
from typing import List, Tuple

from msprof.analysis.facts import Facts
from msprof.analysis.framework_rules import RULES, CpuKernel, FrameworkOp
from msprof.contract import Selection
from msprof.layouts.framework.ops import STEP_MARK
from msprof.tables import INT, NUMBER, TEXT, Column, Table

AI_CPU = "AI_CPU"


def _step(selection: Selection, column: str) -> Tuple[str, tuple]:
    """The condition on ``column`` (a step number) of a selection of one step (--iteration-id N)."""
    return (f"{column} = ?", (selection.iteration_id,)) if selection.iteration_id is not None else ("1", ())


def framework_ops(conn, selection: Selection = Selection()) -> List[FrameworkOp]:
    """The ops by (name, input shapes), the most device time first (steps themselves left out)."""
    where, args = _step(selection, "o.step")
    rows = conn.execute(f"""
        SELECT n.text, coalesce(sh.text, ''), count(*), total(d.total_us), total(d.self_us),
               total(o."end" - o.start) / 1000.0, total(o."end" - o.start - coalesce(h.children_ns, 0)) / 1000.0,
               total(d.total_ai_us)
        FROM fw_op o JOIN torch_op t ON t.seq = o.seq
        LEFT JOIN fw_string n ON n.id = o.name LEFT JOIN fw_string sh ON sh.id = t.input_shapes
        LEFT JOIN fw_op_host h ON h.dfs = o.dfs LEFT JOIN fw_op_device d ON d.dfs = o.dfs
        WHERE instr(coalesce(n.text, ''), '{STEP_MARK}') = 0 AND {where}
        GROUP BY o.name, t.input_shapes ORDER BY 4 DESC, 1, 2""", args)
    return [FrameworkOp(name or "", *rest) for name, *rest in rows]


def ai_cpu_kernels(conn, selection: Selection = Selection()) -> List[CpuKernel]:
    where, args = _step(selection, "l.step")
    rows = conn.execute(f"""
        SELECT n.text, coalesce(sh.text, ''), l.kernel, count(*), total(l.dur)
        FROM fw_link l JOIN fw_op o ON o.dfs = l.op JOIN torch_op t ON t.seq = o.seq
        LEFT JOIN fw_string n ON n.id = o.name LEFT JOIN fw_string sh ON sh.id = t.input_shapes
        WHERE l.task_type = '{AI_CPU}' AND {where} GROUP BY o.name, t.input_shapes, l.kernel""", args)
    return [CpuKernel(name or "", shapes, kernel or "", count, us) for name, shapes, kernel, count, us in rows]


def ops_table(conn, selection: Selection = Selection()) -> Table:
    """show's table of the framework ops (name and input shapes), the most device time first."""
    rows = [(op.name, op.shapes, op.count, round(op.device_total_us, 3), round(op.device_self_us, 3),
             round(op.host_total_us, 3), round(op.host_self_us, 3),
             round(op.ai_core_us * 100.0 / op.device_total_us, 2) if op.device_total_us else 0.0)
            for op in framework_ops(conn, selection)]
    columns = [Column("Name", TEXT), Column("Input Shapes", TEXT), Column("Count", INT),
               Column("Device Total(us)", NUMBER), Column("Device Self(us)", NUMBER), Column("Host Total(us)", NUMBER),
               Column("Host Self(us)", NUMBER), Column("AI Core(%)", NUMBER)]
    return Table("framework_ops", "Framework ops: device time (own kernels and callees'), host time", columns,
                 [rows], context={"iteration_id": selection.iteration_id}, sort="Device Total(us)")


class FrameworkFacts(Facts):
    """A framework unit's facts: its ops and their kernels (the framework rules); no model iteration."""

    rules = RULES

    def framework_ops(self, selection: Selection) -> List[FrameworkOp]:
        return framework_ops(self.report.conn, selection)

    def ai_cpu_kernels(self, selection: Selection) -> List[CpuKernel]:
        return ai_cpu_kernels(self.report.conn, selection)

    def host_us(self, selection: Selection) -> float:
        """The host time of the top-level ops (the steps, when the run has them)."""
        where, args = _step(selection, "step")
        (ns,) = self.report.conn.execute(f'SELECT total("end" - start) FROM fw_op WHERE depth = 0 AND {where}',
                                         args).fetchone()
        return ns / 1000.0

    def device_us(self, selection: Selection) -> float:
        """The time of every kernel the framework launched."""
        where, args = _step(selection, "step")
        (us,) = self.report.conn.execute(f"SELECT total(dur) FROM fw_link WHERE {where}", args).fetchone()
        return us

    def untimed(self):
        return 0, 0        # (no device task of its own: the PROF_ devices' units count theirs)
