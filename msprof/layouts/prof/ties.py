"""The orders of tasks that start at the same moment (docs/prof-format.md §5 and §8, "Ties"): where SQL's order
by start and record is not the reference analyser's, these give each tied row a sort key from its inputs
(msprof.tables.Ties). One of each per report, so that what they work out once (from every launch) serves every
table and part it writes."""
import functools
from itertools import repeat
from typing import Dict, Iterable, Iterator, List, Optional

from msprof.layouts.prof.tasks import task_query
from msprof.tables import Ties

# From this driver version on, the reference keys host and device tasks by batch id too ("all data export"),
# except on these chips (its ChipManager's blacklist)
ALL_EXPORT_DRIVER = 0x072211
ALL_EXPORT_EXCEPT = ("0", "2", "11")


class GeOrder(Ties):
    """op_summary: tasks that start together come in the order of the GE task list the reference joins them
    to — launches thread by thread, each thread's in time order. Threads in the order the reference meets
    them: its API calls as recorded (not empty, not at time 0), then its event pairs, then threads with
    launches only (worked out when the first tie is met: most runs have none)."""

    LAST = 1 << 62
    # A task's launch (its thread, time and record) is looked up for the tasks that tie only: as columns of the
    # summary's query they would cost every row.
    inputs = ("seq",)
    LAUNCH = ("thread", "track_ts", "launch_seq")

    def __init__(self, report):
        self.report = report
        self.threads: Optional[Dict[int, int]] = None

    # a thread's place: its first API call (not empty, not at time 0), else its first event, else its first
    # launch; looked up in seq (rowid) order, which stops at the first found
    _FIRST = ("SELECT coalesce((SELECT seq FROM host.api WHERE thread = :t AND from_events = 0 AND begin > 0"
              " AND begin != [end] ORDER BY seq LIMIT 1),"
              " (1 << 40) + (SELECT seq FROM host.api WHERE thread = :t AND from_events = 1 ORDER BY seq LIMIT 1),"
              " (1 << 50) + (SELECT seq FROM host.launch WHERE thread = :t ORDER BY seq LIMIT 1))")
    FEW_THREADS = 16

    def thread_ranks(self) -> Dict[int, int]:
        """The ranks of the threads that launched tasks, 0 first (only their order among themselves matters:
        tied tasks are ordered by their launches' threads)."""
        if self.threads is None:
            conn = self.report.conn
            threads = [thread for (thread,) in conn.execute("SELECT DISTINCT thread FROM host.launch")]
            launching = set(threads)
            if len(threads) <= self.FEW_THREADS:
                # (a GROUP BY over every host call sorts them all; a lookup for each of a few threads usually
                # stops at the first calls)
                first = {t: conn.execute(self._FIRST, {"t": t}).fetchone()[0] for t in threads}
                ordered = sorted(threads, key=lambda t: (first[t], t))
            else:
                ordered = [thread for (thread,) in conn.execute(
                    "SELECT thread FROM (SELECT thread, min(seq) AS first FROM host.api WHERE from_events = 0"
                    "  AND begin > 0 AND begin != [end] GROUP BY thread"
                    " UNION ALL SELECT thread, (1 << 40) + min(seq) FROM host.api WHERE from_events = 1 GROUP BY thread"
                    " UNION ALL SELECT thread, (1 << 50) + min(seq) FROM host.launch GROUP BY thread)"
                    " GROUP BY thread ORDER BY min(first), thread") if thread in launching]
            self.threads = {thread: rank for rank, thread in enumerate(ordered)}
        return self.threads

    def ranks(self, rows: List[tuple]) -> List[tuple]:
        threads = self.thread_ranks()
        last, unknown = self.LAST, (None, 0, 0)
        seqs = ",".join(str(int(seq)) for (seq,) in rows)
        tasks = task_query(self.report, ("seq",) + self.LAUNCH, False, f"AND t.seq IN ({seqs})")
        launches = {seq: launch for seq, *launch in self.report.conn.execute(
            f"SELECT seq, {', '.join(self.LAUNCH)} FROM ({tasks})", self.report.params)}
        return [(threads.get(thread, last), ts or 0, launch or 0)
                for thread, ts, launch in (launches.get(seq, unknown) for (seq,) in rows)]


