"""What the renderers print besides a summary file's table (msprof.tables.Table): show and query's
``Listing``, compare's ``Comparison`` and advise's ``Findings``. Each is made by its command (msprof.show,
msprof.analysis) and printed by every format's renderer (msprof.renderers.base.Renderer)."""
import heapq
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from msprof.console import emit
from msprof.tables import Table

DEFAULT_TOP = 20            # rows per table in the terminal view of show


@dataclass
class View:
    """What the user asked of show/query's output."""

    fmt: str = "table"
    style: str = "simple"
    top: Optional[int] = None            # None: the format's default; 0: every row
    sort: Optional[str] = None           # a column (name or key); None: each table's own time column
    reverse: bool = False
    wide: bool = False
    spread: bool = False                 # show: the statistics' median and std dev columns too
    tables: Sequence[str] = ()           # table keys to print; () all
    # the table keys the result dirs have (filled in as they are read): named when --table found none
    available: Dict[str, None] = field(default_factory=dict)

    def ranked_by(self, table: Table) -> Optional[str]:
        """The column the rows of ``table`` are ranked by when they are cut or sorted: --sort, else its own."""
        return self.sort if table.column_index(self.sort) is not None else table.sort

    def pick(self, table: Table, default_top: Optional[int]) -> Tuple[Iterator[tuple], List[int]]:
        """The rows to print (an iterator) and a one-item list that holds the table's row count once the
        iterator is exhausted. Ranked by the sort column when there is a top or a --sort."""
        top = default_top if self.top is None else (self.top or None)
        if table.facts:
            top = None
        index = table.column_index(self.sort)
        if index is None:
            index = table.column_index(table.sort) if (top is not None or self.sort is not None) else None
        count = [0]

        def counted() -> Iterator[tuple]:
            for row in table.rows():
                count[0] += 1
                yield row

        if index is None:
            rows = counted()
            return (rows if top is None else _first(rows, top)), count
        descending = table.columns[index].kind.numeric != self.reverse

        def key(row):
            value = row[index]
            # None sorts last either way
            return (value is not None, value) if descending else (value is None, value)

        if top is None:
            return iter(sorted(counted(), key=key, reverse=descending)), count
        choose = heapq.nlargest if descending else heapq.nsmallest
        return iter(choose(top, counted(), key=key)), count


def _first(rows: Iterator[tuple], top: int) -> Iterator[tuple]:
    for i, row in enumerate(rows):
        if i < top:
            yield row
    # rows beyond the top are still counted (the iterator above counts as it goes)


@dataclass
class Section:
    """One result dir's part of show or query's output."""

    label: str
    path: str
    layout: str
    tables: List[Table]
    quality: Optional[str] = None        # the one-line data-quality summary, when something was lost


class Listing(NamedTuple):
    """What show and query print: one ``Section`` per result dir, made as it is printed (its rows stream from
    its open database), its tables' rows picked as the ``view`` says. ``several``: more than one result dir
    will come."""

    sections: Iterable[Section]
    view: View
    several: bool = False


@dataclass
class Comparison:
    """What compare prints: its ``document`` (what --format json prints), the ``verdict`` line, the document's
    sections as ``tables`` for people and as ``scripts`` for csv (a column per field of the document's rows)
    and, per table key, (rows shown, rows in all) where a table holds only the top rows of its section."""

    document: dict
    verdict: str
    tables: List[Table]
    cut: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    scripts: List[Table] = field(default_factory=list)    # the same sections with the document's columns


@dataclass
class Findings:
    """What advise prints for one result dir: the ``findings`` (what --format json prints under "findings"),
    and each one's evidence in words (``evidence``: a list of lines per finding, at most ``limit``: when
    there are that many, the largest of more)."""

    label: str
    findings: List[dict]
    evidence: List[List[str]]
    limit: int


class Stdout:
    """Where show, query, compare and advise print: stdout, through msprof.console.emit (byte for byte into
    a pipe, control characters escaped on a terminal)."""

    def __init__(self, out=None):
        self.out = out

    def write(self, text: str) -> None:
        emit(text, nl=False, file=self.out)
