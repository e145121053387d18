"""Host records of fixed size with a magic and one level (raw-format.md §6): ``*.compact.node_basic_info.*``
(64 B), ``*.compact.task_track.*`` (64 B), ``*.additional.graph_id_map.*`` (256 B) and
``*.additional.tensor_info.*`` (256 B).

Each starts with magic 0x5A5A and its level; a record with another magic or level is skipped and counted,
everything else is taken as it is. Whole chunks are unpacked at once (``msprof.decode.blocks``); ``aging``
(1 for ``aging.*`` files, 0 for ``unaging.*``) is appended to the records that carry it.
"""
from msprof.decode.api_event import LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME, MAGIC
from msprof.decode.base import Blocks, Decoder, Tally
from msprof.decode.blocks import RecordLayout, valid_part


def _checks(level: int):
    return {0: (0xFF, MAGIC & 0xFF), 1: (0xFF, MAGIC >> 8), 2: (0xFF, level & 0xFF), 3: (0xFF, level >> 8)}


class CompactFamily:
    def __init__(self, kind: str, level: int, layout: RecordLayout, with_aging: bool):
        self.kind, self.level, self.layout, self.with_aging = kind, level, layout, with_aging
        self.checks = _checks(level)


# thread, timestamp, op name hash, GE task type, op type hash, block dim, op flag (+ aging)
NODE_BASIC_INFO = CompactFamily("node_basic_info", LEVEL_NODE, RecordLayout(
    "node_info", "8xI4xqqIqII12x",
    ["thread", "ts", "op_name_hash", "task_type", "op_type_hash", "block_dim", "op_flag"], extras=["aging"]), True)
# thread, timestamp, device id, stream id, task id, batch id, runtime task type, kernel name hash (+ aging)
TASK_TRACK = CompactFamily("task_track", LEVEL_RUNTIME, RecordLayout(
    "task_track", "8xI4xqHHHHqq16x",
    ["thread", "ts", "device_id", "stream_id", "task_id", "batch_id", "rts_type", "kernel_hash"],
    extras=["aging"]), True)
# thread, timestamp, model name hash, graph (model) id
GRAPH_ID_MAP = CompactFamily("graph_id_map", LEVEL_MODEL, RecordLayout(
    "graph_map", "8xI4xqqI220x", ["thread", "ts", "model_name_hash", "graph_id"]), False)

# thread, timestamp, node (op name) hash, tensor count, 5 tensors of 11 words (msprof.layouts.prof.tensors)
TENSOR_INFO = CompactFamily("tensor_info", LEVEL_NODE, RecordLayout(
    "tensor_info", "8xI4xqqI55I", ["thread", "ts", "node_hash", "tensor_num"] + [None] * 55), False)

assert (NODE_BASIC_INFO.layout.size, TASK_TRACK.layout.size, GRAPH_ID_MAP.layout.size,
        TENSOR_INFO.layout.size) == (64, 64, 256, 256)


class CompactDecoder(Decoder):
    """Blocks of the family's layout, records with a wrong magic or level left out (and counted)."""

    def __init__(self, family: CompactFamily, aging: int = 0):
        self.family = family
        self.kind = self.label = family.kind
        self.record_size = family.layout.size
        self.aging = aging

    @staticmethod
    def looks_aligned(record: bytes) -> bool:
        return record[0:2] == b"\x5a\x5a"

    def decode(self, chunk: bytes, tally: Tally):
        layout = self.family.layout
        chunk, skipped, first = valid_part(chunk, self.record_size, self.family.checks)
        tally.skip("bad magic or level", skipped, first)
        blocks = list(layout.blocks(chunk))
        if self.family.with_aging:
            width = layout.width
            blocks = [block + (self.aging,) * (len(block) // width) for block in blocks]
        return [Blocks(layout, blocks)]


def aging_of(stem: str) -> int:
    """1 for ``aging.*`` streams (dynamic ops), 0 for ``unaging.*`` (static)."""
    return 1 if stem.lower().startswith("aging") else 0
