"""L2 cache of a PROF_ device (msprof.decode.l2_cache), printed as the reference's l2_cache file: per task
record, its hit and victim rates from the platform's request, hit and victim events (a table of the reference:
an event with a minus sign is subtracted), and its op (docs/prof-format.md, "L2 cache").

The events are sample.json's ``l2CacheTaskProfilingEvents`` (lower case); without every event its platform
needs (or with more than 8, or one the reference does not know) the reference writes no l2_cache file, and
neither do these rows.
"""
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.decode.l2_cache import COLUMNS, L2CacheDecoder
from msprof.layouts.prof.families.base import Context, Family, kinds
from msprof.store import TableDef

HEADERS = ["Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"]
# platform_version → (request, hit, victim) events
PLATFORM_EVENTS = {
    "1": ("0x59", "0x5b", "0x5c"),
    **{p: ("0x78,0x79", "0x6a", "0x71") for p in ("2", "3", "4")},
    **{p: ("0xfb,0xfc", "0x90,0x91", "0x9c") for p in ("5", "7", "8", "11")},
    **{p: ("0x00", "0x00,-0x81,-0x82,-0x83,-0x74,-0x75", "0x74,0x75") for p in ("15", "16")},
}
KNOWN_EVENTS = {"0x59", "0x5b", "0x5c", "0x62", "0x6a", "0x6c", "0x71", "0x74", "0x77", "0x78", "0x79", "0x7c",
                "0x7d", "0x7e", "0xf6", "0xfb", "0xfc", "0x90", "0x91", "0x9c", "0x9d", "0xbf", "0x00", "0x88",
                "0x89", "0x8a", "0x74", "0x75", "0x81", "0x82", "0x83"}
STARS_CHIPS = ("5", "7", "8", "11", "15", "16")

FAMILY = Family("l2_cache", "device", kinds((r"^l2_cache\.data(\.\d+)?$", "l2_cache")),
                {"l2_cache": TableDef({c: int for c in COLUMNS})}, {"l2_cache": lambda item: L2CacheDecoder()})

# each record in file order with its op: the GE op of the last launch of its stream and task. (One statement:
# a query per record was most of a large export's time.)
ROWS_SQL = """
WITH named AS (
    SELECT l.stream_id, l.task_id, o.op_name,
           row_number() OVER (PARTITION BY l.stream_id, l.task_id ORDER BY l.seq DESC) AS latest
    FROM host.launch l JOIN host.op o ON o.op_id = l.op_id AND o.ge = 1)
SELECT c.*, n.op_name FROM {schema}.l2_cache c
    LEFT JOIN named n ON n.latest = 1 AND n.stream_id = c.stream_id AND n.task_id = c.task_id
ORDER BY c.rowid
"""


def slots(context: Context) -> Optional[Dict[str, List[Tuple[int, int]]]]:
    """(counter slot, sign) of the request, hit and victim events; None when the reference computes nothing."""
    platform = context.result.platform_version
    events = [e.strip().lower() for e in str(context.result.sample.get("l2CacheTaskProfilingEvents", "")).split(",")]
    needed = PLATFORM_EVENTS.get(platform)
    if not needed or not events or events == [""] or len(events) > 8 or not set(events) <= KNOWN_EVENTS:
        return None
    out = {}
    for kind, spec in zip(("request", "hit", "victim"), needed):
        pairs = []
        for event in spec.split(","):
            name = event.lstrip("-")
            if name not in events:
                return None
            pairs.append((events.index(name), -1 if event.startswith("-") else 1))
        out[kind] = pairs
    return out


def rows(conn, context: Context, schema: str = "main") -> Tuple[List[str], Iterator[List[str]]]:
    """l2_cache's columns (before Device_id) and rows, in file order, as they are read (``conn``: msprof's
    device database with the host's attached as ``host``; this family's table in ``schema``)."""
    found = slots(context)
    if found is None:
        return HEADERS, iter(())
    return HEADERS, _rows(conn.execute(ROWS_SQL.format(schema=schema)), found,
                          context.result.platform_version in STARS_CHIPS)


def _rows(cursor, found: Dict[str, List[Tuple[int, int]]], stars: bool) -> Iterator[List[str]]:
    for task_type, stream, task, *counters, op in cursor:
        request, hit, victim = (sum(counters[slot] * sign for slot, sign in found[k])
                                for k in ("request", "hit", "victim"))
        yield [str(stream), str(task), "N/A" if stars else _rate(hit, request), _rate(victim, request),
               op if op is not None else "N/A"]


def _rate(part: int, whole: int) -> str:
    return repr(round(part / whole, 6)) if whole else "0"
