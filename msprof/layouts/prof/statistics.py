"""PROF statistics of one device: op_statistic (docs/prof-format.md §6) and api_statistic (§7), with the reference
analyser's sums, rounding and order."""
from operator import itemgetter
from typing import Dict, Iterator, List, Tuple

from msprof.decode.api_event import LEVELS, NAMED_BY_TYPE
from msprof.contract import Selection
from msprof.layouts.prof.tasks import task_query, where
from msprof.layouts.timebase import ProfTime
from msprof.spread import counted_spread, group_spread
from msprof.tables import INT, NA, NUMBER, Column, Table, Tap

NOT_IN_OP_SUMMARY = ("WRITE_BACK", "INVALID")
# op_statistic's tasks (and compare/advise's): those starting after the collection began, a task's start in
# monotonic ns against the beginning's (ProfTime's ``begin_mono_ns``) — not their epoch µs in floats, which
# cannot hold a fraction of a µs at 1.7e15
STARTED = "start_ns > :begin_mono_ns"
# The tasks op_statistic counts are GE tasks of an op type (the reference keeps every GE task in the total the
# ratios divide, then drops the rows of op type "N/A" and of WRITE_BACK and INVALID tasks)
_COUNTED = "op_type IS NOT NULL AND ge = 1"


# --- op_statistic ---------------------------------------------------------------------------------------------
def op_statistic(report, selection: Selection = Selection(), batches=None, gathered=None) -> Table:
    """``batches``: its rows as ``op_statistic_rows`` makes them, when they are made elsewhere (show: by a
    worker process); ``gathered``: the sums op_summary's pass gathered (msprof.summary), when it did."""
    columns = [report.device_column(False), Column("OP Type"), Column("Core Type"), Column("Count", INT)] + [
        Column(name, NUMBER) for name in ("Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)",
                                          "Ratio(%)")]
    return Table("op_statistic", "op_statistic", columns,
                 [op_statistic_rows(report, selection, gathered)] if batches is None else batches)


def op_statistic_rows(report, selection: Selection = Selection(), gathered=None) -> List[tuple]:
    """``gathered``: per part of op_summary's pass (in order), what its taps gathered (``OpTotals``: the sums
    per op of every task, which only a pass over everything has); without it, a query of their own."""
    if gathered is not None and selection.everything:
        ops = OpTotals.merged([taps[0] for taps in gathered])
        names = {op_id: (op_type, task_type) for op_id, op_type, task_type in report.conn.execute(
            "SELECT op_id, op_type, coalesce(task_type, 'UNKNOWN') FROM host.op")}
        return _op_statistic_of(report, (names[op_id] + tuple(ops[op_id]) for op_id in sorted(ops)))
    conditions, args = where(report, selection)
    # grouped by op id (an integer: a cheap sort), then by (op type, task type) here: a few rows. The
    # reference keeps durations in an INTEGER column, so whole ns are integers there and its average
    # sum/count of a group of them is an integer division (``fractional``: the group's other durations)
    if selection.everything and not relaunched(report):
        sql = _PER_TASK_ID
    else:
        tasks = task_query(report, ("op_id", "ge", "op_type", "task_type", "start_ns", "end_ns"), within=selection)
        sql = (f"SELECT op_type, task_type, count(*), sum(d), min(d), max(d), sum(d != CAST(d AS INTEGER)) FROM"
               f" (SELECT op_id, op_type, task_type, end_ns - start_ns AS d, start_ns FROM ({tasks})"
               f" WHERE {conditions} AND {_COUNTED} AND {STARTED}) GROUP BY op_id")
    return _op_statistic_of(report, report.conn.execute(sql, args))


def op_spread(report, selection: Selection = Selection()) -> dict:
    """(op type, core type) → (median, sample std dev) of the µs of op_statistic's row (show): the tasks it
    counts."""
    conditions, args = where(report, selection)
    tasks = task_query(report, ("op_id", "ge", "op_type", "task_type", "start_ns", "end_ns"), within=selection)
    return group_spread(report.conn, f"SELECT op_type AS k0, coalesce(task_type, 'UNKNOWN') AS k1,"
                        f" end_ns - start_ns AS d FROM ({tasks}) WHERE {conditions} AND {_COUNTED} AND {STARTED}",
                        args, 2, 0.001)


