"""show and query: a unit's tables in the terminal (tabulate), or as csv/json on stdout — one path for every
layout (each layout's report says which tables)."""
import json
from typing import List, Optional

import click

from msprof.layouts.base import Selection
from msprof.renderers import FORMATS
from msprof.renderers.csvfile import column_texts
from msprof.tables import Table


def print_tables(report, selection: Selection = Selection(), top: Optional[int] = None, fmt: str = "table",
                 style: str = "simple") -> None:
    tables = report.unit.layout.show_tables(report, selection)
    emit_tables([table.materialize(top) for table in tables], fmt, style)


def print_query(report) -> None:
    """Devices, models, iteration ids and the data present: the values --model-id/--iteration-id take."""
    emit_tables(report.unit.layout.query_tables(report), "table", "simple")


def emit_tables(tables: List[Table], fmt: str, style: str) -> None:
    if fmt == "json":
        click.echo(json.dumps({t.title: [dict(zip([c.name for c in t.columns], _texts(t, row)))
                                         for row in _rows(t)] for t in tables}, indent=1, ensure_ascii=False))
        return
    for table in tables:
        if fmt == "csv":
            click.echo(f"# {table.title}")
            click.echo(FORMATS["csv"]().render(table), nl=False)
        else:
            click.echo(table.title)
            click.echo(FORMATS["text"](style).render(table), nl=False)
        click.echo("")


def _rows(table: Table):
    yield from table.rows()
    if table.total is not None:
        yield table.total


def _texts(table: Table, row):
    return [value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else
            column_texts(column, [value])[0] for column, value in zip(table.columns, row)]


def id_ranges(ids) -> Optional[str]:
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
