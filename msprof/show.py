"""show and query: the report tables in the terminal (tabulate), or as csv/json on stdout."""
import json
from typing import Optional

import click

from msprof.console import notice
from msprof.render import rows_of, to_csv, to_text
from msprof.reports import Report, Table


def print_tables(report: Report, model_id=None, iteration_id=None, top: Optional[int] = None,
                 fmt: str = "table", style: str = "simple") -> None:
    """AA Core metrics (op_summary of the last recorded iteration), op statistic, ACL statistic, frequency."""
    tables = []
    iterations = report.iterations(model_id, iteration_id)
    if model_id is not None and not iterations:
        from msprof.errors import UsageError

        raise UsageError(f"no recorded iteration {iteration_id} of model {model_id} (msprof query lists them)")
    if iterations and report.has_tasks:
        last = iterations[-1]
        summary = report.op_summary(last)
        summary.title = f"AA Core metrics: {last.model_name} (model {last.model_id}), iteration {last.index_id}"
        tables.append(summary)
        statistic = report.op_statistic(last.model_id, iteration_id)
        statistic.title = f"Op statistic: {last.model_name} (model {last.model_id})"
        tables.append(top_rows(statistic, top))
    else:
        notice(f"{report.result_dir.name}: no task iterations recorded: AA Core metrics and op statistic skipped")
    if report.has_acl:
        tables.append(top_rows(report.acl_statistic(), top))
    else:
        notice(f"{report.result_dir.name}: no ACL API data: ACL statistic skipped")
    tables.append(report.frequency())
    emit_tables(tables, fmt, style)


def top_rows(table: Table, top: Optional[int]) -> Table:
    if top:
        table.rows = table.rows[:top]
    return table


def emit_tables(tables, fmt: str, style: str) -> None:
    if fmt == "json":
        click.echo(json.dumps({t.title: [dict(zip(t.columns, r)) for r in rows_of(t)] for t in tables},
                              indent=1, ensure_ascii=False))
        return
    for table in tables:
        if fmt == "csv":
            click.echo(f"# {table.title}")
            click.echo(to_csv(table), nl=False)
        else:
            click.echo(table.title)
            click.echo(to_text(table, style))
        click.echo("")


def print_query(report: Report) -> None:
    """Devices, models, iteration ids and the data present: the values --model-id/--iteration-id take."""
    table = Table("Collection", ["Device", "Model Id", "Model Name", "Iterations", "Iteration Ids"],
                  ["text", "int", "text", "int", "text"])
    for model in report.models() or [{"model_id": None, "model_name": None}]:
        ids = [it.index_id for it in report.iterations(model["model_id"])] if model["model_id"] is not None else []
        table.rows.append([report.device_id, model["model_id"], model["model_name"], len(ids), id_ranges(ids)])
    present = Table("Data", ["Data", "Records"], ["text", "int"])
    for name, count in report.conn.execute("SELECT kind, sum(records) FROM decode_count GROUP BY kind ORDER BY kind"):
        present.rows.append([name, count])
    emit_tables([table, present], "table", "simple")


def id_ranges(ids) -> str:
    """[1,2,3,5] → '1-3,5'."""
    parts, start, prev = [], None, None
    for i in sorted(ids):
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = i
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(parts) or None
