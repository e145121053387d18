"""Ascend CANN PROF_ layout (raw-format.md §6): host/ + device_N/ analysed together."""
