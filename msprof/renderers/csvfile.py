"""CSV: what Python's csv.writer writes (minimal quoting, "\\n" line ends), except that a field holding "\\r"
is quoted too (RFC 4180). Built column by column with C-level map/join instead of csv.writer's per-field
work: half the cost on a million-row table, where formatting floats was the largest part.

Summary files; show and query's one table (``listing``); compare's one table (``comparisons``).

A text that a spreadsheet would take for a formula (it begins with "=", "+", "-", "@", a tab or a carriage
return, and is more than a number: "=HYPERLINK(…)", "-cmd|…") is written with a single quote before it, as
OWASP advises against CSV injection: names come from the data. Numbers, and texts of digits and number
punctuation only ("-1.5", "-1,3,224,224", a lone "-"), are written as they are."""
import itertools
from dataclasses import replace
from typing import List, Optional, Sequence, TextIO, Tuple

from msprof.console import notice
from msprof.renderers import insql
from msprof.renderers.base import Renderer, Sink, register
from msprof.renderers.documents import Comparison, Listing, Section, View
from msprof.tables import EPOCH_US, NA, TEXT, Column, Table, _Plain, chunks, signed_zeros


class _CsvFields(insql.TextFormat):
    """csv fields for SQL to print (msprof.renderers.insql): texts quoted only where they must be."""

    separator = ","

    def constant(self, column: Column) -> str:
        return column_texts(column, [column.constant])[0]

    def na(self) -> str:
        return NA

    def care_sql(self, expr: str) -> str:
        return f"{_quote_sql(expr)} OR {_formula_sql(expr)}"

    def text_sql(self, expr: str) -> str:
        quoted = f"replace({expr}, '\"', '\"\"') || '\"'"
        return (f"CASE WHEN {_formula_sql(expr)} THEN (CASE WHEN {_quote_sql(expr)} THEN '\"''' || {quoted} "
                f"ELSE '''' || {expr} END) WHEN {_quote_sql(expr)} THEN '\"' || {quoted} ELSE {expr} END")

    def texts(self, column: Column, values: Sequence) -> List[str]:
        return column_texts(column, list(values))


CSV_FIELDS = _CsvFields()


@register
class CsvRenderer(Renderer):
    name = "csv"
    extension = ".csv"

    def sink(self, table: Table, out: TextIO, part: Optional[int] = None) -> Sink:
        return _CsvSink(table, out, header=not part)       # the header line in the first part only

    def write_many(self, tables: List[Table], outs: List[TextIO], part: Optional[int] = None) -> None:
        """Tables with SQL sources are printed by SQLite (msprof.renderers.insql), the rest value by value."""
        # (a one-column table is not: its lone empty field must be written "", which SQL's lines do not know)
        made = insql.plan(tables, CSV_FIELDS) if all(len(t.columns) > 1 for t in tables) else None
        if made is None:
            super().write_many(tables, outs, part)
            return
        for table, out in zip(tables, outs):
            if not part:
                out.write(_header(table.columns))
        for step in itertools.zip_longest(*made.streams()):
            for out, text in zip(outs, step):
                if text:
                    out.write(text)

    def listing(self, listing: Listing, out: TextIO) -> None:
        """One table as one csv stream: the one --table names, or the first (said on stderr when there were
        more). With several result dirs a ``result_dir`` column comes first; a header is repeated, after an
        empty line, only where the columns change."""
        state = _ListingState(listing.view, listing.several)
        for section in listing.sections:
            state.section(self, section, out)

    def heading(self, title: str) -> str:
        return f"# == {title} ==\n"

    def comparison(self, comparison: Comparison, out: TextIO) -> None:
        self.comparisons([("", comparison)], out)

    def comparisons(self, comparisons: List[Tuple[str, Comparison]], out: TextIO) -> None:
        """One table of the comparison (the first section asked for: models by default), every row, as the
        document's fields; of several pairs (the devices of two PROF_ directories), each pair's rows under
        one header, after a ``comparison`` column that names the pair."""
        first = comparisons[0][1].scripts
        if not first:
            return
        key = first[0].key
        if len(first) > 1:
            notice(f"csv holds one table: {key} printed; --table {{{', '.join(t.key for t in first[1:])}}} for "
                   "another")
        for n, (title, comparison) in enumerate(comparisons):
            table = next(t for t in comparison.scripts if t.key == key)
            if key in comparison.cut:
                shown, total = comparison.cut[key]
                notice(f"{key}: the {shown} largest changes of {total} in the csv (--top 0: all)")
            if len(comparisons) > 1:
                table = replace(table, columns=[Column("comparison", TEXT, constant=title)] + table.columns)
            self.write(table, out, part=n or None)


class _ListingState:
    """What the csv of a listing keeps from one section to the next."""

    def __init__(self, view: View, several: bool):
        self.view, self.several = view, several
        self.header = None
        self.key = None            # the table printed: the first result dir's first, for every result dir
        self.told = False          # the notice of the tables left out, once for all result dirs

    def section(self, renderer: CsvRenderer, section: Section, out: TextIO) -> None:
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
        rows, _ = self.view.pick(table, renderer.default_top)
        columns = [Column(c.name, c.kind) for c in table.columns]
        total = table.total
        if self.several:
            columns.insert(0, Column("result_dir", TEXT, constant=section.label))
            total = None if total is None else (section.label,) + tuple(total)
        header = [c.name for c in columns]
        if self.header is not None and header != self.header:
            out.write("\n")
        # A table under the same header continues the one before: a later part of one csv. It is written as it
        # goes, so that memory does not grow with the rows.
        renderer.write(replace(table, columns=columns, batches=chunks(rows, 1024), total=total), out,
                       part=1 if header == self.header else None)
        self.header = header


