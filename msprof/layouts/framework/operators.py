"""operator_details.csv (docs/framework-target.md §5): one row per torch op but the steps, in tree order, with
its host durations (total: its range; self: that minus its children's ranges) and the device time of the
kernels linked to it (msprof.layouts.framework.links: its own launches, and those of its subtree), as
torch_npu prints them: floats by ``repr``, an op with no kernel ``0``.

``host_children`` fills ``fw_op_host`` at import: the children's summed durations of every op that has some.
"""
from typing import Iterator, List

from msprof.layouts.framework.ops import STEP_MARK
from msprof.tables import TEXT, Column, Table

COLUMNS = ("Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
           "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
           "Device Total Duration With AICore(us)")
BATCH = 4096
# torch_npu breaks a field of ``;``-joined items into lines (shapes per input, frames of a call stack)
ITEM_BREAK = (";", ";\r\n")


def host_children(conn) -> None:
    conn.execute('INSERT INTO fw_op_host (dfs, children_ns) SELECT parent, sum("end" - start) FROM fw_op'
                 " WHERE parent IS NOT NULL GROUP BY parent")


def op_rows_sql(where: str = "1") -> str:
    """Every torch op but the steps, in tree order: dfs, name, shapes, call stack, host total ns, host self ns,
    then the device sums (NULL: none) and the kernel count."""
    return f"""
        SELECT o.dfs, n.text, sh.text, cs.text, o."end" - o.start, o."end" - o.start - coalesce(h.children_ns, 0),
               d.self_us, d.total_us, d.self_ai_us, d.total_ai_us, coalesce(d.kernels, 0)
        FROM fw_op o JOIN torch_op t ON t.seq = o.seq
        LEFT JOIN fw_string n ON n.id = o.name LEFT JOIN fw_string sh ON sh.id = t.input_shapes
        LEFT JOIN fw_string cs ON cs.id = t.call_stack
        LEFT JOIN fw_op_host h ON h.dfs = o.dfs LEFT JOIN fw_op_device d ON d.dfs = o.dfs
        WHERE instr(coalesce(n.text, ''), '{STEP_MARK}') = 0 AND {where}
        ORDER BY o.dfs"""


def _sum(value) -> str:
    return "0" if value is None else repr(value)


def _rows(conn) -> Iterator[List[tuple]]:
    rows = conn.execute(op_rows_sql())
    while True:
        batch = rows.fetchmany(BATCH)
        if not batch:
            return
        yield [(name or "", (shapes or "").replace(*ITEM_BREAK), (stack or "").replace(*ITEM_BREAK),
                repr(own / 1000), repr(total / 1000), _sum(d_self), _sum(d_total), _sum(a_self), _sum(a_total))
               for _dfs, name, shapes, stack, total, own, d_self, d_total, a_self, a_total, _n in batch]


def operator_details(report) -> Table:
    return Table("operator_details", "operator_details", [Column(name, TEXT) for name in COLUMNS],
                 _rows(report.conn), line_end="\r\n")
