"""The terminal's format ("table"): show and query's tables (tabulate), compare's verdict and tables, advise's
findings in short paragraphs. Numbers are right-aligned, each column's with the same decimals
(msprof.renderers.cells: ``DECIMALS``).

Given a ``width`` (the terminal's), a table is made to fit it: long names lose their middle ("Default/net…
/Conv2D-op12"; a table of messages says ``cut=False``), then columns are left out, the least important
first (msprof.renderers.cells: ``PRIORITY``), never the two most important (the name and what the rows are
ranked by), until the lines fit; when even those are too wide, the wider is wrapped. ``hidden`` says which
columns went, so that the caller can tell the user (``--wide`` shows them all).

Memory stays flat however long the table: the widths come from a first pass over the rows, which keeps their
texts in a temporary file beyond HELD_ROWS; the second draws them a chunk at a time (``_draw_chunked``).
"""
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from typing import IO, Iterable, Iterator, List, Optional, TextIO

from msprof.paths import one_line
from msprof.renderers import cells
from msprof.renderers.base import Renderer, register
from msprof.renderers.csvfile import column_texts
from msprof.renderers.documents import DEFAULT_TOP, Comparison, Findings, Listing, View
from msprof.tables import Column, Table, chunks

LONGEST_CELL = 32       # characters of a text cell when the table has to fit a width
SHOWN_EVIDENCE = 5      # evidence lines printed under a finding of advise
# Rows held in memory to size the columns; a longer table (show --top 0 of a million tasks would take
# gigabytes drawn whole) goes to a temporary file, and is drawn a chunk at a time in its columns' widths.
HELD_ROWS = 20_000
CHUNK_ROWS = 4096


def terminal_width(wide: bool = False) -> Optional[int]:
    """The width tables are fitted to: the terminal's (COLUMNS, else 80), or None for every column (--wide)."""
    return None if wide else shutil.get_terminal_size((80, 24)).columns


def fill(text: str, width: int, **options) -> str:
    """``textwrap.fill`` for people's text, a number kept on one line with its unit (µs, %)."""
    import textwrap

    kept = text.replace(" µs", "\u00a0µs").replace(" %", "\u00a0%")
    return textwrap.fill(kept, width=width, **options).replace("\u00a0", " ")


