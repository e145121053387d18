"""The association of a PROF host's task_track records (the device tasks it launched) with the calls and node
infos around them (msprof.layouts.prof.associate), as they are decoded: into ``launch`` and ``op`` rows. A large
task_track is resolved by two processes, each into a part database, merged in record order."""
from operator import add
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from msprof import parts, store
from msprof.decode.base import Decoder, load_streams
from msprof.decode.compact import TASK_TRACK, CompactDecoder, aging_of
from msprof.layouts.prof.associate import LAUNCH_COLUMNS, OP_COLUMNS, UNKNOWN_MODEL, Associator
from msprof.layouts.prof.schema import HOST
from msprof.outputs import temporary
from msprof.store import Notices
from msprof.workers import several_cores


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
# both are copied in with the worker's op ids and launch ranks made this one's (Associator.absorb). The
# association is the host import's longest step, and the device's import leaves a core idle meanwhile.
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


def load_launches(conn, tracks: list, lookups: tuple, notices: Notices, counts: dict,
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
    from msprof.workers import Pool

    (source,) = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
    store.commit(conn)                    # what the worker reads: the calls and node infos, indexed
    conn.execute("PRAGMA shrink_memory")  # (the worker starts as a copy of this process: not of its cache too)
    directory = Path(source).parent
    parts = [temporary(directory, "msprof.launch.db") for _ in range(2)]
    try:
        with Pool(1) as pool:
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


def say_launches(checks: tuple, unnamed: int, dictionary: str, notices: Notices) -> None:
    """Warn what the launches say of the association (LAUNCH_CHECKS), and of ``unnamed`` op name and type hash
    ids that ``dictionary`` (what names them: hash_dic) lacks."""
    no_node, no_model, in_model, no_info = checks
    if no_node:
        notices.warn(f"{no_node} task(s) launched outside a node-level API: named by their kernel (op name and "
                     "type), as the reference names them")
    if no_model and in_model:
        notices.warn(f"{no_model} task(s) launched outside a model-level API: Model ID {UNKNOWN_MODEL} (unknown)")
    elif no_model:      # an app of single ops (eager mode): nothing is missing
        notices.notice(f"no task launched inside a model-level API (single ops): Model ID {UNKNOWN_MODEL}")
    if no_info:
        notices.warn(f"{no_info} task(s) launched in a node-level API without its node_basic_info: left out "
                     "of op_summary and op_statistic (as the reference does), named by their runtime type in "
                     "task_time")
    if unnamed:
        notices.warn(f"{unnamed} op name/type hash id(s) not in {dictionary}: shown as their numbers, as the "
                     "reference shows them")


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
    # (a small cache: rows are appended, and a large cache would only add to the peak memory)
    return parts.open_part(part, HOST, ["launch", "op"], source=Path(source), cache_kb=4096, source_parts=attached)


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
