"""Renderers: turn report Tables into CSV, JSON or terminal text. The only place values are rounded."""
import csv
import io
import json
from typing import List

from tabulate import tabulate

from msprof.reports import INT, PERCENT, RATIO, TIME, Table

NA = "N/A"
# outputs.md: durations and times 3 decimals, ratios 4 (percent columns too), cycles and bytes integers.
DECIMALS = {TIME: 3, RATIO: 4, PERCENT: 4}


def cell(value, kind):
    """One value as written: rounded number, integer, text, or N/A."""
    if value is None or value == "":
        return NA
    if kind in DECIMALS and isinstance(value, (int, float)):
        return round(float(value), DECIMALS[kind])
    if kind == INT and isinstance(value, (int, float)):
        return int(value)
    return value


def rows_of(table: Table) -> List[list]:
    return [[cell(v, k) for v, k in zip(row, table.kinds)] for row in table.rows]


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