@register
class TextRenderer(Renderer):
    name = "table"
    extension = ".txt"
    default_top = DEFAULT_TOP

    def __init__(self, style: str = "simple", width: Optional[int] = None):
        super().__init__(style, width)
        self.hidden: List[str] = []

    @property
    def hidden_note(self) -> str:
        """What the last table drawn left out, for the line under it ("" when nothing)."""
        n = len(self.hidden)
        return f"{n} more column{'s' if n != 1 else ''}: --wide" if n else ""

    def write(self, table: Table, out: TextIO, part: Optional[int] = None) -> int:
        """Draw the table (its rows, then its total row); return how many rows it had (0: nothing drawn)."""
        headers = [c.name for c in table.columns]
        with _Spool(table) as spool:
            if not spool.rows:
                return 0
            shown = list(range(len(headers)))
            self.hidden = []
            cut = False
            wrap = None

            widths = spool.widths

            def width(i: int) -> int:      # of column i's widest text (a cut text is at most LONGEST_CELL)
                return min(widths[i], LONGEST_CELL) if cut and not spool.numeric[i] else widths[i]

            if self.width is not None:
                def fits() -> bool:       # (drawn under its own headers: a column is 2 wider than its header)
                    return self._line_width([width(i) for i in shown], [headers[i] for i in shown]) <= self.width

                ranked = table.column_index(table.sort)
                order = [None] + cells.least_important_first(table.columns, ranked, spool.distinct) \
                    if table.cut else []     # messages: wrapped
                for index in order:
                    if index is None:       # names: the middle goes, the ends tell them apart
                        cut = True
                    elif len(shown) > 1:
                        shown.remove(index)
                        self.hidden.append(headers[index])
                    if fits():
                        break
                else:
                    # (a table whose texts wrap, not cut, leaves out columns when even wrapped it is too wide)
                    spare = [] if table.cut else cells.least_important_first(table.columns, ranked, spool.distinct)
                    while not fits():
                        sizes = [max(len(headers[i]), width(i)) for i in shown]
                        wrap = self._wrapped(sizes)
                        wrapped = [min(width(i), limit or width(i)) for i, limit in zip(shown, wrap)]
                        if not spare or self._line_width(wrapped, [headers[i] for i in shown]) <= self.width:
                            break
                        index = spare.pop(0)
                        shown.remove(index)
                        self.hidden.append(headers[index])
                        wrap = None

            def rows() -> Iterator[List[str]]:
                return ([_cut(row[i]) if cut else row[i] for i in shown] for row in spool.texts())

            heads = [headers[i] for i in shown]
            align = ["right" if spool.numeric[i] else "left" for i in shown]
            if spool.spilled and wrap is None and spool.plain:
                if _draw_chunked(self.style, heads, align, [width(i) for i in shown], rows(), out):
                    return spool.rows
            from tabulate import tabulate      # (imported here: only show and query draw tables)

            out.write(tabulate(list(rows()), headers=heads, tablefmt=self.style, disable_numparse=True,
                               maxcolwidths=wrap, colalign=align) + "\n")
            return spool.rows

    # --- documents ---------------------------------------------------------------------------------------
    def listing(self, listing: Listing, out: TextIO) -> None:
        """Each result dir under a heading, each table under its title, its rows fitted to the width; a line
        under a table says what was left out (rows beyond the top, columns beyond the width)."""
        view = listing.view
        for section in listing.sections:
            if not section.tables:       # (--table naming none of its tables: it said so on stderr)
                continue
            out.write(f"== {one_line(section.label)} ({section.layout}) ==\n")
            for table in section.tables:
                self._shown(table, view, out)
            out.write("\n")

    def _shown(self, table: Table, view: View, out: TextIO) -> None:
        rows, count = view.pick(table, self.default_top)
        renderer = TextRenderer(self.style, self.width)
        out.write(f"\n{one_line(table.title)}\n")
        # (drawn as the rows come: a million of them are spooled, not held)
        drawn = renderer.write(_with_rows(table, rows, view.sort), out)
        if not drawn:
            out.write(f"(no rows{_recorded_for(table.context)})\n")
            return
        notes = []
        if count[0] > drawn:
            by = view.ranked_by(table)
            notes.append(f"{drawn} of {count[0]} rows" + (f" by {by}" if by else "") + ": --top N")
        if renderer.hidden:
            notes.append(renderer.hidden_note)
        if notes:
            out.write(f"({'; '.join(notes)})\n")

    def comparison(self, comparison: Comparison, out: TextIO) -> None:
        """The verdict first (one line in a pipe, for grep), then each table under its title."""
        line = one_line(comparison.verdict)
        if sys.stdout.isatty() and self.width is not None:
            line = fill(line, self.width, subsequent_indent="  ", break_long_words=False)
        out.write(f"{line}\n\n")
        for table in comparison.tables:
            out.write(f"{table.title}\n")
            renderer = TextRenderer(self.style, self.width)
            out.write(renderer.render(table) if table.batches[0] else "(none)\n")
            if renderer.hidden:
                out.write(f"({renderer.hidden_note})\n")
            out.write("\n")

    def findings(self, findings: Findings, out: TextIO) -> None:
        """The findings, most important first, each a short paragraph and a few lines of its evidence; names
        from the data escaped, as in show's tables."""
        label = one_line(findings.label)
        if not findings.findings:
            out.write(f"{label}: no findings.\n")
            return
        width = max(40, min(100, shutil.get_terminal_size((100, 24)).columns))
        out.write(f"{label}: {len(findings.findings)} finding(s), most important first\n")
        for number, (finding, evidence) in enumerate(zip(findings.findings, findings.evidence), 1):
            out.write(f"\n{number}. [{finding['severity']}] {finding['id']}\n")
            out.write(fill(one_line(finding["message"]), width, initial_indent="   ", subsequent_indent="   ") + "\n")
            for line in evidence[:SHOWN_EVIDENCE]:
                out.write(fill(one_line(line), width, initial_indent="   - ", subsequent_indent="     ",
                               break_long_words=False) + "\n")
            if len(evidence) > SHOWN_EVIDENCE:
                # (evidence stops at the ``limit`` largest: the message may count more)
                of = f" of the {len(evidence)} largest" if len(evidence) >= findings.limit else ""
                out.write(f"   - … {len(evidence) - SHOWN_EVIDENCE} more{of} (--format json lists them)\n")

    def _wrapped(self, widths: List[int]) -> List[Optional[int]]:
        """Column widths that make the table fit by wrapping its widest column (messages, long names)."""
        widest = widths.index(max(widths))
        others = self._line_width(widths[:widest] + [1] + widths[widest + 1:]) - 1
        limits: List[Optional[int]] = [None] * len(widths)
        limits[widest] = max(self.width - others, 12)
        return limits

    def _line_width(self, widths: List[int], headers: Optional[List[str]] = None) -> int:
        """How wide tabulate draws columns of these widths in this style (drawn once, a row of x's; under
        ``headers``, else under headers as wide as the columns)."""
        if not widths:
            return 0
        from tabulate import tabulate

        drawn = tabulate([["x" * w for w in widths]], headers=headers or ["h" * w for w in widths],
                         tablefmt=self.style, disable_numparse=True)
        return max(len(line) for line in drawn.splitlines())


