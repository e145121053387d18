"""Tables printed by SQLite: a renderer's text of each row made by the query that computes the row.

Taking a row's values out of SQLite costs a Python object per value, and printing them one more each: most
of the time of a million-row op_summary. For a table whose columns are SQL over a ``RowSource``
(msprof.tables), a renderer that can describe its fields in SQL (a ``TextFormat``: csv, json) has SQLite print
them with ``printf()`` as each column's kind says (``Kind.printf``), so that Python receives one text per
run of columns. Python still prints what SQL cannot: the columns a ``Running`` computes (the wait since the
row before), and a value outside its kind's ``guard`` (a near tie of Python's rounding, a number beyond
printf's exact digits), which a Python function the query calls prints as the kind's ``text`` does.
Tables of one source (op_summary and task_time) are printed by one query, a batch of each in turn.

``plan`` returns None when a table cannot be printed this way (a column without SQL, a kind printf cannot
print, a text column without a ``domain``): its renderer then prints its values.
"""
import collections
import itertools
from typing import Deque, Iterator, List, Optional, Sequence

from msprof.tables import Column, Printf, Table, tie_order

BATCH = 1024
# Each plan's Python printer is a function of its own name: SQLite refuses to redefine a function while a
# statement of the connection is running, but not to define a new one.
_NAMES = itertools.count()


class TextFormat:
    """What a renderer's fields and records look like, for SQL to print them."""

    separator = ","

    def constant(self, column: Column) -> str:
        """The field of a constant column."""
        raise NotImplementedError

    def na(self) -> str:
        """The text of a value that is N/A (NULL)."""
        raise NotImplementedError

    def field(self, column: Column, conversion: str) -> str:
        """The printf() format of a column's field, around its value's conversion (a field may carry more
        than the value: a key, quotes)."""
        return conversion

    def na_field(self, column: Column) -> str:
        """The field of a column's value that is N/A."""
        return self.na()

    def care_sql(self, expr: str) -> str:
        """SQL: whether a text cannot be a field as it is (it holds a separator, a quote)."""
        raise NotImplementedError

    def quote_sql(self, expr: str) -> str:
        """SQL making the value of a text that needs no care."""
        return expr

    def text_sql(self, expr: str) -> Optional[str]:
        """SQL making the value of a text that may need care; None when SQL cannot."""
        raise NotImplementedError

    def texts(self, column: Column, values: Sequence) -> List[str]:
        """The fields of values of a column, printed by Python."""
        raise NotImplementedError

    def records(self, lines: List[str]) -> str:
        """Records of a batch from their fields' lines."""
        return "\n".join(lines) + "\n"


class _Nested:
    """Consecutive numeric columns printed by one nested printf: N/A together (``null``, an SQL condition,
    or None) and printed by Python instead where a value leaves its kind's guard."""

    def __init__(self, null: Optional[str]):
        self.null = null
        self.columns: List[Column] = []
        self.printfs: List[Printf] = []


class _TablePlan:
    def __init__(self, table: Table):
        self.table = table
        self.pieces: List[object] = []    # per field run: its result position (int), or a running column name
        self.flag: Optional[int] = None    # result position of the table's where (tables sharing a query)
        self.inputs: List[int] = []        # result positions of the running inputs
        self.tie_inputs: List[int] = []    # result positions of the ties' inputs


