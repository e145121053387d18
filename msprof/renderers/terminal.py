"""Terminal tables (tabulate), for ``show`` and ``query``: the rows as the csv files print them."""
from typing import TextIO

from tabulate import tabulate

from msprof.renderers.base import Renderer, register
from msprof.renderers.csvfile import column_texts
from msprof.tables import Table


@register
class TextRenderer(Renderer):
    name = "text"
    extension = ".txt"

    def __init__(self, style: str = "simple"):
        self.style = style

    def write(self, table: Table, out: TextIO) -> None:
        rows = list(table.rows())
        if table.total is not None:
            rows.append(table.total)
        texts = [[_unquoted(t) for t in column_texts(c, values)] for c, values in zip(table.columns, zip(*rows))]
        out.write(tabulate(list(zip(*texts)), headers=[c.name for c in table.columns], tablefmt=self.style,
                           disable_numparse=True) + "\n")


def _unquoted(text: str) -> str:
    return text[1:-1].replace('""', '"') if text.startswith('"') and text.endswith('"') and len(text) > 1 else text
