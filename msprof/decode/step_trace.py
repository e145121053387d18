"""Step trace, ``ts_track.data.*`` — 40 B ``=BBHIQQQHHHH`` (raw-format.md §5.6)."""
import struct

RECORD_SIZE = 40
STEP_TRACE_TAG = 10
ITERATION_START, ITERATION_END = 0, 1
# mode, tag, buffer size, syscnt, index id, model id, stream id, task id, tag id
LAYOUT = struct.Struct("<BBH4xqqqHHH2x")


def decode(chunk: bytes, counts: dict):
    """Rows (syscnt, index_id, model_id, stream_id, task_id, tag_id) of step-trace records."""
    rows = []
    other = 0
    for _mode, tag, _size, syscnt, index_id, model_id, stream_id, task_id, tag_id in LAYOUT.iter_unpack(chunk):
        if tag != STEP_TRACE_TAG:
            other += 1
            continue
        rows.append((syscnt, index_id, model_id, stream_id, task_id, tag_id))
    counts["skipped"] = counts.get("skipped", 0) + other
    return rows


def iterations(rows):
    """Pair start/end marks per (model, index): [(model_id, index_id, start, end)] in time order.

    A start without an end (or the reverse) is dropped: an iteration needs both bounds."""
    starts, result, unpaired = {}, [], 0
    for syscnt, index_id, model_id, _stream, _task, tag_id in sorted(rows):
        key = (model_id, index_id)
        if tag_id == ITERATION_START:
            unpaired += key in starts
            starts[key] = syscnt
        elif tag_id == ITERATION_END:
            start = starts.pop(key, None)
            if start is None:
                unpaired += 1
            else:
                result.append((model_id, index_id, start, syscnt))
    return sorted(result, key=lambda it: it[2]), unpaired + len(starts)
