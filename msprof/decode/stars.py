"""STARS ACSQ task log, ``stars_soc.data.*`` — 64 B ``=4HQ48x`` (raw-format.md §6, platform 5 and later).

First half-word: low 6 bits the log type (0 start, 1 end; other types are other logs, skipped by their size),
high bits the SQE type; second half-word the magic 0x6BD3; stream field, task field, syscnt. The logs are
stored as they are and paired per (stream, task) in counter order after the load (the reference sorts by
syscnt too), since one file does not promise time order.
"""
import struct

from msprof.decode.base import Decoder, Rows, Tally

RECORD_SIZE = 64
MAGIC = 0x6BD3
RECORD = struct.Struct("<4Hq48x")
SQE_TYPES = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE"}


def looks_aligned(record: bytes) -> bool:
    return record[2:4] == b"\xd3\x6b"


def stars_ids(stream: int, task: int):
    """Stream and task ids without the stream expansion of bits 12/13 of the stream field."""
    if stream & 0x1000:
        return stream % 2048, (task & 0x1FFF) | (stream & 0xE000)
    if stream & 0x2000:
        return (task & 0x0FFF) % 2048, (stream & 0x0FFF) | (task & 0xF000)
    return stream % 2048, task


class StarsDecoder(Decoder):
    """Rows of ``stars_log``: (stream, task, sqe type, log type, syscnt) of the start and end logs."""

    kind = "stars"
    label = "stars_soc"
    record_size = RECORD_SIZE
    looks_aligned = staticmethod(looks_aligned)

    def decode(self, chunk: bytes, tally: Tally):
        rows = []
        for index, (head, magic, stream, task, syscnt) in enumerate(RECORD.iter_unpack(chunk)):
            if magic != MAGIC:
                tally.skip("bad magic", 1, index)
                continue
            log_type = head & 0x3F
            if log_type > 1:
                tally.skip("other log type", 1, index, warn=False)
                continue
            if syscnt < 0:          # (2^63 or more, read signed: only damage writes one)
                tally.skip("time stamp of 2^63 or more", 1, index)
                continue
            stream_id, task_id = stars_ids(stream, task)
            rows.append((stream_id, task_id, head >> 10, log_type, syscnt))
        return [Rows("stars_log", ("stream_id", "task_id", "sqe_type", "log_type", "syscnt"), rows)]
