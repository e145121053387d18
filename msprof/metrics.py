"""PMU event registry and the metric columns built from it — data, not if-chains (outputs.md §3.1).

A metric is (column name, formula kind, event names). Formula kinds:
* ``ratio``  — event cycles / total cycles of the task (fraction, 4 decimals)
* ``count``  — the counter itself (integer: bytes)
* ``sum``    — the sum of several counters (integer)
* ``memory_bound`` — max(Dstr, DLD, WLD ratio) / max(Mac Busy, Vec Ppen ratio); N/A when the divisor is 0
"""
from typing import Dict, List, Optional, Tuple

SVP_EVENTS: Dict[int, str] = {
    0x300: "mac_busy", 0x301: "mac_ppen", 0x302: "vec_busy", 0x303: "vec_ppen", 0x304: "dstr",
    0x305: "dtrans", 0x306: "dld", 0x307: "wld", 0x308: "ddr_read", 0x309: "ddr_write",
}

SVP_METRICS: List[Tuple[str, str, Tuple[str, ...]]] = [
    ("Mac Busy Ratio", "ratio", ("mac_busy",)),
    ("Mac Ppen Ratio", "ratio", ("mac_ppen",)),
    ("Vec Busy Ratio", "ratio", ("vec_busy",)),
    ("Vec Ppen Ratio", "ratio", ("vec_ppen",)),
    ("Dstr Ratio", "ratio", ("dstr",)),
    ("Dtrans Ratio", "ratio", ("dtrans",)),
    ("DLD Ratio", "ratio", ("dld",)),
    ("WLD Ratio", "ratio", ("wld",)),
    ("Memory Bound", "memory_bound", ("dstr", "dld", "wld", "mac_busy", "vec_ppen")),
    ("DDR Read(byte)", "count", ("ddr_read",)),
    ("DDR Write(byte)", "count", ("ddr_write",)),
    ("DDR Total(byte)", "sum", ("ddr_read", "ddr_write")),
]


def event_items(sample: dict) -> List[Tuple[int, str]]:
    """(id, text as written) of each event of sample.json's ``ai_core_profiling_events`` (hex list), in PMU
    slot order; an item that is not a 32-bit hex number is skipped."""
    text = str(sample.get("ai_core_profiling_events") or "").strip()
    items = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if part and len(part) <= 10:
            try:
                value = int(part, 16)
            except ValueError:
                continue
            if value < 1 << 32:
                items.append((value, part))
    return items


def event_ids(sample: dict, slots: int, notices=None, pmu_records: bool = False) -> List[int]:
    """PMU slot order from sample.json ``ai_core_profiling_events``; empty when absent. A record has ``slots``
    counters: events beyond them have no counter (and are said, with ``notices``). With ``pmu_records`` (there
    are PMU files), no events at all is said too: the counters are there but cannot be named."""
    ids = [value for value, _text in event_items(sample)]
    if not ids and pmu_records and notices is not None:
        notices.warn("no PMU event ids (sample.json's ai_core_profiling_events; sample.json missing or without it):"
                     " the PMU records' counters cannot be named, so op_summary has no PMU metric columns")
    if len(ids) > slots and notices is not None:
        notices.warn(f"sample.json names {len(ids)} PMU events; a record has {slots} counters: events "
                     + ", ".join(f"0x{e:x}" for e in ids[slots:]) + " have none and are ignored")
    return ids[:slots]


def event_name(event_id: int) -> str:
    return SVP_EVENTS.get(event_id, f"0x{event_id:x}")


