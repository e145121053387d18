"""How many times each key has been met so far: what numbers the executions of a (stream, task) (``exec_n``:
HWTS and STARS pairing, PMU records) and the launches of a (device, stream, task) (``occ``: the PROF host's
association), in one place.

A key is ``group << 16 | id``, the id a 16-bit task id (every record family gives it 16 bits), the group what
comes before it (a stream, a device and stream). A group met with many ids — a stream of a long run — keeps
a count per id in an array: 256 KB, however many of its 65536 ids come. The other groups' keys sit in a dict
(~110 B a key), so that damaged data with stream ids all over the place cannot make an array for each: a
group gets one only when its keys would cost more in the dict. A dict of (stream, task) tuples held ~160 MB
per million keys, which a per-launch run on 16 streams has.
"""
import itertools
from array import array
from collections import Counter, defaultdict, deque
from operator import add, and_, getitem, mul, not_, rshift, setitem
from typing import Dict, Iterator, List, Tuple

IDS = 1 << 16
ID_MASK = IDS - 1


def _counters(counts: Dict[int, int]) -> Dict[int, itertools.count]:
    """The dict's form of counts: a counter per key, starting at its count."""
    return defaultdict(itertools.count, zip(counts.keys(), map(itertools.count, counts.values())))


def _batches(pairs: List[Tuple[int, int]]) -> Iterator[Tuple[List[int], List[int]]]:
    """(keys, counts) of sorted (key, count) pairs, at most IDS a batch."""
    for at in range(0, len(pairs), IDS):
        batch = pairs[at:at + IDS]
        yield [key for key, _n in batch], [n for _key, n in batch]


def _plus_repeats(counts: List[int], keys: List[int]) -> List[int]:
    """``counts`` (each key's count before ``keys``) plus how many times its key came earlier among them."""
    if len(set(keys)) == len(keys):
        return counts
    earlier = defaultdict(itertools.count)
    return list(map(add, counts, map(next, map(earlier.__getitem__, keys))))


