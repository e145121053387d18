"""Renderers: every format (one test over every subclass); the CSV renderer writes the same bytes as Python's
csv.writer (minimal quoting, "\\n" line ends, None as N/A), except that a field holding "\\r" is quoted too;
every field reads back through csv.reader."""
import csv
import io
import random

import pytest

from msprof.renderers import FORMATS, Renderer, csvfile as render, terminal
from msprof.renderers.documents import Comparison, Findings, Listing, Section, View
from msprof.tables import EPOCH_US, INT, NUMBER, ROUND3, TEXT, Column, Table


def writer_csv(columns, rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([["N/A" if v is None else v for v in row] for row in rows])
    return buffer.getvalue()


def table(columns, rows) -> Table:
    return Table("t", "t", [Column(c) for c in columns], [[tuple(r) for r in rows]])


def to_csv(t: Table) -> str:
    return FORMATS["csv"]().render(t)


TEXTS = ["", "N/A", "-", "conv1", "a,b", 'say "hi"', "line\nbreak", "卷积 µs", " padded ", "tab\there"]


def random_value(rnd: random.Random, kind: str):
    if kind == "float":
        return rnd.choice([round(rnd.random() * 1000, 3), round(rnd.random(), 4), 0.0, 1.0, 1e-05, 1e16, -2.5,
                           "N/A"])
    if kind == "int":
        return rnd.choice([0, 1, -7, rnd.randrange(1 << 40), "N/A", "-"])
    if kind == "text":
        return rnd.choice(TEXTS + [rnd.randrange(100)])
    return rnd.choice([None, True, False, 1, 1.0, 2, 2.5, "x,y", float("inf")])      # anything goes


@pytest.mark.parametrize("seed", range(6))
def test_random_tables_match_csv_writer(seed, monkeypatch):
    """Columns of floats, ints, texts (ints among them, like Layer Id) and mixed values; a memo far
    smaller than the number of values, so it is cleared on the way."""
    monkeypatch.setattr(render._FloatTexts, "LIMIT", 50)
    render._FLOAT_TEXTS.clear()
    rnd = random.Random(seed)
    kinds = [rnd.choice(["float", "int", "text", "mixed"]) for _ in range(rnd.randrange(2, 12))]
    columns = [f"col {i}" for i in range(len(kinds))] + ["Time(us)", 'quoted "name", here']
    kinds += ["float", "text"]
    for n_rows in (0, 1, 300):
        rows = [[random_value(rnd, k) for k in kinds] for _ in range(n_rows)]
        assert to_csv(table(columns, rows)) == writer_csv(columns, rows)


def test_ints_and_floats_of_equal_value_keep_their_own_text():
    """1 == 1.0 as dict keys: a column mixing them must not take one's text from the other."""
    rows = [[1.0, 1], [1, 1.0], [0.5, True], [0.5, 1]]
    assert to_csv(table(["a", "b"], rows)) == "a,b\n1.0,1\n1,1.0\n0.5,True\n0.5,1\n"
    render._FLOAT_TEXTS.clear()
    assert to_csv(table(["x"], [[2.0]])) == "x\n2.0\n"
    assert to_csv(table(["x", "y"], [[2, 2.0]])) == "x,y\n2,2.0\n"


def test_single_column_and_empty_fields():
    assert to_csv(table(["only"], [[""], [None], ["v"]])) == writer_csv(["only"], [[""], [None], ["v"]])
    assert to_csv(table(["only"], [[""], [None], ["v"]])) == 'only\n""\nN/A\nv\n'
    assert to_csv(table(["a", "b"], [["", None]])) == 'a,b\n,N/A\n'


def test_carriage_return_is_quoted_and_everything_reads_back():
    rows = [["cr\rinside", 'both\r\n"', 3.25], ["plain", "", 0.1]]
    text = to_csv(table(["name", "other", "Time(us)"], rows))
    assert text == 'name,other,Time(us)\n"cr\rinside","both\r\n""",3.25\nplain,,0.1\n'
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert back == [["name", "other", "Time(us)"], ["cr\rinside", 'both\r\n"', "3.25"], ["plain", "", "0.1"]]


KINDS_TABLE = Table("k", "Kinds", [Column("Name", TEXT), Column("Device", constant="0"), Column("Count", INT),
                                   Column("Time(us)", NUMBER), Column("Wait(us)", ROUND3),
                                   Column("Start(us)", EPOCH_US), Column("Shape", constant=None)],
                    [[("conv,1", 3, 1.5, 0.0625, 1700000000000012800), ("relu", None, None, 2.0004999, 5)]],
                    total=("-", "0", 3, 1.5, 0.12345, None, None))
# what every format must carry for that table: texts as csv prints them (N/A for None, Python's round for
# ROUND3 — 0.0625 → 0.062 half to even —, µs with exactly 3 decimals for EPOCH_US); constant columns are
# not in the row tuples but in every row written
EXPECTED = [["conv,1", "0", "3", "1.5", "0.062", "1700000000000012.800", "N/A"],
            ["relu", "0", "N/A", "N/A", "2.0", "0.005", "N/A"],
            ["-", "0", "3", "1.5", "0.123", "N/A", "N/A"]]
# the terminal's: µs with 3 decimals in every row (0.0625 → 0.062: half to even, as Python formats it)
EXPECTED_TABLE = [["conv,1", "0", "3", "1.500", "0.062", "1700000000000012.800", "N/A"],
                  ["relu", "0", "N/A", "N/A", "2.000", "0.005", "N/A"],
                  ["-", "0", "3", "1.500", "0.123", "N/A", "N/A"]]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_renderer_writes_every_row_and_the_total_last(name):
    renderer = FORMATS[name]()
    assert isinstance(renderer, Renderer) and renderer.extension.startswith(".")
    text = renderer.render(Table(KINDS_TABLE.key, KINDS_TABLE.title, KINDS_TABLE.columns,
                                 [list(b) for b in KINDS_TABLE.batches], KINDS_TABLE.total))
    if name == "csv":
        got = list(csv.reader(io.StringIO(text, newline="")))
        assert got == [[c.name for c in KINDS_TABLE.columns]] + EXPECTED
    elif name == "json":
        import json

        got = json.loads(text)
        assert [list(row) for row in got] == [[c.name for c in KINDS_TABLE.columns]] * 3
        assert [[str(v) for v in row.values()] for row in got] == EXPECTED
        assert isinstance(got[0]["Count"], int) and isinstance(got[0]["Wait(us)"], float)
    else:
        lines = text.splitlines()
        assert lines[0].split() == ["Name", "Device", "Count", "Time(us)", "Wait(us)", "Start(us)", "Shape"]
        body = [line.split() for line in lines[2:]]
        assert body == EXPECTED_TABLE


@pytest.mark.parametrize("constant_at", [[], [0], [2], [0, 3], [1, 2], [0, 1, 2, 3]])
def test_rows_fill_in_constant_columns_wherever_they_are(constant_at):
    """Batches carry the varying columns only; rows() puts each constant back in its place (and turns the
    lists some reports yield into tuples)."""
    columns = [Column(f"c{i}", TEXT, constant=f"K{i}") if i in constant_at else Column(f"c{i}", TEXT)
               for i in range(4)]
    varying = [i for i in range(4) if i not in constant_at]
    batch = [[f"v{r}.{i}" for i in varying] for r in range(3)]
    rows = list(Table("t", "t", columns, [batch, batch[:1]]).rows())
    expected = [tuple(f"K{i}" if i in constant_at else f"v{r}.{i}" for i in range(4)) for r in (0, 1, 2, 0)]
    assert rows == expected


def test_rows_of_a_single_constant_column():
    assert list(Table("t", "t", [Column("only", constant=None)], [[(), ()]]).rows()) == [(None,), (None,)]


FILE_FORMATS = sorted(name for name, cls in FORMATS.items() if cls.sink is not Renderer.sink)
# columns of every kind, and values a memo of value → text could confuse: 0, 0.0 and -0.0 (equal as dict
# keys, three texts), True (== 1), nan (!= itself), N/A
MIXED_COLUMNS = [Column("f", NUMBER), Column("r", ROUND3), Column("i", INT), Column("t", TEXT),
                 Column("e", EPOCH_US), Column("m", NUMBER), Column("k", constant="K")]
MIXED_VALUES = {"f": [0.0, -0.0, 0.0001, -0.0001, 1.5, 0.125, None, 2.0005, 1e16, float("nan")],
                "r": [0.0, -0.0, 0.0001, -0.0001, 0.0625, -0.0625, None, 2.0005],
                "i": [0, 5, None, -3], "t": ['a,"b"', "é", None, "x", "0.0", "-0.0"],
                "e": [1700000000000012800, None, 5, -1500], "m": [0, 0.0, -0.0, 1, 1.0, True, None]}


def mixed_rows(n: int, seed: int = 7) -> list:
    rng = random.Random(seed)
    return [tuple(rng.choice(MIXED_VALUES[c.name]) for c in MIXED_COLUMNS if c.varies) for _ in range(n)]


def mixed_total(seed: int) -> tuple:
    """A total row: every column, the constant one too (as reports give it)."""
    values = iter(mixed_rows(1, seed)[0])
    return tuple(next(values) if c.varies else c.constant for c in MIXED_COLUMNS)


def expected_text(name: str, rows: list, total=None) -> str:
    """What the format must write, from the standard library: csv.writer over each kind's text, json.dumps
    over each kind's JSON value (indent=1)."""
    full = [tuple(c.constant if not c.varies else next(values) for c in MIXED_COLUMNS)
            for values in map(iter, rows)] + ([total] if total else [])
    if name == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([c.name for c in MIXED_COLUMNS])
        writer.writerows([[c.kind.text(v) for c, v in zip(MIXED_COLUMNS, row)] for row in full])
        return buffer.getvalue()
    import json

    objects = [{c.name: "N/A" if v is None else c.kind.json(v) for c, v in zip(MIXED_COLUMNS, row)} for row in full]
    return json.dumps(objects, indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", FILE_FORMATS)
def test_file_formats_write_what_the_standard_library_writes(name):
    """Texts come from memos by column (they repeat); none may confuse 0 with 0.0 or -0.0, 1 with True."""
    rows = mixed_rows(600)
    total = mixed_total(8)
    text = FORMATS[name]().render(Table("m", "m", MIXED_COLUMNS, [rows[:250], [], rows[250:]], total))
    assert text == expected_text(name, rows, total)
    import math

    zeros = {math.copysign(1, v) for v, in [r[:1] for r in rows] if v == 0}
    assert zeros == {1.0, -1.0} and {type(r[-1]) for r in rows} >= {int, float, bool}   # the data tries it


@pytest.mark.parametrize("name", FILE_FORMATS)
@pytest.mark.parametrize("cuts", [[0, 40, 40, 100], [0, 0, 100], [0, 100, 100], [0, 0, 0], [0, 1, 2, 100]])
def test_a_file_written_in_parts_and_joined_is_the_whole_file(name, cuts, tmp_path):
    """Two processes write one file as parts (any of them may be empty); the renderer's join makes the
    file one process writes. A total row, if any, comes with the last part."""
    rows = mixed_rows(cuts[-1])
    total = mixed_total(9)
    renderer = FORMATS[name]()
    parts = []
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        path = tmp_path / f"part{k}"
        last = hi == cuts[-1] and k == len(cuts) - 2
        with open(path, "w", encoding="utf-8", newline="") as out:
            renderer.write(Table("m", "m", MIXED_COLUMNS, [rows[lo:hi]], total if last else None), out, part=k)
        parts.append(path)
    with open(tmp_path / "joined", "wb") as out:
        renderer.join(parts, out)
    assert (tmp_path / "joined").read_bytes().decode() == expected_text(name, rows, total)


def _styles():
    from tabulate import tabulate_formats

    return sorted(tabulate_formats)


@pytest.mark.parametrize("style", _styles())
@pytest.mark.parametrize("names", ["ascii", "wide characters"])
def test_a_long_terminal_table_is_drawn_in_chunks_as_it_would_be_whole(style, names, monkeypatch):
    """Beyond HELD_ROWS the terminal's rows go to a temporary file (show --top 0 of a million tasks drew 2 GB
    whole) and are drawn a chunk at a time: the same text as the whole table drawn at once, in every tabulate
    style, wide or fitted to a width (names cut, columns left out). Texts whose width is not their length
    (wide characters) are read back and drawn whole."""
    rnd = random.Random(7)
    stem = "卷积" if names == "wide characters" else "op"
    rows = [(f"{stem}{i}_" + "n" * rnd.randrange(40), rnd.randrange(1000), round(rnd.random() * 100, 3),
             rnd.choice(["AI_CORE", "AI_CPU"])) for i in range(57)]
    columns = [Column("Op Name", TEXT), Column("Count", INT), Column("Time(us)", NUMBER), Column("Type", TEXT)]

    def draw(width):
        t = Table("t", "t", columns, [rows[:20], rows[20:]], total=("total", 57, 1.0, "-"))
        renderer = FORMATS["table"](style, width)
        return renderer.render(t), renderer.hidden

    whole = {width: draw(width) for width in (None, 50)}
    assert whole[50][1] and "…" in whole[50][0]           # (the narrow one cuts names and leaves columns out)
    monkeypatch.setattr(terminal, "HELD_ROWS", 10)
    monkeypatch.setattr(terminal, "CHUNK_ROWS", 7)
    for width in (None, 50):
        assert draw(width) == whole[width]
    t = Table("t", "t", columns, [rows])
    with terminal._Spool(t) as spool:
        assert spool.spilled and spool.held == [] and spool.rows == 57
        assert spool.plain is (names == "ascii")


# --- the commands' documents: every format prints what its commands print (tests over every subclass) ----------
def _listing(view, several=True):
    def table():
        return Table("ops", "Ops", [Column("Name"), Column("Time(us)", NUMBER)], [[("a", 2.5), ("b,c", 1.0)]],
                     total=("total", 3.5), sort="Time(us)", context={"model_id": 1})

    sections = [Section("one", "/x/one", "JOB", [table()]), Section("two", "/x/two", "PROF", [table()], "lost")]
    return Listing(iter(sections if several else sections[:1]), view, several)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_prints_a_listing(name):
    out = io.StringIO()
    FORMATS[name](width=None).listing(_listing(View(fmt=name)), out)
    text = out.getvalue()
    if name == "csv":       # one header, the result dir first, each section's total last
        assert text == ("result_dir,Name,Time(us)\none,a,2.5\none,\"b,c\",1.0\none,total,3.5\n"
                        "two,a,2.5\ntwo,\"b,c\",1.0\ntwo,total,3.5\n")
    elif name == "json":
        import json

        table = {"title": "Ops", "context": {"model_id": 1}, "columns": ["name", "time_us"],
                 "rows": [{"name": "a", "time_us": 2.5}, {"name": "b,c", "time_us": 1.0}], "row_count": 2,
                 "total": {"name": "total", "time_us": 3.5}}
        assert json.loads(text) == {
            "one": {"path": "/x/one", "layout": "JOB", "data_quality": None, "tables": {"ops": table}},
            "two": {"path": "/x/two", "layout": "PROF", "data_quality": "lost", "tables": {"ops": table}}}
    else:                   # the terminal: the 20 longest rows of each, the total last
        lines = text.splitlines()
        assert lines[0] == "== one (JOB) ==" and "== two (PROF) ==" in lines and lines.count("Ops") == 2
        assert [line.split() for line in lines[3:8]] == [["Name", "Time(us)"], ["------", "----------"], ["a", "2.500"],
                                                       ["b,c", "1.000"], ["total", "3.500"]]


def test_a_listing_without_sections_is_an_empty_document():
    for name, empty in (("csv", ""), ("json", "{}\n"), ("table", "")):
        out = io.StringIO()
        FORMATS[name]().listing(Listing(iter(()), View(fmt=name)), out)
        assert out.getvalue() == empty


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_prints_a_comparison(name):
    document = {"base": "b", "new": "n", "models": [{"model_name": "m", "delta_us": 1.5}]}
    tables = [Table("models", "Models (µs)", [Column("model_name"), Column("delta_us", NUMBER)], [[("m", 1.5)]]),
              Table("ops", "Ops, the 1 largest changes of 2", [Column("op_name")], [[("x",)]])]
    scripts = [Table("models", "Models (µs)", [Column("base_model_name"), Column("new_model_name"),
                                               Column("delta_us", NUMBER)], [[("m", "m", 1.5)]])]
    out = io.StringIO()
    FORMATS[name](width=None).comparison(Comparison(document, "m: 1.0 → 2.5 µs", tables, {"ops": (1, 2)}, scripts),
                                         out)
    text = out.getvalue()
    if name == "csv":       # one table: the first of the document's
        assert text == "base_model_name,new_model_name,delta_us\nm,m,1.5\n"
    elif name == "json":
        import json

        assert text == json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    else:
        lines = text.splitlines()
        assert lines[:3] == ["m: 1.0 → 2.5 µs", "", "Models (µs)"]
        assert ["m", "1.500"] in [line.split() for line in lines] and "Ops, the 1 largest changes of 2" in lines


FINDING = {"id": "idle", "severity": "high", "message": "The device waits: 40.5 % of the time.",
           "evidence": [{"table": "task", "key": {"n": n}, "values": {}} for n in range(7)]}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_prints_findings_or_says_it_cannot(name):
    findings = Findings("JOBX", [FINDING], [[f"gap {n}" for n in range(7)]], limit=20)
    out = io.StringIO()
    if name == "csv":       # (the CLI offers advise in table and json only)
        with pytest.raises(NotImplementedError):
            FORMATS[name]().findings(findings, out)
        return
    FORMATS[name]().findings(findings, out)
    if name == "json":
        import json

        assert json.loads(out.getvalue()) == {"findings": [FINDING]}
    else:
        assert out.getvalue() == ("JOBX: 1 finding(s), most important first\n\n1. [high] idle\n"
                                  "   The device waits: 40.5 % of the time.\n"
                                  + "".join(f"   - gap {n}\n" for n in range(5))
                                  + "   - … 2 more (--format json lists them)\n")
        out = io.StringIO()
        FORMATS[name]().findings(Findings("JOBX", [], [], 20), out)
        assert out.getvalue() == "JOBX: no findings.\n"