class FirstAppearance(Ties):
    """task_time: tasks that start together come in the order their (stream, task) first appears in the
    reference's task list, which is sorted by start from the order of a Python set of those keys (host
    launches' keys by time, then the device's): emulated with the same set."""

    inputs = ("stream_id", "task_id")

    def __init__(self, report, ge_order: GeOrder):
        self.report, self.ge_order = report, ge_order
        self.rank: Optional[Dict[tuple, tuple]] = None

    def ranks(self, rows: List[tuple]) -> List[tuple]:
        if self.rank is None:
            self.rank = self._ranks()
        rank, unknown = self.rank, (GeOrder.LAST, GeOrder.LAST)
        return [rank.get(key, unknown) for key in rows]

    def _ranks(self) -> Dict[tuple, tuple]:
        conn, report = self.report.conn, self.report
        batched = (report.drv_version >= ALL_EXPORT_DRIVER
                   and report.platform not in ALL_EXPORT_EXCEPT)          # keys carry the batch id too

        # The reference's set of keys: host launches' keys by time (those of one moment in the GE task list's
        # thread order), then the device tasks' keys by first start — its ``host.keys() | device.keys()``. Its
        # order depends on every key, and on how the set was sized: ``host.keys() | ()`` makes the set from the
        # same left operand (| sizes it from the dict's length on Python 3.10+, not on 3.9), and adding the
        # device's keys one by one, as | does, is the same whatever their repeats (adding a key again changes
        # nothing): they are streamed in, not gathered into a dict first. Memory is a key per distinct
        # (stream, task[, batch]) — up to 65536 a stream. Only the keys of tasks that tie keep a rank (a run where
        # nothing ties keeps none).
        host: Dict[tuple, None] = {}
        for keys in _key_batches(self._host_keys(batched), batched):
            host.update(zip(keys, repeat(None)))
        keys = host.keys() | ()
        del host
        for device in _key_batches(conn.execute("SELECT stream_id, task_id, 0 FROM task_key ORDER BY rank"), batched):
            keys.update(device)
        first = {(stream, task): start for stream, task, start in conn.execute(
            "SELECT stream_id, task_id, first_start FROM task_key WHERE tied = 1")}
        # the tied tasks' keys in the set's order (a key with batches: its first)
        found = (filter({(stream, task, _CONTEXT) for stream, task in first}.__contains__, keys) if not batched
                 else (k for k in keys if k[:2] in first))
        place: Dict[tuple, int] = {}
        for i, k in enumerate(found):
            place.setdefault(k[:2], i)
        return {k: (start, place.get(k, GeOrder.LAST)) for k, start in first.items()}

    def _host_keys(self, batched: bool) -> Iterable[tuple]:
        """The (stream, task, batch) of the device's launches in the order they first appear in the reference's
        host task list: by time, a moment's launches in their threads' order (``GeOrder``), then in record
        order; a key may come again later (its first place is the one that counts). Without ``batched``, the
        batch is 0."""
        conn, params = self.report.conn, self.report.params
        threads = self.ge_order.thread_ranks()
        group = "stream_id, task_id, batch_id" if batched else "stream_id, task_id"
        keys = group if batched else "stream_id, task_id, 0"
        # (bounds over every device's launches: a scan of the table, where the device's rows are read through
        # an index at three times the cost)
        low, high, whole, last = conn.execute(
            "SELECT min(ts), max(ts), count(ts) = count(*), (SELECT max(seq) FROM host.launch) FROM host.launch"
        ).fetchone()
        seq_bits, rank_bits = (last or 0).bit_length(), (len(threads) - 1).bit_length() if threads else 0
        if whole and low is not None and len(threads) <= GeOrder.FEW_THREADS and \
                high - low < 1 << (62 - seq_bits - rank_bits):
            # each key's first launch, as (time, thread rank, seq) packed into one integer, found by a GROUP BY
            # that hands SQLite's sorter a key per launch and Python a row per key, not every launch
            rank = ("CASE thread " + " ".join(f"WHEN {int(t)} THEN {r}" for t, r in threads.items()) + " END"
                    if len(threads) > 1 else "0")
            return conn.execute(
                f"SELECT {keys} FROM host.launch WHERE device_id = :dev GROUP BY {group} ORDER BY"
                f" min(((ts - :low) << {seq_bits + rank_bits}) | ({rank} << {seq_bits}) | seq)",
                dict(params, low=low))
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS msprof_thread_rank (thread INTEGER PRIMARY KEY, rank INTEGER)")
        conn.execute("DELETE FROM msprof_thread_rank")
        conn.executemany("INSERT INTO msprof_thread_rank VALUES (?, ?)", threads.items())
        if conn.in_transaction:         # (the temporary table's rows are written in a transaction of its own)
            conn.commit()
        return conn.execute(
            f"SELECT {keys} FROM host.launch h LEFT JOIN msprof_thread_rank r ON r.thread = h.thread"
            f" WHERE h.device_id = :dev ORDER BY h.ts, coalesce(r.rank, {GeOrder.LAST}), h.seq", params)


# the default context id of a task outside FFTS+ (the reference's keys carry it)
_CONTEXT = 4294967295


@functools.lru_cache(maxsize=1)
def _ids() -> List[int]:
    """One int object per 16-bit id (stream and task ids are 16 bits), shared by every key that holds it: a
    key then costs no int objects of its own (made when a run has ties)."""
    return list(range(1 << 16))


def _key_batches(cursor, batched: bool) -> Iterator[Iterator[tuple]]:
    """The reference's task keys of rows (stream, task, batch), a batch of rows at a time: (stream, task, context)
    or, ``batched``, (stream, task, context, batch) — tuples made at C speed, sharing their ints."""
    ids = _ids().__getitem__
    for rows in iter(functools.partial(cursor.fetchmany, 4096), []):
        streams, tasks, batches = zip(*rows)
        streams, tasks = map(ids, streams), map(ids, tasks)
        yield (zip(streams, tasks, repeat(_CONTEXT), batches) if batched
               else zip(streams, tasks, repeat(_CONTEXT)))