def _per_task_id_sql() -> str:
    """op_statistic's sums when every execution of a (stream, task) is its one launch's (a static graph): the
    tasks are summed up per (stream, task) on their own, and only those sums meet the host tables, where the
    general query joins every task to them."""
    ns = "(" + ProfTime.device_ns_sql("t.{0}") + ")"
    return (f"SELECT o.op_type, coalesce(o.task_type, 'UNKNOWN') AS task_type, sum(g.n), sum(g.s), min(g.lo),"
            " max(g.hi), sum(g.fr) FROM ("
            "  SELECT stream_id, task_id, count(*) AS n, sum(d) AS s, min(d) AS lo, max(d) AS hi,"
            "   sum(d != CAST(d AS INTEGER)) AS fr"
            f"  FROM (SELECT t.stream_id, t.task_id, {ns.format('end_syscnt')} - {ns.format('start_syscnt')}"
            f"   AS d, {ns.format('start_syscnt')} AS start_ns FROM task t WHERE t.start_syscnt IS NOT NULL"
            f"   AND t.end_syscnt IS NOT NULL) WHERE {STARTED} GROUP BY stream_id, task_id) g"
            " JOIN host.launch h ON h.device_id = :dev AND h.stream_id = g.stream_id AND h.task_id = g.task_id"
            "  AND h.occ = 0"
            f" JOIN host.op o ON o.op_id = h.op_id AND o.kernel = 1 WHERE {_COUNTED} GROUP BY o.op_id")


_PER_TASK_ID = _per_task_id_sql()


def relaunched(report) -> bool:
    """Whether the host launched a (stream, task) of this device more than once (a per-launch run, or ids
    reused): its executions then belong to different launches."""
    return report.conn.execute("SELECT 1 FROM host.launch_count WHERE device_id = :dev AND launches > 1 LIMIT 1",
                               report.params).fetchone() is not None


def _op_statistic_of(report, per_op) -> List[tuple]:
    """op_statistic's rows from the sums of each op (op type, task type, count, total, min and max duration,
    fractional durations), in op id order."""
    merged: Dict[tuple, list] = {}
    for op_type, task_type, *sums in per_op:
        _add_sums(merged, (op_type, task_type), sums)
    # (the reference's GROUP BY order)
    groups = sorted((key + tuple(sums) for key, sums in merged.items()), key=lambda g: (g[0], g[1]))
    grand = sum(g[3] for g in groups)
    rows = []
    for op_type, task_type, count, total, low, high, fractional in groups:
        if op_type == NA or task_type in NOT_IN_OP_SUMMARY:
            continue
        ratio = round(round(total / grand * 100, 6), 3) if grand else 0.0       # (a float, as the reference's)
        average = total / count if fractional else _truncated_division(int(total), count)
        rows.append((report.device_number, op_type, task_type, count, _us(total), _us(low), _us(average),
                     _us(high), ratio, round(total, 6), round(total / grand * 100, 6) if grand else 0.0))
    # its report: rows by ratio (6 decimals) descending, then read back by total time descending
    rows.sort(key=lambda r: -r[10])
    rows.sort(key=lambda r: -r[9])
    return [r[:9] for r in rows]


class OpTotals(Tap):
    """op_statistic's sums per op, gathered from the pass of op_summary and task_time over every timed task
    (a query of its own would join every task to its launch and op again). The tasks op_statistic counts (started after the collection began, GE tasks of an op type) by op
    id: count, total, min and max of the durations (ns, floats, summed in start order) and how many are not
    whole."""

    inputs = (f"CASE WHEN op_type IS NOT NULL AND ge = 1 AND {STARTED} THEN op_id END", "dur")

    def __init__(self):
        super().__init__()
        self.ops: Dict[int, list] = {}

    def feed(self, columns: List[tuple]) -> None:
        ops = self.ops
        for op_id, d in zip(*columns):
            if op_id is None:
                continue
            sums = ops.get(op_id)
            if sums is None:
                ops[op_id] = [1, d, d, d, 0 if d.is_integer() else 1]
                continue
            sums[0] += 1
            sums[1] += d
            if d < sums[2]:
                sums[2] = d
            if d > sums[3]:
                sums[3] = d
            if not d.is_integer():
                sums[4] += 1

    def result(self) -> Dict[int, list]:
        return self.ops

    @staticmethod
    def merged(parts: List[Dict[int, list]]) -> Dict[int, list]:
        """The sums of parts of the tasks (in start order) as one."""
        ops: Dict[int, list] = {}
        for part in parts:
            for op_id, sums in part.items():
                _add_sums(ops, op_id, sums)
        return ops


def _add_sums(groups: dict, key, sums) -> None:
    """Sums of durations (count, total, min, max, how many not whole) added to those of ``groups[key]``."""
    group = groups.get(key)
    if group is None:
        groups[key] = list(sums)
        return
    count, total, low, high, fractional = sums
    group[:] = [group[0] + count, group[1] + total, min(group[2], low), max(group[3], high), group[4] + fractional]


def _truncated_division(total: int, count: int) -> int:
    """SQLite's integer division (toward zero)."""
    return total // count if total >= 0 else -(-total // count)


def _us(ns: float) -> float:
    return round(round(ns, 6) / 1000, 3)


# --- api_statistic --------------------------------------------------------------------------------------------
def api_statistic(report) -> Table:
    columns = [report.device_column(False), Column("Level"), Column("API Name")] + [
        Column(name, INT if name == "Count" else NUMBER)
        for name in ("Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")]
    return Table("api_statistic", "api_statistic", columns, [api_rows(report)])


