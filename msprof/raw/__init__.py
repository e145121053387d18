"""Decoders for raw profiling records: one module per record family (raw-format.md §4–6)."""
