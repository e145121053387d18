"""The STARS chips' AI Core PMU (``ffts_profile.data``, msprof.decode.ffts_pmu) and op_summary's PMU columns on
platform 5, where each task has an AI Core and an AI Vector Core side (docs/prof-format.md §11.2).

A task's context record is the n-th of its (stream, task, context) for its n-th run; the record's own core
is AI Core's for FFTS type 0 (AIC only), 4 with subtask type 0 or 6 (AIC, MIX_AIC) and 5, else AI Vector
Core's. A MIX task's other core is the sum of its block records (its n-th group of ``mix block num`` blocks);
any other task's other core is zero. Each side's time is the reference's total time from that side's cycles,
the task's block num (the MIX task's secondary side: its mix block num), the AI Core frequency and the side's
core count (info.json ai_core_num, aiv_num).

Implemented here: the PipeUtilization set as the collector writes it on platform 5 (AI Core
PipeUtilizationExct, AI Vector Core PipeUtilization) — the other sets' columns are facts in
docs/prof-format.md, to be made from msprof.metrics' formulas when wired (docs/families-plan.md).
"""
from typing import Dict, List, Optional, Sequence, Tuple

from msprof.decode.ffts_pmu import BLOCK_COLUMNS, CONTEXT_COLUMNS, FftsPmuDecoder
from msprof.layouts.prof.families.base import Context, Family, kinds
from msprof.metrics import event_items
from msprof.store import TableDef

FAMILY = Family("ffts_pmu", "device", kinds((r"^ffts_profile\.data(\.\d+)?$", "ffts_pmu")),
                {"ffts_pmu": TableDef({c: int for c in CONTEXT_COLUMNS}),
                 "ffts_block_pmu": TableDef({c: int for c in BLOCK_COLUMNS})},
                {"ffts_pmu": lambda item: FftsPmuDecoder()},
                indexes=[("ffts_pmu", ["stream_id", "task_id", "exec_n"])])

AIC_FFTS = {0, 5}
MIX_SUBTASKS = {6: "MIX_AIC", 7: "MIX_AIV"}
# (column, kind, events): "ratio" Σ counters / cycles (the raw sum without cycles), "time" the side's total
# time × that ratio, "miss" icache misses / requests
PIPE_EXCT = [("mac", (0x416, 0x417)), ("scalar", (0x9,)), ("mte1", (0x302,)), ("mte2", (0xC,)),
             ("fixpipe", (0x303,))]
PIPE_AIV = [("vec", (0x8,)), ("scalar", (0x9,)), ("mte2", (0xC,)), ("mte3", (0xD,))]


def columns() -> List[str]:
    out = ["aicore_time(us)", "aic_total_cycles"]
    for name, _e in PIPE_EXCT:
        out += [f"aic_{name}_time(us)", f"aic_{name}_ratio"]
    out += ["aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles"]
    for name, _e in PIPE_AIV:
        out += [f"aiv_{name}_time(us)", f"aiv_{name}_ratio"]
    return out + ["aiv_icache_miss_rate", "cube_utilization(%)"]


class Sides:
    """The context and block records of a device, taken run by run per (stream, task, context)."""

    def __init__(self, conn, schema: str = "main"):
        self.contexts: Dict[tuple, List[tuple]] = {}
        for row in conn.execute(f"SELECT stream_id, task_id, subtask_id, subtask_type, ffts_type, total_cycles, c0,"
                                f" c1, c2, c3, c4, c5, c6, c7 FROM {schema}.ffts_pmu ORDER BY stream_id, task_id,"
                                " exec_n"):
            self.contexts.setdefault(row[:3], []).append(row[3:])
        self.blocks: Dict[tuple, List[tuple]] = {}
        for row in conn.execute(f"SELECT stream_id, task_id, subtask_id, total_cycles, c0, c1, c2, c3, c4, c5, c6, c7"
                                f" FROM {schema}.ffts_block_pmu WHERE ffts_type = 4 AND subtask_type IN (6, 7)"
                                " ORDER BY rowid"):
            self.blocks.setdefault(row[:3], []).append(row[3:])
        self.taken: Dict[tuple, int] = {}

    def next(self, stream: int, task: int, context: Optional[int], mix_blocks: int):
        """(AI Core (cycles, counters), AI Vector Core (cycles, counters), main side is AI Core) of the next run
        of the key, or None without a record."""
        key = (stream, task, context)
        n = self.taken.get(key, 0)
        records = self.contexts.get(key, [])
        if n >= len(records):
            return None
        self.taken[key] = n + 1
        subtask_type, ffts, cycles, *counters = records[n]
        aic = ffts in AIC_FFTS or (ffts == 4 and subtask_type in (0, 6))
        own, other = (cycles, counters), (0, [0] * 8)
        blocks = self.blocks.get(key, [])
        if ffts == 4 and subtask_type in MIX_SUBTASKS and mix_blocks and blocks:
            group = blocks[n * mix_blocks:(n + 1) * mix_blocks]
            other = (sum(b[0] for b in group), [sum(b[1 + i] for b in group) for i in range(8)])
        return (own, other, True) if aic else (other, own, False)


