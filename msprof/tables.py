"""Report tables: what reports produce and every renderer consumes (msprof.renderers).

A ``Table`` has a stable ``key`` (snake_case, for scripts), a ``title`` (for people), ``Column``s and its rows,
streamed in batches straight from SQL (a table of a million rows never sits in memory), plus an optional
``total`` row kept apart (csv and the terminal print it last; structured output gives it its own field).
Values are raw: numbers, text, or None for N/A. A column's ``Kind`` says how a renderer prints a value —
the one place where output rounding and formatting are defined.

Rounding follows the tools whose files msprof writes: a JOB column the SS928 tool rounds half up is
rounded by the SQL that computes it (exact integer arithmetic: a renderer cannot round a ratio of integers
exactly from its float); a PROF column the reference rounds with SQLite's round() or Python's round() is
rounded by its kind (``SQLITE_ROUND3``, ``ROUND3``), wherever it is printed.

A table whose rows come from SQL may say so (``RowSource``, ``Column.sql``): then a renderer that can print in
SQL (csv) has SQLite make each row's text, and only what SQL cannot compute (``Running``: the wait since
the row before) is computed in Python (msprof.renderers.insql). Every other consumer reads the values.
"""
import itertools
import math
import operator
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

NA = "N/A"


class Kind:
    """How a column's values are printed: ``text`` for csv and the terminal, ``json`` for JSON (a number
    stays a number). None is N/A everywhere.

    For a column computed in SQL (``Column.sql``), ``value_sql`` is the SQL of the value ``text`` and
    ``json`` take, and ``printf`` how SQLite prints that same text itself (msprof.renderers.insql)."""

    name = "plain"
    numeric = False
    words = False          # free text (names): a renderer may have to quote it

    def text(self, value) -> str:
        return NA if value is None else str(value)

    def json(self, value):
        return value

    def value_sql(self, expr: str) -> str:
        return expr

    def printf(self, expr: str) -> Optional["Printf"]:
        """How SQLite prints a (non-NULL) value as ``text`` does, or None when it cannot."""
        return None


class Printf(NamedTuple):
    """A printf() conversion with its arguments that prints a value as its kind's ``text`` does wherever
    ``guard`` (SQL; None: always) holds; elsewhere Python prints it — except an integer when ``integers``
    (it prints as it is). The arguments and the guard may name the value several times: a column is
    cheaper than an expression, which is evaluated each time.
    (printf's ``%!.3f`` prints 3 decimals without their trailing zeros, as Python prints a rounded float:
    1.0, 0.25, 0.063.)"""

    conversion: str
    args: List[str]
    guard: Optional[str] = None
    integers: bool = False


class _Plain(Kind):
    """Text, integers, and numbers already rounded by the SQL that computed them."""

    def __init__(self, name: str, numeric: bool, conversion: Optional[str] = None, words: bool = False):
        self.name, self.numeric, self.words = name, numeric, words
        self.conversion = conversion

    def printf(self, expr: str):
        return None if self.conversion is None else Printf(self.conversion, [expr])


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

    def printf(self, expr: str):
        """printf rounds the decimal expansion half up, nudged up by 3e-16 of the value; Python's round()
        the binary value half to even: they agree wherever x·1000 is more than 1e-6 from a half, which a
        double below 10^6 cannot get wrong. The rest (near ties, zero, negative or large values) Python
        prints; an integer (the reference's 0 for "none") prints as it is."""
        if self.digits != 3:
            return None
        x = f"({expr})"
        return Printf("%!.3f", [x], f"{x} > 0 AND {x} < 1e6 AND {x} * 1000.0 - CAST({x} * 1000.0 AS INTEGER)"
                                    " NOT BETWEEN 0.499999 AND 0.500001", integers=True)


class _SqliteRound(Kind):
    """A float rounded as the reference analyser rounds it in SQL: SQLite's round(x, 3), which prints x with
    printf's %!.3f and reads that text back; Python then prints the double it got. Below 10^12 a double
    holds every 3-decimal text exactly (its step is under 0.0002), so %!.3f of x prints the very text
    Python prints; above, Python's shortest text can have fewer digits (9213822499954.72 for
    9213822499954.721), so those are Python's to print."""

    numeric = True

    def __init__(self, digits: int):
        self.name = f"sqlite_round{digits}"
        self.digits = digits

    def value_sql(self, expr: str) -> str:
        return f"round({expr}, {self.digits})"

    def printf(self, expr: str):
        if self.digits != 3:
            return None
        x = f"({expr})"
        return Printf("%!.3f", [x], f"{x} < 1e12 AND {x} > -1e12")


