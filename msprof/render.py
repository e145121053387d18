"""Renderers: turn report Tables into CSV, JSON or terminal text."""
import csv
import io
import json
from typing import List

from tabulate import tabulate

from msprof.reports import Table

NA = "N/A"


def rows_of(table: Table) -> List[list]:
    """Report rows are already rounded (in SQL); only a missing value may still need its N/A."""
    if table.final:
        return table.rows
    return [[NA if v is None or v == "" else v for v in row] for row in table.rows]


def to_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(rows_of(table))
    return buffer.getvalue()


def to_json(table: Table) -> str:
    return json.dumps([dict(zip(table.columns, row)) for row in rows_of(table)], indent=1, ensure_ascii=False) + "\n"


def to_text(table: Table, style: str = "simple") -> str:
    return tabulate(rows_of(table), headers=table.columns, tablefmt=style, disable_numparse=True,
                    floatfmt="g")


FORMATS = {"csv": (to_csv, ".csv"), "json": (to_json, ".json")}
