"""The PROF host's decoders as the import wires them: API calls counted by duration as they are decoded
(api_statistic's groups), tensor_info records merged per node into the ids of their contents, node_basic_info
records with the id of their content (what the association fetches). The decoders themselves are
msprof.decode's."""
import itertools
import struct
from collections import Counter
from operator import eq, sub
from typing import List, Optional

from msprof.decode.api_event import API_LAYOUT, NAMED_BY_TYPE, ApiEventDecoder, CallBlocks
from msprof.decode.base import Blocks, Rows, load_streams
from msprof.decode.blocks import RecordLayout, bad_records, index_before, record_struct, valid_part
from msprof.decode.compact import NODE_BASIC_INFO, TENSOR_INFO, CompactDecoder, aging_of
from msprof.layouts.prof.associate import NodeContents
from msprof.layouts.prof.tensors import TENSORS_PER_RECORD, TensorContents, merged_texts

# node_info as decoded (msprof.decode.compact.NODE_BASIC_INFO), then aging and the id of the content
NODE_INFO_LAYOUT = RecordLayout("node_info", NODE_BASIC_INFO.layout.record_format, NODE_BASIC_INFO.layout.fields,
                                extras=["aging", "info_id"])


class ApiCalls(ApiEventDecoder):
    """api_event records, with their calls counted by (level, key, duration) into ``api_duration`` as they are
    decoded: the groups api_statistic sums, counted here in Python far faster than SQLite would group the
    calls in the report."""

    FLUSH = 1 << 16      # distinct groups held at most (then written: a group may have several rows)

    def __init__(self, index=None):
        super().__init__(index)
        self.groups: Counter = Counter()

    def decode(self, chunk, tally):
        out = super().decode(chunk, tally)
        for part in out:
            if isinstance(part, CallBlocks):
                width = API_LAYOUT.width
                for block, durations in zip(part.blocks, part.durations):
                    self._count(block[0::width], block[1::width], block[6::width], durations)
            elif part.table == "api" and part.rows:
                levels, types, _thread, _request, begins, ends, items = zip(*part.rows)
                self._count(levels, types, items, map(sub, ends, begins))
        if len(self.groups) >= self.FLUSH:
            out.append(self._written())
        return out

    def finish(self, tally):
        return [self._written()]

    def _count(self, levels, types, items, durations) -> None:
        if NAMED_BY_TYPE.issuperset(levels):
            self.groups.update(zip(levels, types, durations))
        else:
            keys = [t if level in NAMED_BY_TYPE else i for level, t, i in zip(levels, types, items)]
            self.groups.update(zip(levels, keys, durations))

    def _written(self) -> Rows:
        rows = [key + (n,) for key, n in self.groups.items()]
        self.groups.clear()
        return Rows("api_duration", ("level", "k", "d", "n"), rows)


def merge_scattered_tensor_infos(conn, contents: TensorContents) -> None:
    """Records of one node (thread, time, node) that were not next to each other — threads writing one file,
    an aging and an unaging stream — merged into one, in the order they were read, as the reference merges
    every record of a key (the decoder merged the neighbours already: usually there is none left)."""
    keys = conn.execute("SELECT thread, ts, node_hash FROM tensor_info GROUP BY thread, ts, node_hash"
                        " HAVING count(*) > 1").fetchall()
    for key in keys:
        rows = conn.execute("SELECT i.seq, t.* FROM tensor_info i JOIN tensor t USING (tensor_id) WHERE i.thread = ?"
                            " AND i.ts = ? AND i.node_hash = ? ORDER BY i.seq", key).fetchall()
        tensor_id = contents.new_id(merged_texts([row[2:] for row in rows]))
        conn.executemany("DELETE FROM tensor_info WHERE seq = ?", [(row[0],) for row in rows[1:]])
        conn.execute("UPDATE tensor_info SET tensor_id = ? WHERE seq = ?", (tensor_id, rows[0][0]))
    contents.take_new().insert(conn)


