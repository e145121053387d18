"""The STARS chips' AI Core PMU (``ffts_profile.data``, msprof.decode.ffts_pmu) and op_summary's PMU columns on
platform 5, where each task has an AI Core and an AI Vector Core side (docs/prof-format.md §11.2).

A task's context record is the n-th of its (stream, task, context) for its n-th run; the record's own core
is AI Core's for FFTS type 0 (AIC only), 4 with subtask type 0 or 6 (AIC, MIX_AIC) and 5, else AI Vector
Core's. A MIX task's other core is the sum of its block records (its n-th group of ``mix block num`` blocks);
any other task's other core is zero. Each side's time is the reference's total time from that side's cycles,
the task's block num (the MIX task's secondary side: its mix block num), the AI Core frequency and the side's
core count (info.json ai_core_num, aiv_num).

Each side's metric columns are its set's (sample.json ``ai_core_metrics`` for AI Core, ``aiv_metrics`` for AI
Vector Core) as msprof.metrics defines them for the HWTS chips, prefixed ``aic_``/``aiv_``, less the names the
reference does not print (``UNSUPPORTED``) and those whose events the side did not record. The collector
writes AI Core's PipeUtilization on platform 5 as PipeUtilizationExct, with events of its own (``EXCT``).
"""
from typing import List, Optional

from msprof.decode.ffts_pmu import BLOCK_COLUMNS, CONTEXT_COLUMNS, FftsPmuDecoder
from msprof.layouts.prof.families.base import Family, kinds
from msprof.metrics import ASCEND_METRIC_SETS, event_items
from msprof.store import TableDef
from msprof.tables import INT, ROUND3, SQLITE_ROUND3, Column, Running

FAMILY = Family("ffts_pmu", "device", kinds((r"^ffts_profile\.data(\.\d+)?$", "ffts_pmu")),
                {"ffts_pmu": TableDef({c: int for c in CONTEXT_COLUMNS}),
                 "ffts_block_pmu": TableDef({c: int for c in BLOCK_COLUMNS})},
                {"ffts_pmu": lambda item: FftsPmuDecoder()},
                indexes=[("ffts_pmu", ["stream_id", "task_id", "exec_n"]),
                         ("ffts_block_pmu", ["stream_id", "task_id", "subtask_id", "block_n"])])

# the chips whose op_summary has both cores' columns (the reference's chip v4)
PLATFORMS = ("5",)
AIC_FFTS = {0, 5}
MIX_SUBTASKS = (6, 7)        # MIX_AIC, MIX_AIV
# the metric names the reference's op_summary leaves out (AiCoreOpReport.UNSUPPORTED_HEADER)
UNSUPPORTED = {
    "aic_vec_ratio", "aic_vec_time", "aiv_mac_ratio", "aiv_mac_time", "aiv_mte1_ratio", "aic_ub_read_bw",
    "aiv_mte1_time", "aic_ub_write_bw", "aiv_l1_read_bw", "aiv_l1_write_bw", "aic_l0c_read_bw",
    "aic_l0c_write_bw", "aiv_l0a_read_bw", "aiv_l0a_write_bw", "aiv_l0b_read_bw", "aiv_l0b_write_bw",
    "aiv_l0c_read_bw_cube", "aiv_l0c_write_bw_cube", "aic_ub_read_bw_mte", "aic_ub_write_bw_mte",
    "aic_ub_read_bw_vector", "aic_ub_write_bw_vector", "aiv_mac_fp16_ratio", "aiv_mac_int8_ratio",
    "aic_vec_fp32_ratio", "aic_vec_fp16_ratio", "aic_vec_int32_ratio", "aic_vec_misc_ratio",
    "aic_vec_fp16_128lane_ratio", "aic_vec_fp16_64lane_ratio", "aic_vec_bankgroup_cflt_ratio",
    "aic_vec_bank_cflt_ratio", "aic_vec_resc_cflt_ratio", "aic_vector_fops", "aiv_cube_fops",
    "aiv_fixpipe_ratio", "aiv_fixpipe_time"}
