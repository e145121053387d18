"""Terminal tables (tabulate), for ``show`` and ``query``: the rows as the csv files print them.

Given a ``width`` (the terminal's), a table is made to fit it: long names lose their middle ("Default/net…
/Conv2D-op12"; a table of messages says ``cut=False``), then columns are left out — first those the table
does not list in ``keep``, from the right, then the kept ones from the least important — until the lines
fit; when even the most important column alone is too wide, its text is wrapped. ``hidden`` says which
columns went, so that the caller can tell the user (``--wide`` shows them all).
"""
from typing import List, Optional, TextIO

from msprof.renderers.base import Renderer, register
from msprof.renderers.csvfile import column_texts
from msprof.tables import Table

LONGEST_CELL = 32       # characters of a text cell when the table has to fit a width


@register
class TextRenderer(Renderer):
    name = "text"
    extension = ".txt"

    def __init__(self, style: str = "simple", width: Optional[int] = None):
        self.style = style
        self.width = width
        self.hidden: List[str] = []

    def write(self, table: Table, out: TextIO) -> None:
        rows = list(table.rows())
        if table.total is not None and rows:
            rows.append(table.total)
        headers = [c.name for c in table.columns]
        texts = [[_unquoted(t) for t in column_texts(c, values)]
                 for c, values in zip(table.columns, zip(*rows))] or [[] for _ in headers]
        shown = list(range(len(headers)))
        self.hidden = []
        wrap = None
        if self.width is not None:
            def fits() -> bool:
                widths = [max([len(headers[i])] + [len(t) for t in texts[i]]) for i in shown]
                return self._line_width(widths) <= self.width

            order = [None] + _least_important_first(table) if table.cut else []     # messages: wrapped
            for index in order:
                if index is None:       # names: the middle goes, the ends tell them apart
                    texts = [[_cut(t) for t in column] for column in texts]
                elif len(shown) > 1:
                    shown.remove(index)
                    self.hidden.append(headers[index])
                if fits():
                    break
            else:
                if not fits():
                    wrap = self._wrapped(headers, texts, shown)
        from tabulate import tabulate      # only show and query draw tables (import: 20-30 ms)

        out.write(tabulate(list(zip(*(texts[i] for i in shown))), headers=[headers[i] for i in shown],
                           tablefmt=self.style, disable_numparse=True, maxcolwidths=wrap) + "\n")

    def _wrapped(self, headers, texts, shown) -> List[Optional[int]]:
        """Column widths that make the table fit by wrapping its widest column (messages, long names)."""
        widths = [max([len(headers[i])] + [len(t) for t in texts[i]]) for i in shown]
        widest = widths.index(max(widths))
        others = self._line_width(widths[:widest] + [1] + widths[widest + 1:]) - 1
        limits: List[Optional[int]] = [None] * len(shown)
        limits[widest] = max(self.width - others, 12)
        return limits

    def _line_width(self, widths: List[int]) -> int:
        """How wide tabulate draws columns of these widths in this style (drawn once, a row of x's)."""
        if not widths:
            return 0
        from tabulate import tabulate

        drawn = tabulate([["x" * w for w in widths]], headers=["h" * w for w in widths], tablefmt=self.style,
                         disable_numparse=True)
        return max(len(line) for line in drawn.splitlines())


def _least_important_first(table: Table) -> List[int]:
    names = [c.name for c in table.columns]
    kept = [names.index(name) for name in table.keep if name in names]
    others = [i for i in reversed(range(len(names))) if i not in kept]
    return others + list(reversed(kept))[:-1] if kept else others[:-1]


def _cut(text: str) -> str:
    if len(text) <= LONGEST_CELL:
        return text
    head = LONGEST_CELL // 3
    return text[:head] + "…" + text[len(text) - (LONGEST_CELL - head - 1):]


def _unquoted(text: str) -> str:
    return text[1:-1].replace('""', '"') if text.startswith('"') and text.endswith('"') and len(text) > 1 else text
