"""show and query: report tables on stdout — a table for people, csv or json for scripts. One path for every
layout: a layout's report says which tables (``show_tables``, ``query_tables``); this module picks the rows
(``--top``, ``--sort``), fits the terminal, and prints the units one after another through one printer per
format (``PRINTERS``).

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
import heapq
import json
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import click

from msprof.console import emit, notice
from msprof.errors import UsageError
from msprof.paths import one_line
from msprof.renderers.csvfile import CsvRenderer
from msprof.renderers.terminal import TextRenderer, terminal_width
from msprof.tables import TEXT, Column, Table, chunks

DEFAULT_TOP = 20            # rows per table in the terminal view


@dataclass
class View:
    """What the user asked of show/query's output."""

    fmt: str = "table"
    style: str = "simple"
    top: Optional[int] = None            # None: the format's default; 0: every row
    sort: Optional[str] = None           # a column (name or key); None: each table's own time column
    reverse: bool = False
    wide: bool = False
    tables: Sequence[str] = ()           # table keys to print; () all
    # the table keys the result dirs have (filled in as they are read): named when --table found none
    available: Dict[str, None] = field(default_factory=dict)


@dataclass
class Section:
    """One result dir's part of the output."""

    label: str
    path: str
    layout: str
    tables: List[Table]
    quality: Optional[str] = None        # the one-line data-quality summary, when something was lost


# --- picking rows ------------------------------------------------------------------------------------------
def sort_column(table: Table, name: Optional[str]) -> Optional[int]:
    """The index of column ``name`` (its title or its snake_case key, any case), or None."""
    if name is None:
        return None
    wanted = name.strip().lower()
    for index, column in enumerate(table.columns):
        if wanted in (column.name.lower(), column.key):
            return index
    return None


def picked(table: Table, view: View, default_top: Optional[int]) -> Tuple[Iterator[tuple], List[int]]:
    """The rows to print (an iterator) and a one-item list that holds the table's row count once the
    iterator is exhausted. Ranked by the sort column when there is a top or a --sort."""
    top = default_top if view.top is None else (view.top or None)
    if table.facts:
        top = None
    index = sort_column(table, view.sort)
    if index is None:
        index = sort_column(table, table.sort) if (top is not None or view.sort is not None) else None
    count = [0]

    def counted() -> Iterator[tuple]:
        for row in table.rows():
            count[0] += 1
            yield row

    if index is None:
        rows = counted()
        return (rows if top is None else _first(rows, top, count)), count
    descending = table.columns[index].kind.numeric != view.reverse

    def key(row):
        value = row[index]
        # None sorts last either way
        return (value is not None, value) if descending else (value is None, value)

    if top is None:
        return iter(sorted(counted(), key=key, reverse=descending)), count
    choose = heapq.nlargest if descending else heapq.nsmallest
    return iter(choose(top, counted(), key=key)), count


def _first(rows: Iterator[tuple], top: int, count: List[int]) -> Iterator[tuple]:
    for i, row in enumerate(rows):
        if i < top:
            yield row
    # rows beyond the top are still counted (the iterator above counts as it goes)


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
    if view.sort is not None and tables and all(sort_column(t, view.sort) is None for t in tables):
        names = sorted({c.key for t in tables for c in t.columns})
        raise UsageError(f"--sort {view.sort}: no such column; columns: {', '.join(names)}")
    return tables


# --- printers ----------------------------------------------------------------------------------------------
class Printer:
    """Base of the output formats of show and query: ``section`` once per result dir, then ``end``."""

    default_top: Optional[int] = None

    def __init__(self, view: View, several: bool = False, out=None):
        self.view = view
        self.several = several          # more than one result dir
        self.out = out

    def write(self, text: str) -> None:
        emit(text, nl=False, file=self.out)

    def section(self, section: Section) -> None:
        raise NotImplementedError

    def end(self) -> None:
        pass


class TablePrinter(Printer):
    default_top = DEFAULT_TOP

    def section(self, section: Section) -> None:
        if not section.tables:       # (--table naming none of its tables: it said so on stderr)
            return
        self.write(f"== {one_line(section.label)} ({section.layout}) ==\n")
        width = terminal_width(self.view.wide)
        for table in section.tables:
            rows, count = picked(table, self.view, self.default_top)
            renderer = TextRenderer(self.view.style, width)
            self.write(f"\n{_heading(table)}\n")
            # (drawn as the rows come: a million of them are spooled, not held)
            drawn = renderer.write(_with_rows(table, rows, self.view.sort), self)
            if not drawn:
                self.write(f"(no rows{_recorded_for(table.context)})\n")
                continue
            notes = []
            if count[0] > drawn:
                by = self.view.sort if sort_column(table, self.view.sort) is not None else table.sort
                notes.append(f"{drawn} of {count[0]} rows" + (f" by {by}" if by else "") + ": --top N")
            if renderer.hidden:
                notes.append(renderer.hidden_note)
            if notes:
                self.write(f"({'; '.join(notes)})\n")
        self.write("\n")