def _with_rows(table: Table, rows: Iterable[tuple], sort: Optional[str] = None) -> Table:
    """The table of these rows (complete: the columns no longer hold constants), ranked by ``sort`` when it
    names one of its columns: a narrow terminal keeps that column right after the name (rows ranked by a
    hidden value would look unordered)."""
    ranked = table.columns[table.column_index(sort)].name if table.column_index(sort) is not None else table.sort
    return replace(table, columns=[Column(c.name, c.kind) for c in table.columns], batches=chunks(iter(rows), 1024),
                   sort=ranked)


def _recorded_for(context: dict) -> str:
    ids = [f"{name} {context[key]}" for key, name in (("model_id", "model"), ("iteration_id", "iteration"))
           if context.get(key) is not None]
    return f": nothing recorded for {', '.join(ids)}" if ids else ""


def _cut(text: str) -> str:
    if len(text) <= LONGEST_CELL:
        return text
    head = LONGEST_CELL // 3
    return text[:head] + "…" + text[len(text) - (LONGEST_CELL - head - 1):]


def _unquoted(text: str) -> str:
    return text[1:-1].replace('""', '"') if text.startswith('"') and text.endswith('"') and len(text) > 1 else text


class _Spool:
    """Pass one over a table's rows: each row's cell texts (in memory, or in a temporary file once there are
    more than HELD_ROWS) and the length of each column's widest text. ``plain``: every text is one line of
    ASCII, so that its width is its length (a chunk then draws its columns as wide as the whole table)."""

    def __init__(self, table: Table):
        self.table = table
        self.rows = 0
        n = len(table.columns)
        self.numeric = [c.kind.numeric for c in table.columns]
        self.others, self.integers, self.decimals = [0] * n, [0] * n, [0] * n
        self.varies, self.first = [False] * n, [None] * n
        self.plain = True
        self.held: List[List[str]] = []
        self.file: Optional[IO[str]] = None

    def __enter__(self) -> "_Spool":
        expand = self.table.expander()
        for batch in self.table.batches:
            self._add(list(map(expand, batch)))
        if self.table.total is not None and self.rows:
            self._add([tuple(self.table.total)], counted=False)
        return self

    def __exit__(self, *exc) -> None:
        if self.file is not None:
            self.file.close()

    @property
    def spilled(self) -> bool:
        return self.file is not None

    def _add(self, rows: list, counted: bool = True) -> None:
        if not rows:
            return
        # (a tab, an escape sequence or a line break in a name from the data would break the table's lines:
        # escaped, as every line msprof prints)
        columns = [self._texts(c, values) for c, values in zip(self.table.columns, zip(*rows))]
        for i, texts in enumerate(columns):
            if self.numeric[i]:
                self._measure(i, texts)
            else:
                self.others[i] = max(self.others[i], *map(len, texts))
            if counted and not self.varies[i]:
                self.first[i] = texts[0] if self.first[i] is None else self.first[i]
                self.varies[i] = any(t != self.first[i] for t in texts)
            if self.plain and not all(t.isascii() and "\n" not in t for t in texts):
                self.plain = False
        texts = list(map(list, zip(*columns)))
        if counted:
            self.rows += len(rows)
        if self.file is None and len(self.held) + len(texts) > HELD_ROWS:
            self.file = tempfile.TemporaryFile("w+", encoding="utf-8")
            self._spill(self.held)
            self.held = []
        if self.file is None:
            self.held += texts
        else:
            self._spill(texts)

    def _texts(self, column: Column, values: tuple) -> List[str]:
        texts = [_unquoted(t) if t.isprintable() else one_line(_unquoted(t)) for t in column_texts(column, values)]
        digits = cells.decimals(column)
        return texts if digits is None else cells.fixed_texts(digits, values, texts)

    def _measure(self, i: int, texts: List[str]) -> None:
        """A numeric column's widths: of its integer parts, its decimals, and its other texts (N/A, "-")."""
        for text in texts:
            have = cells.decimals_of(text)
            if have is None:
                self.others[i] = max(self.others[i], len(text))
            else:
                self.decimals[i] = max(self.decimals[i], have)
                self.integers[i] = max(self.integers[i], len(text) - have - (1 if have else 0))

    @property
    def widths(self) -> List[int]:
        """The length of each column's widest text, its numbers given the column's decimals."""
        return [max(other, whole + (places + 1 if places else 0) if whole else 0)
                for other, whole, places in zip(self.others, self.integers, self.decimals)]

    @property
    def distinct(self) -> List[bool]:
        """Whether each column's text differs between the rows (every column does in a table of one row)."""
        return self.varies if self.rows > 1 else [True] * len(self.varies)

    def _spill(self, texts: List[List[str]]) -> None:
        self.file.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in texts))

    def texts(self) -> Iterator[List[str]]:
        """The rows' texts, in order (the total row last)."""
        rows = self.held if self.file is None else map(json.loads, self._lines())
        pads = [(i, places) for i, places in enumerate(self.decimals) if places]
        if not pads:
            yield from rows
            return
        for row in rows:
            for i, places in pads:
                row[i] = cells.padded(row[i], places)
            yield row

    def _lines(self) -> Iterator[str]:
        self.file.seek(0)
        yield from self.file


