"""Step trace, ``ts_track.data.*`` — 40 B ``=BBHIQQQHHHH`` (raw-format.md §5.6)."""
import struct

from msprof.decode.base import Decoder, Rows, Tally
from msprof.decode.pairing import Pairing

RECORD_SIZE = 40
STEP_TRACE_TAG = 10
ITERATION_START, ITERATION_END = 0, 1
# mode, tag, buffer size, syscnt, index id, model id, stream id, task id, tag id
LAYOUT = struct.Struct("<BBH4xqqqHHH2x")
_MARKS = (b"\x00\x00", b"\x01\x00")     # tag id (iteration start, end), little-endian


def looks_aligned(record: bytes) -> bool:
    """A step-trace record starts here: tag 10 and a tag id of start or end. Not a check of the records
    (other tags are valid and skipped by size): only where they start, so that a file cut at its end (the app
    died) is not read shifted as one that lost its head."""
    return record[1] == STEP_TRACE_TAG and record[36:38] in _MARKS


class StepTraceDecoder(Decoder):
    """Rows (syscnt, index_id, model_id, stream_id, task_id, tag_id) of step-trace records; records of other
    tags are skipped by their size (and counted). ``rows`` keeps them for the iteration pairing (a few per
    iteration) unless ``keep`` is false (the reader takes them from the table)."""

    kind = "step_trace"
    label = "step trace"
    record_size = RECORD_SIZE
    looks_aligned = staticmethod(looks_aligned)

    def __init__(self, keep: bool = True):
        self.rows = []
        self.keep = keep

    def decode(self, chunk: bytes, tally: Tally):
        rows = []
        first_other = None
        other = 0
        for index, (_mode, tag, _size, syscnt, index_id, model_id, stream_id, task_id,
                    tag_id) in enumerate(LAYOUT.iter_unpack(chunk)):
            if tag != STEP_TRACE_TAG:
                other += 1
                first_other = index if first_other is None else first_other
                continue
            rows.append((syscnt, index_id, model_id, stream_id, task_id, tag_id))
        tally.skip("other tag", other, first_other or 0, warn=False)
        if self.keep:
            self.rows.extend(rows)
        return [Rows("step_trace", ("syscnt", "index_id", "model_id", "stream_id", "task_id", "tag_id"), rows)]


def iterations(rows):
    """Pair start/end marks per (model, index) in time order (msprof.decode.pairing): [(model_id, index_id, start,
    end)] in time order, and how many marks were left unpaired.

    A start without an end (or the reverse) is dropped: an iteration needs both bounds."""
    pairing, result = Pairing(), []
    for syscnt, index_id, model_id, _stream, _task, tag_id in sorted(rows):
        key = (model_id, index_id)
        if tag_id == ITERATION_START:
            pairing.start(key, (syscnt,))
        elif tag_id == ITERATION_END:
            started = pairing.end(key, syscnt)
            if started is not None:
                result.append((model_id, index_id, started[0], syscnt))
    pairing.finish()
    return sorted(result, key=lambda it: it[2]), pairing.unpaired
