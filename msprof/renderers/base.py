"""Renderers: one small class per output format behind this base class (the pyinstrument shape); each
writes a report Table (msprof.tables) to a text stream, row batches as they come from SQL."""
import itertools
import shutil
from pathlib import Path
from typing import BinaryIO, Dict, List, Optional, TextIO, Type

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

    ``part``: None for a whole file; k for the k-th of the parts one file is written in (two processes),
    which ``join`` puts together."""

    name = ""
    extension = ""

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
                shutil.copyfileobj(handle, out, 1 << 20)

    def render(self, table: Table) -> str:
        """The whole table as one string (small tables; files are written with ``write``)."""
        import io

        buffer = io.StringIO()
        self.write(table, buffer)
        return buffer.getvalue()


FORMATS: Dict[str, Type[Renderer]] = {}


def register(cls: Type[Renderer]) -> Type[Renderer]:
    FORMATS[cls.name] = cls
    return cls