class _CsvSink(Sink):
    def __init__(self, table: Table, out: TextIO, header: bool):
        self.table, self.out = table, out
        columns = table.columns
        self.single = len(columns) == 1
        self.end = table.line_end
        if header:
            out.write(_header(columns, self.end))
        self.constants = {i: column_texts(c, [c.constant])[0] for i, c in enumerate(columns) if not c.varies}

    def rows(self, batch: list) -> None:
        if batch:
            constants = self.constants
            values = iter(zip(*batch))
            texts = [[constants[i]] * len(batch) if i in constants else column_texts(column, next(values))
                     for i, column in enumerate(self.table.columns)]
            self.out.write(_lines(zip(*texts), self.single, self.end))

    def close(self) -> None:
        total = self.table.total
        if total is not None:
            self.out.write(_lines([[column_texts(c, [v])[0] for c, v in zip(self.table.columns, total)]],
                                  self.single, self.end))


def _header(columns: List[Column], end: str = "\n") -> str:
    return _lines([_texts([c.name for c in columns])], len(columns) == 1, end)


def _lines(rows, single: bool, end: str = "\n") -> str:
    lines = list(map(",".join, rows))
    if single:                    # a lone empty field is written "" (an empty line would be no row)
        lines = ['""' if line == "" else line for line in lines]
    return end.join(lines) + end


def column_texts(column: Column, values) -> List[str]:
    """Field texts of one column's values (already quoted where needed)."""
    kind = column.kind
    if isinstance(kind, _Plain):
        return _texts(values)
    if kind is EPOCH_US and None not in values and min(values, default=0) >= 0:   # (divmod floors negatives)
        return list(map("%d.%03d".__mod__, map(divmod, values, itertools.repeat(1000))))
    if set(map(type, values)) <= {float, type(None)}:
        texts = signed_zeros(list(map(_memo(kind).__getitem__, values)), values, kind.text)
    else:   # 0, 0.0 and False are one dict key, with three texts (a first wait is the int 0, later ones 0.0)
        texts = list(map(kind.text, values))
    return list(map(_quoted, texts)) if _needs_quotes("".join(texts)) else texts


class _KindTexts(dict):
    """Memo of float → text for one kind: report columns repeat values heavily (durations, ratios)."""

    LIMIT = 1 << 16

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def __missing__(self, value):
        text = self.kind.text(value)
        if len(self) >= self.LIMIT:
            self.clear()
        if value is not None:
            self[value] = text
        return text


_MEMOS = {}


def _memo(kind) -> _KindTexts:
    memo = _MEMOS.get(kind.name)
    if memo is None:
        memo = _MEMOS[kind.name] = _KindTexts(kind)
    return memo


class _FloatTexts(dict):
    """Memo of float → str(float) (strings map to themselves). A ratio has at most 10,001 values at 4
    decimals, and repr of a float costs ~20× a dict lookup."""

    LIMIT = 1 << 16

    def __missing__(self, value):
        text = str(value)
        if len(self) >= self.LIMIT:
            self.clear()
        self[value] = text
        return text


_FLOAT_TEXTS = _FloatTexts()
_SPECIAL = ',"\r\n'
# what a spreadsheet begins a formula with; what a field may hold and still be no more than a number
_FORMULA_START = "=+-@\t\r"
_NUMBER_LIKE = "0123456789+-.,;:eE "


def _quote_sql(expr: str) -> str:
    return f"(instr({expr}, ',') OR instr({expr}, '\"') OR instr({expr}, char(10)) OR instr({expr}, char(13)))"


def _formula_sql(expr: str) -> str:
    return (f"(substr({expr}, 1, 1) IN ('=', '+', '-', '@', char(9), char(13)) "
            f"AND rtrim({expr}, '{_NUMBER_LIKE}') != '')")


def defused(text: str) -> str:
    """A text a spreadsheet would take for a formula, with a single quote before it (the module's doc)."""
    return "'" + text if text and text[0] in _FORMULA_START and text.strip(_NUMBER_LIKE) else text


def _texts(column) -> List[str]:
    """Field texts of a column of plain values. Ints and strings are str() as they are (a string is returned
    as is, so text columns never fill the memo); a memo may hold only one numeric type (1 == 1.0 as dict
    keys), so it serves only columns of floats and strings; anything else (bools, mixed numbers) goes value
    by value. None is N/A."""
    types = set(map(type, column))
    if type(None) in types:
        if len(types) == 1:
            return [NA] * len(column)
        column = [NA if v is None else v for v in column]
        types.discard(type(None))
        types.add(str)
    if types <= {int, str}:
        texts = list(map(str, column))
    elif types <= {float, str}:
        texts = signed_zeros(list(map(_FLOAT_TEXTS.__getitem__, column)), column)
    else:
        return [_quoted(defused(str(value))) for value in column]
    if str in types:                          # (numbers never need quotes, nor look like formulas)
        joined = "\0".join(texts)
        if joined[:1] in _FORMULA_START or any("\0" + start in joined for start in _FORMULA_START):
            texts = list(map(defused, texts))
            joined = "\0".join(texts)
        if _needs_quotes(joined):
            texts = list(map(_quoted, texts))
    return texts


def _needs_quotes(text: str) -> bool:
    return any(c in text for c in _SPECIAL)      # four memchr-speed scans


def _quoted(text: str) -> str:
    if _needs_quotes(text):
        return '"' + text.replace('"', '""') + '"'
    return text