# PipeUtilizationExct (AI Core on platform 5): a pipe's ratio is its events' summed counters over the cycles
EXCT = [("mac_time(us)", "summed_time", (0x416, 0x417)), ("mac_ratio", "summed_ratio", (0x416, 0x417)),
        ("scalar_time(us)", "summed_time", (0x9,)), ("scalar_ratio", "summed_ratio", (0x9,)),
        ("mte1_time(us)", "summed_time", (0x302,)), ("mte1_ratio", "summed_ratio", (0x302,)),
        ("mte2_time(us)", "summed_time", (0xC,)), ("mte2_ratio", "summed_ratio", (0xC,)),
        ("fixpipe_time(us)", "summed_time", (0x303,)), ("fixpipe_ratio", "summed_ratio", (0x303,)),
        ("icache_miss_rate", "miss_rate", (0x54, 0x55))]
PIPE_SETS = ("PipeUtilization", "PipeUtilizationExct")
# the kinds of msprof.metrics a side prints (its time, cycles, memory bound and cube use are the task's)
SIDE_KINDS = ("ratio", "pipe_time", "miss_rate", "fops", "bandwidth", "event_count", "summed_ratio", "summed_time")
# platform 5 weighs vector fops as chip v2 does
SET_PLATFORM = "1"


def side_metrics(metric_set: str, events: List[int], prefix: str) -> List[tuple]:
    """(column name, kind, args) of one side's metrics: the set's columns it prints, of recorded events."""
    make = ASCEND_METRIC_SETS.get(metric_set)
    columns = EXCT if metric_set == "PipeUtilizationExct" else make(SET_PLATFORM) if make else []
    out = []
    for name, kind, args in columns:
        base = name.replace("(us)", "").replace("(GB/s)", "")
        needed = [a[0] if isinstance(a, tuple) else a for a in (args if kind != "bandwidth" else args[:1])]
        if kind in SIDE_KINDS and prefix + base not in UNSUPPORTED and all(e in events for e in needed):
            out.append((prefix + name, kind, args))
    return out


def custom_sides(sample: dict) -> Optional[tuple]:
    """A Custom set's ((metrics, slots) of AI Core, of AI Vector Core): each side's raw count of every AI Core
    event, named ``r`` and the event as written (as msprof.metrics names HWTS Custom columns), a side's slots by
    name. None where the reference writes no PMU column: its AI Vector Core side then lacks one of those names
    (aiv_metrics not Custom, or an AI Core event not among aiv_profiling_events), and the reference's table of
    both sides gets fewer values than columns."""
    def names(key: str) -> List[str]:
        items = event_items({"ai_core_profiling_events": sample.get(key, "")})
        return [text.replace("0x", "r") for _e, text in items][:8]
    aic, aiv = names("ai_core_profiling_events"), names("aiv_profiling_events")
    if not str(sample.get("aiv_metrics") or "").startswith("Custom") or not set(aic) <= set(aiv):
        return None
    aic_metrics = [("aic_" + name, "event_count", (name,)) for name in aic]
    aiv_metrics = [("aiv_" + name, "event_count", (name,)) for name in aic]
    return (aic_metrics, {n: aic.index(n) for n in aic}), (aiv_metrics, {n: aiv.index(n) for n in aic})


def side_events(sample: dict, key: str) -> List[int]:
    return [e for e, _t in event_items({"ai_core_profiling_events": sample.get(key, "")})][:8]


