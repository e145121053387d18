"""The summary files of the PROF_ data families (issue 37; msprof.layouts.prof.families): one entry per file in
``FILES`` (its name, the family it comes from, whether the unit has its data, the family's report function
that makes its columns and text rows as the reference analyser writes them, and the clock it prints with).
``summary_files`` gives export summary those whose family has data: a PROF_ without the families gets none
and pays a few one-row queries.

The report functions print texts (the reference's own rounding and time printing, docs/prof-format.md §11),
so every column but Device_id is text here.
"""
from dataclasses import replace
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

from msprof.collection import read_result_dir
from msprof.contract import Selection, SummaryFile
from msprof.events import FETCH_ROWS
from msprof.layouts.prof import families
from msprof.layouts.prof.families import aicpu, hccl, hccl_analysis, l2_cache, memory, msproftx, step_trace
from msprof.layouts.prof.families.base import Context
from msprof.tables import NUMBER, Column, Table, chunks

Made = Tuple[List[str], Iterable[List[str]]]    # columns, and rows as they are made


class Clocks:
    """The time bases the families' report functions print with: the device's and the host's."""

    def __init__(self, report):
        self.device = Context(read_result_dir(report.unit.path))
        host = report.unit.databases[0].source_dir if report.has_host else None
        self.host = Context(read_result_dir(host)) if host is not None else None


def _msprof_tx(report, clocks: Clocks) -> Made:
    # (this device's marks only: a target of several devices would hand every device's here)
    return msproftx.summary(report.conn, clocks.host, [(str(report.device_number), report.conn, clocks.device)])


def _l2_events_known(report) -> bool:
    """The reference writes no l2_cache file when sample.json's events are not its platform's."""
    return l2_cache.slots(Context(read_result_dir(report.unit.path))) is not None


class FamilyFile(NamedTuple):
    family: str
    tables: Tuple[str, ...]           # a row in one of them: the unit has this file's data
    make: Callable[..., Made]         # make(conn, clock, *args): columns and text rows (clock None: (report, clocks))
    clock: Optional[str] = "device"   # the Clocks attribute it prints with
    args: tuple = ()
    device_first: bool = True         # a Device_id column in front (msprof_tx makes its own)
    also_needs: Optional[Callable] = None     # a further condition on the report
    # the columns naming a row's model and iteration: the file of an iteration (--model-id/--iteration-id) has
    # its rows; a file without them covers the whole run and is not written for an iteration
    iteration_keys: Tuple[str, ...] = ()


# file name → what makes it, in the order export summary lists them
FILES: Dict[str, FamilyFile] = {
    "step_trace": FamilyFile("step_trace", ("main.training_trace",), step_trace.summary,
                             iteration_keys=("Model ID", "Iteration ID")),
    "msprof_tx": FamilyFile("msproftx", ("host.msproftx", "host.msproftx_ex"), _msprof_tx, None, device_first=False),
    "communication_statistic": FamilyFile("hccl", ("host.hccl_info",), hccl.statistic),
    "aicpu": FamilyFile("aicpu", ("main.aicpu_task",), aicpu.aicpu_rows),
    "dp": FamilyFile("aicpu", ("main.aicpu_dp",), aicpu.dp_rows, args=("main",)),
    "npu_mem": FamilyFile("memory", ("main.npu_mem",), memory.npu_mem_rows),
    "npu_module_mem": FamilyFile("memory", ("main.npu_module_mem",), memory.module_rows),
    "memory_record": FamilyFile("task_memory", ("host.task_memory",), memory.record_rows, "host", ("host",)),
    "operator_memory": FamilyFile("task_memory", ("host.task_memory",), memory.operator_rows, "host", ("host",)),
    "l2_cache": FamilyFile("l2_cache", ("main.l2_cache",), l2_cache.rows, args=("main",), also_needs=_l2_events_known),
}


class Shown(NamedTuple):
    """How ``show`` prints a family's file: its title, the numeric columns (the file's texts read as numbers,
    N/A as none) and the one it ranks rows by. (A narrow terminal keeps columns by msprof.renderers.cells.)"""
    title: str
    numbers: Tuple[str, ...] = ()
    sort: Optional[str] = None


_STEP_TIMES = ("Iteration Time(us)", "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)")
# the families' files show prints, in this order (msprof.layouts.prof's show_tables)
SHOWN: Dict[str, Shown] = {
    "step_trace": Shown("Step trace", _STEP_TIMES, "Iteration Time(us)"),
    "communication_statistic": Shown(
        "Communication statistic", ("Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
                                    "Ratio(%)"), "Total Time(us)"),
    "msprof_tx": Shown("msproftx markers and ranges"),
    "aicpu": Shown("AI CPU tasks", ("Compute_time(us)", "Memcpy_time(us)", "Task_time(us)", "Dispatch_time(us)",
                                    "Total_time(us)"), "Total_time(us)"),
    # (ranked by the whole: the peak sample first)
    "npu_mem": Shown("NPU memory", ("ddr(KB)", "hbm(KB)", "memory(KB)"), "memory(KB)"),
    "operator_memory": Shown("Operator memory", ("Size(KB)", "Duration(us)"), "Size(KB)"),
    "l2_cache": Shown("L2 cache", ("Hit Rate", "Victim Rate"), "Victim Rate"),
}


