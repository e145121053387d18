"""Renderers: one small class per output format behind this base class (the pyinstrument shape). Each
format prints every document of the commands that support it: a report Table into a summary file, row
batches as they come from SQL (``write``, ``write_many``, ``join``); show and query's ``Listing``;
compare's ``Comparison``; advise's ``Findings`` (msprof.renderers.documents)."""
import io
import itertools
import os
import shutil
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, TextIO, Tuple, Type

from msprof.renderers.documents import Comparison, Findings, Listing
from msprof.tables import Table


class Sink:
    """A table being written to one stream, a batch at a time: the file formats' way to write several
    tables filled by one pass over the rows (msprof.summary), one batch of each in turn."""

    def rows(self, batch: list) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """What follows the last row (the total row, closing brackets)."""


class Renderer:
    """Base of every format. ``extension`` names the files it writes. A file format provides ``sink``; a
    format that needs every row before it writes one (the terminal's column widths) overrides ``write``.
    ``style`` and ``width`` are the terminal's (a tabulate style; None: every column, however wide).

    ``part``: None for a whole file; k for the k-th of the parts one file is written in (two processes),
    which ``join`` puts together."""

    name = ""
    extension = ""
    default_top: Optional[int] = None     # rows of each table show prints without --top (None: all)

    def __init__(self, style: str = "simple", width: Optional[int] = None):
        self.style = style
        self.width = width

    def sink(self, table: Table, out: TextIO, part: Optional[int] = None) -> Sink:
        raise NotImplementedError

    def write(self, table: Table, out: TextIO, part: Optional[int] = None) -> None:
        sink = self.sink(table, out, part)
        for batch in table.batches:
            sink.rows(batch)
        sink.close()

    def write_many(self, tables: List[Table], outs: List[TextIO], part: Optional[int] = None) -> None:
        """Each table into its stream, a batch of each in turn: tables filled by one pass over the rows
        (msprof.summary) then hold no more than that."""
        sinks = [self.sink(table, out, part) for table, out in zip(tables, outs)]
        for step in itertools.zip_longest(*(table.batches for table in tables)):
            for sink, batch in zip(sinks, step):
                if batch is not None:
                    sink.rows(batch)
        for sink in sinks:
            sink.close()

    def join(self, parts: List[Path], out: BinaryIO) -> None:
        """The file from its parts, in order (by default: one after the other)."""
        for path in parts:
            with open(path, "rb") as handle:
                copy(handle, out)

    def render(self, table: Table) -> str:
        """The whole table as one string (small tables; files are written with ``write``)."""
        buffer = io.StringIO()
        self.write(table, buffer)
        return buffer.getvalue()

    # --- the commands' documents, printed on ``out`` (msprof.renderers.documents.Stdout) -----------------
    def listing(self, listing: Listing, out: TextIO) -> None:
        """show and query's output, one section per result dir."""
        raise NotImplementedError(f"{self.name} does not print show's tables")

    def comparison(self, comparison: Comparison, out: TextIO) -> None:
        """compare's output."""
        raise NotImplementedError(f"{self.name} does not print a comparison")

    def findings(self, findings: Findings, out: TextIO) -> None:
        """advise's output."""
        raise NotImplementedError(f"{self.name} does not print findings")

    def comparisons(self, comparisons: List[Tuple[str, Comparison]], out: TextIO) -> None:
        """compare's output of one pair of result dirs, or of several (the devices of two PROF_ directories:
        (title, comparison) each), one after the other under its title."""
        for title, comparison in comparisons:
            if len(comparisons) > 1:
                out.write(self.heading(title))
            self.comparison(comparison, out)

    def heading(self, title: str) -> str:
        """The line that names a pair of several compared."""
        return f"== {title} ==\n\n"

    def all_findings(self, findings: List[Findings], out: TextIO) -> None:
        """advise's output of each result dir, one after the other."""
        for number, each in enumerate(findings):
            out.write("\n" if number else "")
            self.findings(each, out)


def copy(source: BinaryIO, out: BinaryIO, start: int = 0, end: Optional[int] = None) -> None:
    """Bytes ``start`` to ``end`` of ``source`` (all of it by default) appended to ``out``: in the kernel where it
    can (sendfile, faster than a copy through Python's buffers), the rest (all, without sendfile) in 1 MB
    pieces."""
    out.flush()
    offset = start
    try:
        size = os.fstat(source.fileno()).st_size if end is None else end
        while offset < size:
            sent = os.sendfile(out.fileno(), source.fileno(), offset, size - offset)
            if not sent:
                break
            offset += sent
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass                  # a full disk fails again below, where it is reported
    source.seek(offset)
    if end is None:
        shutil.copyfileobj(source, out, 1 << 20)
        return
    while offset < end:
        chunk = source.read(min(end - offset, 1 << 20))
        if not chunk:
            break
        out.write(chunk)
        offset += len(chunk)


FORMATS: Dict[str, Type[Renderer]] = {}


def register(cls: Type[Renderer]) -> Type[Renderer]:
    FORMATS[cls.name] = cls
    return cls
