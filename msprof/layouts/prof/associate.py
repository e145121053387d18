"""Which op, model and iteration each host task launch belongs to (docs/prof-format.md §3, docs/prof.md
"Association"), resolved while the task_track records are decoded.

For a task_track record at time ts on a thread:

* its **node** is, of the node-level API calls (level 10000) of that thread begun at or before ts and not
  ended before it, the latest begun (the innermost of nested calls); op name = the call's item id through
  hash_dic;
* its **node info** is the last node_basic_info of that thread inside the node's [begin, end]: op type,
  GE task type, block dim, HF32 flag, and OP State (aging → dynamic); its **tensors** (shapes, data types,
  formats) are the last tensor_info inside it (records of one moment merged), kept per launch;
* its **model** is the model-level API call (level 15000) enclosing it the same way: model id = its item id;
  the **iteration** is that call's rank among the model's executions (``model_exec``; a ModelLoad is not one);
* without a node, the kernel name stands in for op name and type, and the GE task type comes from the
  runtime task type (KERNEL_AICORE → AI_CORE, …).

A run has few distinct ops and many launches, so what a launch resolves to is an ``op`` row (its names and
types, created the first time that combination is met) and the launch stores the op's id, its model and
iteration, and ``occ``, its rank among the launches of its (device, stream, task).

The node and model calls and node infos are in the database already, indexed by (thread, time). Records are
resolved a chunk at a time, column by column: per thread, one range query fetches the calls that can
enclose the chunk's records (a node call with its node info, looked up by the same query), and bisect
(``map``, C speed) finds each record's call — no per-record query and no per-record Python statement, and
memory bounded by the chunk and the number of distinct ops. The launches per (device, stream, task) are
counted as ``occ`` is given out, not by a GROUP BY over the launches afterwards.
"""
import bisect
import itertools
from collections import defaultdict
from itertools import repeat
from operator import and_, le, lshift, or_, rshift
from typing import Dict, Iterator, List, Optional, Tuple

from msprof.decode.api_event import LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME
from msprof.decode.base import Rows
from msprof.decode.occurrences import ID_MASK, Occurrences

# the Model ID of a launch no model-level call encloses (the reference's: 0xFFFFFFFF)
UNKNOWN_MODEL = 4294967295
# node_basic_info task type (GE)
GE_TASK_TYPES: Dict[int, str] = {0: "AI_CORE", 1: "AI_CPU", 2: "AI_VECTOR_CORE", 3: "WRITE_BACK", 4: "MIX_AIC",
                                 5: "MIX_AIV", 6: "FFTS_PLUS", 7: "DSA_SQE", 8: "DVPP", 9: "HCCL", 10: "FUSION",
                                 11: "INVALID"}
# runtime task type name (type_info_dic, level 5000) → GE task type, for tasks launched outside a node
RTS_TASK_TYPES: Dict[str, str] = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE",
                                  "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV", "KERNEL_AICPU": "AI_CPU"}

# task_track fields as decoded (msprof.decode.compact.TASK_TRACK), then aging
TRACK_FIELDS = ("thread", "ts", "device_id", "stream_id", "task_id", "batch_id", "rts_type", "kernel_hash")
# a launch keeps its own fields; its runtime type, kernel name and aging are its op's
LAUNCH_COLUMNS = TRACK_FIELDS[:6] + ("occ", "op_id", "model_id", "iteration", "call_begin", "tensor_id")
OP_COLUMNS = ("op_id", "op_name", "op_type", "task_type", "block_dim", "op_flag", "op_state", "kernel_name",
              "rts_type", "kernel", "ge")
# a node call's node info: the content id of the last node_basic_info of its thread inside its time span (the
# reference attaches each to the call and keeps the last)
NODE_INFO_OF_CALL = ("(SELECT n.info_id FROM node_info n WHERE n.thread = a.thread AND n.ts BETWEEN a.begin AND a.[end]"
                     " ORDER BY n.ts DESC, n.seq DESC LIMIT 1)")


def is_kernel_task(rts_type_name: Optional[str]) -> bool:
    """task_track records that describe an op task (docs/prof-format.md §3)."""
    return bool(rts_type_name) and (rts_type_name.startswith("KERNEL") or rts_type_name in ("STARS_COMMON",
                                                                                             "FFTS_PLUS"))