def show_tables(report, selection: Selection) -> List[Table]:
    """The families' tables ``show`` prints (SHOWN) that this unit has data for; an iteration's (step_trace's
    row of it) when the file has one per iteration, the whole run's otherwise."""
    out = []
    for name in present_names(report):
        shown = SHOWN.get(name)
        if shown is None:
            continue
        table = family_table(report, name, selection if FILES[name].iteration_keys else Selection())
        columns = [Column(c.name, NUMBER) if c.name in shown.numbers else c for c in table.columns]
        # (a row holds the values of the columns that vary: not the constant Device_id)
        numbers = {i for i, c in enumerate(c for c in table.columns if c.varies) if c.name in shown.numbers}
        rows = [[_number(v) if i in numbers else v for i, v in enumerate(row)] for batch in table.batches
                for row in batch]
        out.append(replace(table, title=f"{shown.title} (device {report.device_id})", columns=columns, batches=[rows],
                           sort=shown.sort))
    return out


def _number(text):
    try:
        return int(text) if text.isdigit() else float(text)
    except (AttributeError, ValueError):
        return None


def present(report, entry: FamilyFile) -> bool:
    if report.without_devices:
        return False
    if not any(report.conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in entry.tables):
        return False
    return entry.also_needs is None or entry.also_needs(report)


def present_names(report) -> List[str]:
    """The families' summary files this unit has data for."""
    return [name for name, entry in FILES.items() if present(report, entry)]


def summary_files(names: List[str], selection: Selection = Selection(), suffix: str = "") -> List[SummaryFile]:
    """The files of ``names`` (present_names) an export of ``selection`` writes, named with ``suffix``."""
    if selection.everything:
        return [SummaryFile(name, family_table, (name,)) for name in names]
    return [SummaryFile(name + suffix, family_table, (name, selection)) for name in names
            if FILES[name].iteration_keys]


def family_table(report, name: str, selection: Selection = Selection()) -> Table:
    """The summary file ``name`` of ``FILES`` as a table (of the rows of ``selection``'s iteration)."""
    entry = FILES[name]
    clocks = Clocks(report)
    if entry.clock is None:
        columns, rows = entry.make(report, clocks)
    else:
        columns, rows = entry.make(report.conn, getattr(clocks, entry.clock), *entry.args)
    if not selection.everything:
        selection = report.resolve(selection)
        model, iteration = (columns.index(key) for key in entry.iteration_keys)
        wanted = (str(selection.model_id), str(selection.iteration_id))
        rows = (row for row in rows if (row[model], row[iteration]) == wanted)
    # (the rows as they are made, a batch at a time: a family's file can have a row per task)
    batched = chunks(rows, FETCH_ROWS)
    if entry.device_first:
        return Table(name, name, [report.device_column()] + [Column(c) for c in columns], batched)
    return Table(name, name, [Column(c) for c in columns], batched)


def device_executions(report) -> Optional[tuple]:
    """The communication op executions of a device (hccl_analysis.executions) and its clock, for the
    analyses of --analyze=on; None when it has no communication tasks."""
    if not present(report, FILES["communication_statistic"]):
        return None
    context = Clocks(report).device
    ops = hccl_analysis.executions(report.conn, context)
    return (ops, context) if ops else None


def families_table(report) -> Optional[Table]:
    """query's list of the data families present: what was decoded of each (records per stream kind, as
    decode_count has them) and the summary files made from it (issue 37 item 3); None when none is."""
    written = present_names(report)
    rows = []
    for schema, role in (("host", "host"), ("main", "device")):
        kinds = families.kinds_of(role)
        decoded: Dict[str, List[str]] = {}
        for kind, records in report.conn.execute(
                f"SELECT kind, sum(records) FROM {schema}.decode_count GROUP BY kind ORDER BY kind"):
            if kind in kinds:
                decoded.setdefault(kinds[kind], []).append(f"{kind} {records}")
        directory = "host" if role == "host" else report.unit.path.name
        for family, counts in decoded.items():
            files = [name for name in written if FILES[name].family == family]
            rows.append((directory, family, ", ".join(counts), ", ".join(files) or "none yet",
                         families.NOT_MADE_YET.get(family, "")))
    if not rows:
        return None
    return Table("families", "Data families", [Column(c) for c in (
        "Directory", "Family", "Records decoded", "Summary files", "Not made yet")], [rows], cut=False)