class TensorInfos(CompactDecoder):
    """tensor_info records, those of one node (same thread, time and node: an op of more than five tensors)
    merged when they follow each other, each node's description as the id of its content
    (msprof.layouts.prof.tensors). A record claiming more than five tensors (damaged: it has room for five)
    is read for the five it holds, and said."""

    HEAD = struct.Struct("<8xI4xqqI")        # thread, timestamp, node hash, tensor count; the words follow
    HEADS = "8xI4xqqI220x"                   # the same, of a whole 256-byte record (for record_struct)

    def __init__(self, contents: TensorContents):
        super().__init__(TENSOR_INFO)
        self.contents = contents
        self.key: Optional[tuple] = None      # the last node's (thread, ts, node hash) and records: the next
        self.records: List[tuple] = []        # record may continue it, in this chunk or the next
        self.overfull = 0
        self.first_overfull = 0

    def decode(self, chunk, tally):
        bad = bad_records(chunk, self.record_size, self.family.checks)
        chunk, skipped, first = valid_part(chunk, self.record_size, self.family.checks, bad)
        tally.skip("bad magic or level", skipped, first)
        # (the tensor words of a record, as bytes, look its description up: ops repeat, and only a new one is
        # unpacked)
        sides_of = self.contents.sides_of
        nodes = []
        body = self.HEAD.size - 4
        size = self.record_size
        count = len(chunk) // size
        if count > 1:
            # The usual chunk: every node in one record (five tensors or fewer), none continuing the node before
            # the chunk. Its heads are unpacked at once and each record is a node but the last (the next chunk
            # may continue that one); anything else goes record by record below.
            heads = record_struct(self.HEADS, count).unpack(chunk)
            keys = list(zip(heads[0::4], heads[1::4], heads[2::4]))
            if (max(heads[3::4]) <= TENSORS_PER_RECORD and keys[0] != self.key
                    and not any(map(eq, keys, itertools.islice(keys, 1, None)))):
                sides = list(map(sides_of, [chunk[o:o + size - body] for o in range(body, len(chunk), size)]))
                if self.records:
                    nodes.append(self._node())
                ids = map(self.contents.__getitem__, zip(sides[:-1]))
                nodes += [key + (i,) for key, i in zip(keys, ids)]
                self.key, self.records = keys[-1], [sides[-1]]
                return self._rows(nodes)
        for offset in range(0, len(chunk), self.record_size):
            thread, ts, node, count = self.HEAD.unpack_from(chunk, offset)
            if count > TENSORS_PER_RECORD:
                if not self.overfull:       # (its offset in the chunk as read, before the bad records left it)
                    self.first_overfull = tally.base + index_before(offset // self.record_size, bad) * self.record_size
                self.overfull += 1
            key = (thread, ts, node)
            if key != self.key:
                if self.records:
                    nodes.append(self._node())
                self.key = key
            self.records.append(sides_of(chunk[offset + body:offset + self.record_size]))
        return self._rows(nodes)

    def messages(self, where):
        if not self.overfull:
            return []
        return [f"{where(self.first_overfull)}: {self.overfull} tensor_info record(s) claim more than "
                f"{TENSORS_PER_RECORD} tensors (damaged): read for the {TENSORS_PER_RECORD} each holds"]

    def finish(self, tally):
        return self._rows([self._node()] if self.records else [])

    def _node(self) -> tuple:
        row = self.key + (self.contents[tuple(self.records)],)
        self.records = []
        return row

    def _rows(self, nodes: list) -> list:
        return [self.contents.take_new(), Rows("tensor_info", ("thread", "ts", "node_hash", "tensor_id"), nodes)]


def load_node_infos(conn, streams, counts, notices) -> NodeContents:
    """node_basic_info records into ``node_info``; returns the ids given to their contents."""
    contents = NodeContents()
    load_streams(conn, streams, lambda item: _NodeInfos(NODE_BASIC_INFO, aging_of(item.stem), contents), notices,
                 counts)
    return contents


class _NodeInfos(CompactDecoder):
    """node_basic_info records, each with the id of its content (op type, GE task type, block dim, flag,
    aging): ops repeat, so the association fetches (time, id) pairs instead of five columns each."""

    def __init__(self, family, aging: int, contents: "NodeContents"):
        super().__init__(family, aging)
        self.contents = contents

    def decode(self, chunk, tally):
        [out] = super().decode(chunk, tally)
        width = NODE_INFO_LAYOUT.width
        blocks = []
        for block in out.blocks:
            n = len(block) // (width + 1)
            fields = [block[k:n * width:width] for k in range(width)]
            keys = zip(fields[3], fields[4], fields[5], fields[6], block[n * width:])
            blocks.append(block + tuple(map(self.contents.__getitem__, keys)))
        return [Blocks(NODE_INFO_LAYOUT, blocks)]