class _Calls:
    """The calls of one level on one thread that can enclose moments in [first, last], from the index: every
    one beginning up to ``last``, from the last one beginning at or before ``first`` — or from an earlier one
    still open at ``first`` (an outer call whose nested calls came since; looked for among the LOOKBACK calls
    before ``first``). The per-call lists end with a None entry, so that position -1 (no enclosing call)
    reads as None."""

    LOOKBACK = 256

    def __init__(self, conn, level: int, thread: int, first: int, last: int, extra: str = "NULL"):
        before = (f"SELECT begin, [end] FROM api WHERE level = {level} AND thread = :thread AND begin <= :first"
                  f" ORDER BY begin DESC LIMIT {self.LOOKBACK}")
        rows = conn.execute(
            f"SELECT a.begin, a.[end], a.item_id, {extra} FROM api a WHERE a.level = {level} AND a.thread = :thread"
            f" AND a.begin <= :last AND a.begin >= coalesce((SELECT min(begin) FROM ({before}) WHERE [end] >= :first),"
            f" (SELECT max(begin) FROM api WHERE level = {level} AND thread = :thread AND begin <= :first), :first)"
            " ORDER BY a.begin", {"thread": thread, "first": first, "last": last}).fetchall()
        begins, ends, items, extras = (list(c) for c in zip(*rows)) if rows else ([], [], [], [])
        self.begins = begins
        self.ends = ends + [None]
        self.items = items + [None]
        self.extras = extras + [None]

    @property
    def nest(self) -> bool:
        """Whether a call begins inside the one before it (then calls nest, or overlap)."""
        return any(map(le, itertools.islice(self.begins, 1, None), self.ends))

    def enclosing(self, moments: List[int], nested: bool = False) -> List[int]:
        """Position of the call enclosing each moment, -1 where none does: the call begun latest at or before the
        moment, if it has not ended before it. ``nested`` (node calls): if it has, the latest begun of the calls
        still open — the reference's call tree gives a node call back its launches once a node call nested in
        it has ended (and only a node call: a model-level call nested in a model execution leaves the launches
        after it without a model)."""
        begins, ends = self.begins, self.ends
        if len(begins) * 8 < len(moments) and all(map(le, moments, itertools.islice(moments, 1, None))):
            # few calls over many moments in time order (model-level calls): each call's run of moments is
            # found by bisecting the moments, and filled in one slice assignment (later calls over earlier; not
            # nested: each run stops where the next call begins)
            out = [-1] * len(moments)
            starts = [bisect.bisect_left(moments, b) for b in begins] + [len(moments)]
            for p, end in enumerate(ends[:-1]):
                lo = starts[p]
                hi = bisect.bisect_right(moments, end, lo, None if nested else starts[p + 1])
                if lo < hi:
                    out[lo:hi] = itertools.repeat(p, hi - lo)
            return out
        at = map(bisect.bisect_right, itertools.repeat(begins), moments)
        out = [p if p >= 0 and ends[p] >= m else -1 for p, m in zip(map(int.__sub__, at, itertools.repeat(1)),
                                                                      moments)]
        if nested and -1 in out and self.nest:
            # a moment after the latest call ended may still be inside an earlier one
            latest = list(itertools.accumulate(ends[:-1], max))
            for i, m in enumerate(moments):
                if out[i] == -1:
                    q = bisect.bisect_right(begins, m) - 2
                    while q >= 0 and latest[q] >= m:
                        if ends[q] >= m:
                            out[i] = q
                            break
                        q -= 1
        return out


