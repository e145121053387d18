"""Decoders for raw profiling records: one module per record family (raw-format.md §4–6)."""

# 64-bit fields are decoded as signed (``q``): SQLite integers are signed 64-bit, and a value of 2^63 or
# more only occurs in a corrupt record. Decoding signed keeps the bits and cannot overflow the store.
