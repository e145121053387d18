"""CSV renderer: the same bytes as Python's csv.writer (minimal quoting, "\\n" line ends), except that a
field holding "\\r" is quoted too; every field reads back through csv.reader."""
import csv
import io
import random

import pytest

from msprof import render
from msprof.reports import Table


def writer_csv(columns, rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


def table(columns, rows) -> Table:
    return Table("t", list(columns), ["text"] * len(columns), [list(r) for r in rows], final=True)


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
        assert render.to_csv(table(columns, rows)) == writer_csv(columns, rows)


def test_ints_and_floats_of_equal_value_keep_their_own_text():
    """1 == 1.0 as dict keys: a column mixing them must not take one's text from the other."""
    rows = [[1.0, 1], [1, 1.0], [0.5, True], [0.5, 1]]
    assert render.to_csv(table(["a", "b"], rows)) == "a,b\n1.0,1\n1,1.0\n0.5,True\n0.5,1\n"
    render._FLOAT_TEXTS.clear()
    assert render.to_csv(table(["x"], [[2.0]])) == "x\n2.0\n"
    assert render.to_csv(table(["x", "y"], [[2, 2.0]])) == "x,y\n2,2.0\n"


def test_single_column_and_empty_fields():
    assert render.to_csv(table(["only"], [[""], [None], ["v"]])) == writer_csv(["only"], [[""], [None], ["v"]])
    assert render.to_csv(table(["a", "b"], [["", None]])) == 'a,b\n,\n'


def test_carriage_return_is_quoted_and_everything_reads_back():
    rows = [["cr\rinside", 'both\r\n"', 3.25], ["plain", "", 0.1]]
    text = render.to_csv(table(["name", "other", "Time(us)"], rows))
    assert text == 'name,other,Time(us)\n"cr\rinside","both\r\n""",3.25\nplain,,0.1\n'
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert back == [["name", "other", "Time(us)"], ["cr\rinside", 'both\r\n"', "3.25"], ["plain", "", "0.1"]]