class _Ops(dict):
    """((node item, node info), kernel hash, runtime type) → op id; a new combination becomes an ``op`` row.
    (Tensors are the launch's, not the op's: with dynamic shapes every launch may have its own.)"""

    def __init__(self, names: Dict[int, str], rts_names: Dict[int, str]):
        super().__init__()
        self.names, self.rts_names = names, rts_names
        self.new: List[tuple] = []
        self.unnamed: set = set()       # op name and type hashes hash_dic does not name (shown as numbers)

    def __missing__(self, key) -> int:
        node, kernel_hash, rts_type = key
        names = self.names
        rts_name = self.rts_names.get(rts_type)
        kernel_name = names.get(kernel_hash)
        block_dim = op_flag = op_state = None
        ge = 1
        if node is None:
            op_name, op_type = kernel_name, kernel_name
            task_type = RTS_TASK_TYPES.get(rts_name, rts_name)
        else:
            item, info = node
            if item not in names:
                self.unnamed.add(item)
            op_name = names.get(item, str(item))
            if info is None:         # no GE task (the reference finds no node desc): its runtime type names it
                op_type, task_type, ge = None, rts_name, 0
            else:
                ge_type, type_hash, block_dim, op_flag, aging = info
                if type_hash not in names:
                    self.unnamed.add(type_hash)
                op_type = names.get(type_hash, str(type_hash))
                task_type = GE_TASK_TYPES.get(ge_type, str(ge_type))
                op_state = "dynamic" if aging else "static"
        kernel = 1 if is_kernel_task(rts_name) else 0
        if not kernel:               # no GE task either (a memcpy, an event record): its runtime type names it
            task_type, ge = rts_name, 0
        op_id = self[key] = len(self) + 1
        self.new.append((op_id, op_name, op_type, task_type, block_dim, op_flag, op_state, kernel_name, rts_name,
                         kernel, ge))
        return op_id

    def take_new(self) -> Rows:
        rows, self.new = self.new, []
        return Rows("op", OP_COLUMNS, rows)


class NodeContents(dict):
    """(GE task type, op type hash, block dim, op flag, aging) of a node_basic_info record → a small id."""

    def __missing__(self, content) -> int:
        self[content] = len(self) + 1
        return len(self)

    def by_id(self) -> Dict[int, tuple]:
        return {i: content for content, i in self.items()}


def _launch_rows(table: str, count: str, keys: List[int], counts: List[int]) -> Rows:
    """Rows (device, stream, task, ``count``) of ``occ`` keys and their counts (C speed)."""
    devices, streams = map(rshift, keys, repeat(32)), map(and_, map(rshift, keys, repeat(16)), repeat(ID_MASK))
    return Rows(table, ("device_id", "stream_id", "task_id", count),
                list(zip(devices, streams, map(and_, keys, repeat(ID_MASK)), counts)))


