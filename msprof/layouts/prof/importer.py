"""import of a PROF_ directory: host/ and device_N/ raw files → one database each (layouts/prof/schema.py).

Every binary stream goes through the shared decoders and stream loop (msprof.decode), in bounded chunks.
The host's task_track records are resolved against the node- and model-level calls as they are decoded
(msprof.layouts.prof.associate); event pairing and STARS pairing are ordered SQL scans. Nothing holds a
whole file or every task in memory.
"""
import itertools
import struct
import time
from collections import Counter
from dataclasses import asdict
from operator import add, eq, sub
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from msprof import store
from msprof.collection import ResultDir, data_files, read_result_dir, require_hwts_frequency
from msprof.console import log
from msprof.decode.api_event import API_LAYOUT, LEVEL_MODEL, NAMED_BY_TYPE, ApiEventDecoder
from msprof.decode.base import Blocks, Decoder, Rows, StreamCount, load_streams
from msprof.decode.blocks import RecordLayout, bad_records, index_before, record_struct, valid_part
from msprof.decode.compact import GRAPH_ID_MAP, NODE_BASIC_INFO, TASK_TRACK, TENSOR_INFO, CompactDecoder, aging_of
from msprof.decode.dicts import HashDecoder, TypeInfoDecoder
from msprof.decode.hwts import HwtsDecoder
from msprof.decode.occurrences import Occurrences
from msprof.decode.pairing import Pairing
from msprof.decode.pmu import ASCEND, PmuDecoder
from msprof.decode.slices import group_files
from msprof.decode.stars import StarsDecoder
from msprof.layouts.prof.associate import LAUNCH_COLUMNS, OP_COLUMNS, UNKNOWN_MODEL, Associator, NodeContents
from msprof.layouts.prof.schema import DEVICE, HOST, HOST_LATE_INDEXES, TASK_COLUMNS, TIED_STARTS
from msprof.layouts.prof.tensors import TENSORS_PER_RECORD, TensorContents, merged_texts
from msprof.metrics import AscendMetrics, event_ids
from msprof.outputs import temporary
from msprof.store import Notices
from msprof.workers import several_cores

# node_info as decoded (msprof.decode.compact.NODE_BASIC_INFO), then aging and the id of the content
NODE_INFO_LAYOUT = RecordLayout("node_info", NODE_BASIC_INFO.layout.record_format, NODE_BASIC_INFO.layout.fields,
                          extras=["aging", "info_id"])

# model-level calls that are not executions of the model (they do not count as iterations)
NOT_EXECUTIONS = ("ModelLoad", "ModelUnload")
# Chips (platform_version) whose AI Core PMU is not in aicore.data: the STARS chips keep theirs in
# ffts_profile.data, and the reference reads no aicore.data on them (no op_summary PMU columns), so neither does
# msprof: a generated or mixed-up device directory gets the reference's op_summary, with a notice.
PMU_NOT_IN_AICORE_DATA = ("5", "7", "8", "11", "15", "16")
# Chips whose device tasks the reference does not take from hwts.data (its HWTS calculator is registered for chips
# 1–4 only: chip 0 times them from runtime data, the STARS chips from stars_soc.data): a hwts.data found there is
# not read either, with a notice (found by a randomised comparison with the reference on chip 0 and 7–16)
HWTS_NOT_READ = ("0", "5", "7", "8", "9", "11", "15", "16")
# device files msprof knows of but does not read yet: what a user goes without
NOT_READ_YET = {"ffts_profile.data": "the STARS chips' AI Core PMU: op_summary has no PMU columns"}


