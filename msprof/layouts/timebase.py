"""Device counters and host timestamps as times: the one place both layouts convert them, in SQL and in Python.

The clock facts are a result directory's (msprof.collection.ClockFacts, stored as the database's ``clock``
meta): the device counter ``dev_cntvct`` and the host's CLOCK_MONOTONIC_RAW ``host_mono_ns`` read at one
instant, the counter's frequency, and where the collection began. Each layout keeps its own conventions,
including the order of its float operations, since outputs are compared byte for byte:

* a JOB (raw-format.md §3): ``(syscnt - dev_cntvct) × 1000 / hwts_mhz + host_mono_ns`` is host-monotonic ns;
  timelines give integer ns since the collection began (``clock_monotonic_raw_ns``);
* a PROF_ device (docs/prof-format.md §4): the reference analyser's ``((syscnt - cnt) / hz) × 1e9 + mono``,
  in floats, with the host counter's drift in ``mono``, and epoch times through its Decimal arithmetic.

Host timestamps are ns of CLOCK_MONOTONIC_RAW, or CPU ticks when the host gives its CPU frequency.
"""
import copy
import math
from decimal import Decimal
from typing import Optional


def host_ns_sql(column: str, cpu_mhz: Optional[float], mono: int) -> str:
    """Integer ns since the collection began (``mono``: its host-monotonic ns) of a column of host timestamps,
    which are ticks at ``cpu_mhz`` when it is given, else ns."""
    if cpu_mhz:
        return f"CAST(round({column} * {1000.0 / float(cpu_mhz)!r} - {int(mono)}) AS INTEGER)"
    return f"({column} - {int(mono)})"


class JobTime:
    """A JOB's conversions (raw-format.md §3)."""

    def __init__(self, clock: dict, hwts_mhz: Optional[float] = None):
        self.clock = clock
        self.hwts_mhz = clock.get("hwts_mhz") or hwts_mhz
        self.dev_cntvct = int(clock.get("dev_cntvct") or 0)
        self.mono = int(clock.get("clock_monotonic_raw_ns") or 0)
        self.cpu_mhz = clock.get("cpu_mhz")

    def device_ns_sql(self, column: str) -> str:
        """Integer ns since the collection began, of a column of device counters (timelines)."""
        factor = 1000.0 / float(self.hwts_mhz)
        offset = int(self.clock.get("host_mono_ns") or 0) - self.mono
        return f"CAST(round(({column} - {self.dev_cntvct}) * {factor!r} + {offset}) AS INTEGER)"

    def device_us(self, syscnt: int) -> float:
        """µs since the collection began, of one device counter (the frequency table; its float operations)."""
        c = self.clock
        ns = (syscnt - c["dev_cntvct"]) * 1000.0 / c["hwts_mhz"] + c["host_mono_ns"]
        return (ns - c["clock_monotonic_raw_ns"]) / 1000.0

    def host_ns_sql(self, column: str) -> str:
        return host_ns_sql(column, self.cpu_mhz, self.mono)

    @property
    def host_us_per_unit(self) -> float:
        """µs per host timestamp unit: ns normally, CPU ticks when the host gives its frequency."""
        return 1.0 / self.cpu_mhz if self.cpu_mhz else 0.001