class Associator:
    """Turns decoded task_track blocks into ``launch`` rows (and new ``op`` rows); see the module docstring."""

    def __init__(self, conn, names: Dict[int, str], type_names: Dict[Tuple[int, int], str],
                 contents: NodeContents):
        self.conn = conn
        self.contents = contents.by_id()
        self.ops = _Ops(names, {t: n for (level, t), n in type_names.items() if level == LEVEL_RUNTIME})
        self.occ = Occurrences()         # launches per device << 32 | stream << 16 | task
        self.has_tensors = conn.execute("SELECT 1 FROM tensor_info LIMIT 1").fetchone() is not None

    def rows(self, blocks) -> List[Rows]:
        """``launch`` rows of one chunk's task_track blocks (the record fields, then the aging values)."""
        width = len(TRACK_FIELDS)
        columns: List[list] = [[] for _ in range(width + 1)]
        for block in blocks:
            n = len(block) // (width + 1)
            for k in range(width):
                columns[k].extend(block[k:n * width:width])
            columns[width].extend(block[n * width:])
        if not columns[0]:
            return []
        threads = columns[0]
        if threads.count(threads[0]) == len(threads):
            extras = self._resolve(threads[0], columns)
        else:   # several threads in the chunk: resolve each thread's records, then put them back in order
            extras = [[None] * len(threads) for _ in range(5)]
            by_thread: Dict[int, List[int]] = defaultdict(list)
            for index, thread in enumerate(threads):
                by_thread[thread].append(index)
            for thread, indexes in by_thread.items():
                part = self._resolve(thread, [[column[i] for i in indexes] for column in columns])
                for target, values in zip(extras, part):
                    for i, value in zip(indexes, values):
                        target[i] = value
        # occ in the records' order (time order within a thread)
        devices = list(map(and_, columns[2], repeat(0xFFF)))
        columns[2] = devices
        occ = self.occ.take(list(map(or_, map(lshift, map(or_, map(lshift, devices, repeat(16)), columns[3]), repeat(16)),
                                     columns[4])))          # keys device << 32 | stream << 16 | task
        launch = Rows("launch", LAUNCH_COLUMNS, list(zip(*columns[:6], occ, *extras)))
        return [self.ops.take_new(), launch]

    def absorb(self, ops: Dict[tuple, int], counts: Occurrences) -> Tuple[List[tuple], Iterator[Rows]]:
        """Take in the records an Associator of the same import resolved after this one's (the later half of
        the task_track stream, in another process): its ``ops`` (key → its own op id) and launch ``counts``.
        Returns (its op id → this one's, as pairs) and ``msprof_before`` rows, a batch at a time: (device, stream,
        task, launches before its records) of its keys launched here too (what its ``occ`` values are offset
        by). Its ops new here get ids in the order it met them, as one Associator reading every record would
        have given them."""
        op_ids = [(local, self.ops[key]) for key, local in ops.items()]
        before = self.occ.absorb(counts)
        return op_ids, (_launch_rows("msprof_before", "n", keys, launches) for keys, launches in before)

    def launch_counts(self) -> Iterator[Rows]:
        """``launch_count`` rows: the launches of each (device, stream, task), as counted by ``occ``, a batch
        at a time."""
        for keys, counts in self.occ.items():
            yield _launch_rows("launch_count", "launches", keys, counts)

    def _own_node_infos(self, nodes: _Calls, thread: int) -> None:
        """Where node calls nest, a node_basic_info belongs to the innermost call open at its time (the
        reference attaches it to the call begun latest that is still open): an outer call's info is the last
        of its span that no nested call holds, not merely the last of its span."""
        if not nodes.nest:
            return
        begins, ends = nodes.begins, nodes.ends
        for i in [i for i in range(len(begins) - 1) if begins[i + 1] <= ends[i]]:
            infos = self.conn.execute("SELECT ts, info_id FROM node_info WHERE thread = ? AND ts BETWEEN ? AND ?"
                                      " ORDER BY ts, seq", (thread, begins[i], ends[i])).fetchall()
            owners = nodes.enclosing([ts for ts, _info in infos], nested=True) if infos else []
            nodes.extras[i] = next((info for (_ts, info), owner in zip(reversed(infos), reversed(owners))
                                    if owner == i), None)

    def _tensors(self, nodes: _Calls, thread: int) -> List[Optional[int]]:
        """Each node call's tensor description: the last tensor_info of its span that no call nested in it holds
        (a tensor_info belongs to the innermost call open at its time, as a node_basic_info does; of several,
        the reference keeps the last it attached)."""
        tensors: List[Optional[int]] = [None] * len(nodes.begins)
        if not self.has_tensors or not nodes.begins:
            return tensors
        infos = self.conn.execute("SELECT ts, tensor_id FROM tensor_info WHERE thread = ? AND ts BETWEEN ? AND ?"
                                  " ORDER BY ts, seq", (thread, nodes.begins[0], max(nodes.ends[:-1]))).fetchall()
        owners = nodes.enclosing([ts for ts, _tensor in infos], nested=True) if infos else []
        for (_ts, tensor), owner in zip(infos, owners):
            if owner >= 0:
                tensors[owner] = tensor
        return tensors

    def _resolve(self, thread: int, columns: List[list]) -> List[list]:
        """(op ids, model ids, iterations, begins of the enclosing node calls, tensor ids) of one thread's
        records."""
        moments = columns[1]
        first, last = min(moments), max(moments)
        nodes = _Calls(self.conn, LEVEL_NODE, thread, first, last, extra=NODE_INFO_OF_CALL)
        self._own_node_infos(nodes, thread)
        node_at = nodes.enclosing(moments, nested=True)
        models = _Calls(self.conn, LEVEL_MODEL, thread, first, last,
                        extra="(SELECT iteration FROM model_exec e WHERE e.seq = a.seq)")
        model_at = models.enclosing(moments)
        contents = self.contents
        node_keys = list(zip(nodes.items[:-1], map(contents.get, nodes.extras))) + [None]
        keys = zip(map(node_keys.__getitem__, node_at), columns[7], columns[6])
        op_ids = list(map(self.ops.__getitem__, keys))
        node_begins = nodes.begins + [None]
        node_tensors = self._tensors(nodes, thread) + [None]
        return [op_ids, list(map(models.items.__getitem__, model_at)), list(map(models.extras.__getitem__, model_at)),
                list(map(node_begins.__getitem__, node_at)), list(map(node_tensors.__getitem__, node_at))]