def import_host(result: ResultDir, target: Path, spare_cores: bool = False) -> Path:
    started = time.monotonic()
    notices = Notices()
    for message in result.warnings:
        if "dev_start.log" not in message:    # the host has no device counter
            notices.warn(message)
    files = data_files(result.path)
    grouped, unknown = group_files(files)
    for path in unknown:
        log.info("ignored %s (not a known raw file)", path.name)
    counts: Dict[str, StreamCount] = {}
    # The node infos (and their index) are loaded by a worker while this process loads and indexes the API calls:
    # both must be in before the association, the host's critical path. With a second core, whether or not the
    # device is imported beside it: the device's import ends first, and a core sat idle until the association.
    side = {"node_info": ("node_info", _load_node_infos, grouped.get("node_basic_info", []))}
    with store.build(target, HOST) as db, store.SideLoads(target, HOST, side, several_cores()) as workers:
        conn = db.conn
        load_streams(conn, grouped.get("type_info_dic", []), lambda item: TypeInfoDecoder(), notices, counts)
        load_streams(conn, grouped.get("hash_dic", []), lambda item: HashDecoder(), notices, counts)
        load_streams(conn, grouped.get("api_event", []), lambda item: _ApiCalls(), notices, counts)
        load_streams(conn, grouped.get("graph_id_map", []), lambda item: CompactDecoder(GRAPH_ID_MAP), notices,
                     counts)
        tensors = TensorContents()
        load_streams(conn, grouped.get("tensor_info", []), lambda item: _TensorInfos(tensors), notices, counts)
        _pair_events(conn, notices)
        HOST.create_indexes(db)
        _merge_scattered_tensor_infos(conn, tensors)
        _model_executions(conn)
        names = dict(conn.execute("SELECT hash, text FROM hash_string"))
        type_names = {(level, t): name for level, t, name in conn.execute("SELECT level, type, name FROM type_name")}
        contents = workers.merge(db, "node_info", counts, notices)
        associator, checks = _load_launches(conn, grouped.get("task_track", []), (names, type_names, contents),
                                            notices, counts, workers.attached())
        for table, columns in HOST_LATE_INDEXES:
            db[table].create_index(columns, if_not_exists=True)
        for rows in associator.launch_counts():
            rows.insert(conn)
        no_node, no_model, in_model, no_info = checks
        if no_node:
            notices.warn(f"{no_node} task(s) launched outside a node-level API: named by their kernel (op name and "
                         "type), as the reference names them")
        if no_model and in_model:
            notices.warn(f"{no_model} task(s) launched outside a model-level API: Model ID {UNKNOWN_MODEL} "
                         "(unknown)")
        elif no_model:      # an app of single ops (eager mode): nothing is missing
            notices.notice(f"no task launched inside a model-level API (single ops): Model ID {UNKNOWN_MODEL}")
        if no_info:
            notices.warn(f"{no_info} task(s) launched in a node-level API without its node_basic_info: left out "
                         "of op_summary and op_statistic (as the reference does), named by their runtime type in "
                         "task_time")
        unnamed = len(associator.ops.unnamed)
        if unnamed:
            where = "hash_dic" if grouped.get("hash_dic") else f"hash_dic (none in {result.path / 'data'})"
            notices.warn(f"{unnamed} op name/type hash id(s) not in {where}: shown as their numbers, as the "
                         "reference shows them")
        kernels = [name for (level, _t), name in type_names.items() if level == 5000]
        if grouped.get("task_track") and not any(n.startswith("KERNEL") for n in kernels):
            notices.warn("type_info_dic names no KERNEL_* runtime task type: no task_track becomes an op task")
        for kind, label in (("api_event", "API (api_event)"), ("task_track", "task_track"),
                            ("node_basic_info", "node_basic_info")):
            if not grouped.get(kind):
                notices.notice(f"no {label} data in {result.path / 'data'}: outputs that need it are skipped")
        store.record_sources(db, result.path, counts, notices, files + result.metadata_files,
                             _meta(result, "host"))
    log.info("imported %s in %.2f s", result.path, time.monotonic() - started)
    return target


class _ApiCalls(ApiEventDecoder):
    """api_event records, with their calls counted by (level, key, duration) into ``api_duration`` as they are
    decoded: the groups api_statistic sums. Counted here, 2M calls take 0.6 s; grouped by SQLite in the report,
    2 s."""

    FLUSH = 1 << 16      # distinct groups held at most (then written: a group may have several rows)

    def __init__(self):
        self.groups: Counter = Counter()

    def decode(self, chunk, tally):
        out = super().decode(chunk, tally)
        for part in out:
            if isinstance(part, Blocks):
                width = API_LAYOUT.width
                for block in part.blocks:
                    self._count(block[0::width], block[1::width], block[6::width],
                                map(sub, block[5::width], block[4::width]))
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