class ProfTime:
    """A PROF_ device's conversions, in the reference analyser's operations (docs/prof-format.md §4).

    ``params`` are the SQL parameters its expressions use (``:cnt``, ``:hz``, ``:mono``, ``:offset_ns``,
    ``:begin_ns``, ``:begin_mono_ns``, ``:host_begin``). ``host_cpu_mhz``: the host's CPU frequency (its
    timestamps are ticks), from the host's own metadata."""

    def __init__(self, clock: dict, hwts_mhz: float, host_cpu_mhz: Optional[float] = None):
        self.clock = clock
        self.host_cpu_mhz = host_cpu_mhz
        # the reference converts in this order, in floats
        self.cnt = clock.get("dev_cntvct", 0) / 1e9 * 1e9
        self.hz = hwts_mhz * 1e6 or 1.0
        # (the host's monotonic ns at the sync instant with its counter drift added, as the reference has it)
        self.mono = (clock.get("host_mono_ns", 0) + clock.get("host_diff_ns", 0)) / 1e9 * 1e9
        self.offset_us = float(clock.get("collection_begin_us") or 0) - float(
            clock.get("clock_monotonic_raw_ns") or 0) / 1000
        self.begin_us = float(clock.get("collection_begin_us") or 0)
        self.params = {"cnt": self.cnt, "hz": self.hz, "mono": self.mono, "offset_us": self.offset_us,
                       "begin_us": self.begin_us, "offset_ns": _offset_ns(self.offset_us),
                       "begin_ns": _begin_ns(self.begin_us),
                       "begin_mono_ns": _begin_mono_ns(self.begin_us, self.offset_us),
                       "host_begin": _host_begin(clock, self.mono)}
        self.origin_ns = _origin_ns(self.begin_us, self.params["offset_ns"])
        self.host_cntvct = int(clock.get("host_cntvct") or 0)

    @staticmethod
    def device_ns_sql(column: str) -> str:
        """Host-monotonic ns (a float) of a column of device counters."""
        return f"(({column} - :cnt) / :hz) * 1e9 + :mono"

    def device_ns(self, syscnt: int) -> float:
        """``device_ns_sql`` of one counter, in the same float operations."""
        return ((syscnt - self.cnt) / self.hz) * 1e9 + self.mono

    def syscnt_at(self, mono_ns: int, later_ns: float = 0.0) -> int:
        """The device counter ``later_ns`` after host-monotonic ``mono_ns``, rounded down (``device_ns``'s
        inverse)."""
        return int(self.cnt + (mono_ns - self.mono + later_ns) / 1e9 * self.hz)

    @staticmethod
    def epoch_ns_sql(ns: str) -> str:
        """Integer ns since the epoch of a host-monotonic ns value: the reference's Decimal(repr(t)) / 1000 +
        offset, quantized to 3 decimals half to even — exact: a float's repr ends in .5 exactly when it is a
        tie. (Columns are referenced several times: ``ns`` is a plain column name.)"""
        whole = f"CAST({ns} AS INTEGER)"
        return (f"({whole} + :offset_ns + (CASE WHEN {ns} - {whole} > 0.5 OR ({ns} - {whole} = 0.5 AND"
                f" ({whole} + :offset_ns) % 2 = 1) THEN 1 ELSE 0 END))")

    def on_the_epoch(self) -> "ProfTime":
        """These conversions with the epoch as the timeline's origin: a time is then ns since 1970, whose µs
        print as op_summary's (the reference's Decimal sum, but at an exact half ns, which rounds up here and
        half to even there). The CANN layout's timeline (docs/prof.md)."""
        other = copy.copy(self)
        other.origin_ns = -self.params["offset_ns"]
        return other

    def relative_ns_sql(self, ns: str) -> str:
        """Integer ns since the timeline's origin (``origin_ns``) of a host-monotonic ns value, rounded."""
        return f"CAST(round({ns}) AS INTEGER) - {self.origin_ns}"

    def relative_ns(self, ns: float) -> int:
        """Integer ns since the timeline's origin of a host-monotonic ns value, truncated (where a timeline's
        two halves meet)."""
        return int(ns) - self.origin_ns

    def host_ns_sql(self, column: str) -> str:
        """Integer ns since the timeline's origin of a column of host timestamps. A host that gives its CPU
        frequency records counter ticks, counted from host_start.log's cntvct at the sync instant, when its
        monotonic clock (with the counter drift) read ``mono``: the reference's conversion, in its float
        operations (issue 36: ticks / frequency alone put the calls seconds away from the tasks)."""
        if not self.host_cpu_mhz:
            return f"({column} - {self.origin_ns})"
        hz = float(self.host_cpu_mhz) * 1e6
        # (the origin subtracted from the rounded integer: on the epoch, a float of 1.7e18 ns steps by 256 ns)
        ticks = f"({column} - {self.host_cntvct}) / {hz!r} * 1e9 + {self.mono!r}"
        return f"(CAST(round({ticks}) AS INTEGER) - {self.origin_ns})"

    def host_stamp(self, mono_ns: float) -> float:
        """The host timestamp (as recorded: ticks when the host gives its CPU frequency, else ns) of a
        host-monotonic ns value: ``host_ns_sql``'s inverse."""
        if not self.host_cpu_mhz:
            return mono_ns
        return (mono_ns - self.mono) * float(self.host_cpu_mhz) / 1000 + self.host_cntvct

    def host_us(self, delta: int) -> float:
        """A host duration in µs, in the reference's float operations (its InfoConfReader.get_host_duration)."""
        hz = self.host_cpu_mhz * 1000000.0 if self.host_cpu_mhz else 1000000000.0
        return delta / hz * 1000000.0 if hz != 1000000000.0 else delta * 1000000.0 / 1000000000.0


def _host_begin(clock: dict, mono: float) -> Optional[int]:
    """The collection's beginning (start_info's clockMonotonicRaw) on the host's task_track clock, in the
    reference's Decimal operations (its InfoConfReader.trans_from_start_info_raw_time_into_host_cnt; ``mono``:
    the host's monotonic ns at the sync instant as it has them); None when the metadata do not say (no
    start_info, or no host counter in host_start.log)."""
    raw, cnt = clock.get("clock_monotonic_raw_ns"), clock.get("host_cntvct")
    if not raw or not cnt:
        return None
    hz = float(clock["cpu_mhz"]) * 1e6 if clock.get("cpu_mhz") else 1e9
    return int((Decimal(int(raw)) - Decimal(mono)) * Decimal(hz / 1e9) + Decimal(cnt / 1e9 * 1e9))


def _origin_ns(begin_us: float, offset_ns: int) -> int:
    """The host-monotonic ns that a PROF_ timeline's origin, collectionTimeBegin, stands for. The reference
    (and op_summary) adds to a monotonic time an offset, collectionTimeBegin less clockMonotonicRaw in µs, held
    in a float: at 1.7e15 µs its step is 0.25 µs, so this origin may be up to 0.125 µs away from
    clockMonotonicRaw itself (issue 36: every timeline time was 0.075 µs before op_summary's on one run)."""
    return int(Decimal(repr(begin_us)) * 1000) - offset_ns


def _begin_mono_ns(begin_us: float, offset_us: float) -> int:
    """The collection's beginning as op_statistic compares it with a task's start (monotonic ns, in floats as
    the reference computes it): the start_info text less the offset, in ns, truncated."""
    return int((Decimal(repr(begin_us)) - Decimal(repr(offset_us))) * 1000)


def _begin_ns(begin_us: float) -> int:
    """The collection's beginning in ns since the epoch, rounded up: the first ns a task may start at."""
    return math.ceil(Decimal(repr(begin_us)) * 1000)


def _offset_ns(offset_us: float) -> int:
    """offset_us (a float) as the reference's Decimal(repr(offset_us)), in whole ns."""
    return int((Decimal(repr(offset_us)) * 1000).to_integral_value())