def _draw_chunked(style: str, headers: List[str], align: List[str], widths: List[int],
                  rows: Iterator[List[str]], out: TextIO) -> bool:
    """Draw a table a chunk of rows at a time, each chunk led by a row of the columns' widths (so that
    tabulate draws every chunk's columns as wide as the whole table's), whose own line is then dropped. The
    style's parts come from probes: its head (down to the first row), what parts two rows, and its tail.
    False (nothing written) when the style does not draw one line per row."""
    from tabulate import tabulate

    sizer = ["x" * max(w, 1) for w in widths]

    def lines(body: List[List[str]]) -> List[str]:
        return tabulate(body, headers=headers, tablefmt=style, disable_numparse=True, colalign=align).split("\n")

    one, two = lines([sizer]), lines([sizer, sizer])
    ys, zs = ["y" * len(x) for x in sizer], ["z" * len(x) for x in sizer]
    row_lines = [i for i, (a, b) in enumerate(zip(one, lines([ys]))) if a != b]
    step = len(two) - len(one)                 # the lines a row adds: its own and what parts it
    if len(row_lines) != 1 or step < 1:
        return False
    head = row_lines[0]
    tail = len(one) - head - 1
    parting = two[head + 1:head + step]
    # the parts checked on rows of other letters, put together as the chunks will be
    if lines([sizer, ys, zs]) != (one[:head + 1] + parting + [one[head].replace("x", "y")] + parting
                                  + [one[head].replace("x", "z")] + one[head + 1:]):
        return False
    for k, chunk in enumerate(chunks(rows, CHUNK_ROWS)):
        drawn = lines([sizer] + chunk)
        body = drawn[head + 1:len(drawn) - tail]          # each row with the parting before it
        out.write("\n".join(drawn[:head] + body[len(parting):] if k == 0 else body) + "\n")
    if tail:
        out.write("\n".join(one[len(one) - tail:]) + "\n")
    return True
