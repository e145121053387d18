"""PMU event registry and the metric columns built from it — data, not if-chains (outputs.md §3.1).

A metric is (column name, formula kind, event names). Formula kinds:
* ``ratio``  — event cycles / total cycles of the task (fraction, 4 decimals)
* ``count``  — the counter itself (integer: bytes)
* ``sum``    — the sum of several counters (integer)
* ``memory_bound`` — max(Dstr, DLD, WLD ratio) / max(Mac Busy, Vec Ppen ratio); N/A when the divisor is 0
"""
from typing import Dict, List, Tuple

SVP_EVENTS: Dict[int, str] = {
    0x300: "mac_busy", 0x301: "mac_ppen", 0x302: "vec_busy", 0x303: "vec_ppen", 0x304: "dstr",
    0x305: "dtrans", 0x306: "dld", 0x307: "wld", 0x308: "ddr_read", 0x309: "ddr_write",
}
DEFAULT_SVP_EVENT_IDS = list(SVP_EVENTS)

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


def event_ids(sample: dict) -> List[int]:
    """PMU slot order from sample.json ``ai_core_profiling_events`` (hex list); empty when absent."""
    text = str(sample.get("ai_core_profiling_events") or "").strip()
    ids = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if part:
            try:
                ids.append(int(part, 16) if part.lower().startswith("0x") else int(part, 16))
            except ValueError:
                continue
    return ids


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


# Ratios are fractions of total cycles; Memory Bound's ratios share the divisor, so it is the ratio
# of the raw counters (N/A when the divisor is 0).
_FORMULAS = {
    "ratio": lambda c, cycles: rounded_ratio(c[0], cycles),
    "count": lambda c, cycles: f"({c[0]})",
    "sum": lambda c, cycles: "(" + " + ".join(c) + ")",
    "memory_bound": lambda c, cycles: (f"CASE WHEN {cycles} > 0 THEN "
                                       f"{rounded_ratio(f'max({c[0]}, {c[1]}, {c[2]})', f'max({c[3]}, {c[4]})')} END"),
}
