"""msprof.decode.occurrences against a plain dict of counts, over the shapes that take its three paths: groups
with arrays, groups in the dict, keys met twice in one batch, batches mixing both kinds of group, and a later
half's counts absorbed."""
import pickle
import random
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msprof.decode.occurrences import Occurrences  # noqa: E402


def _batches(seed: int, n: int):
    """Batches of keys, each of one shape or mixed: dense streams cycling their 16-bit ids in order (wrapping),
    sparse streams of few ids, damage-like keys spread over many groups, keys met again within the batch."""
    rng = random.Random(seed)
    dense_at = 0

    def key(shape: str) -> int:
        nonlocal dense_at
        if shape == "dense":                     # 3 streams, ids in order
            dense_at += 1
            return dense_at % 3 << 16 | (dense_at // 3) % 65536
        if shape == "sparse":                    # 40 streams, few ids each
            return rng.randrange(100, 140) << 16 | rng.randrange(50)
        return rng.randrange(1 << 20) << 16 | rng.randrange(65536)      # spread over many groups

    made = 0
    while made < n:
        size = rng.choice([1, 7, 1000, 5000, 20000])
        shape = rng.choice(["dense", "dense", "sparse", "spread", "mixed"])
        batch = [key(rng.choice(["dense", "sparse", "spread"]) if shape == "mixed" else shape)
                 for _ in range(size)]
        if rng.random() < 0.2 and size > 1:      # a key twice in the batch
            batch[rng.randrange(size)] = batch[0]
        made += size
        yield batch


def _pairs(batches) -> list:
    """(key, count) of absorb's batches, in key order (each batch is; the batches of the arrays come first)."""
    pairs = [pair for keys, counts in batches for pair in zip(keys, counts)]
    for keys, counts in batches:
        assert len(keys) == len(counts) and keys == sorted(keys) and all(counts)
    return sorted(pairs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ranks_and_counts_are_those_of_a_plain_counter(seed):
    occurrences, plain = Occurrences(), Counter()
    for batch in _batches(seed, 120_000):
        expected = []
        for key in batch:
            expected.append(plain[key])
            plain[key] += 1
        assert occurrences.take(batch) == expected
    assert occurrences.arrays, "no group got an array: the test misses the array path"
    assert occurrences.sparse, "no key stayed in the dict: the test misses the dict path"
    got = {}
    for keys, counts in occurrences.items():
        assert len(keys) == len(counts)
        got.update(zip(keys, counts))
    assert got == dict(plain)


@pytest.mark.parametrize("seed", [4, 5])
def test_absorbing_a_later_half_counts_as_one_would(seed):
    batches = list(_batches(seed, 100_000))
    half = len(batches) // 2
    first, later, whole = Occurrences(), Occurrences(), Occurrences()
    plain_first, plain_later = Counter(), Counter()
    later_ranks, whole_ranks = [], []
    for batch in batches[:half]:
        first.take(batch)
        whole_ranks += whole.take(batch)
        plain_first.update(batch)
    for batch in batches[half:]:
        later_ranks.append((batch, later.take(batch)))
        whole_ranks += whole.take(batch)
        plain_later.update(batch)
    before = _pairs(first.absorb(later))
    assert before == sorted((key, plain_first[key]) for key in plain_later if plain_first[key])
    offset = dict(before)
    shifted = [rank + offset.get(key, 0) for batch, ranks in later_ranks for key, rank in zip(batch, ranks)]
    assert shifted == whole_ranks[sum(len(b) for b in batches[:half]):]
    merged = {}
    for keys, counts in first.items():
        merged.update(zip(keys, counts))
    assert merged == dict(plain_first + plain_later)
    # and counting goes on from the sums
    probe = sorted(plain_later)[:1000]
    assert first.take(probe) == [plain_first[k] + plain_later[k] for k in probe]


def test_a_long_run_on_many_streams_is_counted_in_arrays():
    """16 streams cycling through their 65536 task ids (a per-launch run of 1M tasks): each stream ends with an
    array of its own and nothing is left in the dict — memory no longer grows with the number of keys."""
    occurrences = Occurrences()
    keys = [stream << 16 | task for task in range(65536) for stream in range(16)]
    for at in range(0, len(keys), 8192):
        assert occurrences.take(keys[at:at + 8192]) == [0] * len(keys[at:at + 8192])
    assert sorted(occurrences.arrays) == list(range(16))
    assert not occurrences.sparse
    assert occurrences.take([3 << 16 | 7, 3 << 16 | 7]) == [1, 2]


@pytest.mark.parametrize("seed", range(6, 30))
def test_absorbing_counts_that_overlap_in_part(seed):
    """The later half meets ids the first half did not, below and among the ones both met (task ids wrapping
    back to 0), with either side's group in an array or in the dict."""
    rng = random.Random(seed)
    first, later = Occurrences(), Occurrences()
    plain_first, plain_later = Counter(), Counter()
    for occurrences, plain in ((first, plain_first), (later, plain_later)):
        for group in range(3):
            low = rng.randrange(0, 3000)
            ids = range(low, low + rng.choice([10, 5000]))          # a group in the dict, or in an array
            keys = [group << 16 | i for i in ids if rng.random() < 0.9]
            occurrences.take(keys)
            plain.update(keys)
    before = _pairs(first.absorb(later))
    assert before == sorted((key, plain_first[key]) for key in plain_later if plain_first[key])
    merged = {}
    for keys, counts in first.items():
        merged.update(zip(keys, counts))
    assert merged == dict(plain_first + plain_later)


def test_the_wrapped_ids_of_a_later_half():
    first, later = Occurrences(), Occurrences()
    first.take([3 << 16 | t for t in range(1, 5001)])
    later.take([3 << 16 | t for t in range(0, 5001)])
    assert dict(_pairs(first.absorb(later)))[3 << 16 | 1] == 1


def test_counts_pickle_as_ints():
    """What a worker sends back: no itertools.count object is pickled (Python 3.14 cannot; 3.12 warns)."""
    occurrences = Occurrences()
    occurrences.take([1 << 16 | 5, 1 << 16 | 5, 2 << 16 | 9] + [4 << 16 | i for i in range(5000)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy = pickle.loads(pickle.dumps(occurrences))
    assert b"itertools" not in pickle.dumps(occurrences)
    assert copy.take([1 << 16 | 5, 2 << 16 | 9, 4 << 16 | 7, 7 << 16]) == [2, 1, 1, 0]
    assert occurrences.take([1 << 16 | 5]) == [2]
