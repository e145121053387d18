"""JSON files: an array of objects keyed by the column names (outputs.md §3), written row by row with the
layout ``json.dumps(rows, indent=1)`` gives; numbers stay numbers, N/A stays the text "N/A" as in the
csv files."""
import itertools
import json
from typing import TextIO

from msprof.renderers.base import Renderer, register
from msprof.tables import NA, Table


@register
class JsonRenderer(Renderer):
    name = "json"
    extension = ".json"

    def write(self, table: Table, out: TextIO) -> None:
        def field(c) -> str:
            value = "%s" if c.varies else _encoder(c.kind)(c.constant).replace("%", "%%")
            return f"  {json.dumps(c.name, ensure_ascii=False).replace('%', '%%')}: {value}"

        template = " {\n" + ",\n".join(field(c) for c in table.columns) + "\n }"
        encoders = [_encoder(c.kind) for c in table.columns if c.varies]
        first = True
        for row in itertools.chain.from_iterable(table.batches):
            out.write(("[\n" if first else ",\n") + template % tuple(e(v) for e, v in zip(encoders, row)))
            first = False
        if table.total is not None:
            encode = [_encoder(c.kind) for c in table.columns]
            total = tuple(e(v) for e, v, c in zip(encode, table.total, table.columns) if c.varies)
            out.write(("[\n" if first else ",\n") + template % total)
            first = False
        out.write("[]\n" if first else "\n]\n")


_NA = json.dumps(NA)


def _encoder(kind):
    def encode(value):
        if value is None:
            return _NA
        value = kind.json(value)
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=False)
        return json.dumps(value)
    return encode