class MetricSet:
    """The op_summary metric columns available for the recorded events, as SQL expressions.

    ``task_columns`` are computed from one PMU row (alias ``p``), ``total_columns`` from sums over the
    AA_CORE tasks of an iteration (cycle-weighted ratios). NULL means N/A.
    """

    def __init__(self, slot_events: List[int]):
        self.slot_of = {event_name(e): slot for slot, e in enumerate(slot_events)}
        self.columns: List[Tuple[str, str, Tuple[int, ...]]] = []
        for column, kind, names in SVP_METRICS:
            if all(n in self.slot_of for n in names):
                self.columns.append((column, kind, tuple(self.slot_of[n] for n in names)))
        for slot, e in enumerate(slot_events):  # unknown ids: raw counter columns named by the id
            if e not in SVP_EVENTS:
                self.columns.append((f"0x{e:x}", "count", (slot,)))

    @property
    def names(self) -> List[str]:
        return [c[0] for c in self.columns]

    def kinds(self) -> List[str]:
        return [c[1] for c in self.columns]

    def sql(self, counter: str, cycles: str) -> List[str]:
        """One SQL expression per column; ``counter`` formats a slot number into a counter expression."""
        out = []
        for _column, kind, slots in self.columns:
            c = [counter.format(s) for s in slots]
            out.append(_FORMULAS[kind](c, cycles))
        return out


def rounded_ratio(numerator: str, denominator: str, decimals: int = 4) -> str:
    """numerator/denominator of two integer expressions, rounded half up to ``decimals``, exactly.

    Integer arithmetic instead of SQLite's round() (which goes through text and is the hot spot of a
    large export); dividing the rounded integer by 10^k yields the same double as the decimal literal.
    NULL (N/A) when the denominator is 0.
    """
    scale = 10 ** decimals
    return (f"(({numerator}) * {2 * scale} + ({denominator})) / (2 * nullif({denominator}, 0))"
            f" / {float(scale)!r}")


def py_round_sql(x: str, digits: int) -> str:
    """SQL for Python's round(x, digits) of a REAL (or 0) ``x``, exactly, at a third of the cost of calling
    Python (the connection's ``py_round``) for each value.

    Python rounds the exact binary value, half to even. For 0 < x < 10^6:
    * away from a tie — x × 10^digits more than 1e-6 from a half, which its double arithmetic cannot get
      wrong — the result is the nearest integer to x × 10^digits over 10^digits;
    * at a tie, which a double can hold only as an odd multiple of 2^-(digits+1) (then x × 10^digits is
      exact and ends in .5), it is the even one of its two neighbours.
    Anything else (near a tie but not on it, negative or large values) is left to ``py_round``. ``x`` is
    evaluated several times: pass a column."""
    scale = float(10 ** digits)
    y = f"{x} * {scale!r}"
    half = f"{x} * {float(2 ** (digits + 1))!r}"
    return (f"(CASE WHEN {x} > 0 AND {x} < 1e6 AND abs({y} - CAST({y} AS INTEGER) - 0.5) > 1e-6"
            f" THEN CAST({y} + 0.5 AS INTEGER) / {scale!r}"
            f" WHEN {x} > 0 AND {x} < 1e6 AND {half} = CAST({half} AS INTEGER)"
            f" THEN (CAST({y} AS INTEGER) + CAST({y} AS INTEGER) % 2) / {scale!r}"
            f" WHEN {x} = 0 THEN {x} ELSE py_round({x}, {digits}) END)")


# Ratios are fractions of total cycles; Memory Bound's ratios share the divisor, so it is the ratio
# of the raw counters (N/A when the divisor is 0).
_FORMULAS = {
    "ratio": lambda c, cycles: rounded_ratio(c[0], cycles),
    "count": lambda c, cycles: f"({c[0]})",
    "sum": lambda c, cycles: "(" + " + ".join(c) + ")",
    "memory_bound": lambda c, cycles: (f"CASE WHEN {cycles} > 0 THEN "
                                       f"{rounded_ratio(f'max({c[0]}, {c[1]}, {c[2]})', f'max({c[3]}, {c[4]})')} END"),
}