def _merge_scattered_tensor_infos(conn, contents: TensorContents) -> None:
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


class _TensorInfos(CompactDecoder):
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


def _load_node_infos(conn, streams, counts, notices) -> NodeContents:
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


class _Resolving(Decoder):
    """task_track records, resolved into ``launch`` rows as they are decoded — those of the chunks ``share``
    gives this process (every chunk, unless two processes resolve the stream)."""

    def __init__(self, decoder: CompactDecoder, associator: Associator, share: "_Share"):
        self.decoder, self.associator, self.share = decoder, associator, share
        self.kind, self.label, self.record_size = decoder.kind, decoder.label, decoder.record_size
        self.looks_aligned = decoder.looks_aligned

    def decode(self, chunk, tally):
        if not self.share.mine(len(chunk)):
            return []
        blocks = [block for out in self.decoder.decode(chunk, tally) for block in out.blocks]
        return self.associator.rows(blocks)

    def finish(self, tally):
        self.share.finished(tally)
        return []


# What the launches say of the association, for the import's warnings: kernel launches of GE tasks outside a
# node-level call and outside a model-level call, kernel launches inside a model-level call, and kernel launches
# in a node-level call without its node_basic_info (no GE task)
LAUNCH_CHECKS = ("SELECT coalesce(sum(o.ge AND l.call_begin IS NULL), 0), coalesce(sum(o.ge AND l.model_id IS NULL), 0),"
                 " coalesce(sum(l.model_id IS NOT NULL), 0), coalesce(sum(1 - o.ge), 0)"
                 " FROM main.launch l JOIN main.op o USING (op_id) WHERE o.kernel = 1")

# From this much task_track (a per-launch run of ~125k launches; 64 B each) and with a second core, two
# processes resolve the records: this one the first half, a worker the second, each into a part database, then
# both are copied in with the worker's op ids and launch ranks made this one's (Associator.absorb). At 1M
# launches the association took 3.9 s in one process, where the device's import leaves a core idle.
SPLIT_TRACK_BYTES = 8 << 20


class _Share:
    """Which chunks of the task_track streams (all of them, one after another) a process resolves: those
    starting before byte ``cut`` (``first``) or at and after it. ``first`` also takes in, as each stream
    ends, the records the other process skipped in it (``wait``: its result), so that a stream's warnings
    count them all."""

    def __init__(self, cut: Optional[int] = None, first: bool = True, wait=None):
        self.cut, self.first, self.wait = cut, first, wait
        self.seen = 0
        self.streams = 0
        self.tallies: List[tuple] = []        # per stream: (counts, first offsets, quiet reasons) of its skips

    def mine(self, size: int) -> bool:
        start = self.seen
        self.seen += size
        return self.cut is None or (start < self.cut) == self.first

    def finished(self, tally) -> None:
        index = self.streams
        self.streams += 1
        if self.cut is None:
            return
        if not self.first:
            self.tallies.append((dict(tally.counts), dict(tally.first), set(tally.quiet)))
            return
        counts, firsts, quiet = self.wait()["tallies"][index]
        for reason, n in counts.items():
            tally.counts[reason] = tally.counts.get(reason, 0) + n
            tally.first[reason] = min(tally.first.get(reason, firsts[reason]), firsts[reason])
        tally.quiet |= quiet


