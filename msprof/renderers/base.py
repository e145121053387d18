"""Renderers: one small class per output format behind this base class (the pyinstrument shape); each
writes a report Table (msprof.tables) to a text stream, row batches as they come from SQL."""
from typing import Dict, TextIO, Type

from msprof.tables import Table


class Renderer:
    """Base of every format. ``extension`` names the files it writes."""

    name = ""
    extension = ""

    def write(self, table: Table, out: TextIO) -> None:
        raise NotImplementedError

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
