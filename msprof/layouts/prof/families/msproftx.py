"""msproftx / mstx: the host's ``(un)aging.additional.msproftx`` records (msprof.decode.msproftx) and the
device's mstx marks (step-trace records of tag id 11, a marker, and 12, a range's start and end, in the
device's ``step_trace`` table: the step_trace family decodes them), printed as the reference's msprof_tx file:
the host's records in start order, each mstx record with the device times of its mark id on every device
(docs/prof-format.md, "msproftx").
"""
from decimal import Decimal
from itertools import groupby
from typing import Iterable, List, Sequence, Tuple

from msprof.decode.msproftx import EX_COLUMNS, TX_COLUMNS, MsprofTxDecoder
from msprof.layouts.prof.families.base import Context, Family, kinds
from msprof.store import TableDef

NA = "N/A"
EVENTS = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}
COLUMNS = ["pid", "tid", "category", "event_type", "payload_type", "payload_value", "Start_time(us)",
           "End_time(us)", "message_type", "message", "domain"]
DEVICE_COLUMNS = ["Device Start_time(us)", "Device End_time(us)"]
MARK, RANGE = 11, 12
# from this CANN version (info.json cannVersion) tag id 12 marks a range's two ends; before it, a mark id's
# records are one range from its first to its last
RANGES_FROM = (9, 1)

_TYPES = {"seq": int, "pid": int, "tid": int, "category": int, "event_type": int, "payload_type": int,
          "payload_value": int, "start": int, "end": int, "message_type": int, "message": str, "mark_id": int,
          "seg_idx": int, "domain": int}
TABLES = {"msproftx": TableDef({c: _TYPES[c] for c in TX_COLUMNS}, "seq"),
          "msproftx_ex": TableDef({c: _TYPES[c] for c in EX_COLUMNS}, "seq")}

FAMILY = Family("msproftx", "host", kinds((r"^(un)?aging\.additional\.msproftx$", "msproftx")), TABLES,
                {"msproftx": lambda item: MsprofTxDecoder()})


def host_rows(conn, context: Context) -> List[list]:
    """The host's rows (before the device times), in the reference's order: msproftx records, then mstx marks
    by first appearance, sorted (stably) by their printed start. The mark id is the last cell."""
    rows = []
    for pid, tid, category, event, ptype, pvalue, start, end, mtype, message in conn.execute(
            "SELECT pid, tid, category, event_type, payload_type, payload_value, start, end, message_type, message"
            " FROM msproftx ORDER BY seq"):
        rows.append([str(pid), str(tid), str(category), EVENTS.get(event, ""), str(ptype), str(pvalue),
                     context.host_text(start), context.host_text(end), str(mtype), message, NA, NA])
    names = dict(conn.execute("SELECT hash, text FROM hash_string"))
    for mark, segments in groupby(conn.execute(
            "SELECT e.mark_id, e.seg_idx, e.pid, e.tid, e.event_type, e.start, e.end, e.domain, e.message"
            " FROM msproftx_ex e JOIN (SELECT mark_id, min(seq) AS first FROM msproftx_ex GROUP BY mark_id) f"
            " USING (mark_id) ORDER BY f.first, e.seg_idx, e.seq"), key=lambda row: row[0]):
        segments = list(segments)
        _mark, _seg, pid, tid, event, start, end, domain, _m = segments[0]
        rows.append([str(pid), str(tid), NA, EVENTS.get(event, ""), NA, NA, context.host_text(start),
                     context.host_text(end), NA, "".join(s[8] for s in segments), names.get(domain, "invalid"),
                     str(mark)])
    rows.sort(key=lambda row: row[6] + "\t")
    return rows


def device_marks(conn, context: Context) -> List[Tuple[str, str, str]]:
    """(mark id, start, end) of the device's mstx marks, as the reference lists them."""
    marks = conn.execute("SELECT index_id, syscnt, tag_id FROM step_trace WHERE tag_id IN (11, 12)"
                         " ORDER BY rowid").fetchall()
    if not marks:
        return []
    out = []
    if _cann_version(context) >= RANGES_FROM:
        out = [(m, s, 0) for m, s, tag in marks if tag == MARK]
        ranges = sorted(((m, s) for m, s, tag in marks if tag == RANGE))
        for mark, group in groupby(ranges, key=lambda r: r[0]):
            times = [s for _m, s in group]
            out += [(mark, times[i], times[i + 1] - times[i]) for i in range(0, len(times) - 1, 2)]
    else:
        for mark, group in groupby(sorted((m, s) for m, s, _t in marks), key=lambda r: r[0]):
            times = [s for _m, s in group]
            out.append((mark, times[0], times[-1] - times[0]))
    return [(str(m), context.device_text(s), context.device_text(s + d)) for m, s, d in out]


def summary(host_conn, host_context: Context, devices: Sequence[Tuple[str, object, Context]]) -> tuple:
    """msprof_tx's columns and rows: the host's, each mstx mark once per device time of its mark id (Device_id
    the device's), or once with Device_id "host" and N/A device times."""
    times = {}
    for device_id, conn, context in devices:
        for mark, start, end in device_marks(conn, context):
            times.setdefault(mark, []).append((device_id, start, end))
    rows = []
    for row in host_rows(host_conn, host_context):
        matched = times.get(row[-1])
        if matched:
            rows += [[device_id] + row[:-1] + [start, end] for device_id, start, end in matched]
        else:
            rows.append(["host"] + row[:-1] + [NA, NA])
    return ["Device_id"] + COLUMNS + DEVICE_COLUMNS, rows


def _cann_version(context: Context) -> Tuple[int, int]:
    text = str(context.result.info.get("cannVersion", ""))
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0
