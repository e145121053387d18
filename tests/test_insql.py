"""Tables printed by SQLite (msprof.renderers.insql) against the same tables printed value by value (every
renderer's path): the same bytes for every kind, N/A, edge value, text needing quotes, running column and
tie order; and a few of those bytes as Python itself prints the values (computed here, not by msprof)."""
import io
import sqlite3
from decimal import ROUND_HALF_UP, Decimal

import pytest

from msprof.renderers import insql
from msprof.renderers.csvfile import CSV_FIELDS, CsvRenderer
from msprof.renderers.jsonfile import JSON_FIELDS, JsonRenderer
from msprof.tables import EPOCH_US, INT, ROUND3, SQLITE_ROUND3, TEXT, Column, Running, RowSource, Table, Ties

# values where SQL's printing and Python's disagree unless the guards hand them to Python
FLOATS = [0.0625, 0.0075, 0.3125, 2.5, 0.0, -0.0, -1.2345, 1e6 + 0.5, 123456.7895, 1e15 + 0.25, 1e16, 3.7e17,
          5e-7, 0.0005, 0.0015, 12.4995, 1 / 3, 2 / 3, 19.999999, 1e-300, 4503599627370497.0, -2.0005,
          # where a double no longer holds every 3-decimal text (Python's shortest text is shorter)
          9213822499954.72, 999999999999.9995, 123456789012345.6, -54321987654321.123]
INTS = [0, 7, -3, 2 ** 62]
TEXTS = ["plain", "a,b", 'say "hi"', "two\nlines", "cr\rhere", "%d%s%%", "ünïcode", ""]
# texts JSON prints as they are, quoted (no quote, backslash or control character to escape)
JSON_TEXTS = ["plain", "a,b", "%d%s%%", "ünïcode", "", "back`tick", "tab-less", "sp ace"]
FORMATS = {"csv": (CsvRenderer, CSV_FIELDS, TEXTS), "json": (JsonRenderer, JSON_FIELDS, JSON_TEXTS)}


