"""Renderers: turn report Tables into CSV, JSON or terminal text."""
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
    """The table as csv.writer writes it (minimal quoting, "\n" line ends; a field holding "\r" is quoted
    too), built column by column with C-level map/join instead of csv.writer's per-field work:
    half the cost on a 1M-row export, where formatting floats was the largest part."""
    columns = [_column_texts(column) for column in zip(*rows_of(table))]
    lines = [",".join(_column_texts(table.columns))]
    lines += map(",".join, zip(*columns))
    if len(table.columns) == 1:                  # a lone empty field is written "" (an empty line is no row)
        lines = ['""' if line == "" else line for line in lines]
    return "\n".join(lines) + "\n"


class _FloatTexts(dict):
    """Memo of float → str(float) (strings map to themselves). Report tables repeat values heavily (a
    ratio has at most 10,001 values at 4 decimals), and repr of a float costs ~20× a dict lookup."""

    LIMIT = 1 << 16

    def __missing__(self, value):
        text = str(value)
        if len(self) >= self.LIMIT:
            self.clear()
        self[value] = text
        return text


_FLOAT_TEXTS = _FloatTexts()
_SPECIAL = ',"\r\n'


def _column_texts(column) -> List[str]:
    """Field texts of one column. Ints and strings are str() as they are (cheap: a string is returned
    as is, so text columns never fill the memo); a memo may hold only one numeric type (1 == 1.0 as dict
    keys), so it serves only columns with floats and strings; anything else (None, bools, mixed numbers)
    goes value by value."""
    types = set(map(type, column))
    if types <= {int, str}:
        texts = list(map(str, column))
    elif types <= {float, str}:
        texts = list(map(_FLOAT_TEXTS.__getitem__, column))
    else:
        return [_field(value) for value in column]
    if _needs_quotes("".join(texts)):
        texts = list(map(_quoted, texts))
    return texts


def _field(value) -> str:
    return "" if value is None else _quoted(str(value))


def _needs_quotes(text: str) -> bool:
    return any(c in text for c in _SPECIAL)      # four memchr-speed scans


def _quoted(text: str) -> str:
    if _needs_quotes(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def to_json(table: Table) -> str:
    return json.dumps([dict(zip(table.columns, row)) for row in rows_of(table)], indent=1, ensure_ascii=False) + "\n"


def to_text(table: Table, style: str = "simple") -> str:
    return tabulate(rows_of(table), headers=table.columns, tablefmt=style, disable_numparse=True,
                    floatfmt="g")


FORMATS = {"csv": (to_csv, ".csv"), "json": (to_json, ".json")}
