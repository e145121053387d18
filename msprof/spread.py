"""The spread of durations that show adds to its statistic tables (issue 38 #8): the median and the sample
standard deviation (n − 1, as nsys stats reports it) of each row's durations, beside the average; compare
--spread gives each side's (msprof.analysis.compare). The summary files keep the reference analysers' columns.

Both come from one SQL pass that counts each group's durations by value (``group_spread``): the runs of
one op take a few distinct times, so Python sorts a few values per group, not every task, and squares each
value's deviation from the group's mean (no sum of squares minus a square of sums, which loses the digits
of a small spread of large durations). A window function that ranks every task was 4 times slower on a
million tasks (docs/performance.md)."""
import math
from dataclasses import replace
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from msprof.tables import NUMBER, Column, Table, chunks

# from this many tasks the spread is made by a worker process (msprof.workers.Later), beside the other tables
PARALLEL_MIN_TASKS = 100_000
Spread = Tuple[Optional[float], Optional[float]]        # (median, sample std dev), None when undefined


def group_spread(conn, source: str, params: dict, width: int, scale: float = 1.0) -> Dict[tuple, Spread]:
    """Per group: (median, sample std dev) × ``scale``, rounded to 3 decimals. ``source`` is SQL that selects
    a group's key (``width`` columns, k0 … k{width-1}) and a duration ``d`` per row."""
    keys = ", ".join(f"k{i}" for i in range(width))
    rows = conn.execute(f"SELECT {keys}, d * {scale!r}, count(*) FROM ({source}) WHERE d IS NOT NULL"
                        f" GROUP BY {keys}, d", params)
    return counted_spread((tuple(row[:width]), row[width], row[width + 1]) for row in rows)


def counted_spread(groups: Iterable[Tuple[tuple, float, int]]) -> Dict[tuple, Spread]:
    """The same from durations already counted: (key, duration, how many calls took it) rows."""
    values: Dict[tuple, List[Tuple[float, int]]] = {}
    for key, duration, n in groups:
        values.setdefault(key, []).append((duration, n))
    return {key: _of_counted(sorted(pairs)) for key, pairs in values.items()}


def _of_counted(pairs: List[Tuple[float, int]]) -> Spread:
    n = sum(count for _d, count in pairs)
    middle = [(n + 1) // 2, (n + 2) // 2]          # 1-based ranks of the middle one or two
    picked, seen = [], 0
    for duration, count in pairs:
        while middle and middle[0] <= seen + count:
            picked.append(duration)
            middle.pop(0)
        seen += count
    mean = sum(d * c for d, c in pairs) / n
    deviation = math.sqrt(sum((d - mean) ** 2 * c for d, c in pairs) / (n - 1)) if n > 1 else None
    return _r3(sum(picked) / len(picked)), None if deviation is None else _r3(deviation)


def with_spread(table: Table, spread, key: Callable[[tuple], tuple], after: str,
                names: Sequence[str] = ("Median(us)", "StdDev(us)")) -> Table:
    """The table with a median and a deviation column after column ``after``, each row's found by ``key`` in
    the dict ``spread`` gives: a function (called when the rows are read: a table left out costs nothing) or a
    msprof.workers.Later (made beside the other tables' rows, in a worker process)."""
    at = table.column_index(after) + 1
    columns = [Column(c.name, c.kind) for c in table.columns]      # (rows with their constants filled in)
    columns = columns[:at] + [Column(name, NUMBER) for name in names] + columns[at:]
    total = None if table.total is None else tuple(table.total[:at]) + ("-", "-") + tuple(table.total[at:])
    return replace(table, columns=columns, batches=_SpreadRows(table, spread, key, at), total=total)


def spread_of(report, function, args: tuple = ()):
    """What ``with_spread`` takes: ``function(report, *args)`` (a report method) made by a worker process on a
    large collection with a core to spare (a pass over every task, beside the main one's), else a call."""
    from msprof.workers import Later, several_cores

    if report.count("task") >= PARALLEL_MIN_TASKS and several_cores():
        return Later(report, function, args)
    return lambda: function(report, *args)


class _SpreadRows:
    """A table's batches with the spread of each row inserted at ``at``. ``start`` starts the workers that
    make either (msprof.api.show starts them once the tables are chosen)."""

    def __init__(self, table: Table, spread, key: Callable[[tuple], tuple], at: int):
        self.table, self.spread, self.key, self.at = table, spread, key, at

    def start(self) -> None:
        for part in (self.table.batches, self.spread):
            if hasattr(part, "start"):
                part.start()

    def __iter__(self) -> Iterator[list]:
        found = next(iter(self.spread)) if hasattr(self.spread, "start") else self.spread()
        at, key = self.at, self.key
        for batch in chunks(self.table.rows(), 1024):
            yield [row[:at] + found.get(key(row), (None, None)) + row[at:] for row in batch]


def _r3(value: Optional[float]) -> Optional[float]:
    return None if value is None else (round(value, 3) or 0.0)
