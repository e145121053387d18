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


def ratio(value, total) -> Optional[float]:
    return value / total if total else None


class MetricSet:
    """The op_summary metric columns available for the recorded events, and how to compute them."""

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

    def values(self, total_cycles, counters) -> List[object]:
        """Metric values for one task (or a total: summed cycles and counters); None = N/A."""
        out: List[object] = []
        for _column, kind, slots in self.columns:
            if kind == "ratio":
                out.append(ratio(counters[slots[0]], total_cycles))
            elif kind == "count":
                out.append(counters[slots[0]])
            elif kind == "sum":
                out.append(sum(counters[s] for s in slots))
            else:
                dstr, dld, wld, mac, vec = (ratio(counters[s], total_cycles) for s in slots)
                if None in (dstr, dld, wld, mac, vec) or max(mac, vec) == 0:
                    out.append(None)
                else:
                    out.append(max(dstr, dld, wld) / max(mac, vec))
        return out

    def kinds(self) -> List[str]:
        return [c[1] for c in self.columns]
