"""ACL API records, ``AclModule.*`` — 128 B ``=HHIQQII64s4Q`` (raw-format.md §5.3)."""
import struct

RECORD_SIZE = 128
MAGIC = 0x5A5A
# magic, tag, api type, start, end, pid, tid, name (reserved tail skipped)
LAYOUT = struct.Struct("<HHIqqII64s32x")
API_TYPES = {1: "ACL_OP", 2: "ACL_MODEL", 3: "ACL_RTS", 4: "ACL_OTHERS"}


def looks_aligned(record: bytes) -> bool:
    return record[0:2] == b"\x5a\x5a" and record[2:4] == b"\x00\x00"


def api_type_name(value: int) -> str:
    return API_TYPES.get(value, str(value))


def decode(chunk: bytes, counts: dict):
    """Rows (api_type, start, end, pid, tid, name) of the valid records; bad magic/tag counted."""
    names = {}
    rows = []
    skipped = 0
    for magic, tag, api_type, start, end, pid, tid, raw_name in LAYOUT.iter_unpack(chunk):
        if magic != MAGIC or tag != 0:
            skipped += 1
            continue
        name = names.get(raw_name)
        if name is None:
            name = names[raw_name] = _clean(raw_name)
        rows.append((api_type, start, end, pid, tid, name))
    counts["skipped"] = counts.get("skipped", 0) + skipped
    return rows


def _clean(raw: bytes) -> str:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return "".join(ch if ch.isprintable() else "?" for ch in text)
