"""ACL API records, ``AclModule.*`` — 128 B ``=HHIQQII64s4Q`` (raw-format.md §5.3)."""
from typing import List

from msprof.decode.base import IMPOSSIBLE_TIMES, Blocks, Decoder, Tally, impossible_time, impossible_times
from msprof.decode.blocks import RecordLayout, bad_records, valid_part

RECORD_SIZE = 128
MAGIC = 0x5A5A
# api type, start, end, pid, tid, raw name (magic and tag are checked on the raw bytes; reserved tail
# skipped); the clean name is computed
LAYOUT = RecordLayout("acl_api", "4xIqqII64s32x", ["api_type", "start", "end", "pid", "tid", None], extras=["name"])
CHECKS = {0: (0xFF, MAGIC & 0xFF), 1: (0xFF, MAGIC >> 8), 2: (0xFF, 0), 3: (0xFF, 0)}
API_TYPES = {1: "ACL_OP", 2: "ACL_MODEL", 3: "ACL_RTS", 4: "ACL_OTHERS"}


def looks_aligned(record: bytes) -> bool:
    return record[0:2] == b"\x5a\x5a" and record[2:4] == b"\x00\x00"


def api_type_name(value: int) -> str:
    return API_TYPES.get(value, str(value))


class AclDecoder(Decoder):
    """Blocks of LAYOUT (record values, then the clean names) of the valid records; bad magic/tag counted."""

    kind = "acl"
    label = "ACL"
    record_size = RECORD_SIZE
    looks_aligned = staticmethod(looks_aligned)

    def decode(self, chunk: bytes, tally: Tally):
        dropped = bad_records(chunk, RECORD_SIZE, CHECKS)
        chunk, skipped, first = valid_part(chunk, RECORD_SIZE, CHECKS, dropped)
        tally.skip("bad magic or tag", skipped, first)
        clean = _Names().__getitem__
        width = LAYOUT.width
        blocks = list(LAYOUT.blocks(chunk))
        if any(impossible_times(block[1::width], block[2::width]) for block in blocks):
            blocks = self._timed(blocks, tally, dropped)
        return [Blocks(LAYOUT, [block + tuple(map(clean, block[width - 1::width])) for block in blocks])]

    @staticmethod
    def _timed(blocks, tally: Tally, dropped: List[int]):
        """The records of ``blocks`` whose times can be a call's (IMPOSSIBLE_TIMES: the others are skipped and
        counted). ``dropped``: the chunk's records left out before (bad magic), so that the first one skipped
        here is named at its place in the file."""
        width = LAYOUT.width
        out, bad, first = [], 0, None
        index = 0
        for block in blocks:
            kept = []
            for at in range(0, len(block), width):
                record = block[at:at + width]
                if impossible_time(record[1], record[2]):
                    bad += 1
                    first = index if first is None else first
                else:
                    kept.extend(record)
                index += 1
            if kept:            # (an empty block would be an INSERT of no rows)
                out.append(tuple(kept))
        at = first or 0
        for gone in dropped:    # (sorted): the chunk index of the first such record
            if gone <= at:
                at += 1
        tally.skip(IMPOSSIBLE_TIMES, bad, at)
        return out


class _Names(dict):
    """raw 64-byte name → clean text, each distinct name cleaned once (per chunk: memory stays bounded)."""

    def __missing__(self, raw: bytes) -> str:
        name = self[raw] = _clean(raw)
        return name


def _clean(raw: bytes) -> str:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return "".join(ch if ch.isprintable() else "?" for ch in text)