class StarsPmu(Running):
    """op_summary's PMU columns of a platform-5 device, computed a batch of task rows at a time from each
    row's context record (the task query's ``f_*`` fields) and, for a MIX task, its blocks' sums."""

    inputs = ("f_cycles", "f_c0", "f_c1", "f_c2", "f_c3", "f_c4", "f_c5", "f_c6", "f_c7", "f_ffts",
              "f_subtask_type", "f_subtask", "stream_id", "task_id", "exec_n", "block_dim", "dur")

    def __init__(self, conn, sample: dict, aic_mhz: Optional[float], ai_core_num: Optional[int],
                 aiv_num: Optional[int], block_counts: bool = True):
        self.conn = conn
        # (False: the reference's export of one iteration, which reads the records without GE's block counts: its
        # times are 0 and a MIX task's other core is not summed)
        self.block_counts = block_counts
        self.aic_set, self.aiv_set = str(sample.get("ai_core_metrics") or ""), str(sample.get("aiv_metrics") or "")
        self.aic = side_metrics(str(sample.get("ai_core_metrics") or ""), side_events(sample,
                                "ai_core_profiling_events"), "aic_")
        self.aiv = side_metrics(str(sample.get("aiv_metrics") or ""), side_events(sample, "aiv_profiling_events"),
                                "aiv_")
        self.aic_slot = {e: i for i, e in enumerate(side_events(sample, "ai_core_profiling_events"))}
        self.aiv_slot = {e: i for i, e in enumerate(side_events(sample, "aiv_profiling_events"))}
        self.cube = str(sample.get("ai_core_metrics") or "") in PIPE_SETS
        # (a Custom set: the reference writes no PMU column at all when its sides' event lists do not fit)
        self.no_pmu = False
        if self.aic_set.startswith("Custom"):
            sides = custom_sides(sample)
            self.no_pmu = sides is None
            (self.aic, self.aic_slot), (self.aiv, self.aiv_slot) = sides or (([], {}), ([], {}))
        # (taskBlock on: a MIX task's first core writes a block record per block too, before or among the
        # second core's; its run's group is then both counts of blocks, of which only the second core's add up)
        self.task_block = sample.get("taskBlock") == "on"
        self.mhz, self.aic_cores, self.aiv_cores = float(aic_mhz or 0), int(ai_core_num or 0), int(aiv_num or 0)
        self.columns = tuple(c.name for c in self.column_list())

    def column_list(self) -> List[Column]:
        """Context ID (an FFTS+ record's context) and the PMU columns after it, in the reference's order."""
        def side(first: str, cycles: str, metrics) -> List[Column]:
            return [Column(first, ROUND3), Column(cycles, INT)] + [
                Column(name, SQLITE_ROUND3) for name, _k, _a in metrics]
        if self.no_pmu:
            return [Column("Context ID", INT)]
        out = [Column("Context ID", INT)] + side("aicore_time(us)", "aic_total_cycles", self.aic) + side(
            "aiv_time(us)", "aiv_total_cycles", self.aiv)
        return out + ([Column("cube_utilization(%)", ROUND3)] if self.cube else [])

    def fill(self, batch: List[tuple]) -> List[tuple]:
        rows, rounded = [], []
        for row in batch:
            if row[0] is None:
                rows.append(None)
                continue
            values = self._row(row)
            rows.append(values)
            rounded += [v for v, sqlite in values if sqlite]
        rounded = iter(sqlite_round3(self.conn, rounded))
        empty = (None,) * len(self.columns)
        return [empty if r is None else tuple(next(rounded) if sqlite else v for v, sqlite in r) for r in rows]

    def _row(self, row: tuple) -> List[tuple]:
        """(value, whether SQLite rounds it) of each column of one task with a context record."""
        cycles, counters, ffts, subtask_type, subtask, stream, task, exec_n, block_dim, dur = (
            row[0], row[1:9], *row[9:])
        main_aic = ffts in AIC_FFTS or (ffts == 4 and subtask_type in (0, 6))
        mix = ffts == 4 and subtask_type in MIX_SUBTASKS
        if self.no_pmu:
            return [(subtask if ffts == 4 else None, False)]
        block_dim = block_dim if self.block_counts else 0
        blocks = (block_dim or 0) & 0xFFFF
        mix_blocks = blocks * ((block_dim or 0) >> 16 & 0xFFFF)
        other = (self._blocks(stream, task, subtask, exec_n, mix_blocks, blocks, 1 if main_aic else 0)
                 if mix and mix_blocks else (0, [0] * 8))
        own = (cycles, list(counters))
        (aic_cyc, aic_c), (aiv_cyc, aiv_c) = (own, other) if main_aic else (other, own)
        aic_time = total_time(aic_cyc, self.mhz, mix_blocks if mix and not main_aic else blocks, self.aic_cores)
        aiv_time = total_time(aiv_cyc, self.mhz, mix_blocks if mix and main_aic else blocks, self.aiv_cores)
        out = [(subtask if ffts == 4 else None, False), (aic_time, False), (aic_cyc, False)]
        out += [(v, True) for v in self._side(self.aic, self.aic_slot, aic_cyc, aic_c, aic_time)]
        out += [(aiv_time, False), (aiv_cyc, False)]
        out += [(v, True) for v in self._side(self.aiv, self.aiv_slot, aiv_cyc, aiv_c, aiv_time)]
        if self.cube:
            cores = self.aic_cores
            usage = 100 * aic_cyc * 1000 / (self.mhz * cores * dur) if aic_cyc and dur and self.mhz and cores else 0
            out.append((usage, False))
        return out

    def _blocks(self, stream: int, task: int, subtask, exec_n: int, mix_blocks: int, blocks: int,
                core_type: int) -> tuple:
        """(cycles, counters) summed over the blocks of a MIX task's run ``exec_n``: the run's group of its
        blocks as numbered at decode (``block_n``), of the second core (``core_type``) when taskBlock is on."""
        size, core = (blocks + mix_blocks, " AND core_type = ?") if self.task_block else (mix_blocks, "")
        got = self.conn.execute(
            "SELECT count(*), total(total_cycles), total(c0), total(c1), total(c2), total(c3), total(c4),"
            " total(c5), total(c6), total(c7) FROM ffts_block_pmu WHERE stream_id = ? AND task_id = ?"
            " AND subtask_id = ? AND block_n >= ? AND block_n < ?" + core,
            (stream, task, subtask, exec_n * size, (exec_n + 1) * size) + ((core_type,) if core else ())).fetchone()
        if not got[0]:
            return 0, [0] * 8
        return int(got[1]), [int(v) for v in got[2:]]

    def _side(self, metrics, slot: dict, cycles: int, counters: List[int], side_time: float) -> List[float]:
        def count(e):
            return counters[slot[e]]

        def ratio(e):
            return count(e) / cycles if cycles else float(count(e))
        out = []
        for _name, kind, args in metrics:
            out.append(_FORMULAS[kind](args, count, ratio, cycles, side_time, self.mhz * 1e6))
        return out