class _EpochNs(Kind):
    """Integer ns since the epoch printed as µs with exactly 3 decimals (more digits than a float holds)."""

    name = "epoch_us"

    def text(self, value) -> str:
        if value is None:
            return NA
        return "%d.%03d" % divmod(value, 1000) if value >= 0 else "-" + self.text(-value)

    json = text

    def printf(self, expr: str):
        x = f"({expr})"
        return Printf("%d.%03d", [f"{x} / 1000", f"{x} % 1000"], f"{x} >= 0")


TEXT = _Plain("text", False, "%s", words=True)
INT = _Plain("int", True, "%d")
NUMBER = _Plain("number", True)       # rounded in SQL: times 3 decimals, ratios 4 (outputs.md)
ROUND3 = _PythonRound(3)
SQLITE_ROUND3 = _SqliteRound(3)
EPOCH_US = _EpochNs()


_VARIES = object()


@dataclass
class Column:
    """A column; ``constant``: the value of every row, which the row tuples then do not carry (the PROF
    tensor columns: a million N/A fetched from SQLite and formatted one by one cost a second).

    In a table with a ``RowSource``: ``sql`` is the column's value over a source row (its kind's ``value_sql``
    rounds it where the kind says so); ``null_when`` the SQL condition under which it is NULL (N/A), when
    known (columns NULL together are printed N/A together); ``nullable`` False when it never is; ``domain``
    a SELECT of every text a text column can hold (a few rows: names), so that a renderer checks them once
    for characters it must quote instead of checking every row."""

    name: str
    kind: Kind = TEXT
    constant: object = _VARIES
    sql: Optional[str] = None
    null_when: Optional[str] = None
    nullable: bool = True
    domain: Optional[str] = None

    @property
    def varies(self) -> bool:
        return self.constant is _VARIES

    @property
    def key(self) -> str:
        """The column's name for scripts: snake_case ASCII ("Time(us)" → "time_us")."""
        return snake_case(self.name)


@dataclass
class RowSource:
    """The rows one or more tables select their columns from: ``sql``, a SELECT of named columns in the
    tables' row order, with its ``params``. Tables of one RowSource are filled by one pass over its rows (PROF
    op_summary and task_time), each keeping the rows its ``where`` accepts. ``order``: SQL of the key the
    rows are in order of, for tables whose rows of equal keys are ordered otherwise (``Ties``). ``taps``:
    what the report gathers from every row of such a pass for another table (``Tap``)."""

    conn: sqlite3.Connection
    sql: str
    params: dict = field(default_factory=dict)
    order: Optional[str] = None
    taps: List["Tap"] = field(default_factory=list)

    @property
    def whole(self) -> bool:
        """Whether a pass must read every row, whatever its tables keep: its taps gather from all of them."""
        return bool(self.taps)

    def columns(self, select: List[str], where: str = "", group: Optional[int] = None,
                size: int = 1024) -> Iterator[List[tuple]]:
        """One pass over the rows: the values of ``select`` (SQL over a source row) of the rows ``where``
        accepts, ``size`` rows at a time as columns, no batch splitting a run of rows with equal values at
        position ``group`` (a tie group). A pass over every row feeds the taps, done once it has ended."""
        taps = [] if where else self.taps
        positions = []
        select = list(select)
        for tap in taps:
            positions.append(range(len(select), len(select) + len(tap.inputs)))
            select += list(tap.inputs)
        sql = f"SELECT {', '.join(select)} FROM ({self.sql})" + (f" WHERE {where}" if where else "")
        cursor = self.conn.execute(sql, self.params)
        batched = iter(lambda: cursor.fetchmany(size), [])
        if group is not None:              # rows that may be reordered come in the same batch
            batched = whole_groups(batched, group)
        for rows in batched:
            columns = list(zip(*rows))
            for tap, at in zip(taps, positions):
                tap.feed([columns[i] for i in at])
            yield columns
        for tap in taps:
            tap.done = True

    def gathered(self) -> Optional[list]:
        """What the taps gathered (a result per tap) in a pass over every row; None without taps, or before
        such a pass has ended."""
        if not self.taps or not all(tap.done for tap in self.taps):
            return None
        return [tap.result() for tap in self.taps]