def _load_launches(conn, tracks: list, lookups: tuple, notices: Notices, counts: dict,
                   attached: Dict[str, Path]) -> Tuple[Associator, tuple]:
    """The ``launch`` and ``op`` rows of the task_track streams (``lookups``: the Associator's names, type
    names and node contents; ``attached``: the database's parts merged so far, by their attached names);
    returns the Associator that holds the launch counts, and the launches' LAUNCH_CHECKS."""
    try:
        total = sum(p.stat().st_size for item in tracks for p in item.files)
    except OSError:             # (said with its name where the stream is opened)
        total = 0
    if total < SPLIT_TRACK_BYTES or not several_cores():
        return _resolve(conn, tracks, lookups, _Share(), notices, counts)
    from msprof.workers import process_pool

    (source,) = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
    store.commit(conn)                    # what the worker reads: the calls and node infos, indexed
    conn.execute("PRAGMA shrink_memory")  # (the worker starts as a copy of this process: not of its cache too)
    directory = Path(source).parent
    parts = [temporary(directory, "msprof.launch.db") for _ in range(2)]
    try:
        with process_pool(1) as pool:
            later = pool.submit(_resolve_part, source, str(parts[1]), tracks, lookups, total // 2, attached)
            part = _part_connection(parts[0], source, attached)
            try:
                associator, checks = _resolve(part, tracks, lookups, _Share(total // 2, True, later.result), notices,
                                              counts)
                store.commit(part)
            finally:
                part.close()
            result = later.result()
        _merge_parts(conn, associator, parts, result)
    finally:
        for path in parts:
            path.unlink(missing_ok=True)
    return associator, tuple(map(add, checks, result["checks"]))


def _resolve(conn, tracks: list, lookups: tuple, share: _Share, notices: Notices,
             counts: dict) -> Tuple[Associator, tuple]:
    """The task_track chunks ``share`` gives this process, resolved into ``conn``'s launch and op tables; the
    Associator and what LAUNCH_CHECKS counts of them (counted by each process of its own: it is then no scan of
    every launch after the merge, where the import has one process left)."""
    associator = Associator(conn, *lookups)
    load_streams(conn, tracks, lambda item: _Resolving(CompactDecoder(TASK_TRACK, aging_of(item.stem)), associator,
                                                       share), notices, counts)
    return associator, conn.execute(LAUNCH_CHECKS).fetchone()


def _part_connection(part: Path, source: str, attached: Dict[str, Path]):
    """A part database for ``launch`` and ``op`` rows, with the database being built and its parts (``attached``)
    attached (read-only) for the association's lookups: their tables are read by their names, as the part has
    none of them."""
    # (4 MB: rows are appended, a large cache would only add to the peak)
    return store.open_part(part, HOST, ["launch", "op"], source=Path(source), cache_kb=4096, source_parts=attached)


def _resolve_part(source: str, part: str, tracks: list, lookups: tuple, cut: int, attached: Dict[str, Path]) -> dict:
    """In a worker: the task_track chunks from byte ``cut`` on, resolved into the part database ``part``;
    returns the ops it made (key → its op id), its launch counts and what it skipped in each stream."""
    conn = _part_connection(Path(part), source, attached)
    try:
        share = _Share(cut, False)
        associator, checks = _resolve(conn, tracks, lookups, share, Notices(echo=False), {})
        store.commit(conn)
        return {"ops": dict(associator.ops), "counts": associator.occ, "tallies": share.tallies,
                "checks": checks}
    finally:
        conn.close()


def _merge_parts(conn, associator: Associator, parts: List[Path], later: dict) -> None:
    """The two parts' rows into the database, in record order: the first as they are, the later one's with
    its op ids and launch ranks made the first's (Associator.absorb)."""
    op_ids, before = associator.absorb(later["ops"], later["counts"])
    for i, path in enumerate(parts):
        conn.execute(f"ATTACH DATABASE ? AS part{i}", (store.uri(path, "ro"),))
    store.begin(conn)
    conn.execute("CREATE TEMP TABLE msprof_op_ids (later INTEGER PRIMARY KEY, op_id INTEGER)")
    conn.executemany("INSERT INTO temp.msprof_op_ids VALUES (?, ?)", op_ids)
    # (typed: a key of no affinity cannot be looked up by the launches' integers)
    conn.execute("CREATE TEMP TABLE msprof_before (device_id INTEGER, stream_id INTEGER, task_id INTEGER, n INTEGER,"
                 " PRIMARY KEY (device_id, stream_id, task_id)) WITHOUT ROWID")
    for rows in before:
        rows.insert(conn)
    ops = ", ".join(OP_COLUMNS)
    conn.execute(f"INSERT INTO main.op ({ops}) SELECT {ops} FROM part0.op ORDER BY op_id")
    associator.ops.take_new().insert(conn)
    columns = list(LAUNCH_COLUMNS)
    names = ", ".join(columns)
    # (the whole table, as it is: SQLite then copies its records without decoding them — main.launch is empty
    # and has no index yet)
    conn.execute("INSERT INTO main.launch SELECT * FROM part0.launch")
    later_columns = ", ".join({"occ": "l.occ + coalesce(b.n, 0)", "op_id": "m.op_id"}.get(c, f"l.{c}")
                              for c in columns)
    # (CROSS JOIN: the launches in order, each looking up its op and count; SQLite would rather scan the
    # launches once per op)
    conn.execute(f"INSERT INTO main.launch ({names}) SELECT {later_columns} FROM part1.launch l"
                 " CROSS JOIN temp.msprof_op_ids m ON m.later = l.op_id LEFT JOIN temp.msprof_before b"
                 " ON b.device_id = l.device_id AND b.stream_id = l.stream_id AND b.task_id = l.task_id ORDER BY l.seq")
    conn.execute("DROP TABLE temp.msprof_op_ids")
    conn.execute("DROP TABLE temp.msprof_before")
    store.commit(conn)
    for i in range(len(parts)):
        conn.execute(f"DETACH DATABASE part{i}")
    store.begin(conn)


def _pair_events(conn, notices: Notices) -> None:
    """Two events of the same (level, thread, struct type, request id, item id) make one API from the first's
    timestamp to the second's (docs/prof-format.md §3); an unpaired event is reported and ignored."""
    cursor = conn.execute("SELECT level, struct_type, thread, request_id, item_id, ts FROM event"
                          " ORDER BY level, thread, struct_type, request_id, item_id, ts, seq")
    columns = ("level", "struct_type", "thread", "begin", "end", "item_id", "request_id", "from_events")
    pairing = Pairing()           # (an event is a start when none of its key waits, else that one's end)
    batch = []
    for level, stype, thread, request, item, ts in cursor:
        key = (level, stype, thread, request, item)
        started = pairing.waiting.pop(key, None)
        if started is None:
            pairing.start(key, (ts,))
        else:
            batch.append((level, stype, thread, started[0], ts, item, request, 1))
    pairing.finish()
    Rows("api", columns, batch).insert(conn)
    if pairing.unended:
        notices.warn(f"api_event: {pairing.unended} event record(s) without their begin/end partner ignored")


def _model_executions(conn) -> None:
    """model_exec: the model-level calls that execute a model, numbered per model in time order (from 1);
    model: each model's name (graph_id_map) and number of executions."""
    skip = ",".join(f"'{name}'" for name in NOT_EXECUTIONS)
    conn.execute(
        "INSERT INTO model_exec (seq, model_id, iteration)"
        " SELECT a.seq, a.item_id, row_number() OVER (PARTITION BY a.item_id ORDER BY a.begin, a.seq) FROM api a"
        f" LEFT JOIN type_name t ON t.level = a.level AND t.type = a.struct_type WHERE a.level = {LEVEL_MODEL}"
        f" AND coalesce(t.name, '') NOT IN ({skip})")
    conn.execute(
        "INSERT INTO model (model_id, model_name, iterations)"
        " SELECT m.model_id, (SELECT coalesce(h.text, CAST(g.model_name_hash AS TEXT)) FROM graph_map g"
        "  LEFT JOIN hash_string h ON h.hash = g.model_name_hash WHERE g.graph_id = m.model_id"
        "  ORDER BY g.ts LIMIT 1), count(*) FROM model_exec m GROUP BY m.model_id")


# ---------------------------------------------------------------------------------------------- device
def import_device(result: ResultDir, target: Path, spare_cores: bool = False) -> Path:
    """``spare_cores``: aicore.data may be loaded by a worker process while this one loads the task logs."""
    started = time.monotonic()
    notices = Notices()
    for message in result.warnings:
        notices.warn(message)
    files = data_files(result.path, empty_ok=True)
    grouped, unknown = group_files(files)
    for path in unknown:
        log.info("ignored %s (not a known raw file)", path.name)
    for prefix, cost in NOT_READ_YET.items():
        if any(path.name.startswith(prefix + ".") for path in unknown):
            notices.notice(f"{prefix} files are not read by msprof yet ({cost})")
    streams = {k: [s for s in v if s.device in (None, result.device_id)] for k, v in grouped.items()}
    unread_pmu = streams.get("pmu") and result.platform_version in PMU_NOT_IN_AICORE_DATA
    if unread_pmu:
        streams["pmu"] = []
    unread_hwts = streams.get("hwts") and result.platform_version in HWTS_NOT_READ
    if unread_hwts:
        streams["hwts"] = []
    has_tasks = bool(streams.get("hwts") or streams.get("stars"))
    if has_tasks:
        require_hwts_frequency(result, "device task")
    counts: Dict[str, StreamCount] = {}
    side = {"pmu": ("pmu", _load_pmu, streams.get("pmu", []))}
    with store.build(target, DEVICE) as db, store.SideLoads(target, DEVICE, side, spare_cores) as workers:
        conn = db.conn
        events = event_ids(result.sample, ASCEND.counters, notices, bool(streams.get("pmu")))
        db["pmu_event"].insert_all([{"slot": i, "event_id": e} for i, e in enumerate(events)])
        metric_set = str(result.sample.get("ai_core_metrics") or "")
        missing = AscendMetrics(metric_set, events, str(result.info.get("platform_version", ""))).missing
        if missing and events and streams.get("pmu"):      # (no events at all: event_ids said so)
            notices.warn(f"sample.json's ai_core_profiling_events lack {', '.join(f'0x{e:x}' for e in missing)} of "
                         f"the {metric_set} metric set: op_summary has its raw PMU counters, by event id, instead "
                         "of the set's columns")
        load_streams(conn, streams.get("hwts", []),
                     lambda item: HwtsDecoder(lambda piece: [Rows("task", TASK_COLUMNS, _task_rows(piece))]),
                     notices, counts)
        load_streams(conn, streams.get("stars", []), lambda item: StarsDecoder(), notices, counts)
        _pair_stars(conn, notices)
        DEVICE.create_indexes(db, ["task"])      # while the worker may still be busy
        _task_keys(conn)
        workers.merge(db, "pmu", counts, notices)
        if unread_hwts:
            notices.notice(f"hwts.data of platform {result.platform_version} not read, as the reference does not "
                           "read it on this chip (its task log is elsewhere)")
        if not has_tasks:
            notices.notice(f"no device task data (hwts.data / stars_soc.data) in {result.path / 'data'}: "
                           "op_summary, op_statistic and task_time are skipped")
        if unread_pmu:
            notices.notice(f"aicore.data of platform {result.platform_version} (a STARS chip, whose PMU is in "
                           "ffts_profile.data) not read, as the reference does not read it: op_summary has no PMU "
                           "columns")
        elif not streams.get("pmu") and result.sample.get("ai_core_metrics") and has_tasks:
            notices.notice(f"no aicore.data in {result.path / 'data'}: op_summary has no PMU columns")
        DEVICE.create_indexes(db)
        store.record_sources(db, result.path, counts, notices, files + result.metadata_files,
                             _meta(result, "device"))
    log.info("imported %s in %.2f s", result.path, time.monotonic() - started)
    return target


def import_no_device(result: ResultDir, target: Path, spare_cores: bool = False) -> Path:
    """The device database of a PROF_ with a host and no device_N: no tasks, the host's clock, Device_id "host"."""
    notices = Notices()
    notices.notice(f"no device_N directory in {result.path.parent}: only the host's data are reported (API "
                   "statistic and calls)")
    with store.build(target, DEVICE) as db:
        store.record_sources(db, result.path, {}, notices, data_files(result.path) + result.metadata_files,
                             dict(_meta(result, "device"), device_id="host"))
    return target


def _load_pmu(conn, streams, counts, notices) -> None:
    load_streams(conn, streams, lambda item: PmuDecoder(ASCEND), notices, counts)


def _task_rows(piece) -> list:
    """Every paired execution; an HWTS end without its start (or a start never ended) is a row with the
    other time NULL, reported by the pairer and never given an invented time."""
    complete, data = piece
    return list(zip(*data)) if complete else data


def _task_keys(conn) -> None:
    """``task_key``, when two timed tasks start together (schema.py)."""
    if conn.execute(f"{TIED_STARTS} LIMIT 1").fetchone() is not None:
        conn.execute("INSERT INTO task_key (stream_id, task_id, first_start, tied) SELECT stream_id, task_id,"
                     " min(start_syscnt), 0 FROM task WHERE start_syscnt IS NOT NULL GROUP BY stream_id, task_id"
                     " ORDER BY min(start_syscnt), min(seq)")
        # (the few tied tasks found through the start index: a lookup for every task in the GROUP BY cost a
        # third more)
        conn.execute("UPDATE task_key SET tied = 1 WHERE (stream_id, task_id) IN (SELECT stream_id, task_id FROM"
                     f" task WHERE start_syscnt IN ({TIED_STARTS}))")


def _pair_stars(conn, notices: Notices) -> None:
    """STARS start/end logs paired per (stream, task) in counter order (what the reference does); an end
    before any start and a start whose end never came are reported, not timed."""
    if not conn.execute("SELECT 1 FROM stars_log LIMIT 1").fetchone():
        return
    pairing = Pairing()
    waiting = pairing.waiting           # (a start waits as (sqe type, counter): its start and end inlined)
    executions = Occurrences()
    batch: List[tuple] = []
    for stream_id, task_id, sqe, log_type, syscnt in conn.execute(
            "SELECT stream_id, task_id, sqe_type, log_type, syscnt FROM stars_log ORDER BY syscnt, seq"):
        key = (stream_id, task_id)
        if log_type == 0:
            earlier = waiting.get(key)
            if earlier is not None:
                pairing.never_ended(earlier[1], key)
            waiting[key] = (sqe, syscnt)
            continue
        started = waiting.pop(key, None)
        if started is None:
            pairing.alone(syscnt, key)
            continue
        n = executions.next(stream_id << 16 | task_id)
        batch.append((stream_id, task_id, started[0], started[1], syscnt, n))
        if len(batch) >= 10000:
            Rows("task", TASK_COLUMNS, batch).insert(conn)
            batch = []
    Rows("task", TASK_COLUMNS, batch).insert(conn)
    pairing.finish()
    # (the logs are paired in counter order, after the load: a log is named by its stream, task and counter)
    if pairing.ends_alone:
        (stream, task), counter = pairing.first_alone_key, pairing.first_alone
        notices.warn(f"stars_soc: {pairing.ends_alone} task end(s) without a start dropped (no start time invented; "
                     f"the first: stream {stream}, task {task}, counter {counter})")
    if pairing.unended:
        (stream, task), counter = pairing.first_unended_key, pairing.first_unended
        notices.warn(f"stars_soc: {pairing.unended} task start(s) never ended dropped (no end time invented; the "
                     f"first: stream {stream}, task {task}, counter {counter})")


def _meta(result: ResultDir, role: str) -> dict:
    return {"layout": "PROF", "prof_role": role, "device_id": result.device_id,
            "platform_version": result.platform_version, "drv_version": result.drv_version, "pid": result.pid,
            "clock": asdict(result.clock),
            "aic_mhz": result.aic_mhz, "hwts_mhz": result.clock.hwts_mhz, "ai_core_num": result.ai_core_num,
            "sample": result.sample, "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def import_result_dir(result_dir: Path, role: str, target: Optional[Path] = None, spare_cores: bool = False) -> Path:
    """Rebuild the database of a PROF host/ (``role`` "host") or device_N/ directory (``target``, default its
    sqlite/msprof.db), or the empty device database of a host without devices (``role`` "none").
    ``spare_cores``: the device import may use a worker process."""
    result = read_result_dir(result_dir)
    target = Path(target) if target else store.db_path(result.path)
    return {"host": import_host, "none": import_no_device}.get(role, import_device)(result, target, spare_cores)