# ---------------------------------------------------------------------------------------------------------
# Ascend AI Core metric sets (task-based PMU, aicore.data): which events, which op_summary columns, and how
# each is computed (docs/prof-format.md §5; the formulas and their rounding follow msprof's analyser)
# ---------------------------------------------------------------------------------------------------------
# A column is (name, formula kind, args). Kinds:
#   aicore_time   cycles/f · ceil(B/C)/B µs, rounded to 2 decimals (Python round) before anything else uses it
#   cycles        total cycles of the task
#   ratio         sum of the ratios event/cycles of the events in args
#   pipe_time     aicore_time · ratio of one event
#   miss_rate     (event b / cycles) / (event a / cycles); event b / cycles when event a's counter is 0
#   memory_bound  ratio column args[0] / max(ratio columns args[1:]), from their rounded values
#   cube_usage    100 · cycles·1000 / (f · C · duration ns); 0 when ratio column args[0] is 0
#   fops          Σ ratio·cycles·weight over args ((event, weight) pairs)
#   bandwidth     GB/s of one event (args: event, bytes per count): count·bytes / (cycles/f Hz) / 2^33;
#                 the raw counter when the task has no cycles, 0 without a frequency
#   event_count   a counter of a set whose columns are counts (L2Cache), printed as the other floats
#   slot_count    the same, of a PMU slot (args: the slot): Custom sets, whose events may repeat
#   counter       a PMU slot's counter as it is, an integer (args: the slot; sets msprof has no formulas for)
# How each is printed is its column kind's (msprof.tables): the reference rounds memory_bound,
# cube_utilization and aicore_time with Python's round() (ROUND3), every other float with SQLite's
# round(x, 3) (SQLITE_ROUND3); cycles and counters are integers.
# Which columns a set has, and in which order, is what the reference prints for it on chips v2/v3: its metric
# list, less the pairs it drops when both are present (aic_utils: l2_read/l2_write_bw from Memory,
# ub_read/ub_write_bw_mte from MemoryUB), so some recorded events have no column.
PIPE_UTILIZATION = [
    ("aicore_time(us)", "aicore_time", ()),
    ("total_cycles", "cycles", ()),
    ("vec_time(us)", "pipe_time", (0x8,)), ("vec_ratio", "ratio", (0x8,)),
    ("mac_time(us)", "pipe_time", (0xA,)), ("mac_ratio", "ratio", (0xA,)),
    ("scalar_time(us)", "pipe_time", (0x9,)), ("scalar_ratio", "ratio", (0x9,)),
    ("mte1_time(us)", "pipe_time", (0xB,)), ("mte1_ratio", "ratio", (0xB,)),
    ("mte2_time(us)", "pipe_time", (0xC,)), ("mte2_ratio", "ratio", (0xC,)),
    ("mte3_time(us)", "pipe_time", (0xD,)), ("mte3_ratio", "ratio", (0xD,)),
    ("icache_miss_rate", "miss_rate", (0x54, 0x55)),
    ("memory_bound", "memory_bound", ("mte2_ratio", "vec_ratio", "mac_ratio")),
    ("cube_utilization(%)", "cube_usage", ("mac_ratio",)),
]


def _arithmetic(vector_weights) -> list:
    return [
        ("aicore_time(us)", "aicore_time", ()),
        ("total_cycles", "cycles", ()),
        ("mac_fp16_ratio", "ratio", (0x49,)),
        ("mac_int8_ratio", "ratio", (0x4A,)),
        ("vec_fp32_ratio", "ratio", (0x4B,)),
        ("vec_fp16_ratio", "ratio", (0x4C, 0x4D)),
        ("vec_int32_ratio", "ratio", (0x4E,)),
        ("vec_misc_ratio", "ratio", (0x4F,)),
        ("cube_fops", "fops", ((0x49, 8192.0), (0x4A, 16384.0))),
        ("vector_fops", "fops", tuple(vector_weights)),
    ]


# vector fops weights of events 0x4b..0x4f by chip (platform_version): chip v2 ("1"), chip v1 ("0"), chip v3
# and later (the default)
VECTOR_WEIGHTS = {
    "1": ((0x4B, 64.0), (0x4C, 128.0), (0x4D, 64.0), (0x4E, 64.0), (0x4F, 32.0)),
    "0": ((0x4B, 32.0), (0x4C, 128.0), (0x4D, 64.0), (0x4E, 64.0), (0x4F, 32.0)),
}
DEFAULT_VECTOR_WEIGHTS = ((0x4B, 64.0), (0x4C, 128.0), (0x4D, 64.0), (0x4E, 16.0), (0x4F, 16.0))


