"""Report tables: what reports produce and every renderer consumes (msprof.renderers).

A ``Table`` has a stable ``key`` (snake_case, for scripts), a ``title`` (for people), ``Column``s and its rows,
streamed in batches straight from SQL (a table of a million rows never sits in memory), plus an optional
``total`` row kept apart (csv and the terminal print it last; structured output gives it its own field).
Values are raw: numbers, text, or None for N/A. A column's ``Kind`` says how a renderer prints a value —
the one place where output rounding and formatting are defined.

Rounding follows the tools whose files msprof writes: a JOB column the SS928 tool rounds half up, and a
PROF column the reference analyser rounds with SQLite's round(), are rounded by the SQL that computes them
(exact integer arithmetic, or the same SQLite function: a renderer cannot round a ratio of integers
exactly from its float); a column the reference rounds with Python's round() is rounded here, by its kind.
"""
import collections
import operator
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, List, Optional, Sequence

NA = "N/A"


class Kind:
    """How a column's values are printed: ``text`` for csv and the terminal, ``json`` for JSON (a number
    stays a number). None is N/A everywhere."""

    name = "plain"
    numeric = False

    def text(self, value) -> str:
        return NA if value is None else str(value)

    def json(self, value):
        return value


class _Plain(Kind):
    """Text, integers, and numbers already rounded by the SQL that computed them."""

    def __init__(self, name: str, numeric: bool):
        self.name, self.numeric = name, numeric


class _PythonRound(Kind):
    """A float rounded with Python's round() to ``digits`` (half to even on the binary value)."""

    numeric = True

    def __init__(self, digits: int):
        self.name = f"round{digits}"
        self.digits = digits

    def text(self, value) -> str:
        return NA if value is None else str(round(value, self.digits))

    def json(self, value):
        return None if value is None else round(value, self.digits)


class _EpochNs(Kind):
    """Integer ns since the epoch printed as µs with exactly 3 decimals (more digits than a float holds)."""

    name = "epoch_us"

    def text(self, value) -> str:
        if value is None:
            return NA
        return "%d.%03d" % divmod(value, 1000) if value >= 0 else "-" + self.text(-value)

    json = text


TEXT = _Plain("text", False)
INT = _Plain("int", True)
NUMBER = _Plain("number", True)       # rounded in SQL: times 3 decimals, ratios 4 (outputs.md)
ROUND3 = _PythonRound(3)
EPOCH_US = _EpochNs()


_VARIES = object()


@dataclass
class Column:
    """A column; ``constant``: the value of every row, which the row tuples then do not carry (the PROF
    tensor columns: a million N/A fetched from SQLite and formatted one by one cost a second)."""

    name: str
    kind: Kind = TEXT
    constant: object = _VARIES

    @property
    def varies(self) -> bool:
        return self.constant is _VARIES

    @property
    def key(self) -> str:
        """The column's name for scripts: snake_case ASCII ("Time(us)" → "time_us")."""
        return snake_case(self.name)


@dataclass
class Table:
    key: str
    title: str
    columns: List[Column]
    batches: Iterable[List[tuple]] = field(default_factory=list)     # rows, a batch at a time
    total: Optional[tuple] = None
    facts: bool = False          # a few facts (the frequency table): --top does not cut it
    context: dict = field(default_factory=dict)   # what the title says in words: model_id, iteration_id, ...
    sort: Optional[str] = None   # the column show ranks rows by (--top, --sort): the table's time
    keep: Sequence[str] = ()     # the columns a narrow terminal keeps, most important first
    cut: bool = True             # a narrow terminal may cut long texts (names); False: wrap them (messages)

    def rows(self) -> Iterator[tuple]:
        """Every row with all its values (constant columns filled in); the total row is apart."""
        expand = self.expander()
        for batch in self.batches:
            yield from map(expand, batch)

    def expander(self) -> Callable[[Sequence], tuple]:
        """A function from a row of the batches (varying columns only) to the row with the constant columns
        filled in: worked out once per table, then one tuple concatenation and one itemgetter per row (a
        loop over the columns per row cost 4 s of a 1M-row show)."""
        if all(c.varies for c in self.columns):
            return tuple
        constants = tuple(c.constant for c in self.columns if not c.varies)
        varying = sum(1 for c in self.columns if c.varies)
        order, taken, fixed = [], 0, varying
        for column in self.columns:          # each column's place in row + constants
            if column.varies:
                order.append(taken)
                taken += 1
            else:
                order.append(fixed)
                fixed += 1
        if len(order) == 1:
            return lambda row: constants
        pick = operator.itemgetter(*order)
        return lambda row: pick(tuple(row) + constants)

    def select(self, first: int, last: int) -> "Table":
        """The same table with only columns [first, last) (all of them varying)."""
        varying = [i for i, c in enumerate(self.columns) if c.varies]
        if not all(self.columns[i].varies for i in range(first, last)):
            raise ValueError("select() takes varying columns only")
        # positions of the selected columns in a batch row (which holds the varying columns only)
        pick = operator.itemgetter(*[varying.index(i) for i in range(first, last)])
        if last - first == 1:
            batches = ([(pick(row),) for row in batch] for batch in self.batches)
        else:
            batches = (list(map(pick, batch)) for batch in self.batches)
        total = None if self.total is None else self.total[first:last]
        columns = [Column(c.name, c.kind) for c in self.columns[first:last]]
        return replace(self, columns=columns, batches=batches, total=total)


def batches(cursor, size: int = 1024) -> Iterator[list]:
    """Rows of a cursor in lists of ``size``: fewer Python↔SQLite round trips than row by row, and small
    enough that one batch's objects are freed and reused by the next."""
    while True:
        rows = cursor.fetchmany(size)
        if not rows:
            return
        yield rows


def lockstep(source: Iterable[tuple], n: int) -> List[Iterator[list]]:
    """n streams of batches out of one source of n-tuples of batches (tables filled by one query). Read them
    in turn, one batch of each, as msprof.summary does: then none holds more than the batch not yet read."""
    source = iter(source)
    waiting: List[collections.deque] = [collections.deque() for _ in range(n)]

    def stream(queue: collections.deque) -> Iterator[list]:
        while True:
            if not queue:
                step = next(source, None)
                if step is None:
                    return
                for each, batch in zip(waiting, step):
                    each.append(batch)
            yield queue.popleft()

    return [stream(queue) for queue in waiting]


def signed_zeros(texts: List[str], values, text: Callable[[object], str] = str) -> List[str]:
    """Texts a renderer took from a memo of value → ``text(value)``, with each zero written as it is:
    -0.0 == 0.0, so the memo gives both the text of whichever came first."""
    if "0.0" in texts or "-0.0" in texts:
        return [text(v) if t in ("0.0", "-0.0") else t for t, v in zip(texts, values)]
    return texts


def columns(spec: Sequence[tuple]) -> List[Column]:
    """[(name, kind)] → Columns."""
    return [Column(name, kind) for name, kind in spec]


def snake_case(name: str) -> str:
    out, last = [], "_"
    for ch in name.replace("%", " pct ").replace("(", " ").replace(")", " "):
        ch = ch.lower() if ch.isascii() and ch.isalnum() else "_"
        if ch == "_" and last == "_":
            continue
        out.append(ch)
        last = ch
    return "".join(out).strip("_")

