"""msproftx / mstx records of the host, ``(un)aging.additional.msproftx.slice_k`` — 256 bytes
``=HH3IQ2HI2H4Ii5Qi156s`` (docs/prof-format.md, "msproftx").

Header of every additional record (magic 0x5A5A, level, type, thread, data length, time stamp), then the info
type (0: an msproftx API record, 1: an mstx record, one segment of its message), the segment index, reserved
words and the data tag, the process and thread ids, category, event type (0 marker, 1 push/pop, 2 start/end,
3 marker_ex), payload type and value, start and end (host clock), mark id, domain (a hash_dic id), message
type, and a NUL-terminated message of at most 156 bytes.

Validated: the magic, the info type (0 or 1), and start ≤ end (a record ending before it starts cannot be
real); other records are skipped and counted. Messages are read as UTF-8 up to their first NUL (bytes that
are not UTF-8 are replaced, not fatal).
"""
import struct

from msprof.decode.api_event import MAGIC, looks_aligned
from msprof.decode.base import Decoder, Rows, Tally
from msprof.decode.dicts import signed64

RECORD_SIZE = 256
RECORD = struct.Struct("<HH3IQ2HI2H4Ii5Qi156s")
TX, TX_EX = 0, 1
TX_COLUMNS = ("seq", "pid", "tid", "category", "event_type", "payload_type", "payload_value", "start", "end",
              "message_type", "message")
EX_COLUMNS = ("seq", "mark_id", "seg_idx", "pid", "tid", "event_type", "start", "end", "domain", "message")
assert RECORD.size == RECORD_SIZE


def message_text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


class MsprofTxDecoder(Decoder):
    """Rows of ``msproftx`` (info type 0) and ``msproftx_ex`` (info type 1, one row per message segment)."""

    kind = "msproftx"
    label = "msproftx"
    record_size = RECORD_SIZE
    looks_aligned = staticmethod(looks_aligned)

    def __init__(self):
        self.seq = 0

    def decode(self, chunk: bytes, tally: Tally):
        tx, ex = [], []
        for index, fields in enumerate(RECORD.iter_unpack(chunk)):
            (magic, _level, _type, _thread, _length, _ts, info, seg, _r, _r2, _tag, pid, tid, category, event,
             payload_type, payload, start, end, mark, domain, message_type, message) = fields
            self.seq += 1
            if magic != MAGIC:
                tally.skip("bad magic", 1, index)
            elif info not in (TX, TX_EX):
                tally.skip("unknown info type", 1, index)
            elif end < start:
                tally.skip("end before start", 1, index)
            elif info == TX:
                tx.append((self.seq, pid, tid, category, event, payload_type, signed64(payload), signed64(start),
                           signed64(end), message_type, message_text(message)))
            else:
                ex.append((self.seq, signed64(mark), seg, pid, tid, event, signed64(start), signed64(end),
                           signed64(domain), message_text(message)))
        return [Rows("msproftx", TX_COLUMNS, tx), Rows("msproftx_ex", EX_COLUMNS, ex)]
