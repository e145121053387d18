"""Frequency changes, ``lpmFreqConv.data.*`` — 888 B ``=II`` + 55×``QII`` (raw-format.md §5.7)."""
import struct

from msprof.decode.base import Decoder, Rows, Tally

RECORD_SIZE = 888
ENTRIES = 55
HEADER = struct.Struct("<II")
ENTRY = struct.Struct("<qII")


class FreqDecoder(Decoder):
    """Rows (syscnt, mhz) of the valid entries of each record; a count above 55 is a damaged record."""

    kind = "freq"
    label = "frequency"
    record_size = RECORD_SIZE

    def decode(self, chunk: bytes, tally: Tally):
        rows = []
        for offset in range(0, len(chunk), RECORD_SIZE):
            count, _reserved = HEADER.unpack_from(chunk, offset)
            if count > ENTRIES:
                tally.skip(f"entry count above {ENTRIES}", 1, offset // RECORD_SIZE)
                continue
            for index in range(count):
                syscnt, mhz, _ = ENTRY.unpack_from(chunk, offset + HEADER.size + index * ENTRY.size)
                rows.append((syscnt, mhz))
        return [Rows("freq_change", ("syscnt", "mhz"), rows)]
