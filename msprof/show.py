"""show and query: report tables on stdout — a table for people, csv or json for scripts. One path for every
layout: a layout says which tables (msprof.contract.Layout ``show_tables``, ``query_tables``); this module
keeps those --table asks for and has the format's renderer print the units one after another
(msprof.renderers: each format's ``listing``).

* table: each result dir under a heading, each table under its title; by default the 20 longest rows of
  each table (``--top N``; ``--top 0`` all), the total row always last; cut to the terminal's width (columns
  of least value left out and named; ``--wide`` keeps them all).
* csv: one table (``--table KEY``; the first one by default), one header; with several result dirs a
  ``result_dir`` column comes first.
* json: one document, keyed by result dir (docs/user-guide.md "Output for scripts" pins its shape): table
  keys and column keys in snake_case, numbers as numbers, null for N/A, the total row in its own field.

Without ``--top`` or ``--sort``, csv and json rows are streamed in the table's own order (flat memory on a
million rows); ``--top`` keeps only N rows at a time; ``--sort`` alone sorts every row in memory.
"""
from typing import Iterable, List

from msprof.console import notice
from msprof.errors import UsageError
from msprof.renderers import FORMATS
from msprof.renderers.documents import Listing, Section, Stdout, View
from msprof.renderers.terminal import terminal_width
from msprof.tables import Table

__all__ = ["Section", "View", "print_sections", "selected"]


def selected(tables: List[Table], view: View, label: str = "", several: bool = True) -> List[Table]:
    """The tables --table asks for (a result dir without one of them says why when it makes its tables; one
    whose layout has no such table says which it has — unless it is the only result dir and has none of them:
    the error print_sections then gives says it), checked against --sort: it must name a column of at least
    one of them."""
    if view.tables:
        keys = [t.key for t in tables]
        view.available.update(dict.fromkeys(keys))
        missing = [key for key in view.tables if key not in keys]
        if several or len(missing) < len(view.tables):
            for key in missing:
                notice(f"{label}: no {key} table here (it has {', '.join(keys) or 'none'})")
        tables = [t for t in tables if t.key in view.tables]
    if view.sort is not None and tables and all(t.column_index(view.sort) is None for t in tables):
        names = sorted({c.key for t in tables for c in t.columns})
        raise UsageError(f"--sort {view.sort}: no such column; columns: {', '.join(names)}")
    return tables


def print_sections(sections: Iterable[Section], view: View, several: bool = False) -> None:
    """Print result dirs' sections in the view's format (produced lazily, one at a time: a section's tables
    stream from its open database). ``several``: more than one result dir will come."""
    found = []

    def watched() -> Iterable[Section]:
        for section in sections:
            found.append(bool(section.tables))
            yield section

    renderer = FORMATS[view.fmt](view.style, terminal_width(view.wide))
    renderer.listing(Listing(watched(), view, several), Stdout())
    if view.tables and not any(found):       # (each result dir said which tables it has)
        raise UsageError(f"--table {', '.join(view.tables)}: no such table in any result directory (their tables: "
                         f"{', '.join(view.available) or 'none'})")