def _bandwidths(*columns) -> list:
    return [("aicore_time(us)", "aicore_time", ()), ("total_cycles", "cycles", ())] + [
        (f"{name}(GB/s)", "bandwidth", (event, per_count)) for name, event, per_count in columns]


# bytes per count of each bandwidth event (the reference's pipe size × scalar)
MEMORY = _bandwidths(("ub_read_bw", 0x15, 1024.0), ("ub_write_bw", 0x16, 1024.0),
                     ("l1_read_bw", 0x31, 4096.0), ("l1_write_bw", 0x32, 2048.0),
                     ("main_mem_read_bw", 0x12, 64.0), ("main_mem_write_bw", 0x13, 64.0))
MEMORY_L0 = _bandwidths(("l0a_read_bw", 0x1B, 4096.0), ("l0a_write_bw", 0x1C, 4096.0),
                        ("l0b_read_bw", 0x21, 2048.0), ("l0b_write_bw", 0x22, 2048.0),
                        ("l0c_read_bw", 0x27, 2048.0), ("l0c_write_bw", 0x29, 2048.0),
                        ("l0c_read_bw_cube", 0x28, 2048.0), ("l0c_write_bw_cube", 0x2A, 2048.0))
MEMORY_UB = _bandwidths(("ub_read_bw_vector", 0x43, 256.0), ("ub_write_bw_vector", 0x44, 256.0),
                        ("ub_read_bw_scalar", 0x37, 128.0), ("ub_write_bw_scalar", 0x38, 128.0))
RESOURCE_CONFLICT_RATIO = [
    ("aicore_time(us)", "aicore_time", ()),
    ("total_cycles", "cycles", ()),
    ("vec_bankgroup_cflt_ratio", "ratio", (0x64,)),
    ("vec_bank_cflt_ratio", "ratio", (0x65,)),
    ("vec_resc_cflt_ratio", "ratio", (0x66,)),
]
L2_CACHE = [("aicore_time(us)", "aicore_time", ()), ("total_cycles", "cycles", ())] + [
    (name, "event_count", (event,)) for name, event in (
        ("write_cache_hit", 0x500), ("write_cache_miss_allocate", 0x502), ("r0_read_cache_hit", 0x504),
        ("r0_read_cache_miss_allocate", 0x506), ("r1_read_cache_hit", 0x508),
        ("r1_read_cache_miss_allocate", 0x50A))]

ASCEND_METRIC_SETS = {
    "PipeUtilization": lambda platform: PIPE_UTILIZATION,
    "ArithmeticUtilization": lambda platform: _arithmetic(VECTOR_WEIGHTS.get(platform, DEFAULT_VECTOR_WEIGHTS)),
    "Memory": lambda platform: MEMORY,
    "MemoryL0": lambda platform: MEMORY_L0,
    "MemoryUB": lambda platform: MEMORY_UB,
    "ResourceConflictRatio": lambda platform: RESOURCE_CONFLICT_RATIO,
    "L2Cache": lambda platform: L2_CACHE,
}
# the kinds printed as Python rounds (ROUND3); integers: INT; every other: SQLITE_ROUND3
PYTHON_ROUNDED = ("aicore_time", "memory_bound", "cube_usage")
INTEGERS = ("cycles", "counter")


