"""What a layout's event sources make their events of (msprof.contract.EventSource): the rows' query, the
JSON texts of times and names, the synthetic pids, a timeline's otherData. The trace writer (msprof.trace)
puts the events into files."""
import json
import re
from typing import Optional, Tuple

from msprof import __version__

# Synthetic ids, above what Linux hands out (pid_max <= 2^22), so they never clash with real pids/tids.
TASK_PID_BASE = 1 << 22
FLOW_CATEGORY = "HostToDevice"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Rows per fetch (and per write of formatted events): few enough that the row tuples and event strings
# of one batch are freed and reused by the next. With much larger batches the allocator returns its arenas
# to the OS and faults them in again for every batch.
FETCH_ROWS = 1024


def sorted_query(conn, sql: str, args=(), cache_mb: int = 128):
    """A cursor over ``sql``, whose ORDER BY sorts a whole table. SQLite sorts in runs of the cache size
    (2 MB by default), spilled to a temporary file and merged; with room for 128 MB, a million task or ACL
    rows are sorted in memory at once, which is faster (docs/performance.md, "Sorts"). The sort is done by the
    first step, inside execute(), so the connection's setting can be restored right after."""
    (cache_size,) = conn.execute("PRAGMA cache_size").fetchone()
    conn.execute(f"PRAGMA cache_size = -{int(cache_mb) * 1024}")
    try:
        return conn.execute(sql, args)
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache_size)}")


def batches(cursor):
    """Rows of ``cursor`` in lists of FETCH_ROWS (fewer Python↔SQLite round trips than row by row)."""
    while True:
        rows = cursor.fetchmany(FETCH_ROWS)
        if not rows:
            return
        yield rows


NA_JSON = '"N/A"'             # N/A as an event's argument: the JSON text of msprof.tables.NA


# Event times: whole ns printed as µs with three decimals. An event format writes ``%U`` for a time; ``us_formats``
# makes two formats of it: one printing a time from (ns // 1000, ns % 1000), one from its text (``us_text``), for
# times that may be negative (``%d.%03d`` cannot print -0.5). Printing the parts is cheaper than repr() of
# ns / 1000, and a JSON reader gets the same number: the double nearest to the exact thousandths.
def us_formats(template: str) -> Tuple[str, str]:
    return template.replace("%U", "%d.%03d"), template.replace("%U", "%s")


def us_text(ns: int) -> str:
    return ("-%d.%03d" if ns < 0 else "%d.%03d") % divmod(abs(ns), 1000)


def clean_name(value) -> str:
    """A display name without control characters or unencodable text."""
    text = "" if value is None else str(value)
    text = text.encode("utf-8", "replace").decode("utf-8")
    return _CONTROL.sub("?", text)


def jstr(value) -> str:
    return json.dumps(clean_name(value), ensure_ascii=False)


class JsonNames(dict):
    """name → its JSON string, each distinct name escaped once (bounded: names come from the data)."""

    LIMIT = 100_000

    def __missing__(self, name) -> str:
        text = jstr(name)
        if len(self) < self.LIMIT:
            self[name] = text
        return text


def other_data(report, kind: str, model: Optional[dict], iteration_id=None) -> dict:
    """otherData of a unit's timeline file."""
    begin = report.clock.get("collection_begin_us") or 0
    return {
        "collectionTimeBegin": int(begin) if float(begin).is_integer() else begin,
        "deviceId": report.device_id,
        "file": kind,
        "model": None if model is None else {"modelId": model["model_id"], "modelName": model["model_name"],
                                              "batchNum": model["batch_num"]},
        "iteration": iteration_id,
        "msprofVersion": __version__,
        "timeUnit": "us",
    }


def device_number(report) -> int:
    try:
        return max(0, min(int(report.device_id), 4095))
    except (TypeError, ValueError):
        return 0
