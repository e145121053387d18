"""The PROF_ data families beyond ops and APIs (issue 37), each a ``Family`` (base.py): step trace, STARS AI
Core PMU, msproftx, HCCL, AI CPU, memory and L2 cache. Standalone until they are wired into the PROF layout
(docs/families-plan.md): ``build`` decodes a result directory's families into a database of their own, which
the tests compare with the reference analyser's outputs.
"""
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from msprof import store
from msprof.collection import data_files, read_result_dir
from msprof.decode.base import StreamCount
from msprof.layouts.prof.families import aicpu, ffts_pmu, hccl, l2_cache, memory, msproftx, names, step_trace
from msprof.layouts.prof.families.base import Context, Family, load

FAMILIES: Dict[str, Family] = {family.name: family for family in (names.FAMILY, step_trace.FAMILY,
                                                                  msproftx.FAMILY, hccl.FAMILY, aicpu.FAMILY,
                                                                  memory.DEVICE, memory.HOST, l2_cache.FAMILY,
                                                                  ffts_pmu.FAMILY)}


def schema(role: str, names: Optional[Sequence[str]] = None) -> store.Schema:
    """The tables of the families of one role ("host" or "device")."""
    tables = dict(store.BOOKKEEPING)
    indexes: List[tuple] = []
    for family in _chosen(role, names):
        tables.update(family.tables)
        indexes += family.indexes
    return store.Schema(f"PROF {role} families", tables, indexes=indexes)


def _chosen(role: str, names: Optional[Sequence[str]]) -> List[Family]:
    return [f for f in FAMILIES.values() if f.role == role and (names is None or f.name in names)]


def build(result_dir: Path, role: str, target: Path, names: Optional[Sequence[str]] = None) -> Context:
    """Decode the families of ``result_dir`` (a host/ or device_N/ directory) into a new database ``target``;
    returns the directory's clock context."""
    result = read_result_dir(result_dir)
    context = Context(result)
    files = data_files(result.path, empty_ok=True)
    notices = store.Notices(echo=False)
    counts: Dict[str, StreamCount] = {}
    with store.build(target, schema(role, names)) as db:
        for family in _chosen(role, names):
            load(db.conn, family, files, context, notices, counts)
        store.record_sources(db, result.path, counts, notices, files, {"layout": "PROF families", "role": role})
    return context