class Tap:
    """What a report gathers from every row of a RowSource in the pass that prints its tables, whichever
    tables keep the row (``RowSource.columns``): the sums of another table that would otherwise need a pass of
    its own over the same joins (PROF op_statistic beside op_summary). ``inputs`` are SQL over the source row;
    ``feed`` takes a batch's values, a tuple per input. ``done`` once a pass has fed every row (a renderer
    that prints values reads each table's rows on their own: then it is never done, and what it gathered
    is not to be used)."""

    inputs: Sequence[str] = ()

    def __init__(self):
        self.done = False

    def feed(self, columns: List[tuple]) -> None:
        raise NotImplementedError

    def result(self):
        """What it gathered (picklable: a worker process hands it back), once ``done``."""
        raise NotImplementedError


class Ties:
    """The order of a table's rows that share their RowSource's order key (tasks that start at the same moment),
    where it is not the SQL's: ``inputs`` are SQL over the source row, ``ranks`` gives
    the rows of any number of such groups (their inputs' values) a sort key each, and a group's rows are
    sorted by it (stable: equal keys keep the SQL's order). Computed a batch at a time, from the inputs or
    from what they look up (a few rows tie: their inputs are keys rather than columns on every row); a run
    where every task ties has as many groups as rows/2."""

    inputs: Sequence[str] = ()

    def ranks(self, rows: List[tuple]) -> List[Any]:
        raise NotImplementedError


def whole_groups(batched: Iterable[list], key: int) -> Iterator[list]:
    """The batches of rows, none splitting a run of rows with the same value at ``key`` (a tie group)."""
    carry: list = []
    for batch in batched:
        rows = carry + list(batch) if carry else list(batch)
        last, cut = rows[-1][key], len(rows) - 1
        while cut > 0 and rows[cut - 1][key] == last:
            cut -= 1
        carry = rows[cut:]
        if cut:
            yield rows[:cut]
    if carry:
        yield carry


def tie_order(keys: Sequence, inputs: Sequence[tuple], ties: Ties) -> Optional[List[int]]:
    """Positions of rows (in order of ``keys``; ``inputs``: each row's values of ``ties.inputs``) with each run
    of equal keys in ``ties``' order; None when no two rows share a key (the usual case, found at C speed)."""
    if not any(map(operator.eq, keys, itertools.islice(keys, 1, None))):
        return None
    runs: List[Tuple[int, int]] = []
    i, n = 0, len(keys)
    while i < n:
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        runs.append((i, j))
        i = j
    tied = [k for i, j in runs if j - i > 1 for k in range(i, j)]
    rank = dict(zip(tied, ties.ranks([inputs[k] for k in tied])))
    out: List[int] = []
    for i, j in runs:
        out += sorted(range(i, j), key=rank.__getitem__) if j - i > 1 else [i]
    return out


class Running:
    """Columns computed in Python over a table's rows in order, from a running state (the wait since the row
    before): ``inputs`` are SQL over the source row; ``start`` begins a pass over the rows, ``fill`` takes
    a batch of input tuples and returns each row's values of ``columns`` (the names of the columns it
    fills)."""

    columns: Sequence[str] = ()
    inputs: Sequence[str] = ()

    def start(self) -> None:
        """A new pass over the rows, from the first."""

    def fill(self, batch: List[tuple]) -> List[tuple]:
        raise NotImplementedError


def chunks(rows: Iterable, size: int) -> Iterator[list]:
    """``rows`` in lists of ``size`` (the last may be shorter)."""
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


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
    cut: bool = True             # a narrow terminal may cut long texts (names); False: wrap them (messages)
    source: Optional[RowSource] = None     # the SQL rows the columns' ``sql`` reads (batches made from it)
    where: str = ""              # which of the source's rows are this table's (SQL; "": all)
    running: Optional[Running] = None   # columns computed in Python, in row order
    ties: Optional[Ties] = None  # the order of rows with the same source order key, when not the SQL's
    line_end: str = "\n"         # csv's line ends (CR LF where a file copies another tool's: torch_npu's)

    def __post_init__(self):
        if self.source is not None and not self.batches:
            self.batches = _SourceBatches(self)

    def column_index(self, name: Optional[str]) -> Optional[int]:
        """The index of column ``name`` (its title or its snake_case key, any case), or None."""
        if name is None:
            return None
        wanted = name.strip().lower()
        for index, column in enumerate(self.columns):
            if wanted in (column.name.lower(), column.key):
                return index
        return None

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
        """The same table with only columns [first, last) (a constant column stays constant)."""
        varying = [i for i, c in enumerate(self.columns) if c.varies]
        # positions of the selected varying columns in a batch row (which holds the varying columns only)
        kept = [varying.index(i) for i in range(first, last) if self.columns[i].varies]
        if len(kept) == 1:
            batches = ([(row[kept[0]],) for row in batch] for batch in self.batches)
        else:
            pick = operator.itemgetter(*kept) if kept else (lambda row: ())
            batches = (list(map(pick, batch)) for batch in self.batches)
        total = None if self.total is None else self.total[first:last]
        columns = [Column(c.name, c.kind, c.constant) for c in self.columns[first:last]]
        return replace(self, columns=columns, batches=batches, total=total)


