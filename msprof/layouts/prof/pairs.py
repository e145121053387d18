"""The PROF pairings done after the load, in SQL order (msprof.decode.pairing): the host's event records
into API calls, the device's STARS logs into tasks."""
from typing import List

from msprof.decode.base import Rows
from msprof.decode.occurrences import Occurrences
from msprof.decode.pairing import Pairing
from msprof.layouts.prof.schema import TASK_COLUMNS
from msprof.store import Notices


def pair_events(conn, notices: Notices) -> None:
    """Two events of the same (level, thread, struct type, request id, item id) make one API from the first's
    timestamp to the second's (docs/prof-format.md §3); an unpaired event is reported and ignored."""
    cursor = conn.execute("SELECT level, struct_type, thread, request_id, item_id, ts, conn_id FROM event"
                          " ORDER BY level, thread, struct_type, request_id, item_id, ts, seq")
    columns = ("level", "struct_type", "thread", "begin", "end", "item_id", "request_id", "from_events", "conn_id")
    pairing = Pairing()           # (an event is a start when none of its key waits, else that one's end)
    batch = []
    for level, stype, thread, request, item, ts, conn_id in cursor:
        key = (level, stype, thread, request, item)
        started = pairing.waiting.pop(key, None)
        if started is None:
            pairing.start(key, (ts,))
        else:
            batch.append((level, stype, thread, started[0], ts, item, request, 1, conn_id))     # (the end's id)
    pairing.finish()
    Rows("api", columns, batch).insert(conn)
    if pairing.unended:
        notices.warn(f"api_event: {pairing.unended} event record(s) without their begin/end partner ignored")


def pair_stars(conn, notices: Notices) -> None:
    """STARS start/end logs paired per (stream, task) in counter order (what the reference does); an end
    before any start and a start whose end never came are reported, not timed."""
    if not conn.execute("SELECT 1 FROM stars_log LIMIT 1").fetchone():
        return
    pairing = Pairing()
    waiting = pairing.waiting           # (a start waits as (sqe type, counter): its start and end inlined)
    executions = Occurrences()
    batch: List[tuple] = []
    for stream_id, task_id, sqe, log_type, syscnt in conn.execute(
            "SELECT stream_id, task_id, sqe_type, log_type, syscnt FROM stars_log ORDER BY syscnt, seq"):
        key = (stream_id, task_id)
        if log_type == 0:
            earlier = waiting.get(key)
            if earlier is not None:
                pairing.never_ended(earlier[1], key)
            waiting[key] = (sqe, syscnt)
            continue
        started = waiting.pop(key, None)
        if started is None:
            pairing.alone(syscnt, key)
            continue
        n = executions.next(stream_id << 16 | task_id)
        batch.append((stream_id, task_id, started[0], started[1], syscnt, n))
        if len(batch) >= 10000:
            Rows("task", TASK_COLUMNS, batch).insert(conn)
            batch = []
    Rows("task", TASK_COLUMNS, batch).insert(conn)
    pairing.finish()
    # (the logs are paired in counter order, after the load: a log is named by its stream, task and counter)
    if pairing.ends_alone:
        (stream, task), counter = pairing.first_alone_key, pairing.first_alone
        notices.warn(f"stars_soc: {pairing.ends_alone} task end(s) without a start dropped (no start time invented; "
                     f"the first: stream {stream}, task {task}, counter {counter})")
    if pairing.unended:
        (stream, task), counter = pairing.first_unended_key, pairing.first_unended
        notices.warn(f"stars_soc: {pairing.unended} task start(s) never ended dropped (no end time invented; the "
                     f"first: stream {stream}, task {task}, counter {counter})")