def total_time(cycles: int, freq_hz: int, blocks: int, cores: int) -> float:
    """The reference's Utils.cal_total_time: µs of the cycles over the blocks' waves of cores, 2 decimals."""
    if not (blocks and cores and freq_hz):
        return 0
    return round(cycles * 1000 * 1000 / freq_hz / blocks * ((blocks + cores - 1) // cores), 2)


def cells(conn, side: tuple, context: Context, row: dict, events: Tuple[List[int], List[int]]) -> List[str]:
    """op_summary's PMU cells of one task row (``row``: block_num, mix_block_num, dur_ns, mix main side)."""
    (aic_cyc, aic_c), (aiv_cyc, aiv_c), main_aic = side
    freq = int(float(context.result.aic_mhz or 0) * 1e6)
    info = context.result.info.get("DeviceInfo", [{}])[0]
    aic_cores, aiv_cores = context.result.ai_core_num or 0, int(info.get("aiv_num") or 0)
    mix = row["mix"]
    aic_blocks = row["mix_block_num"] if mix and not main_aic else row["block_num"]
    aiv_blocks = row["mix_block_num"] if mix and main_aic else row["block_num"]
    aic_time = total_time(aic_cyc, freq, aic_blocks, aic_cores)
    aiv_time = total_time(aiv_cyc, freq, aiv_blocks, aiv_cores)
    out = [_round(conn, aic_time), str(aic_cyc)] + _pipe(conn, PIPE_EXCT, events[0], aic_cyc, aic_c, aic_time)
    out += [_round(conn, aiv_time), str(aiv_cyc)] + _pipe(conn, PIPE_AIV, events[1], aiv_cyc, aiv_c, aiv_time)
    mhz, cores, dur = float(context.result.aic_mhz or 0), context.result.ai_core_num or 0, row["dur_ns"]
    if aic_cyc and dur and mhz and cores:
        out.append(repr(round(100 * aic_cyc * 1000 / (mhz * cores * dur), 3)))
    else:
        out.append("0")
    return out


def _pipe(conn, metrics, events: List[int], cycles: int, counters: List[int], side_time: float) -> List[str]:
    slot = {e: i for i, e in enumerate(events)}
    out = []
    for _name, needed in metrics:
        raw = sum(counters[slot[e]] for e in needed if e in slot)
        ratio = raw / cycles if cycles else float(raw)
        out += [_round(conn, side_time * ratio), _round(conn, ratio)]
    req, miss = counters[slot[0x54]] if 0x54 in slot else 0, counters[slot[0x55]] if 0x55 in slot else 0
    rate = (miss / req if req else (miss / cycles if cycles else float(miss)))
    return out + [_round(conn, rate)]


def _round(conn, value: float) -> str:
    return repr(conn.execute("SELECT round(?, 3)", (value,)).fetchone()[0])


def sample_events(sample: dict) -> Tuple[List[int], List[int]]:
    """The AI Core and AI Vector Core events of sample.json, in slot order."""
    aiv = {"ai_core_profiling_events": sample.get("aiv_profiling_events", "")}
    return [e for e, _t in event_items(sample)], [e for e, _t in event_items(aiv)]
