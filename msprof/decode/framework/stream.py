"""Byte streams of framework records (framework.md §2–3): what every FRAMEWORK decoder shares.

A framework file is one stream, read in chunks cut anywhere (``record_size`` 1: a tally index is a byte offset
in the chunk, negative for a record that began in an earlier chunk). Two shapes:

* ``TlvDecoder``: ``u16 type, u32 length, value`` records; the value is a fixed struct and inner TLVs
  ``u16 type, u32 length, utf-8 bytes``. A value shorter than its struct is lost data (skipped, counted); an
  inner field that runs past its value ends the record's fields (counted; those before it are kept); a string
  that is not UTF-8 is ``N/A`` (counted). The outer type is the framework's own record kind: not checked.
* ``FixedDecoder``: back-to-back structs.

The framework writes from the start of the file: a record cut at the end is lost data (``tail_lost``), there is
no ring buffer. Strings are stored once each in ``fw_string`` (``Strings``) and referred to by id.
"""
import functools
import operator
import struct
from itertools import count, repeat
from typing import Dict, List, Optional

from msprof.decode.base import Decoder, Rows, Tally

HEADER = struct.Struct("<HI")
NA = "N/A"
# No framework record is anywhere near this long (an op's call stack is kilobytes): a length beyond it is a
# damaged header, after which nothing in the stream can be found again.
MAX_RECORD = 64 << 20


class Strings:
    """Text → id, shared by the decoders of one import; ``drain`` hands over the rows of new strings."""

    def __init__(self):
        self.ids: Dict[str, int] = {}
        self.new: List[tuple] = []

    def id(self, text: Optional[str]) -> Optional[int]:
        if text is None:
            return None
        found = self.ids.get(text)
        if found is None:
            found = self.ids[text] = len(self.ids) + 1
            self.new.append((found, text))
        return found

    def drain(self) -> List[Rows]:
        rows, self.new = self.new, []
        return [Rows("fw_string", ("id", "text"), rows)] if rows else []


class _ByteStream(Decoder):
    """Keeps the part of a record cut by a chunk boundary, counts records and what the end cut off."""

    record_size = 1
    zero_records = False        # (a byte stream: zero bytes inside a record are its data)

    def __init__(self, strings: Optional[Strings] = None):
        self.strings = strings or Strings()
        self.records = 0
        self.tail_lost = 0
        self._carry = b""
        self._seen = 0                  # stream bytes before the current chunk
        self._dead_at: Optional[int] = None  # stream offset of a damaged header: the rest is lost

    def decode(self, chunk: bytes, tally: Tally):
        data = self._carry + chunk if self._carry else chunk
        self._seen += len(chunk)
        if self._dead_at is not None:
            return []
        rows, used = self.split(data, tally, -len(self._carry))
        self._carry = data[used:] if self._dead_at is None else b""
        return self.output(rows) + self.strings.drain()

    def finish(self, tally: Tally):
        if self._dead_at is not None:
            self.tail_lost = self._seen - self._dead_at
        else:
            self.tail_lost = len(self._carry)
        return []

    def messages(self, where) -> List[str]:
        notes = []
        if self._dead_at is not None:
            notes.append(f"{where(self._dead_at)}: a {self.label} record longer than {MAX_RECORD} bytes (a damaged"
                         f" header): the {self.tail_lost} bytes from there are lost")
        elif self.tail_lost:
            notes.append(f"{where(self._seen - self.tail_lost)}: the last {self.label} record is cut short: "
                         f"{self.tail_lost} bytes lost")
        return notes

    def split(self, data: bytes, tally: Tally, base: int):
        """(rows of the whole records at the head of ``data``, the bytes they take); ``base``: the tally index
        of ``data[0]``."""
        raise NotImplementedError

    def output(self, rows: list) -> list:
        raise NotImplementedError


