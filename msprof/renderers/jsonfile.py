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
        keys = [json.dumps(c.name, ensure_ascii=False).replace("%", "%%") for c in table.columns]
        template = " {\n" + ",\n".join(f"  {k}: %s" for k in keys) + "\n }"
        encoders = [_encoder(c.kind) for c in table.columns]
        first = True
        for batch in itertools.chain(table.batches, [[table.total]] if table.total is not None else []):
            for row in batch:
                out.write(("[\n" if first else ",\n") + template % tuple(e(v) for e, v in zip(encoders, row)))
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
