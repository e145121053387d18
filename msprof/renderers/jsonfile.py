"""JSON files: an array of objects keyed by the column names (outputs.md §3), written with the layout
``json.dumps(rows, indent=1)`` gives; numbers stay numbers, N/A stays the text "N/A" as in the csv files.
Tables of a SQL source are printed by SQLite, each row's object one text (msprof.renderers.insql: 250k
tasks' op_summary and task_time 4.7 -> 2.6 s); other tables' texts are made column by column, as the csv
renderer makes them (a json.dumps call per value made a 250k-task op_summary take 12 s).

show and query print one document keyed by result dir (docs/user-guide.md "Output for scripts" pins its
shape: table keys and column keys in snake_case, numbers as numbers, null for N/A, the total row in its own
field), written as it goes; compare and advise print theirs whole (``json.dumps``, indent 1)."""
import itertools
import json
from pathlib import Path
from typing import BinaryIO, List, Optional, Sequence, TextIO, Tuple

from msprof.renderers import insql
from msprof.renderers.base import Renderer, Sink, register
from msprof.renderers.documents import Comparison, Findings, Listing, Section, View
from msprof.tables import EPOCH_US, NA, Column, Kind, Table, _PythonRound, signed_zeros


def _key(column: Column) -> str:
    """What precedes a column's value in its row's object."""
    return f"  {json.dumps(column.name, ensure_ascii=False)}: "


class _JsonFields(insql.TextFormat):
    """JSON fields for SQL to print (msprof.renderers.insql): each field its key and value, a record one
    object, as _JsonSink writes them. A text is quoted as it is, or printed by Python where it holds what
    JSON escapes (a quote, a backslash, a control character: rare in names)."""

    separator = ",\n"

    def constant(self, column: Column) -> str:
        return _key(column) + encode(column.kind, column.constant)

    def na(self) -> str:
        return _NA

    def na_field(self, column: Column) -> str:
        return _key(column) + _NA

    def field(self, column: Column, conversion: str) -> str:
        if column.kind is EPOCH_US:                # digits, a point and maybe a minus, quoted
            conversion = f'"{conversion}"'
        return _key(column).replace("%", "%%") + conversion

    def care_sql(self, expr: str) -> str:
        controls = "'*[' || char(1) || '-' || char(31) || ']*'"
        return f"instr({expr}, '\"') OR instr({expr}, '\\') OR {expr} GLOB {controls}"

    def quote_sql(self, expr: str) -> str:
        return f"('\"' || {expr} || '\"')"

    def text_sql(self, expr: str) -> Optional[str]:
        return None

    def texts(self, column: Column, values: Sequence) -> List[str]:
        return list(map(_key(column).__add__, column_json(column, list(values))))

    def records(self, lines: List[str]) -> str:
        return ",\n".join(map(" {{\n{}\n }}".format, lines))


JSON_FIELDS = _JsonFields()


@register
class JsonRenderer(Renderer):
    name = "json"
    extension = ".json"

    def sink(self, table: Table, out: TextIO, part: Optional[int] = None) -> Sink:
        return _JsonSink(table, out, bare=part is not None)

    def write_many(self, tables: List[Table], outs: List[TextIO], part: Optional[int] = None) -> None:
        """Tables with SQL sources are printed by SQLite (msprof.renderers.insql), the rest value by value."""
        made = insql.plan(tables, JSON_FIELDS)
        if made is None:
            super().write_many(tables, outs, part)
            return
        sinks = [_JsonSink(table, out, bare=part is not None) for table, out in zip(tables, outs)]
        for step in itertools.zip_longest(*made.streams()):
            for sink, text in zip(sinks, step):
                if text:
                    sink.objects(text)
        for sink in sinks:
            sink.close()

    def join(self, parts: List[Path], out: BinaryIO) -> None:
        """Parts hold bare objects: the array's brackets go around them, commas between them."""
        written = False
        for path in parts:
            if path.stat().st_size:
                out.write(b",\n" if written else b"[\n")
                super().join([path], out)
                written = True
        out.write(b"\n]\n" if written else b"[]\n")

    def listing(self, listing: Listing, out: TextIO) -> None:
        """One document, written as it goes: a million rows never sit in memory."""
        first = True
        for section in listing.sections:
            out.write("{\n" if first else ",\n")
            first = False
            self._section(section, listing.view, out)
        out.write("{}\n" if first else "\n}\n")

    def _section(self, section: Section, view: View, out: TextIO) -> None:
        head = {"path": section.path, "layout": section.layout, "data_quality": section.quality}
        out.write(f" {_dumps(section.label)}: {_dumps(head)[:-1]}, " '"tables": {')
        for n, table in enumerate(section.tables):
            rows, count = view.pick(table, self.default_top)
            keys = [c.key for c in table.columns]
            encode = [c.kind.json for c in table.columns]
            head = {"title": table.title, "context": table.context, "columns": keys}
            out.write(("," if n else "") + f"\n  {_dumps(table.key)}: {_dumps(head)[:-1]}, \"rows\": [")
            for i, row in enumerate(rows):
                out.write(("," if i else "") + "\n   " + _dumps(_record(keys, encode, row)))
            # the total row's "-" fill the columns that have no total: left out
            total = None if table.total is None else {k: v for k, v in _record(keys, encode, table.total).items()
                                                      if v != "-"}
            out.write(f"\n  ], \"row_count\": {count[0]}, \"total\": {_dumps(total)}}}")
        out.write("\n }}")

    def comparison(self, comparison: Comparison, out: TextIO) -> None:
        out.write(json.dumps(comparison.document, indent=1, ensure_ascii=False) + "\n")

    def findings(self, findings: Findings, out: TextIO) -> None:
        out.write(json.dumps({"findings": findings.findings}, indent=1, ensure_ascii=False) + "\n")

    def comparisons(self, comparisons: List[Tuple[str, Comparison]], out: TextIO) -> None:
        """One document: a pair's, or {"comparisons": [each pair's]} (each names its sides: base, new)."""
        if len(comparisons) == 1:
            self.comparison(comparisons[0][1], out)
        else:
            documents = [comparison.document for _title, comparison in comparisons]
            out.write(json.dumps({"comparisons": documents}, indent=1, ensure_ascii=False) + "\n")

    def all_findings(self, findings: List[Findings], out: TextIO) -> None:
        """One document: every result dir's findings in one list (each names its "result_dir" when several)."""
        out.write(json.dumps({"findings": [f for each in findings for f in each.findings]}, indent=1,
                             ensure_ascii=False) + "\n")


