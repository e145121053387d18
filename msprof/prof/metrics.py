"""Ascend AI Core metric sets (task-based PMU, aicore.data) as data: which events, which op_summary columns,
and how each column is computed (docs/prof-format.md §5; the formulas follow msprof's analyser).

A column is ``(name, kind, args)``; ``kind`` is one of

* ``aicore_time``  cycles/f · ceil(B/C)/B µs, rounded to 2 decimals first (B block num, C ai_core_num)
* ``cycles``       total cycles of the task (integer)
* ``ratio``        sum of the ratios event/cycles of the events in ``args``
* ``pipe_time``    aicore_time · ratio of one event
* ``miss_rate``    (event b / cycles) / (event a / cycles); event b / cycles when event a is 0
* ``memory_bound`` ratio column ``args[0]`` / max(ratio columns ``args[1:]``), from the 3-decimal values
* ``cube_usage``   100 · cycles·1000 / (f · C · duration ns); 0 when ratio column ``args[0]`` is 0
* ``fops``         Σ ratio·cycles·weight over ``args`` ((event, weight) pairs)

Every float column is then rounded to 3 decimals half away from zero (what SQLite ``round`` does in the
reference), except ``memory_bound`` and ``cube_usage`` which use Python's ``round`` on already rounded values.
"""
from decimal import ROUND_HALF_UP, Decimal
from typing import Dict, List, Optional, Sequence, Tuple

PIPE_EVENTS = [0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55]
ARITH_EVENTS = [0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F]

PIPE_UTILIZATION: List[Tuple[str, str, tuple]] = [
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


def _arith(vector_weights: Sequence[Tuple[int, float]]) -> List[Tuple[str, str, tuple]]:
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


# vector fops weights of events 0x4b..0x4f by chip (platform_version): chip v2 ("1"), chip v1 ("0"),
# chip v3 and later (default)
VECTOR_WEIGHTS: Dict[str, Tuple[Tuple[int, float], ...]] = {
    "1": ((0x4B, 64.0), (0x4C, 128.0), (0x4D, 64.0), (0x4E, 64.0), (0x4F, 32.0)),
    "0": ((0x4B, 32.0), (0x4C, 128.0), (0x4D, 64.0), (0x4E, 64.0), (0x4F, 32.0)),
}
DEFAULT_VECTOR_WEIGHTS = ((0x4B, 64.0), (0x4C, 128.0), (0x4D, 64.0), (0x4E, 16.0), (0x4F, 16.0))

def round3(x: float) -> float:
    """Half away from zero on the decimal representation (SQLite round(x, 3))."""
    return float(Decimal(repr(float(x))).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def aicore_time_us(cycles: int, aic_mhz: float, block_num: Optional[int], core_num: Optional[int]) -> float:
    freq_hz = aic_mhz * 1e6
    if not block_num or not core_num or not freq_hz:
        return 0
    return round(cycles * 1000 * 1000 / freq_hz / block_num * ((block_num + core_num - 1) // core_num), 2)


class AscendMetrics:
    """The op_summary PMU columns of one device, from sample.json's metric set and event slot order."""

    def __init__(self, metric_set: str, slot_events: List[int], platform_version: str):
        self.metric_set = metric_set
        self.slot_of = {e: i for i, e in enumerate(slot_events)}
        if metric_set == "PipeUtilization":
            columns = PIPE_UTILIZATION
        elif metric_set == "ArithmeticUtilization":
            columns = _arith(VECTOR_WEIGHTS.get(platform_version, DEFAULT_VECTOR_WEIGHTS))
        else:
            columns = []
        needed = set()
        for _name, kind, args in columns:
            if kind in ("ratio", "pipe_time", "miss_rate"):
                needed.update(args)
            elif kind == "fops":
                needed.update(e for e, _w in args)
        # a known set is used only when every event it needs was recorded; otherwise raw counters by event id
        if columns and needed <= set(self.slot_of):
            self.columns = columns
        else:
            self.columns = [("aicore_time(us)", "aicore_time", ()), ("total_cycles", "cycles", ())] + [
                (f"0x{e:x}", "counter", (e,)) for e in slot_events]

    @property
    def names(self) -> List[str]:
        return [c[0] for c in self.columns]

    def values(self, cycles: int, counters: Sequence[int], aic_mhz: float, block_num, core_num,
               dur_ns: float) -> List[object]:
        def r(event):
            return counters[self.slot_of[event]] / cycles if cycles else 0.0

        aicore = aicore_time_us(cycles, aic_mhz, block_num, core_num)
        done: Dict[str, object] = {}
        out = []
        for name, kind, args in self.columns:
            if kind == "aicore_time":
                value = round3(aicore)
            elif kind == "cycles":
                value = cycles
            elif kind == "counter":
                value = counters[self.slot_of[args[0]]]
            elif kind == "ratio":
                total = 0.0
                for e in args:
                    total += r(e)
                value = round3(total)
            elif kind == "pipe_time":
                value = round3(aicore * r(args[0]))
            elif kind == "miss_rate":
                a, b = args
                value = round3(r(b) / r(a)) if counters[self.slot_of[a]] else round3(r(b))
            elif kind == "memory_bound":
                top = max(done[c] for c in args[1:])
                value = round(done[args[0]] / top, 3) if top else 0
            elif kind == "cube_usage":
                value = (round(cycles / (aic_mhz * core_num * dur_ns) * 1000 * 100, 3)
                         if done[args[0]] and cycles and dur_ns and core_num and aic_mhz else 0)
            elif kind == "fops":
                total = 0.0
                for e, weight in args:
                    total += r(e) * cycles * weight
                value = round3(total)
            else:  # pragma: no cover - table error
                raise ValueError(kind)
            done[name] = value
            out.append(value)
        return out