class _SourceBatches:
    """A source table's rows, a batch at a time: its columns' values selected from its source (the query runs
    each time it is iterated, so a renderer that prints in SQL never runs it)."""

    def __init__(self, table: Table):
        self.table = table

    def __iter__(self) -> Iterator[list]:
        table, source = self.table, self.table.source
        varying = [c for c in table.columns if c.varies]
        running = table.running
        filled = set(running.columns) if running else set()
        exprs = [c.kind.value_sql(c.sql) if c.null_when is None else
                 f"CASE WHEN {c.null_when} THEN NULL ELSE {c.kind.value_sql(c.sql)} END"
                 for c in varying if c.name not in filled]
        inputs = list(running.inputs) if running else []
        extra = [source.order, *table.ties.inputs] if table.ties else []
        where = f" WHERE {table.where}" if table.where else ""
        sql = f"SELECT {', '.join(exprs + inputs + extra) or 'NULL'} FROM ({source.sql}){where}"
        batched = batches(source.conn.execute(sql, source.params))
        if running:
            running.start()
        if not running and not table.ties:
            yield from batched
            return
        selected, width = len(exprs), len(exprs) + len(inputs)
        if table.ties:
            batched = whole_groups(batched, width)
        # where each column comes from: a selected value (its position) or a running column (its name)
        places, at = [], 0
        for c in varying:
            if c.name in filled:
                places.append(c.name)
            else:
                places.append(at)
                at += 1
        for batch in batched:
            if table.ties:
                order = tie_order([r[width] for r in batch], [r[width + 1:] for r in batch], table.ties)
                if order is not None:
                    batch = [batch[i] for i in order]
            if not running:
                yield [row[:selected] for row in batch]
                continue
            columns = list(zip(*batch))
            made = dict(zip(running.columns, zip(*running.fill(list(zip(*columns[selected:width]))))))
            yield list(zip(*(made[p] if isinstance(p, str) else columns[p] for p in places)))


def part_cut(i: int, n: int) -> float:
    """Where the i-th of n cuts of a table into parts lies, as a fraction of its rows (msprof.summary writes a
    large table in parts): parts shrink linearly (n, n-1, …, 1 shares), so the last ones, which two
    processes take in turn, even out their end."""
    shares = n * (n + 1) // 2
    return sum(n - k for k in range(i)) / shares


def part_share(k: int, n: int) -> float:
    return part_cut(k + 1, n) - part_cut(k, n)


def batches(cursor, size: int = 1024) -> Iterator[list]:
    """Rows of a cursor in lists of ``size``: fewer Python↔SQLite round trips than row by row, and small
    enough that one batch's objects are freed and reused by the next."""
    while True:
        rows = cursor.fetchmany(size)
        if not rows:
            return
        yield rows


def signed_zeros(texts: List[str], values, text: Callable[[object], str] = str) -> List[str]:
    """Texts a renderer took from a memo of value → ``text(value)``, with each zero written as it is:
    -0.0 == 0.0, so the memo gives both the text of whichever came first."""
    if "0.0" in texts or "-0.0" in texts:
        # (a float zero's text by its sign, made once: runs on several streams have a zero wait in most rows)
        signs = {1.0: text(0.0), -1.0: text(-0.0)}
        return [(signs[math.copysign(1.0, v)] if type(v) is float and v == 0 else text(v))
                if t in ("0.0", "-0.0") else t for t, v in zip(texts, values)]
    return texts


def snake_case(name: str) -> str:
    out, last = [], "_"
    for ch in name.replace("%", " pct ").replace("(", " ").replace(")", " "):
        ch = ch.lower() if ch.isascii() and ch.isalnum() else "_"
        if ch == "_" and last == "_":
            continue
        out.append(ch)
        last = ch
    return "".join(out).strip("_")