def _record(keys: List[str], encode, row) -> dict:
    return {k: (None if v is None else e(v)) for k, e, v in zip(keys, encode, row)}


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


class _JsonSink(Sink):
    def __init__(self, table: Table, out: TextIO, bare: bool = False):
        """``bare``: the objects only, comma-separated (a part of a file), no brackets."""
        def field(c) -> str:
            value = "%s" if c.varies else encode(c.kind, c.constant).replace("%", "%%")
            return _key(c).replace("%", "%%") + value

        self.table, self.out = table, out
        self.template = " {\n" + ",\n".join(field(c) for c in table.columns) + "\n }"
        self.varying = [c for c in table.columns if c.varies]
        self.first = True
        self.bare = bare
        self.opening = "" if bare else "[\n"

    def rows(self, batch: list) -> None:
        if not batch:
            return
        values = zip(*batch)
        texts = [column_json(column, next(values)) for column in self.varying]
        objects = list(map(self.template.__mod__, zip(*texts))) if texts else [self.template] * len(batch)
        self.objects(",\n".join(objects))

    def objects(self, text: str) -> None:
        """Objects made already (``text``: one or more, comma-separated), in their place in the array."""
        self.out.write((self.opening if self.first else ",\n") + text)
        self.first = False

    def close(self) -> None:
        columns = self.table.columns
        if self.table.total is not None:
            total = tuple(encode(c.kind, v) for v, c in zip(self.table.total, columns) if c.varies)
            self.objects(self.template % total)
        if not self.bare:
            self.out.write("[]\n" if self.first else "\n]\n")


_NA = json.dumps(NA)


def encode(kind, value) -> str:
    """The JSON text of one value of a column of that kind."""
    if value is None:
        return _NA
    value = kind.json(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


class _Texts(dict):
    """Memo of value → JSON text for values of one type (1, 1.0 and True are one dict key: never mixed)."""

    LIMIT = 1 << 16

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, value):
        text = self.make(value)
        if len(self) >= self.LIMIT:
            self.clear()
        self[value] = text
        return text


_BY_TYPE = {int: int.__repr__, float: json.dumps, str: lambda v: json.dumps(v, ensure_ascii=False)}
_MEMOS = {t: _Texts(make) for t, make in _BY_TYPE.items()}


def column_json(column: Column, values) -> List[str]:
    """JSON texts of one column's values: what ``encode`` gives each, through a memo when the column holds
    one type (its N/A apart)."""
    kind = column.kind
    if kind is EPOCH_US:           # digits, a point and maybe a minus: quoted as they are
        return list(map('"%s"'.__mod__, map(kind.text, values)))
    if isinstance(kind, _PythonRound):
        values = [None if v is None else round(v, kind.digits) for v in values]
    elif type(kind).json is not Kind.json:     # a kind with a JSON form of its own
        return [encode(kind, v) for v in values]
    types = set(map(type, values)) - {type(None)}
    memo = _MEMOS.get(types.pop()) if len(types) == 1 else None
    if memo is None:
        return [encode(kind, v) for v in values]
    if None in values:
        texts = [_NA if v is None else memo[v] for v in values]
    else:
        texts = list(map(memo.__getitem__, values))
    return signed_zeros(texts, values)