class Plan:
    """The one query printing the rows of tables that share one source (see the module docstring)."""

    def __init__(self, tables: List[Table], fmt: TextFormat):
        self.tables, self.fmt = tables, fmt
        self.source = tables[0].source
        self.nested: List[List[Column]] = []      # the columns of each nested printf Python may stand in for
        self.plans = [_TablePlan(t) for t in tables]
        self.select: List[str] = []        # what the one query selects from the source's rows
        self.where = ""
        self.function = f"msprof_texts_{next(_NAMES)}"
        self.tied: Optional[int] = None     # result position of the source's order key

    # --- building --------------------------------------------------------------------------------------
    def build(self) -> bool:
        select: List[str] = []
        # (one query for several tables, or of a source read whole, reads every source row; each table keeps
        # its own)
        shared = len(self.tables) > 1 or self.source.whole
        for plan in self.plans:
            table = plan.table
            if table.total is not None or table.source is not self.source:
                return False
            if shared and table.where:
                plan.flag = len(select)
                select.append(f"CASE WHEN {table.where} THEN 1 ELSE 0 END")
            filled = set(table.running.columns) if table.running else set()
            run: List[Column] = []
            for column in table.columns + [None]:
                if column is None or column.name in filled:
                    if run:
                        sql = self._fields_sql(run)
                        if sql is None:
                            return False
                        plan.pieces.append(len(select))
                        select.append(sql)
                        run = []
                    if column is not None:
                        plan.pieces.append(column.name)
                else:
                    run.append(column)
            if table.running:
                plan.inputs = list(range(len(select), len(select) + len(table.running.inputs)))
                select += list(table.running.inputs)
        if any(t.ties for t in self.tables):
            self.tied = len(select)
            select.append(self.source.order)
            for plan in self.plans:
                if plan.table.ties:
                    plan.tie_inputs = list(range(len(select), len(select) + len(plan.table.ties.inputs)))
                    select += list(plan.table.ties.inputs)
        self.select = select
        self.where = self.tables[0].where if not shared else ""
        return True

    def _fields_sql(self, columns: List[Column]) -> Optional[str]:
        """printf() of the fields of these columns, joined by the separator; None when one cannot be.

        Fields that may be N/A together, print an integer as it is, or leave SQL's printing (a guard) are
        each a nested group: a CASE of its own. Most rows need none of that: for them one flat printf of
        every field, the groups' conversions in place (each nested printf costs a call and a copy)."""
        parts = self._field_parts(columns)
        return None if parts is None else self._printf_of(parts)

    def _field_parts(self, columns: List[Column]) -> Optional[List[tuple]]:
        """(conversion, its arguments) of each field, or (None, a nested group); None when a column cannot be
        printed by SQLite."""
        parts: List[tuple] = []
        nested: Optional[_Nested] = None
        for column in columns:
            if not column.varies:
                parts.append((_escape(self.fmt.constant(column)), []))
                nested = None
                continue
            if column.sql is None:
                return None
            if column.kind.words:
                text = self._text_sql(column)
                if text is None:
                    return None
                parts.append((self.fmt.field(column, "%s"), [text]))
                nested = None
                continue
            printf = column.kind.printf(column.sql)
            if printf is None:
                return None
            if printf.guard is None and printf.conversion in ("%d", "%s"):      # integers print N/A as text
                na = _sql_text(self.fmt.na())
                if column.null_when is not None:
                    parts.append((self.fmt.field(column, "%s"),
                                  [f"CASE WHEN {column.null_when} THEN {na} ELSE ({column.sql}) END"]))
                elif column.nullable:
                    parts.append((self.fmt.field(column, "%s"), [f"coalesce(({column.sql}), {na})"]))
                else:
                    parts.append((self.fmt.field(column, printf.conversion), printf.args))
                nested = None
                continue
            null = column.null_when if column.null_when is not None else (
                f"{column.sql} IS NULL" if column.nullable else None)
            # a kind whose integers print as they are is alone in its group (its CASE picks the conversion)
            if (nested is None or nested.null != null or printf.integers or nested.printfs[-1].integers
                    or (null is not None and column.null_when is None)):
                nested = _Nested(null)
                parts.append((None, nested))
            nested.columns.append(column)
            nested.printfs.append(printf)
        return parts

    def _printf_of(self, parts: List[tuple]) -> str:
        """One printf of the fields, and where a row needs the groups, a CASE: the flat printf for the rows
        that need none of them, else the nested one."""
        sep = _escape(self.fmt.separator)

        def printf_sql(conversions: List[str], args: List[str]) -> str:
            return f"printf({_sql_text(sep.join(conversions))}" + "".join(f", {a}" for a in args) + ")"

        nested_conversions, nested_args, flat_conversions, flat_args, fast = [], [], [], [], []
        for conversion, arg in parts:
            if conversion is not None:
                nested_conversions.append(conversion)
                flat_conversions.append(conversion)
                nested_args += arg
                flat_args += arg
                continue
            nested_conversions.append("%s")
            nested_args.append(self._nested_sql(arg))
            flat_conversions.append(sep.join(self.fmt.field(c, p.conversion) for c, p in zip(arg.columns, arg.printfs)))
            flat_args += [a for p in arg.printfs for a in p.args]
            if arg.null is not None:
                fast.append(f"NOT ({arg.null})")
            fast += [f"typeof(({c.sql})) != 'integer'" for c, p in zip(arg.columns, arg.printfs) if p.integers]
            fast += [f"({p.guard})" for p in arg.printfs if p.guard]
        nested = printf_sql(nested_conversions, nested_args)
        if len(flat_conversions) == len(nested_conversions) and flat_args == nested_args:
            return nested                                        # no group: the two are one
        flat = printf_sql(flat_conversions, flat_args)
        return f"CASE WHEN {' AND '.join(fast)} THEN {flat} ELSE {nested} END" if fast else flat

    def _nested_sql(self, nested: _Nested) -> str:
        """CASE: N/A where null; an integer as it is (a kind that says so, alone in its group); the printf
        where the guards hold; else Python's text (``msprof_texts``)."""
        sep = _escape(self.fmt.separator)
        conversions = [self.fmt.field(c, p.conversion) for c, p in zip(nested.columns, nested.printfs)]
        printed = (f"printf({_sql_text(sep.join(conversions))}, "
                   f"{', '.join(a for p in nested.printfs for a in p.args)})")
        cases = []
        if nested.null is not None:
            na = self.fmt.separator.join(self.fmt.na_field(c) for c in nested.columns)
            cases.append(f"WHEN {nested.null} THEN {_sql_text(na)}")
        if nested.printfs[0].integers:
            first = nested.columns[0]
            around = self.fmt.field(first, "%s")
            value = f"({first.sql})" if around == "%s" else f"printf({_sql_text(around)}, ({first.sql}))"
            cases.append(f"WHEN typeof(({first.sql})) = 'integer' THEN {value}")
        guards = [p.guard for p in nested.printfs if p.guard]
        if guards:
            number = len(self.nested)
            self.nested.append(nested.columns)
            values = ", ".join(c.kind.value_sql(c.sql) for c in nested.columns)
            cases.append(f"WHEN {' AND '.join(f'({g})' for g in guards)} THEN {printed}")
            printed = f"{self.function}({number}, {values})"
        return f"CASE {' '.join(cases)} ELSE {printed} END" if cases else printed

    def _text_sql(self, column: Column) -> Optional[str]:
        """A text column's value: as it is (quoted as the format quotes every text) when no text of its
        domain needs care, else through the format's SQL; None without a domain, or when the format's SQL
        cannot print one."""
        if column.domain is None:
            return None
        careful = self.source.conn.execute(
            f"WITH d(v) AS ({column.domain}) SELECT 1 FROM d WHERE {self.fmt.care_sql('v')} LIMIT 1",
            self.source.params).fetchone() is not None
        expr = self.fmt.text_sql(column.sql) if careful else self.fmt.quote_sql(column.sql)
        if expr is None:
            return None
        return f"coalesce({expr}, {_sql_text(self.fmt.na())})" if column.nullable else expr

    # --- printing --------------------------------------------------------------------------------------
    def _python_texts(self, number: int, *values) -> str:
        """The fields of a nested printf's values where a guard failed, printed by Python."""
        return self.fmt.separator.join(self.fmt.texts(c, [v])[0] for c, v in zip(self.nested[number], values))

    def streams(self) -> List[Iterator[str]]:
        """One iterator per table of its records' text (each record ending with a newline), a batch of rows
        at a time; read them in turn, one chunk of each (then none holds more than a batch)."""
        self.source.conn.create_function(self.function, -1, self._python_texts, deterministic=True)
        for table in self.tables:
            if table.running:
                table.running.start()
        batched = self.source.columns(self.select, self.where, self.tied, BATCH)
        queues: List[Deque[str]] = [collections.deque() for _ in self.plans]

        def step() -> bool:
            columns = next(batched, None)
            if columns is None:       # done: the connection lets go of this plan (and what its tables hold)
                self.source.conn.create_function(self.function, -1, None)
                return False
            for plan, queue in zip(self.plans, queues):
                queue.append(self._records(plan, columns))
            return True

        def stream(queue: Deque[str]) -> Iterator[str]:
            while queue or step():
                yield queue.popleft()

        return [stream(queue) for queue in queues]

    def _records(self, plan: _TablePlan, columns: List[tuple]) -> str:
        keep = None if plan.flag is None else columns[plan.flag]
        table = plan.table
        order = None
        if table.ties:
            kept = [columns[self.tied]] + [columns[i] for i in plan.tie_inputs]
            if keep is not None:
                kept = [list(itertools.compress(values, keep)) for values in kept]
            order = tie_order(kept[0], list(zip(*kept[1:])), table.ties)

        def rows_of(values: tuple) -> Sequence:
            values = values if keep is None else list(itertools.compress(values, keep))
            return values if order is None else [values[i] for i in order]

        running = {}
        if table.running:
            inputs = list(zip(*(rows_of(columns[i]) for i in plan.inputs)))
            filled = table.running.fill(inputs)
            by_name = {c.name: c for c in table.columns}
            for name, values in zip(table.running.columns, zip(*filled) if filled else
                                    [()] * len(table.running.columns)):
                running[name] = self.fmt.texts(by_name[name], list(values))
        fields = [rows_of(columns[piece]) if isinstance(piece, int) else running[piece] for piece in plan.pieces]
        if not fields[0]:
            return ""
        lines = list(map(self.fmt.separator.join, zip(*fields))) if len(fields) > 1 else list(fields[0])
        return self.fmt.records(lines)


def plan(tables: List[Table], fmt: TextFormat) -> Optional[Plan]:
    """The query printing these tables (of one source), or None when one of them cannot be printed in SQL."""
    if not tables or any(t.source is None for t in tables):
        return None
    made = Plan(tables, fmt)
    return made if made.build() else None


def _escape(text: str) -> str:
    """A text as a printf() format prints it."""
    return text.replace("%", "%%")


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
