"""The time base of a framework directory (docs/framework-target.md §2): framework times become local epoch ns
as ``mono + diff``, where ``mono`` is the value as written (or, when profiler_info's ``syscnt_enable``, a
counter value converted at the host CPU frequency from the PROF_'s sync instant) and ``diff`` =
``collectionTimeBegin``·1000 − ``clockMonotonicRaw`` of the PROF_'s host start_info. collectionTimeBegin is
µs text, turned into ns by its digits (a float would lose the last of them)."""
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from msprof.collection import (COUNTER, EPOCH_US, MHZ, _read_ini_first_section, _read_json,
                                _read_json_first_line, number)
from msprof.errors import DataError

# torch_npu's frequency (MHz) when the host's info.json gives none (target §2)
DEFAULT_MHZ = 100.0
_DECIMAL = re.compile(r"^\s*(\d+)(?:\.(\d*))?\s*$")


@dataclass
class FrameworkClock:
    diff_ns: int = 0                 # added to every monotonic ns
    syscnt: bool = False             # the framework wrote counter values
    cntvct: int = 0                  # the counter and the monotonic clock at the PROF_'s sync instant
    mono_ns: int = 0
    mhz: float = DEFAULT_MHZ

    def local_sql(self, column: str) -> str:
        """SQL of a framework time column as local epoch ns (an integer, truncated as torch_npu does)."""
        if not self.syscnt:
            return f"({column} + {self.diff_ns})"
        return f"(CAST(({column} - {self.cntvct}) * {1000.0 / self.mhz!r} AS INTEGER) + {self.mono_ns + self.diff_ns})"

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def us_text_to_ns(text: str, source: Path, key: str) -> int:
    """ns of a µs value written as decimal text, by its digits."""
    match = _DECIMAL.match(str(text))
    if not match:
        raise DataError(f"{source}: {key} is not a decimal number of µs: {str(text)[:40]!r}")
    whole, fraction = match.group(1), (match.group(2) or "")[:3]
    return int(whole) * 1000 + int(fraction.ljust(3, "0"))


def read_clock(info: dict, prof_host: Optional[Path], sources: List[Path], counters: bool = False
               ) -> Tuple[FrameworkClock, List[str]]:
    """The clock of a framework directory from its profiler_info (``info``) and its PROF_'s ``host/``; the
    files read are added to ``sources``; (clock, warnings). ``counters``: the times are counter values whatever
    profiler_info says (MindSpore's always are: target §9)."""
    warnings: List[str] = []
    start = info.get("start_info") if isinstance(info.get("start_info"), dict) else {}
    clock = FrameworkClock(syscnt=counters or start.get("syscnt_enable") is True)
    start_info = prof_host / "start_info" if prof_host is not None else None
    if start_info is None or not start_info.is_file():
        warnings.append(f"{prof_host or 'no PROF_'}: no host start_info: framework times stay monotonic (offset 0)")
    else:
        sources.append(start_info)
        values = _read_json(start_info)
        begin = values.get("collectionTimeBegin")
        number(values, "collectionTimeBegin", start_info, EPOCH_US, required=True)      # (bounds, or the error)
        mono = number(values, "clockMonotonicRaw", start_info, COUNTER, integer=True, required=True)
        clock.diff_ns = us_text_to_ns(begin, start_info, "collectionTimeBegin") - mono
    if clock.syscnt:
        _counter_facts(clock, start, prof_host, sources, warnings)
    return clock, warnings


def _counter_facts(clock: FrameworkClock, start: dict, prof_host: Optional[Path], sources: List[Path],
                   warnings: List[str]) -> None:
    host_log = prof_host / "host_start.log" if prof_host is not None else None
    if host_log is not None and host_log.is_file():
        sources.append(host_log)
        values = _read_ini_first_section(host_log)
        clock.cntvct = number(values, "cntvct", host_log, COUNTER, integer=True, required=True)
        clock.mono_ns = number(values, "clock_monotonic_raw", host_log, COUNTER, integer=True, required=True)
    else:
        clock.cntvct = int(number(start, "start_cnt", Path("profiler_info"), COUNTER, integer=True) or 0)
        clock.mono_ns = int(number(start, "start_monotonic", Path("profiler_info"), COUNTER, integer=True) or 0)
        warnings.append("no host_start.log in the PROF_: the counter's sync instant taken from profiler_info")
    info_json = prof_host / "info.json" if prof_host is not None else None
    if info_json is not None and info_json.is_file():
        sources.append(info_json)
        cpu = _read_json_first_line(info_json).get("CPU") or [{}]
        first = cpu[0] if isinstance(cpu, list) and cpu and isinstance(cpu[0], dict) else {}
        try:
            clock.mhz = number(first, "Frequency", info_json, MHZ) or DEFAULT_MHZ
        except DataError as exc:
            warnings.append(f"{exc.message}: {DEFAULT_MHZ:g} MHz used, as torch_npu does")
    else:
        clock.mhz = number(start, "freq", Path("profiler_info"), MHZ) or DEFAULT_MHZ