class TlvDecoder(_ByteStream):
    """A TLV family: ``row(fixed values, field values, tally, index)`` makes a record's row (or None:
    skipped); the field values are those of ``field_types``, in that order (None: absent), as ``fw_string``
    ids (``intern``) or as text."""

    fixed: struct.Struct
    field_types: tuple = ()
    intern = True
    MEMO = 1 << 16          # distinct field blocks remembered (an op's name, shapes and stack repeat each step)

    def __init__(self, strings: Optional[Strings] = None):
        super().__init__(strings)
        self.undecodable = 0
        self.cut_fields = 0
        self._memo: Dict[bytes, tuple] = {}

    def split(self, data: bytes, tally: Tally, base: int):
        """Two passes: the records' offsets, walking their headers (the only work done record by record in
        Python), then their fixed parts and field blocks unpacked by C-level maps over those offsets."""
        starts, at, end = [], 0, len(data)
        unpack, header, append = HEADER.unpack_from, HEADER.size, starts.append
        while at + header <= end:
            length = unpack(data, at)[1]
            if length > MAX_RECORD:
                self._dead_at = tally.base + base + at
                break
            stop = at + header + length
            if stop > end:
                break
            append(at)
            at = stop
        first = self.records
        self.records += len(starts)
        stops = starts[1:] + [at]            # (records are back to back: one ends where the next starts)
        size = self.fixed.size
        if starts and min(map(operator.sub, stops, starts)) < header + size:
            return self._one_by_one(data, starts, stops, first, tally, base), at
        values = map(functools.partial(self.fixed.unpack_from, data), map(operator.add, starts, repeat(header)))
        blocks = list(map(data.__getitem__, map(slice, map(operator.add, starts, repeat(header + size)), stops)))
        fields = list(map(self._memo.get, blocks))          # (the field blocks seen before: no parsing)
        if None in fields:
            fields = [known if known is not None else self.field_values(block) for known, block in zip(fields, blocks)]
        return self.rows(count(first), values, fields, tally, map(operator.add, starts, repeat(base))), at

    def rows(self, seqs, values, fields, tally: Tally, indexes) -> list:
        """The rows of a chunk's records (iterables in file order): ``row`` of each, those not None."""
        return [row for row in map(self.row, seqs, values, fields, repeat(tally), indexes) if row is not None]

    def _one_by_one(self, data: bytes, starts: List[int], stops: List[int], first: int, tally: Tally, base: int):
        """The rows of a chunk holding a record whose value is shorter than the struct (lost data: counted)."""
        rows, size, header = [], self.fixed.size, HEADER.size
        for seq, (at, stop) in enumerate(zip(starts, stops), first):
            if stop - at - header < size:
                tally.skip(f"value shorter than its {size}-byte struct: data lost", 1, base + at)
                continue
            row = self.row(seq, self.fixed.unpack_from(data, at + header),
                           self.field_values(data[at + header + size:stop]), tally, base + at)
            if row is not None:
                rows.append(row)
        return rows

    def field_values(self, block: bytes) -> tuple:
        """The values of ``field_types`` in a record's field block, its problems counted. A block without
        problems is remembered (``_memo``: its values); one with problems is parsed and counted each time."""
        known = self._memo.get(block)
        if known is not None:
            return known
        fields, undecodable, cut = parse_fields(block)
        get = self.strings.id if self.intern else (lambda text: text)
        values = tuple(get(fields.get(k)) for k in self.field_types)
        if undecodable or cut:
            self.undecodable += undecodable
            self.cut_fields += cut
            return values
        if len(self._memo) >= self.MEMO:
            self._memo.clear()
        self._memo[block] = values
        return values

    def messages(self, where) -> List[str]:
        notes = super().messages(where)
        if self.undecodable:
            notes.append(f"{self.undecodable} {self.label} string(s) not UTF-8: kept as {NA}")
        if self.cut_fields:
            notes.append(f"{self.cut_fields} {self.label} record(s) with a field running past the record: "
                         f"the fields from there are lost")
        return notes

    def row(self, seq: int, values: tuple, fields: tuple, tally: Tally, index: int):
        """The row of the record ``seq`` (its place in the file), or None (skipped, counted in ``tally``)."""
        raise NotImplementedError


def parse_fields(block: bytes):
    """The inner TLVs of a field block as ({type: text}, strings not UTF-8, 1 when a field runs past the
    block); a later field of a type replaces an earlier one."""
    out, undecodable, at, stop = {}, 0, 0, len(block)
    while at < stop:
        if at + HEADER.size > stop:
            return out, undecodable, 1
        kind, length = HEADER.unpack_from(block, at)
        at += HEADER.size
        if at + length > stop:
            return out, undecodable, 1
        try:
            out[kind] = block[at:at + length].decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
            out[kind] = NA
        at += length
    return out, undecodable, 0


class FixedDecoder(_ByteStream):
    """Back-to-back structs: ``rows(list of value tuples, tally, index of the first)``."""

    fixed: struct.Struct

    def split(self, data: bytes, tally: Tally, base: int):
        size = self.fixed.size
        used = len(data) - len(data) % size
        values = list(self.fixed.iter_unpack(data[:used] if used < len(data) else data))
        self.records += len(values)
        return self.rows(values, tally, base), used

    def rows(self, values: List[tuple], tally: Tally, base: int) -> list:
        raise NotImplementedError