class AscendMetrics:
    """The op_summary PMU columns of one device, from sample.json's metric set and its event slot order, as
    SQL over a PMU row and the task's aicore time and duration, in three steps: ``inner`` over a task row
    with the PMU record (``total_cycles``, counters ``c<slot>`` and their ratios ``r<slot>``:
    ``counter_ratios``), ``outer`` over that (what several columns or a kind's guard read more than once),
    ``columns`` over that. NULL (N/A) for a task without a PMU record.

    A known set is used only when every event it needs was recorded; otherwise the columns are aicore_time,
    total_cycles and the raw counters named by event id (where the reference prints no PMU column)."""

    def __init__(self, metric_set: str, slot_events: List[int], platform_version: str,
                 event_texts: Optional[List[str]] = None):
        self.name = metric_set
        self.slot_of = {e: i for i, e in enumerate(slot_events)}
        make = ASCEND_METRIC_SETS.get(metric_set)
        columns = make(platform_version) if make else []
        if metric_set.startswith("Custom"):
            columns = self._custom(slot_events, event_texts)
        needed = {event for _name, kind, args in columns for event in _events(kind, args)}
        # (the events of a known set that were not recorded: it then falls back to the raw counters)
        self.missing = sorted(needed - set(self.slot_of))
        if columns and not self.missing:
            self.columns = columns
        else:
            self.columns = [("aicore_time(us)", "aicore_time", ()), ("total_cycles", "cycles", ())] + [
                (f"0x{e:x}", "counter", (slot,)) for slot, e in enumerate(slot_events)]

    def _custom(self, slot_events: List[int], texts: Optional[List[str]]) -> list:
        """The user's own events ("Custom:0x8,…"): each slot's count, named as the reference names it, the
        event as written with "r" for "0x" (r8, r08, rA); a slot repeating an event is its own column (#2)."""
        if not texts or len(texts) != len(slot_events):
            texts = [f"0x{e:x}" for e in slot_events]
        columns, seen = [("aicore_time(us)", "aicore_time", ()), ("total_cycles", "cycles", ())], {}
        for slot, (event, text) in enumerate(zip(slot_events, texts)):
            name = text.replace("0x", "r")
            seen[name] = seen.get(name, 0) + 1
            columns.append((name if seen[name] == 1 else f"{name}#{seen[name]}", "slot_count", (slot,)))
        return columns

    @property
    def names(self) -> List[str]:
        return [c[0] for c in self.columns]

    def ratio(self, event: int) -> str:
        return f"r{self.slot_of[event]}"

    def counters(self) -> List[int]:
        """The slots whose raw counter a column reads (c<slot>: miss_rate's test, counter columns)."""
        slots = []
        for _name, kind, args in self.columns:
            if kind in ("miss_rate", "bandwidth", "event_count"):
                slots.append(self.slot_of[args[0]])
            elif kind in ("counter", "slot_count"):
                slots.append(args[0])
        return sorted(set(slots))

    def inner(self, pmu: str = "") -> List[str]:
        """The ratio columns memory_bound and cube_utilization read, rounded as printed (``m<k>``), over the
        PMU row ``pmu`` (beside ``counter_ratios``, whose columns they cannot name)."""
        divided = {c for _n, kind, args in self.columns if kind in ("memory_bound", "cube_usage") for c in args}
        return [f"round({' + '.join(['0.0'] + [ratio_sql(self.slot_of[e], pmu) for e in args])}, 3) AS m{k}"
                for k, (name, kind, args) in enumerate(self.columns) if kind == "ratio" and name in divided]

    def outer(self, dur_ns: str, aic_mhz: Optional[float], core_num: Optional[int]) -> List[str]:
        """The columns a kind prints from several references (``x<k>``): memory_bound, cube_utilization."""
        rounded = {name: f"m{k}" for k, (name, kind, _a) in enumerate(self.columns) if kind == "ratio"}
        out = []
        for k, (name, kind, args) in enumerate(self.columns):
            if kind == "memory_bound":
                top = f"max({', '.join(rounded[c] for c in args[1:])})"
                out.append(f"CASE WHEN {top} THEN {rounded[args[0]]} / {top} ELSE 0 END AS x{k}")
            elif kind == "cube_usage":
                if not core_num or not aic_mhz:
                    out.append(f"0 AS x{k}")
                else:
                    out.append(f"CASE WHEN {rounded[args[0]]} AND total_cycles AND {dur_ns} THEN total_cycles /"
                               f" ({float(aic_mhz)!r} * {int(core_num)} * {dur_ns}) * 1000 * 100 ELSE 0 END AS x{k}")
        return out

    def column_sql(self, aicore_time: str, aic_mhz: Optional[float] = None) -> List[Tuple[str, str, str]]:
        """(name, how it is printed: "python"/"sqlite"/"int", SQL) per column, over a row holding the inner
        and outer columns; ``aicore_time``: the column of the task's aicore time (rounded to 2 decimals);
        ``aic_mhz``: the AI Core frequency (bandwidths)."""
        out = []
        for k, (name, kind, args) in enumerate(self.columns):
            if kind == "aicore_time":
                expr = aicore_time
            elif kind == "cycles":
                expr = "total_cycles"
            elif kind in ("counter", "slot_count"):
                expr = f"c{args[0]}"
            elif kind == "ratio":
                expr = " + ".join(self.ratio(e) for e in args)
            elif kind == "pipe_time":
                expr = f"{aicore_time} * {self.ratio(args[0])}"
            elif kind == "miss_rate":
                a, b = args
                expr = f"CASE WHEN c{self.slot_of[a]} THEN {self.ratio(b)} / {self.ratio(a)} ELSE {self.ratio(b)} END"
            elif kind in ("memory_bound", "cube_usage"):
                expr = f"x{k}"
            elif kind == "fops":
                expr = " + ".join(["0.0"] + [f"{self.ratio(e)} * total_cycles * {w!r}" for e, w in args])
            elif kind == "bandwidth":
                # (bytes per count are powers of two: the product is exact in any order, as is / 2^33)
                c = f"c{self.slot_of[args[0]]}"
                per_second = (f"CAST({c} AS REAL) * {args[1]!r} / (total_cycles / {float(aic_mhz) * 1e6!r})"
                              f" / 8589934592.0" if aic_mhz else "0")
                expr = f"CASE WHEN total_cycles THEN {per_second} ELSE {c} END"
            elif kind == "event_count":
                expr = f"c{self.slot_of[args[0]]}"
            else:  # pragma: no cover - a table error
                raise ValueError(kind)
            printed = "python" if kind in PYTHON_ROUNDED else "int" if kind in INTEGERS else "sqlite"
            out.append((name, printed, expr))
        return out


