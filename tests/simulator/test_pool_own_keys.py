"""The array pool's own-keys mode against the scalar reference pool.

With own keys (every content key one request's, hit only by that request after
a preemption) the array pool keeps no hash table for blocks in use: it
registers a preempted request's blocks when they are released and trusts a
registration while the block still sits where it was appended. Driven by the
same random operations as the reference pool (which publishes every full block
as vLLM does), it must hand out the same blocks, find the same hits and count
the same evictions, across free-queue compactions.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulator._pool import FastPool

from .reference_blocks import BlockPool

KEYS_PER_REQUEST = 64


@pytest.mark.parametrize("seed", [*range(12), 29, 228, 582])
def test_own_keys_pool_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(8, 120))
    n_req, n_steps = 10, 4000
    fast = FastPool(nb, True, n_steps * KEYS_PER_REQUEST)
    fast.own_keys, fast.track_refs = True, False
    ref = BlockPool(nb, True)
    held: dict[int, list[int]] = {}   # request -> its blocks (allocation order)
    full: dict[int, int] = {}         # request -> leading blocks published
    nhit: dict[int, int] = {}         # request -> leading blocks it found cached
    preempted: list[int] = []
    key0: dict[int, int] = {}         # request -> its first key (a finished request comes back as a new one)
    hits = compactions = 0
    real_compact = fast._compact

    def counting_compact(extra):
        nonlocal compactions
        compactions += 1
        real_compact(extra)

    fast._compact = counting_compact
    for step in range(n_steps):
        ref.now = step
        q = int(rng.integers(n_req))
        if q not in held and q not in preempted:
            key0[q] = step * KEYS_PER_REQUEST
        k0 = key0[q]
        if q in held:
            blocks = held.pop(q)
            nfull = full.pop(q)
            for i in range(nhit.pop(q), nfull):  # vLLM publishes when a block fills (hits already are)
                ref.cache(blocks[i], k0 + i)
            # finished, or preempted (then its keys can be hit again)
            again = bool(rng.integers(2))
            fast.release_own(np.array(blocks, np.int64), nfull, k0, keep=again)
            ref.release(blocks)
            if again:
                preempted.append(q)
            continue
        want = int(rng.integers(1, 12))
        hit_fast = np.zeros(0, np.int64)
        if q in preempted:
            preempted.remove(q)
            hit_fast = fast.lookup(np.arange(k0, k0 + want - 1))
            hit_ref = []
            for i in range(want - 1):
                b = ref.lookup(k0 + i)
                if b is None:
                    break
                hit_ref.append(b)
            assert hit_fast.tolist() == hit_ref, step
            hits += len(hit_ref)
            if hit_ref:
                fast.touch(hit_fast, step)
                ref.touch(hit_ref)
        new = want - hit_fast.size
        if new > fast.num_free():
            assert new > ref.num_free()
            if hit_fast.size:  # give the hits back, as an admission that failed never took them
                fast.release_own(hit_fast, hit_fast.size, k0, keep=True)
                ref.release(hit_fast.tolist())
                preempted.append(q)
            continue
        got = fast.allocate(new, step).tolist()
        assert got == ref.allocate(new), step
        held[q] = hit_fast.tolist() + got
        nhit[q] = hit_fast.size
        full[q] = int(rng.integers(hit_fast.size, want + 1))
        assert fast.num_free() == ref.num_free()
        assert fast.evictions == ref.evictions
    assert hits > 0 and compactions > 0
