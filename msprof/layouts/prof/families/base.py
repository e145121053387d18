"""What a PROF_ data family is, as data: the raw files it reads (name patterns), the decoders of their
streams, the tables they fill and what is derived from them after the load, and the reports that print its
outputs as the reference analyser writes them (docs/families-plan.md says how they join the layout).

``load(conn, family, streams, notices, counts)`` is the one loop: the family's files grouped into streams
(``Family.streams``: msprof.decode.slices.group_files with the family's patterns), each stream decoded by
msprof.decode.base.load_streams, then the family's ``derive``; the PROF import calls it for every family
(msprof.layouts.prof.families.load_families).
"""
import re
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from msprof.collection import ResultDir
from msprof.decode.base import Decoder, StreamCount, load_streams
from msprof.decode.slices import StreamFiles, group_files
from msprof.layouts.timebase import ProfTime
from msprof.store import TableDef


@dataclass
class Family:
    """One data family of a host/ or device_N/ directory."""

    name: str
    role: str                                                  # "host" or "device": which database
    kinds: List[Tuple[re.Pattern, str]]                        # stem pattern (lower case) → stream kind
    tables: Dict[str, TableDef]
    decoders: Dict[str, Callable[[StreamFiles], Decoder]]      # stream kind → a new decoder for the stream
    derive: Optional[Callable[["object"], None]] = None      # derive(conn), after the load
    indexes: List[tuple] = field(default_factory=list)

    def streams(self, files: Sequence[Path]) -> Dict[str, List[StreamFiles]]:
        return group_files(list(files), self.kinds)[0]


def run_launch(task: str, launch: str) -> str:
    """The JOIN condition of a device run (``task`` alias) and its launch (``launch`` alias) in msprof's PROF
    databases, for the device ``:device``: the n-th launch of a (stream, task) runs n-th; an id launched once
    (a static graph) names every run (host.launch_count)."""
    return (f"{launch}.device_id = :device AND {launch}.stream_id = {task}.stream_id AND {launch}.task_id ="
            f" {task}.task_id AND {launch}.occ = (CASE WHEN (SELECT c.launches FROM host.launch_count c WHERE"
            f" c.device_id = :device AND c.stream_id = {task}.stream_id AND c.task_id = {task}.task_id) = 1 THEN 0"
            f" ELSE {task}.exec_n END)")


def kinds(*pairs: Tuple[str, str]) -> List[Tuple[re.Pattern, str]]:
    return [(re.compile(pattern), kind) for pattern, kind in pairs]


def load(conn, family: Family, streams: Dict[str, List[StreamFiles]], notices,
         counts: Dict[str, StreamCount]) -> None:
    """Decode the family's ``streams`` (``Family.streams``, by kind) into ``conn`` (its tables exist), then
    derive what it derives (only when it found a stream: a directory without the family pays nothing)."""
    for kind, items in streams.items():
        make = family.decoders.get(kind)
        if make is not None:
            load_streams(conn, items, make, notices, counts)
    if family.derive is not None and streams:
        family.derive(conn)


class Context(ProfTime):
    """The time base of a result directory (msprof.layouts.timebase.ProfTime: device counters to host-monotonic
    ns in the reference's float operations, ``offset_us``) with what the families' reports add: µs variants,
    the host's own sync log, and times printed since the epoch (docs/prof-format.md §4)."""

    def __init__(self, result: ResultDir):
        clock = result.clock
        super().__init__(asdict(clock), clock.hwts_mhz or 0, clock.cpu_mhz)
        self.result = result
        self.device_id = result.device_id
        self.hz = (clock.hwts_mhz or 0) * 1e6      # (0 without a frequency: a family then has no device times)
        # the reference's intermediates in seconds, kept as it computes them for its µs conversions
        self.cnt_s = clock.dev_cntvct / 1e9
        self.mono_s = (clock.host_mono_ns + clock.host_diff_ns) / 1e9
        self.begin_text = _begin_text(result)
        # the collection's beginning as device-side raw ns (the reference's trans_from_local_time_into_dev_raw_time)
        self.begin_raw_ns = int((Decimal(self.begin_text) - Decimal(repr(self.offset_us))) * 1000)
        # the host clock (the host's own sync log): ticks at CPU[0].Frequency, or ns without one
        self.host_hz = (clock.cpu_mhz or 0) * 1e6
        self.host_cnt_s = clock.host_cntvct / 1e9
        self.dev_mono_ns = _dev_start_mono(result)

    def device_us(self, syscnt: int) -> float:
        """Host-monotonic µs of a device counter, as the reference's time_from_syscnt(…, µs) computes it."""
        return float(syscnt - self.cnt_s * 1e9) / self.hz * 1e6 + self.mono_s * 1e6

    def host_us(self, ts: int) -> float:
        """Host-monotonic µs of a host time stamp, as the reference's time_from_host_syscnt(…, µs) computes it
        (a negative result is 0)."""
        if not self.host_hz:
            return ts * 1000000 / 1000000000
        us = float(ts - self.host_cnt_s * 1e9) / self.host_hz * 1e6 + self.mono_s * 1e6
        return us if us >= 0.0 else 0

    def host_duration_us(self, delta: int) -> float:
        return delta / self.host_hz * 1000000 if self.host_hz else delta * 1000000 / 1000000000

    def host_text(self, ts: int) -> str:
        return self.local_text(self.host_us(ts))

    def duration_us(self, delta: int) -> float:
        """Counter ticks as µs, as the reference's step trace prints them (not rounded)."""
        return delta * 1000000 / self.hz

    def local_text(self, us: float) -> str:
        """µs since the epoch with 3 decimals: the reference's Decimal(str(us)) + Decimal(str(offset)),
        quantized half to even."""
        return str((Decimal(repr(us)) + Decimal(repr(self.offset_us))).quantize(Decimal("0.000")))

    def ns_text(self, ns) -> str:
        """µs since the epoch of host-monotonic ns, as the reference's trans_into_local_time(ns) prints it."""
        return str((Decimal(repr(ns)) / 1000 + Decimal(repr(self.offset_us))).quantize(Decimal("0.000")))

    def device_text(self, syscnt: int) -> str:
        return self.local_text(self.device_us(syscnt))


def _begin_text(result: ResultDir) -> str:
    """start_info's collectionTimeBegin as written: the reference compares printed times with this text."""
    begin = result.clock.collection_begin_us
    return str(int(begin)) if float(begin).is_integer() else repr(begin)


def _dev_start_mono(result: ResultDir) -> int:
    """dev_start.log's clock_monotonic_raw (the device's monotonic ns at the sync instant; 0 without one): the
    reference adds it to, and takes it back from, the time of a memory sample."""
    for path in sorted(result.path.glob("dev_start.log*")):
        try:
            text = path.read_text(errors="replace")[:65536]
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "clock_monotonic_raw" and value.strip().isdigit():
                return int(value.strip())
    return 0
