"""Whole-chunk decoding for the big fixed-size record families (PMU, ACL).

Decoding 1M records one Python statement at a time costs more than everything SQLite does with them.
So these decoders
* check magic bytes on byte columns of the whole chunk (``chunk[offset::size]``, C speed); only a
  chunk holding bad records pays for a per-record pass, to find and drop them;
* unpack ``BLOCK`` records at once with one struct (one flat tuple: no tuple per record) and append
  any computed columns (``extras``: k values each) to that tuple, which is then the parameter tuple of
  one INSERT of k rows (``insert_sql``: numbered parameters pick each row's values out of it).
"""
import struct
from functools import lru_cache
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

# byte offset in the record → (mask applied to the byte, value it must then have)
Checks = Dict[int, Tuple[int, int]]
# SQLite's limit on parameters per statement before 3.32; blocks stay below it
MAX_PARAMETERS = 999


class RecordLayout:
    """A record family: struct format of one record, the table column of each unpacked field (None:
    unpacked but not stored) and the computed columns appended per block."""

    def __init__(self, table: str, record_format: str, fields: Sequence[Optional[str]], extras: Sequence[str] = ()):
        self.table, self.record_format = table, record_format
        self.fields, self.extras = tuple(fields), tuple(extras)
        self.size = struct.calcsize("<" + record_format)
        self.width = len(self.fields)
        self.block = rows_per_statement(self.width + len(self.extras))

    def blocks(self, chunk: bytes) -> Iterator[tuple]:
        """Flat tuples of ``block`` records each (the last may hold fewer)."""
        full = len(chunk) - len(chunk) % (self.size * self.block)
        if full:
            yield from record_struct(self.record_format, self.block).iter_unpack(chunk[:full] if full < len(chunk) else chunk)
        if full < len(chunk):
            yield record_struct(self.record_format, (len(chunk) - full) // self.size).unpack(chunk[full:])

    def insert(self, conn, blocks: List[tuple]) -> int:
        """Insert blocks (record values + extras) into the table; returns the number of rows."""
        return insert_blocks(conn, self.insert_sql, blocks, self.width + len(self.extras), self.block)

    def insert_sql(self, rows: int) -> str:
        return insert_sql(self.table, self.fields, self.extras, rows)


def insert_blocks(conn, sql_for, blocks: Sequence[Sequence], row_width: int, block_rows: int) -> int:
    """Parameter blocks of ``block_rows`` rows each (any may be shorter) as one multi-row INSERT each:
    the full ones in one executemany. ``sql_for(n)`` is the statement for n rows. Returns the rows."""
    full = [b for b in blocks if len(b) == block_rows * row_width]
    if full:
        conn.executemany(sql_for(block_rows), full)
    for block in blocks:
        if len(block) != block_rows * row_width:
            conn.execute(sql_for(len(block) // row_width), block)
    return sum(len(b) for b in blocks) // row_width


def rows_per_statement(row_width: int) -> int:
    """As many rows per INSERT as the parameter limit allows."""
    return max(1, MAX_PARAMETERS // row_width)


@lru_cache(maxsize=256)
def record_struct(record_format: str, count: int) -> struct.Struct:
    """One struct for ``count`` records in a row (their fields in one flat tuple)."""
    return struct.Struct("<" + record_format * count)


@lru_cache(maxsize=None)
def insert_sql(table: str, fields: tuple, extras: tuple, rows: int) -> str:
    """The INSERT of ``rows`` rows from one flat parameter tuple: each row's values of ``fields`` (a field None:
    in the tuple, not stored), then ``extras`` columns of ``rows`` values each, appended after every row's."""
    width = len(fields)
    columns = [f for f in fields if f] + list(extras)
    values = []
    for r in range(rows):
        numbers = [r * width + j + 1 for j, f in enumerate(fields) if f]
        numbers += [rows * width + e * rows + r + 1 for e in range(len(extras))]
        values.append("(" + ",".join(f"?{n}" for n in numbers) + ")")
    return f"INSERT INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) VALUES {','.join(values)}"


_MASKED: Dict[int, bytes] = {}


def byte_column(chunk: bytes, size: int, offset: int, mask: int = 0xFF) -> bytes:
    """Byte ``offset`` of every record of ``chunk``, masked with ``mask``."""
    column = chunk[offset::size]
    if mask == 0xFF:
        return column
    table = _MASKED.get(mask)
    if table is None:
        table = _MASKED[mask] = bytes(b & mask for b in range(256))
    return column.translate(table)


def bad_records(chunk: bytes, size: int, checks: Checks) -> List[int]:
    """Indexes of the records of ``chunk`` that fail any check, in order."""
    count = len(chunk) // size
    bad = set()
    for offset, (mask, value) in checks.items():
        column = byte_column(chunk, size, offset, mask)
        if column != bytes((value,)) * count:
            # (found at C speed: the usual chunk that fails has few such records among thousands)
            flags = column.translate(_other_than(value))
            index = flags.find(1)
            while index >= 0:
                bad.add(index)
                index = flags.find(1, index + 1)
    return sorted(bad)


_OTHER_THAN: Dict[int, bytes] = {}


def _other_than(value: int) -> bytes:
    """The byte translation that makes ``value`` 0 and every other byte 1 (made when first needed, as
    ``byte_column``'s masks are: not at every start-up)."""
    table = _OTHER_THAN.get(value)
    if table is None:
        table = _OTHER_THAN[value] = bytes(int(b != value) for b in range(256))
    return table


def valid_part(chunk: bytes, size: int, checks: Checks, bad: Optional[List[int]] = None) -> Tuple[bytes, int, int]:
    """(the records of ``chunk`` that pass every check, how many were left out, index of the first left out);
    ``bad``: the chunk's ``bad_records``, when the caller has them already."""
    bad = bad_records(chunk, size, checks) if bad is None else bad
    if not bad:
        return chunk, 0, 0
    kept, start = [], 0
    for index in bad:
        kept.append(chunk[start:index * size])
        start = (index + 1) * size
    kept.append(chunk[start:])
    return b"".join(kept), len(bad), bad[0]


def index_before(index: int, bad: List[int]) -> int:
    """The index a record of ``valid_part``'s chunk had before the records ``bad`` (their indexes in the chunk as
    read, in order) were left out."""
    for taken in bad:
        if taken > index:
            break
        index += 1
    return index
