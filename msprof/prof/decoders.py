"""Record layouts of the Ascend CANN PROF layout (raw-format.md §6, docs/prof-format.md §2) and their decoders.

Every decoder maps a chunk of whole records to rows and counts what it skipped; none keeps state across
chunks except the small objects named below (``ApiSplitter`` keeps nothing, ``Numberer`` a dict per
(stream, task) key). Host hash ids are unsigned 64-bit on disk; SQLite integers are signed, so they are
stored as the signed value with the same bits (``signed64``) and text dictionaries are keyed the same way.
"""
import re
import struct
from typing import Dict, Optional, Tuple

MAGIC_HOST = 0x5A5A
MAGIC_DEVICE = 0x6BD3
EVENT_END = 0xFFFFFFFFFFFFFFFF

# ---------------------------------------------------------------------------------------------- levels
LEVELS: Dict[int, str] = {
    30000: "pytorch_tx", 25000: "pta", 20500: "msproftx", 20000: "acl", 15000: "model", 10000: "node",
    6000: "aicpu", 5500: "communication", 5000: "runtime",
}
LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME = 20000, 15000, 10000, 5000
ACL_TAGS: Dict[int, str] = {1: "ACL_OP", 2: "ACL_MODEL", 3: "ACL_RTS", 4: "ACL_OTHERS", 5: "ACL_NN",
                            6: "ACL_ASCENDC", 7: "HOST_HCCL", 9: "ACL_DVPP", 10: "ACL_GRAPH", 11: "ACL_ATB"}
# node_basic_info task type (GE)
GE_TASK_TYPES: Dict[int, str] = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK", 4: "MIX_AIC",
                                 5: "MIX_AIV", 6: "FFTS_PLUS", 7: "DSA_SQE", 8: "DVPP", 9: "HCCL", 10: "FUSION",
                                 11: "INVALID"}
# runtime task type name (type_info_dic, level 5000) -> GE task type, for tasks launched outside a node
RTS_TASK_TYPES: Dict[str, str] = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE",
                                  "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV", "KERNEL_AICPU": "AI_CPU"}
# hwts.data task type byte / STARS SQE type (high 6 bits of the first half-word)
HWTS_TASK_TYPES: Dict[int, str] = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK"}
STARS_SQE_TYPES: Dict[int, str] = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE"}


def is_kernel_task(rts_type_name: Optional[str]) -> bool:
    """task_track records that describe an op task (docs/prof-format.md §3)."""
    return bool(rts_type_name) and (rts_type_name.startswith("KERNEL") or rts_type_name in ("STARS_COMMON",
                                                                                             "FFTS_PLUS"))


