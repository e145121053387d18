"""How the terminal prints a table's numbers, and which columns it keeps on a narrow terminal: two data
tables, ``DECIMALS`` and ``PRIORITY``, read by msprof.renderers.terminal (docs/user-guide.md, "numbers in the
terminal" and "narrow terminal", says the same in words). Only the terminal reads them: csv, json and the summary files print every
value as the reference tools do.

Numbers are right-aligned with the same number of decimals in every row of a column: the decimals its key
calls for (µs 3, percentages 2), else as many as the column's most precise value has (counts and ids are
whole: none; a 0-1 ratio keeps its 3 or 4).
"""
import re
from typing import Dict, List, Optional, Sequence

from msprof.tables import EPOCH_US, Column

# (how a column's key ends, decimals), first match wins: JOB's "Time Ratio" is a percentage of the total
DECIMALS = (
    ("_pct", 2),
    ("time_ratio", 2),
    ("_us", 3),
)

# The columns a narrow terminal keeps, longest first, by key: the ids a selection takes (query's), what names
# a row, what a profiling engineer reads first (the time, the count, the average, the share, the spread), then
# what tells rows of one name apart, then the rest. A column not listed ranks after all of these, the
# rightmost first to go; those of LEFT_OUT_FIRST go before it.
PRIORITY = (
    # the ids --model-id and --iteration-id take
    "model_id", "iteration_ids", "step", "step_ids",
    # the row's name
    "op_name", "layer_name", "api_name", "name", "model_name", "message", "op_type", "layer_type",
    # the time it took
    "task_duration_us", "time_us", "total_time_us", "delta_us", "delta_pct", "delta_avg_us",
    "iteration_time_us", "fp_to_bp_time_us", "iteration_refresh_us", "data_aug_bound_us",
    "start_time_us", "end_time_us", "event_type",
    # how often, on average, its share
    "count", "base_us", "new_us", "avg_us", "avg_time_us", "base_avg_us", "new_avg_us", "base_count",
    "new_count", "ratio_pct", "total_time_ratio_pct", "time_ratio", "memory_bound",
    # its spread
    "median_us", "median_time_us", "stddev_us", "stddev_time_us", "base_median_us", "new_median_us",
    "base_stddev_us", "new_stddev_us", "min_us", "max_us", "min_time_us", "max_time_us",
    # what tells rows of one name apart
    "task_id", "layer_id", "iteration_id", "iterations", "stream_id", "device", "device_id", "level",
    "task_type", "core_type", "records", "lost", "kind", "directory", "family", "platform", "tid", "domain",
)
# Wide columns of little value in a terminal: they go first of all (after those that tell no row apart).
LEFT_OUT_FIRST = ("ori_layer_name", "task_start_time_us", "op_state", "block_num", "variance")
# Columns whose text is the same in every row shown tell no row apart: one of these, or one not listed,
# goes before any other.
IDS = {"model_id", "iteration_ids", "step", "step_ids", "task_id", "layer_id", "iteration_id", "stream_id", "device", "device_id",
       "level", "task_type", "core_type", "platform"}
_RANK: Dict[str, int] = {key: rank for rank, key in enumerate(PRIORITY)}
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z")


def decimals(column: Column) -> Optional[int]:
    """The decimals ``DECIMALS`` gives a numeric column (None: as many as its most precise value)."""
    if not column.kind.numeric or column.kind is EPOCH_US:
        return None
    return next((digits for end, digits in DECIMALS if column.key.endswith(end)), None)


def fixed_texts(digits: int, values: Sequence, fallback: List[str]) -> List[str]:
    """Each number with ``digits`` decimals; anything else (N/A, the total row's "-") as ``fallback`` has it."""
    form = f"{{:.{digits}f}}".format
    return [form(v) if type(v) in (float, int) else text for v, text in zip(values, fallback)]


def decimals_of(text: str) -> Optional[int]:
    """How many decimals a number's text has; None for a text that is no plain number."""
    if not _NUMBER.match(text):
        return None
    point = text.find(".")
    return 0 if point < 0 else len(text) - point - 1


def padded(text: str, digits: int) -> str:
    """A number's text with ``digits`` decimals (zeros added), other texts as they are."""
    have = decimals_of(text)
    if have is None or have >= digits:
        return text
    return text + ("." if have == 0 else "") + "0" * (digits - have)


def least_important_first(columns: List[Column], ranked: Optional[int], varies: List[bool]) -> List[int]:
    """The columns a narrow terminal may leave out, in the order it does (``PRIORITY``); ``ranked`` is the
    column the rows are ranked by, kept right after the name; ``varies[i]``: column i's text differs between
    the rows shown. The two most important never go: a table of names alone answers nothing (the wider of
    the two is then wrapped)."""
    def rank(i: int) -> int:
        key = columns[i].key
        place = _RANK.get(key, len(PRIORITY) + i)
        if key in LEFT_OUT_FIRST:
            place += len(PRIORITY) + len(columns)
        same = not varies[i] and (key in IDS or key not in _RANK)
        return place + 2 * (len(PRIORITY) + len(columns)) if same else place

    order = sorted(range(len(columns)), key=rank)
    if ranked is not None and order and order[0] != ranked:
        order.remove(ranked)
        order.insert(1, ranked)
    return list(reversed(order))[:-2]
