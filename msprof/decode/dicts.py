"""Name dictionaries of the PROF host (raw-format.md §6), text lines in slice files:

* ``*.additional.type_info_dic.*`` — ``<level>_<type>:<name>``: names of API / task types;
* ``*.additional.hash_dic.*`` — ``<hash>:<string>``: the strings behind hash ids (op, kernel, model names).

A line that does not parse (or names an unknown level, or a number beyond 64 bits) is skipped and counted.
Hash ids are unsigned 64-bit on disk and kept as the signed value with the same bits, like the binary
records that refer to them.
"""
import re

from msprof.decode.api_event import LEVELS
from msprof.decode.base import LineDecoder, Rows, Tally

_TYPE_LINE = re.compile(r"^(\d{1,20})_(\d{1,20}):(.*)$")
_HASH_LINE = re.compile(r"^(\d{1,20}):(.*)$")
_U64 = 1 << 64


def signed64(value: int) -> int:
    return value - _U64 if value >= (1 << 63) else value


class TypeInfoDecoder(LineDecoder):
    kind = label = "type_info_dic"

    def decode(self, lines, tally: Tally):
        rows = []
        for index, line in enumerate(lines):
            if not line:
                continue
            match = _TYPE_LINE.match(line)
            if not match or int(match.group(1)) not in LEVELS or int(match.group(2)) >= _U64:
                tally.skip("unreadable line", 1, index)
                continue
            rows.append((int(match.group(1)), signed64(int(match.group(2))), match.group(3)))
        return [Rows("type_name", ("level", "type", "name"), rows)]


class HashDecoder(LineDecoder):
    kind = label = "hash_dic"

    def decode(self, lines, tally: Tally):
        rows = []
        for index, line in enumerate(lines):
            if not line:
                continue
            match = _HASH_LINE.match(line)
            if not match or int(match.group(1)) >= _U64:
                tally.skip("unreadable line", 1, index)
                continue
            rows.append((signed64(int(match.group(1))), match.group(2)))
        return [HashRows("hash_string", ("hash", "text"), rows)]


class HashRows(Rows):
    """A hash listed twice keeps its last string (later slices win)."""

    def insert(self, conn) -> int:
        conn.executemany("INSERT OR REPLACE INTO hash_string (hash, text) VALUES (?, ?)", self.rows)
        return len(self.rows)
