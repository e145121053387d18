"""Host API calls and event markers, ``(un)aging.api_event.data.*`` — 40 B ``=HHIIIQQQ`` (raw-format.md §6).

magic 0x5A5A, level, struct type, thread, reserve (the request id of an event), begin, end, item id. An end of
all ones marks an *event* (a timestamp in the begin field), any other record is an API call. Records with
another magic or a level msprof does not know are skipped and counted; so are API calls with begin 0 (the
reference analyser drops them too), and records whose times cannot be real (a time stamp of 2^63 or more, or
an end before the begin: msprof.decode.base.IMPOSSIBLE_TIMES, as for a JOB's ACL calls). Other 64-bit fields
are kept as signed values with the same bits.

Each record the reference analyser identifies (an event, an API call but those with begin 0) takes the next
number of the host's api_event stream, aging files first (its ``connection_id``; docs/ecosystem-target.md §2.2):
the events keep theirs (``event.conn_id``); a call's is its rank among the calls plus the events before it
(msprof.layouts.prof.trace). ``StreamIndex`` carries the count from one file set to the next.

Whole chunks are decoded at once (``msprof.decode.blocks``) when their records are valid API calls (no begin
with its top bit set) but for a few events (an all-ones end: the top bit set), which is the usual case: the
events are taken out and go record by record. A chunk holding bad records, or many events, goes record by
record.
"""
import struct
from dataclasses import dataclass, field
from typing import Optional
from operator import sub

from msprof.decode.base import IMPOSSIBLE_TIMES, Blocks, Decoder, Rows, Tally, impossible_time
from msprof.decode.blocks import RecordLayout, bad_records, valid_part

RECORD_SIZE = 40
MAGIC = 0x5A5A

LEVELS = {30000: "pytorch_tx", 25000: "pta", 20500: "msproftx", 20000: "acl", 15000: "model", 10000: "node",
          6000: "aicpu", 5500: "communication", 5000: "runtime"}
LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME = 20000, 15000, 10000, 5000
# the levels whose calls are named by their struct type (type_info_dic); other levels' by their item id
# (hash_dic)
NAMED_BY_TYPE = frozenset((LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME))
_LEVEL_BYTES = {(level & 0xFF, level >> 8) for level in LEVELS}

# level, struct type, thread, request id, begin, end, item id (magic checked on the raw bytes)
API_LAYOUT = RecordLayout("api", "xxHIIIqqq", ["level", "struct_type", "thread", "request_id", "begin", "end", "item_id"])
RECORD = struct.Struct("<HHIIIqqq")
# the records whose end has its top bit clear: an API call's (an event's end is all ones; damage may set it too)
_END_TOP_BIT = {31: (0x80, 0x00)}
assert API_LAYOUT.size == RECORD.size == RECORD_SIZE


class StreamIndex:
    """The number of records identified so far in the host's api_event streams (shared by their decoders)."""

    __slots__ = ("next",)

    def __init__(self):
        self.next = 0


def looks_aligned(record: bytes) -> bool:
    return record[0:2] == b"\x5a\x5a"


class ApiEventDecoder(Decoder):
    """Rows of ``api`` (calls) and ``event`` (markers, paired into calls after the load)."""

    kind = "api_event"
    label = "api_event"
    record_size = RECORD_SIZE
    looks_aligned = staticmethod(looks_aligned)

    def __init__(self, index: Optional[StreamIndex] = None):
        self.index = index if index is not None else StreamIndex()

    def decode(self, chunk: bytes, tally: Tally):
        count = len(chunk) // RECORD_SIZE
        if (chunk[0::RECORD_SIZE] == b"\x5a" * count and chunk[1::RECORD_SIZE] == b"\x5a" * count
                and max(chunk[23::RECORD_SIZE], default=0) < 0x80
                and set(zip(chunk[2::RECORD_SIZE], chunk[3::RECORD_SIZE])) <= _LEVEL_BYTES):
            # Events (an end of all ones: its top bit set) are a few records among many calls — the markers of
            # a model's executions, msproftx — and go record by record; the calls around them stay whole.
            marked = bad_records(chunk, RECORD_SIZE, _END_TOP_BIT)
            if len(marked) <= count // 8:
                calls = valid_part(chunk, RECORD_SIZE, _END_TOP_BIT, marked)[0]
                blocks = list(API_LAYOUT.blocks(calls)) if calls else []
                width = API_LAYOUT.width
                durations = [list(map(sub, block[5::width], block[4::width])) for block in blocks]
                # No API with begin 0, and none whose times cannot be real (IMPOSSIBLE_TIMES): the top byte
                # checked above keeps every begin below 2^63, so only an end before its begin is left to find.
                if not any(0 in block[4::width] for block in blocks) and min(map(min, durations), default=0) >= 0:
                    out = [CallBlocks(API_LAYOUT, blocks, durations)]
                    if marked:
                        return out + self._records(chunk, tally, marked)
                    self.index.next += count
                    return out
        return self._records(chunk, tally, range(count))

    def _records(self, chunk: bytes, tally: Tally, indexes):
        """Rows of the records ``indexes`` of ``chunk``, one by one (skips counted at their own index); the
        records not in ``indexes`` are valid calls. A skipped record takes no number of the stream."""
        apis, events = [], []
        unpack = RECORD.unpack_from
        first, skipped = self.index.next, 0
        for index in indexes:
            magic, level, stype, thread, reserve, begin, end, item = unpack(chunk, index * RECORD_SIZE)
            if magic != MAGIC:
                tally.skip("bad magic", 1, index)
            elif level not in LEVELS:
                tally.skip("unknown level", 1, index)
            elif end == -1 and begin >= 0:
                events.append((level, stype, thread, reserve, begin, item, first + index - skipped))
                continue
            elif impossible_time(begin, end):
                tally.skip(IMPOSSIBLE_TIMES, 1, index)
            elif begin == 0:
                tally.skip("API with begin 0", 1, index)
            else:
                apis.append((level, stype, thread, reserve, begin, end, item))
                continue
            skipped += 1
        self.index.next = first + len(chunk) // RECORD_SIZE - skipped
        return [Rows("api", API_LAYOUT.fields, apis), Rows("event", EVENT_COLUMNS, events)]


EVENT_COLUMNS = ("level", "struct_type", "thread", "request_id", "ts", "item_id", "conn_id")


@dataclass
class CallBlocks(Blocks):
    """Blocks of API calls with each block's durations (end − begin): computed once, to check the calls and
    for whoever counts them (the PROF import's api_statistic groups)."""

    durations: list = field(default_factory=list)