def database(texts=TEXTS):
    conn = sqlite3.connect(":memory:")
    conn.create_function("py_round", 2, round)
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, k INTEGER, x REAL, y, n INTEGER, e INTEGER, s TEXT,"
                 " w INTEGER)")
    rows = []
    seq = 0
    for i, x in enumerate(FLOATS + [None]):
        for j, y in enumerate([x, None, 0, 7] if x is not None else [None]):
            seq += 1
            n = INTS[(i + j) % len(INTS)] if (i + j) % 5 else None
            e = [1700000000000012800, 0, -1500, 999, None][(i + j) % 5]
            s = (texts + [None])[(i * 3 + j) % (len(texts) + 1)]
            rows.append((seq, seq // 3, x, y, n, e, s, (seq * 7) % 5))
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return conn


class _Gap(Running):
    """A running column like op_summary's wait: 0 for the first row, then the gap to the row before."""

    columns = ("gap",)
    inputs = ("k", "w")

    def __init__(self):
        self.previous = None

    def start(self):
        self.previous = None

    def fill(self, batch):
        out = []
        for k, w in batch:
            out.append((0 if self.previous is None else (k - self.previous) * 0.001 + w / 3,))
            self.previous = k
        return out


class _Reversed(Ties):
    inputs = ("seq",)                # grows in the SQL's order within a group

    def ranks(self, rows):
        return [-seq for (seq,) in rows]


def tables(conn, where="", running=True, ties=True):
    texts = "SELECT s FROM t"
    source = RowSource(conn, "SELECT * FROM t ORDER BY k, seq", {}, order="k")
    columns = [Column("const%", constant="a%d,b"), Column("k", INT, sql="k", nullable=False),
               Column("python x", ROUND3, sql="x"), Column("sqlite x", SQLITE_ROUND3, sql="x"),
               Column("gap", ROUND3), Column("python y", ROUND3, sql="y", null_when="y IS NULL"),
               Column("sqlite y", SQLITE_ROUND3, sql="y", null_when="y IS NULL"),
               Column("n", INT, sql="n"), Column("epoch", EPOCH_US, sql="e", null_when="e IS NULL"),
               Column("text", TEXT, sql="s", domain=texts), Column("na", constant=None)]
    first = Table("first", "first", columns, source=source, where=where, running=_Gap() if running else None,
                  ties=_Reversed() if ties else None)
    if not running:
        first.columns = [c for c in columns if c.name != "gap"]
    second = Table("second", "second", [Column("seq", INT, sql="seq", nullable=False),
                                        Column("x", SQLITE_ROUND3, sql="x"),
                                        Column("text", TEXT, sql="s", domain=texts)], source=source)
    return [first, second]


def render(made, sql: bool, fmt: str = "csv"):
    renderer_class, fields, _texts = FORMATS[fmt]
    outs = [io.StringIO() for _ in made]
    renderer = renderer_class()
    if sql:
        assert insql.plan(made, fields) is not None
        renderer.write_many(made, outs)
    else:
        for table, out in zip(made, outs):
            renderer.write(table, out)
    return [out.getvalue() for out in outs]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("where,running,ties", [("", True, True), ("n IS NOT NULL", True, True),
                                               ("", False, False), ("x > 0", False, True)])
def test_printed_by_sqlite_as_value_by_value(where, running, ties, fmt):
    conn = database(FORMATS[fmt][2])
    by_sql = render(tables(conn, where, running, ties), sql=True, fmt=fmt)
    by_values = render(tables(conn, where, running, ties), sql=False, fmt=fmt)
    assert by_sql[0].splitlines() == by_values[0].splitlines()
    assert by_sql == by_values
    assert len(by_sql[0].splitlines()) > 50


def test_json_printed_by_sqlite_parses_to_the_values():
    """The JSON SQL prints is JSON, and holds the values Python computes for them (not only the same bytes
    as the value path)."""
    import json

    conn = database(JSON_TEXTS)
    [first, second] = [json.loads(text) for text in render(tables(conn), sql=True, fmt="json")]
    rows = conn.execute("SELECT seq, round(x, 3), s FROM t ORDER BY k, seq").fetchall()   # x: SQLITE_ROUND3
    assert [r["seq"] for r in second] == [seq for seq, _x, _s in rows]
    assert [r["text"] for r in second] == ["N/A" if s is None else s for _seq, _x, s in rows]
    assert [r["x"] for r in second] == ["N/A" if x is None else x for _seq, x, _s in rows]
    assert all(isinstance(r["epoch"], str) for r in first) and first[0]["const%"] == "a%d,b"
    assert list(first[0]) == [c.name for c in tables(conn)[0].columns]


def test_json_texts_to_escape_are_printed_by_python():
    """A text column whose domain holds what JSON escapes cannot be printed by SQL: the renderer prints the
    table value by value, the same bytes as ever."""
    conn = database(TEXTS)
    assert insql.plan(tables(conn), JSON_FIELDS) is None
    outs = [io.StringIO(), io.StringIO()]
    JsonRenderer().write_many(tables(conn), outs)
    assert [o.getvalue() for o in outs] == render(tables(conn), sql=False, fmt="json")
    assert '"say \\"hi\\""' in outs[0].getvalue() and '"two\\nlines"' in outs[0].getvalue()


def test_what_python_prints():
    """Some of those fields as Python prints them, worked out here."""
    conn = database()
    [first, _second] = render(tables(conn), sql=True)
    assert first.splitlines()[0] == "const%,k,python x,sqlite x,gap,python y,sqlite y,n,epoch,text,na"
    texts = first
    # Python's round(): half to even on the binary value; SQLite's round(): half up after a nudge of 3e-16
    assert f",{round(0.0625, 3)},0.063," in texts and round(0.0625, 3) == 0.062
    assert f",{round(0.0075, 3)},0.008," in texts and round(0.0075, 3) == 0.007
    assert ",1e+16,1e+16," in texts and ",3.7e+17,3.7e+17," in texts
    assert ",-0.0,0.0," in texts                      # Python keeps -0.0; SQLite's round() gives 0.0 back
    assert '"a,b"' in texts and '"say ""hi"""' in texts and '"two\nlines"' in texts and '"cr\rhere"' in texts
    assert ",%d%s%%," in texts and '"a%d,b"' in texts    # printf's specials printed as they are
    assert ",1700000000000012.800," in texts and ",-1.500," in texts and ",0.000," in texts
    sqlite = float(Decimal(repr(12.4995)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))
    assert f",{round(12.4995, 3)},{sqlite}," in texts and sqlite == 12.5


def test_a_text_column_without_domain_or_sql_is_printed_value_by_value():
    conn = database()
    made = tables(conn)
    made[1].columns[2] = Column("text", TEXT, sql="s")          # no domain: SQL would have to check each
    assert insql.plan(made, CSV_FIELDS) is None
    made = tables(conn)
    made[0].columns[1] = Column("k", INT)                          # no SQL at all
    assert insql.plan(made, CSV_FIELDS) is None


def test_a_source_table_read_twice_gives_the_same_rows():
    """Each pass over a source table's rows runs its query anew and starts its running columns over (the
    first row's gap is 0 again)."""
    conn = database()
    [first, _second] = tables(conn)
    once = [row for batch in first.batches for row in batch]
    again = [row for batch in first.batches for row in batch]
    gap = [c.name for c in first.columns if c.varies].index("gap")
    assert once == again and once[0][gap] == 0 and len(once) > 50


def test_a_one_column_table_writes_its_empty_fields_quoted():
    """A row whose only field is empty is written "" (an empty line would be no row), by write_many too."""
    conn = database()
    source = RowSource(conn, "SELECT * FROM t ORDER BY k, seq", {}, order="k")
    texts = [Column("text", TEXT, sql="s", domain="SELECT s FROM t")]
    many = [io.StringIO()]
    CsvRenderer().write_many([Table("one", "one", texts, source=source)], many)
    single = io.StringIO()
    CsvRenderer().write(Table("one", "one", texts, source=source), single)
    empty = sum(1 for (s,) in conn.execute("SELECT s FROM t") if s == "")
    assert many[0].getvalue() == single.getvalue()
    assert many[0].getvalue().splitlines().count('""') == empty and empty > 5