def _events(kind: str, args: tuple) -> tuple:
    """The events a column of ``kind`` reads (the others' args name columns or are empty)."""
    if kind in ("ratio", "pipe_time", "miss_rate"):
        return args
    if kind == "fops":
        return tuple(e for e, _w in args)
    if kind in ("bandwidth", "event_count"):
        return args[:1]
    return ()


def counter_ratios(pmu: str = "") -> List[str]:
    """The ratio of each counter of a PMU row (alias ``pmu``) to its total cycles, as columns ``r0``…``r7``
    (the raw counter without cycles, as the reference): what ``AscendMetrics`` columns read."""
    return [f"{ratio_sql(i, pmu)} AS r{i}" for i in range(8)]


def ratio_sql(slot: int, pmu: str = "") -> str:
    """A counter's ratio to the total cycles; without cycles the reference keeps the raw counter instead."""
    return (f"CASE WHEN {pmu}total_cycles THEN CAST({pmu}c{slot} AS REAL) / {pmu}total_cycles"
            f" ELSE CAST({pmu}c{slot} AS REAL) END")


def aicore_time_sql(cycles: str, block_num: str, aic_mhz: Optional[float], core_num: Optional[int]) -> str:
    """cycles·10⁶/f_Hz / B · ceil(B/C), in the reference's order of float operations, before its 2-decimal
    rounding; 0.0 without a block num, core count or frequency (the reference stores its 0 as a REAL)."""
    if not core_num or not aic_mhz:
        return "0.0"
    f_hz = float(aic_mhz) * 1e6
    c = int(core_num)
    return (f"(CASE WHEN {block_num} THEN {cycles} * 1000000 / {f_hz!r} / {block_num} * (({block_num} + {c} - 1)"
            f" / {c}) ELSE 0.0 END)")