def api_rows(report) -> list:
    """Per (name, level): the reference's sums and variance of µs durations (docs/prof-format.md §7).

    The reference keeps every call's duration and sums floats in record order; msprof sums the distinct
    durations and their counts as integers (ticks; squares in thousandths, each rounded to 3 decimals
    first): the import counted the calls by (level, key, duration) as it decoded them (``api_duration``),
    so Python here reads a few thousand groups, twice (the variance needs the average). The two agree
    wherever a result is not within a hair of a half (the reference's float error is far smaller than the
    3rd decimal); a group whose exact total or variance is that close to a tie (14.0625 rounds either way)
    is summed again as the reference sums it: its calls in record order, with Python's sum()."""
    to_us = report.time.host_us
    sums = _api_sums(report)
    averages = {k: round(round(to_us(g[1]), 3) / g[0], 3) for k, g in sums.items()}
    squares = dict.fromkeys(sums, 0)
    for name, level, _k, delta, n in report.conn.execute(_API_GROUPS):
        squares[(name, level)] += round(round((to_us(delta) - averages[(name, level)]) ** 2, 3) * 1000) * n
    rows = []
    for (name, level) in sorted(sums, key=lambda k: (k[0], LEVELS.get(k[1], str(k[1])))):
        count, ticks, low, high, keys = sums[(name, level)]
        total, average = round(to_us(ticks), 3), averages[(name, level)]
        square_sum = squares[(name, level)]            # thousandths
        if _near_half(to_us(ticks) * 1000) or _near_half(square_sum / count):
            total, average, variance = _reference_sums(report, level, sorted(keys), count)
        else:
            variance = round(square_sum / 1000 / count, 3)
        rows.append((report.device_number, LEVELS.get(level, str(level)), name, total, count, average,
                     round(to_us(low), 3), round(to_us(high), 3), variance))
    return rows


def api_spread(report) -> dict:
    """(name, level name) → (median, sample std dev) of the µs of api_statistic's row (show)."""
    return counted_spread(((name, level), us, n) for name, level, us, n in api_durations(report))


def api_durations(report) -> Iterator[Tuple[str, str, float, int]]:
    """api_statistic's calls counted by duration, from the import's groups of calls of one duration: (name,
    level name, µs, calls)."""
    to_us = report.time.host_us
    return ((name, LEVELS.get(level, str(level)), to_us(delta), n)
            for name, level, _k, delta, n in report.conn.execute(_API_GROUPS))


# The import's groups of calls (level, key, duration in ticks, count), each named. The levels named by their
# struct type are counted by it, not by item id (a node-level call's item is its op: a thousand ops would
# give a thousand times the rows for one name).
_TYPED = f"level IN ({', '.join(map(str, sorted(NAMED_BY_TYPE)))})"
_API_GROUPS = (f"SELECT CASE WHEN g.{_TYPED} THEN coalesce(tn.name, CAST(g.k AS TEXT))"
               " ELSE coalesce(hs.text, CAST(g.k AS TEXT)) END, g.level, g.k, g.d, g.n FROM host.api_duration g"
               " LEFT JOIN host.type_name tn ON tn.level = g.level AND tn.type = g.k"
               " LEFT JOIN host.hash_string hs ON hs.hash = g.k")


def _api_sums(report) -> Dict[tuple, list]:
    """(name, level) → [count, total ticks, min, max, the raw keys of its groups]."""
    sums: Dict[tuple, list] = {}
    for name, level, k, delta, n in report.conn.execute(_API_GROUPS):
        group = sums.get((name, level))
        if group is None:
            sums[(name, level)] = [n, delta * n, delta, delta, {k}]
        else:
            group[0] += n
            group[1] += delta * n
            group[2] = min(group[2], delta)
            group[3] = max(group[3], delta)
            group[4].add(k)
    return sums


def _reference_sums(report, level: int, keys: List[int], count: int) -> Tuple[float, float, float]:
    """(total, average, variance) of one API's calls summed as the reference sums them: every call's µs in
    record order, by Python's sum() (streamed from SQLite, one call at a time)."""
    key = "struct_type" if level in NAMED_BY_TYPE else "item_id"
    sql = (f"SELECT [end] - begin FROM host.api WHERE from_events = 0 AND level = ? AND {key} IN"
           f" ({', '.join('?' * len(keys))}) ORDER BY seq")
    to_us = report.time.host_us
    total = round(sum(map(to_us, map(itemgetter(0), report.conn.execute(sql, (level, *keys))))), 3)
    average = round(total / count, 3)
    squares = sum(round((to_us(d) - average) ** 2, 3) for (d,) in report.conn.execute(sql, (level, *keys)))
    return total, average, round(squares / count, 3)


def _near_half(thousandths: float) -> bool:
    """Whether a value in thousandths is within a hair of a half: its 3-decimal rounding depends on the last bits
    of the reference's float sums."""
    return abs(thousandths - int(thousandths) - 0.5) < 1e-6