class CsvPrinter(Printer):
    """One table as one csv stream: the one --table names, or the first (said on stderr when there were
    more). With several result dirs a ``result_dir`` column comes first; a header is repeated, after an
    empty line, only where the columns change."""

    def __init__(self, view: View, several: bool = False, out=None):
        super().__init__(view, several, out)
        self.header = None
        self.key = None            # the table printed: the first result dir's first, for every result dir
        self.told = False          # the notice of the tables left out, once for all result dirs

    def section(self, section: Section) -> None:
        if not section.tables:
            return
        if self.key is None:
            self.key = section.tables[0].key
        others = ", ".join(t.key for t in section.tables if t.key != self.key)
        if others and not self.told:
            if self.view.tables:      # (several asked for: each but the first left out, said as such)
                notice(f"csv holds one table: {self.key} printed, not {others} (one --table per csv)")
            else:
                notice(f"csv holds one table: {self.key} printed; --table {{{others}}} for another")
            self.told = True
        table = next((t for t in section.tables if t.key == self.key), None)
        if table is None:           # (a PROF_ host without devices has no op_summary: not another table instead)
            notice(f"{section.label}: no {self.key} table: nothing of it in the csv")
            return
        rows, _ = picked(table, self.view, self.default_top)
        columns = [Column(c.name, c.kind) for c in table.columns]
        total = table.total
        if self.several:
            columns.insert(0, Column("result_dir", TEXT, constant=section.label))
            total = None if total is None else (section.label,) + tuple(total)
        header = [c.name for c in columns]
        if self.header is not None and header != self.header:
            self.write("\n")
        # a table under the same header continues the one before: a later part of one csv. (Written as it
        # goes: a million rows held as one text took 210 MB.)
        CsvRenderer().write(replace(table, columns=columns, batches=chunks(rows, 1024), total=total), self,
                            part=1 if header == self.header else None)
        self.header = header


class JsonPrinter(Printer):
    """One document, written as it goes: a million rows never sit in memory."""

    def __init__(self, view: View, several: bool = False, out=None):
        super().__init__(view, several, out)
        self.first = True

    def section(self, section: Section) -> None:
        head = {"path": section.path, "layout": section.layout, "data_quality": section.quality}
        self.write(("{\n" if self.first else ",\n") + f" {_dumps(section.label)}: {_dumps(head)[:-1]}, "
                   '"tables": {')
        self.first = False
        for n, table in enumerate(section.tables):
            rows, count = picked(table, self.view, self.default_top)
            keys = [c.key for c in table.columns]
            encode = [c.kind.json for c in table.columns]
            head = {"title": table.title, "context": table.context, "columns": keys}
            self.write(("," if n else "") + f"\n  {_dumps(table.key)}: {_dumps(head)[:-1]}, \"rows\": [")
            for i, row in enumerate(rows):
                self.write(("," if i else "") + "\n   " + _dumps(_record(keys, encode, row)))
            # the total row's "-" fill the columns that have no total: left out
            total = None if table.total is None else {k: v for k, v in _record(keys, encode, table.total).items()
                                                      if v != "-"}
            self.write(f"\n  ], \"row_count\": {count[0]}, \"total\": {_dumps(total)}}}")
        self.write("\n }}")

    def end(self) -> None:
        self.write("{}\n" if self.first else "\n}\n")


PRINTERS: Dict[str, type] = {"table": TablePrinter, "csv": CsvPrinter, "json": JsonPrinter}


def print_sections(sections: Iterable[Section], view: View, several: bool = False) -> None:
    """Print result dirs' sections in the view's format (produced lazily, one at a time: a section's tables
    stream from its open database). ``several``: more than one result dir will come."""
    printer = PRINTERS[view.fmt](view, several)
    found = False
    for section in sections:
        found = found or bool(section.tables)
        printer.section(section)
    printer.end()
    if view.tables and not found:       # (each result dir said which tables it has)
        raise UsageError(f"--table {', '.join(view.tables)}: no such table in any result directory (their tables: "
                         f"{', '.join(view.available) or 'none'})")


# --- helpers -----------------------------------------------------------------------------------------------
def _heading(table: Table) -> str:
    return one_line(table.title)


def _recorded_for(context: dict) -> str:
    ids = [f"{name} {context[key]}" for key, name in (("model_id", "model"), ("iteration_id", "iteration"))
           if context.get(key) is not None]
    return f": nothing recorded for {', '.join(ids)}" if ids else ""


def _with_rows(table: Table, rows: Iterable[tuple], sort: Optional[str] = None) -> Table:
    """The table of these rows (complete: the columns no longer hold constants). A column the user sorted by
    is kept on a narrow terminal, right after the most important one: rows ranked by a hidden value would
    look unordered."""
    keep = list(table.keep)
    index = sort_column(table, sort)
    if index is not None:
        name = table.columns[index].name
        keep = keep[:1] + [name] + [k for k in keep[1:] if k != name]
    return replace(table, columns=[Column(c.name, c.kind) for c in table.columns], batches=chunks(iter(rows), 1024),
                   keep=keep)


def _record(keys: List[str], encode, row) -> dict:
    return {k: (None if v is None else e(v)) for k, e, v in zip(keys, encode, row)}


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


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
