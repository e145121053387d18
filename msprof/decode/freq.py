"""Frequency changes, ``lpmFreqConv.data.*`` — 888 B ``=II`` + 55×``QII`` (raw-format.md §5.7)."""
import struct

RECORD_SIZE = 888
ENTRIES = 55
HEADER = struct.Struct("<II")
ENTRY = struct.Struct("<qII")


def decode(chunk: bytes, counts: dict):
    """Rows (syscnt, mhz) of the valid entries of each record."""
    rows = []
    for offset in range(0, len(chunk), RECORD_SIZE):
        count, _reserved = HEADER.unpack_from(chunk, offset)
        if count > ENTRIES:
            counts["skipped"] = counts.get("skipped", 0) + 1
            continue
        for index in range(count):
            syscnt, mhz, _ = ENTRY.unpack_from(chunk, offset + HEADER.size + index * ENTRY.size)
            rows.append((syscnt, mhz))
    return rows
