"""The PROF_ data families beyond ops and APIs (issue 37), each a ``Family`` (base.py): step trace, STARS AI
Core PMU, msproftx, HCCL, AI CPU, memory and L2 cache. The PROF import (msprof.layouts.prof.importer) loads
them into the role's database (their tables are in schema.HOST / schema.DEVICE) with ``load_families``; their
summary files are msprof.layouts.prof.family_files'.
"""
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from msprof.decode.base import StreamCount
from msprof.decode.slices import StreamFiles
from msprof.layouts.prof.families import aicpu, ffts_pmu, hccl, l2_cache, memory, msproftx, step_trace
from msprof.layouts.prof.families.base import Family, load
from msprof.store import TableDef

FAMILIES: List[Family] = [step_trace.FAMILY, msproftx.FAMILY, hccl.FAMILY, aicpu.FAMILY, memory.DEVICE,
                          memory.HOST, l2_cache.FAMILY, ffts_pmu.FAMILY]
# what msprof does not make yet of a family it decodes: said at import when the family is found (issue 37 item 3)
NOT_MADE_YET = {
    "ffts_pmu": "op_summary's STARS AI Core PMU columns",
    "hccl": "msprof's own timeline of it (the CANN layout's timeline has it)",
    "step_trace": "the Step Trace threads of device_N/timeline (the CANN layout's timeline has them)",
    "msproftx": "the msproftx timeline",
    "memory": "the NPU MEM counters of device_N/timeline (the CANN layout's timeline has them)",
}

# families whose records are timed by the device counter: their reports need info.json's hwts_frequency
DEVICE_COUNTER_TIMED = ("step_trace", "aicpu", "ffts_pmu")


def of_role(role: str) -> List[Family]:
    return [f for f in FAMILIES if f.role == role]


def tables(role: str) -> Dict[str, TableDef]:
    """The families' tables of a role's database ("host" or "device")."""
    return {name: table for family in of_role(role) for name, table in family.tables.items()}


def indexes(role: str) -> List[tuple]:
    return [index for family in of_role(role) for index in family.indexes]


def kinds_of(role: str) -> Dict[str, str]:
    """Stream kind → family name (decode_count's kinds)."""
    return {kind: family.name for family in of_role(role) for _pattern, kind in family.kinds}


def made_on(platform: str) -> Tuple[str, ...]:
    """The families of NOT_MADE_YET that msprof makes on this platform all the same."""
    return ("ffts_pmu",) if platform in ffts_pmu.PLATFORMS else ()


def load_families(conn, role: str, files: Sequence[Path], device_id: Optional[str], notices,
                  counts: Dict[str, StreamCount], need_clock: Callable[[str], object] = lambda what: None,
                  made: Sequence[str] = ()) -> Tuple[List[str], List[Path]]:
    """Decode every family of ``role`` found among ``files`` (a device's streams: those of ``device_id`` or of
    no device); returns the names of the families found and the files they read. ``need_clock(family)``
    is called first for a family timed by the device counter (it raises when the frequency is unknown).
    ``made``: families whose NOT_MADE_YET notice does not apply here (made_on)."""
    found, claimed = [], []
    for family in of_role(role):
        streams: Dict[str, List[StreamFiles]] = {}
        for kind, items in family.streams(files).items():
            mine = [s for s in items if device_id is None or s.device in (None, device_id)]
            if mine:
                streams[kind] = mine
                claimed += [path for item in items for path in item.files]
        if streams:
            if family.name in DEVICE_COUNTER_TIMED:
                need_clock(family.name)
            load(conn, family, streams, notices, counts)
            found.append(family.name)
            if family.name in NOT_MADE_YET and family.name not in made:
                notices.notice(f"{family.name} data decoded (msprof query counts them); not made from them yet: "
                               f"{NOT_MADE_YET[family.name]}")
    return found, claimed