def signed64(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


# ---------------------------------------------------------------------------------------------- layouts
class Layout:
    """A fixed-size record family: struct, size, and how to recognise a record boundary."""

    def __init__(self, kind: str, fmt: str, label: str, magic_offset: int, magic: int):
        self.kind = kind
        self.struct = struct.Struct(fmt)
        self.RECORD_SIZE = self.struct.size
        self.label = label
        self._magic = struct.pack("<H", magic)
        self._offset = magic_offset

    def looks_aligned(self, record: bytes) -> bool:
        return record[self._offset:self._offset + 2] == self._magic


API_EVENT = Layout("api_event", "<HHIIIQQQ", "api_event", 0, MAGIC_HOST)              # 40 B
NODE_BASIC_INFO = Layout("node_basic_info", "<HHIIIQQIQIIQI", "node_basic_info", 0, MAGIC_HOST)  # 64 B
TASK_TRACK = Layout("task_track", "<HHIIIQHHHHQQ16x", "task_track", 0, MAGIC_HOST)    # 64 B
GRAPH_ID_MAP = Layout("graph_id_map", "<HHIIIQQI220x", "graph_id_map", 0, MAGIC_HOST)  # 256 B
HWTS = Layout("hwts", "<BBH2xHqI44x", "HWTS", 2, MAGIC_DEVICE)                        # 64 B
AICORE = Layout("pmu", "<BBHHHIIQ8x8QI28x", "aicore PMU", 2, MAGIC_DEVICE)            # 128 B
STARS = Layout("stars", "<4HQ48x", "stars_soc", 2, MAGIC_DEVICE)                      # 64 B

assert (API_EVENT.RECORD_SIZE, NODE_BASIC_INFO.RECORD_SIZE, TASK_TRACK.RECORD_SIZE, GRAPH_ID_MAP.RECORD_SIZE,
        HWTS.RECORD_SIZE, AICORE.RECORD_SIZE, STARS.RECORD_SIZE) == (40, 64, 64, 256, 64, 128, 64)


class Skips:
    """Per-file tally of records skipped, by reason (one warning per file and reason at the end)."""

    def __init__(self):
        self.counts: Dict[str, int] = {}

    def add(self, reason: str, n: int = 1) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + n

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# ---------------------------------------------------------------------------------------------- host
def decode_api_event(chunk: bytes, aging: int, skips: Skips):
    """(apis, events): API rows (level, struct_type, thread, begin, end, item_id, request_id) and event rows
    (level, struct_type, thread, request_id, timestamp, item_id). end = all-ones marks an event."""
    apis, events = [], []
    for magic, level, stype, thread, reserve, begin, end, item in API_EVENT.struct.iter_unpack(chunk):
        if magic != MAGIC_HOST:
            skips.add("bad magic")
            continue
        if level not in LEVELS:
            skips.add("unknown level")
            continue
        if end == EVENT_END:
            events.append((level, stype, thread, reserve, signed64(begin), signed64(item)))
        elif begin == 0:
            skips.add("API with begin 0")
        else:
            apis.append((level, stype, thread, signed64(begin), signed64(end), signed64(item), reserve, 0))
    return apis, events


def decode_node_basic_info(chunk: bytes, aging: int, skips: Skips):
    rows = []
    for (magic, level, _stype, thread, _len, ts, name_hash, task_type, type_hash, block_dim, op_flag, _u1,
         _u2) in NODE_BASIC_INFO.struct.iter_unpack(chunk):
        if magic != MAGIC_HOST:
            skips.add("bad magic")
            continue
        if level != LEVEL_NODE:
            skips.add("unknown level")
            continue
        rows.append((thread, signed64(ts), signed64(name_hash), task_type, signed64(type_hash), block_dim,
                     op_flag, aging))
    return rows


def decode_task_track(chunk: bytes, aging: int, skips: Skips):
    rows = []
    for (magic, level, _stype, thread, _len, ts, device, stream, task, batch, rts_type,
         kernel_hash) in TASK_TRACK.struct.iter_unpack(chunk):
        if magic != MAGIC_HOST:
            skips.add("bad magic")
            continue
        if level != LEVEL_RUNTIME:
            skips.add("unknown level")
            continue
        rows.append((thread, signed64(ts), device & 0xFFF, stream, task, batch, signed64(rts_type),
                     signed64(kernel_hash), aging))
    return rows


def decode_graph_id_map(chunk: bytes, aging: int, skips: Skips):
    rows = []
    for magic, level, _stype, thread, _len, ts, name_hash, graph_id in GRAPH_ID_MAP.struct.iter_unpack(chunk):
        if magic != MAGIC_HOST:
            skips.add("bad magic")
            continue
        if level != LEVEL_MODEL:
            skips.add("unknown level")
            continue
        rows.append((thread, signed64(ts), signed64(name_hash), graph_id))
    return rows


_TYPE_LINE = re.compile(r"^(\d+)_(\d+):(.*)$")
_HASH_LINE = re.compile(r"^(\d+):(.*)$")


def parse_type_line(line: str, skips: Skips) -> Optional[Tuple[int, int, str]]:
    """``<level>_<type>:<name>``; a line with an unknown level or no match is skipped and counted."""
    line = line.rstrip("\r\n")
    if not line:
        return None
    match = _TYPE_LINE.match(line)
    if not match or int(match.group(1)) not in LEVELS or int(match.group(2)) >= (1 << 64):
        skips.add("unreadable line")
        return None
    return int(match.group(1)), signed64(int(match.group(2))), match.group(3)


def parse_hash_line(line: str, skips: Skips) -> Optional[Tuple[int, str]]:
    """``<hash>:<string>`` (the key must be all digits)."""
    line = line.rstrip("\r\n")
    if not line:
        return None
    match = _HASH_LINE.match(line)
    if not match or int(match.group(1)) >= (1 << 64):
        skips.add("unreadable line")
        return None
    return signed64(int(match.group(1))), match.group(2)


# ---------------------------------------------------------------------------------------------- device
def stars_ids(stream: int, task: int) -> Tuple[int, int]:
    """STARS stream/task ids without stream expansion (bits 12/13 of the stream field)."""
    if stream & 0x1000:
        return stream % 2048, (task & 0x1FFF) | (stream & 0xE000)
    if stream & 0x2000:
        return (task & 0x0FFF) % 2048, (stream & 0x0FFF) | (task & 0xF000)
    return stream % 2048, task


def decode_stars(chunk: bytes, skips: Skips):
    """Start/end logs of the ACSQ (func type 0 / 1): (stream, task, sqe_type, log_type, syscnt)."""
    rows = []
    for head, magic, stream, task, syscnt in STARS.struct.iter_unpack(chunk):
        if magic != MAGIC_DEVICE:
            skips.add("bad magic")
            continue
        func = head & 0x3F
        if func > 1:
            skips.add("other log type")
            continue
        stream_id, task_id = stars_ids(stream, task)
        rows.append((stream_id, task_id, head >> 10, func, syscnt))
    return rows


class PmuNumberer:
    """aicore.data records → rows (stream, task, exec_n, total_cycles, c0..c7); ``exec_n`` numbers the
    records of one (stream, task) in file order (the n-th record belongs to the n-th execution)."""

    def __init__(self):
        self.seen: Dict[Tuple[int, int], int] = {}
        self.skips = Skips()

    def feed(self, chunk: bytes):
        rows = []
        seen = self.seen
        for head, _core, magic, _res, task, _r1, _r2, cycles, *rest in AICORE.struct.iter_unpack(chunk):
            counters, stream = rest[:8], rest[8]
            if magic != MAGIC_DEVICE:
                self.skips.add("bad magic")
                continue
            if head & 7 != 4:
                self.skips.add("not a PMU record")
                continue
            key = (stream % 2048, task)
            n = seen.get(key, 0)
            seen[key] = n + 1
            rows.append((key[0], task, n, signed64(cycles), *(signed64(c) for c in counters)))
        return rows