# each side kind's value from the side's counters (count), ratios (ratio), cycles, time and frequency (Hz)
# (msprof.metrics.AscendMetrics.column_sql computes the same for the HWTS chips in SQL)
_FORMULAS = {
    "ratio": lambda a, count, ratio, cyc, t, f: sum(ratio(e) for e in a),
    "pipe_time": lambda a, count, ratio, cyc, t, f: t * ratio(a[0]),
    "miss_rate": lambda a, count, ratio, cyc, t, f: ratio(a[1]) / ratio(a[0]) if count(a[0]) else ratio(a[1]),
    "fops": lambda a, count, ratio, cyc, t, f: sum((ratio(e) * cyc * w for e, w in a), 0.0),
    "bandwidth": lambda a, count, ratio, cyc, t, f: (
        (float(count(a[0])) * a[1] / (cyc / f) / 8589934592.0 if f else 0.0) if cyc else float(count(a[0]))),
    "event_count": lambda a, count, ratio, cyc, t, f: float(count(a[0])),
    "summed_ratio": lambda a, count, ratio, cyc, t, f: _summed(a, count, cyc),
    "summed_time": lambda a, count, ratio, cyc, t, f: t * _summed(a, count, cyc),
}


def _summed(events, count, cycles: int) -> float:
    raw = sum(count(e) for e in events)
    return raw / cycles if cycles else float(raw)


def total_time(cycles: int, mhz: float, blocks: int, cores: int) -> float:
    """The reference's Utils.cal_total_time: µs of the cycles over the blocks' waves of cores, 2 decimals."""
    freq_hz = int(mhz * 1e6)
    if not (blocks and cores and freq_hz):
        return 0.0
    return round(cycles * 1000 * 1000 / freq_hz / blocks * ((blocks + cores - 1) // cores), 2)


def sqlite_round3(conn, values: List[float]) -> List[float]:
    """SQLite's round(x, 3) of each value (what the reference prints; it rounds ties of the decimal text up,
    not Python's way), a few hundred values a statement."""
    out: List[float] = []
    for i in range(0, len(values), 500):
        part = values[i:i + 500]
        sql = "SELECT round(column1, 3) FROM (VALUES " + ", ".join(["(?)"] * len(part)) + ")"
        out += [v for (v,) in conn.execute(sql, part)]
    return out