class Occurrences:
    """Counts of keys met so far (see the module docstring)."""

    # ids of a group counted before it gets its array: 4096 keys cost ~450 KB in the dict, the array 256 KB
    DENSE = 1 << 12

    def __init__(self):
        self.arrays: Dict[int, array] = {}      # group → a count per id
        # key → the counter of its next count, for the groups without an array (a counter: a key met twice in
        # one take costs nothing more, where a run's ops come again every iteration)
        self.sparse: Dict[int, itertools.count] = defaultdict(itertools.count)
        self.ids: Counter = Counter()           # group → its keys in ``sparse``

    def __getstate__(self):
        # (counts as ints: itertools.count objects do not pickle from Python 3.14 on, and warn before)
        return self.arrays, self._counts(), self.ids

    def __setstate__(self, state) -> None:
        self.arrays, counts, self.ids = state
        self.sparse = _counters(counts)

    def take(self, keys: List[int]) -> List[int]:
        """Each key's count so far (its rank among the keys met), counting these in — at C speed: a key met
        twice among them gets its two ranks, and the keys of groups with and without an array are each taken
        their own way and put back in place."""
        if not self.arrays:
            return self._take_sparse(keys)
        groups = list(map(rshift, keys, itertools.repeat(16)))
        dense = list(map(self.arrays.__contains__, groups))
        if not any(dense):
            return self._take_sparse(keys)
        if all(dense):
            return self._take_dense(keys, groups)
        out = [0] * len(keys)
        sparse = list(map(not_, dense))
        for flags, counts in ((dense, self._take_dense(list(itertools.compress(keys, dense)),
                                                      list(itertools.compress(groups, dense)))),
                              (sparse, self._take_sparse(list(itertools.compress(keys, sparse))))):
            deque(map(out.__setitem__, itertools.compress(range(len(keys)), flags), counts), maxlen=0)
        return out

    def _take_dense(self, keys: List[int], groups: List[int]) -> List[int]:
        tables = list(map(self.arrays.__getitem__, groups))
        ids = list(map(and_, keys, itertools.repeat(ID_MASK)))
        counts = _plus_repeats(list(map(getitem, tables, ids)), keys)
        # (in order: a key met twice is left with its later count)
        deque(map(setitem, tables, ids, map(add, counts, itertools.repeat(1))), maxlen=0)
        return counts

    def _take_sparse(self, keys: List[int]) -> List[int]:
        counts = list(map(next, map(self.sparse.__getitem__, keys)))
        if not all(counts):              # keys new here: their groups may now have enough for an array
            new = Counter(map(rshift, itertools.compress(keys, map(not_, counts)), itertools.repeat(16)))
            self.ids.update(new)
            for group in new:
                if self.ids[group] >= self.DENSE:
                    self._dense(group)
        return counts

    def next(self, key: int) -> int:
        """The key's count so far, counting it in."""
        table = self.arrays.get(key >> 16)
        if table is not None:
            n = table[key & ID_MASK]
            table[key & ID_MASK] = n + 1
            return n
        n = next(self.sparse[key])
        if not n:
            group = key >> 16
            self.ids[group] += 1
            if self.ids[group] >= self.DENSE:
                self._dense(group)
        return n

    def _dense(self, group: int) -> None:
        """The group's keys moved from the dict into an array of their own."""
        first = group << 16
        counters = map(self.sparse.pop, range(first, first + IDS), itertools.repeat(None))
        self.arrays[group] = array("I", [0 if counter is None else next(counter) for counter in counters])
        del self.ids[group]

    def _counts(self) -> Dict[int, int]:
        """The counts of the keys in the dict (read by advancing their counters, then given new ones)."""
        counts = dict(zip(self.sparse.keys(), map(next, self.sparse.values())))
        self.sparse = _counters(counts)
        return counts

    def items(self) -> Iterator[Tuple[List[int], List[int]]]:
        """(keys, their counts) of every key met, a batch at a time: the groups with an array in order, then
        the other keys in order."""
        for group in sorted(self.arrays):
            table = self.arrays[group]
            first = group << 16
            yield list(itertools.compress(range(first, first + IDS), table)), list(filter(None, table))
        yield from _batches(sorted(self._counts().items()))

    def absorb(self, later: "Occurrences") -> List[Tuple[List[int], List[int]]]:
        """Add the counts of ``later`` (of the keys met after these). Returns its keys met here too, with their
        counts here before (what the ranks it gave are offset by), as batches of (keys, counts) like ``items``:
        lists of ints, not a tuple per key (a long run's halves share a key per task)."""
        before: List[Tuple[List[int], List[int]]] = []
        mine = self._counts()
        for group in sorted(later.arrays):
            table = later.arrays[group]
            first = group << 16
            own = self.arrays.get(group)
            if own is None:            # its keys met here, if any, are in the dict
                own = array("I", map(mine.pop, range(first, first + IDS), itertools.repeat(0)))
                self.ids.pop(group, None)
            both = list(map(mul, own, table))          # (non-zero where the id was met on both sides)
            if any(both):
                before.append((list(itertools.compress(range(first, first + IDS), both)),
                               list(itertools.compress(own, both))))
            self.arrays[group] = array("I", map(add, own, table))
        shared: List[Tuple[int, int]] = []
        for key, n in later._counts().items():
            table = self.arrays.get(key >> 16)
            if table is not None:
                was = table[key & ID_MASK]
                table[key & ID_MASK] = was + n
            else:
                was = mine.get(key, 0)
                mine[key] = was + n
                if not was:
                    self.ids[key >> 16] += 1
            if was:
                shared.append((key, was))
        self.sparse = _counters(mine)
        for group in [g for g, ids in self.ids.items() if ids >= self.DENSE]:
            self._dense(group)
        return before + list(_batches(sorted(shared)))
