"""The array pool with shared keys (a trace's common system prompt: several blocks under one key) against the
scalar reference pool, fed int32 block ids and keys as the engine's block table and key array hold them.

Evictions of a few blocks drop their keys one by one, of many through masks (``FastPool._drop_keys``); a key's
later carriers (``FastPool.dups``) take over in order either way. Random requests over a small key space (so
that keys repeat) allocate, publish, hit and release on both pools, compared after every operation.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulator.engine.pool import FastPool

from .reference_blocks import BlockPool


def _drive(seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(40, 90))
    fast, ref = FastPool(nb, True, 24), BlockPool(nb, True)
    held: dict[int, tuple[list[int], list[int]]] = {}  # request -> (its prefix hits, its new blocks)
    seen = dict(few=0, many=0, dups=0, hits=0)
    for step in range(600):
        ref.now = step
        q = int(rng.integers(8))
        if q in held:  # publish its new blocks under random keys (repeats: later carriers), then release
            hits, new = held.pop(q)
            blocks = hits + new
            keys = rng.integers(0, 24, len(new))
            fast.publish(np.array(new, np.int32), keys.astype(np.int32))
            for b, k in zip(new, keys.tolist()):
                ref.cache(b, k)
            seen["dups"] += bool(fast.dups)
            fast.release(np.array(blocks, np.int32))
            ref.release(blocks)
            continue
        keys = rng.choice(24, int(rng.integers(1, 6)), replace=False).astype(np.int32)
        hit_fast = fast.lookup(keys)
        hit_ref = ref.prefix_hits(keys.tolist())
        assert hit_fast.tolist() == hit_ref, step
        want = int(rng.integers(1, 40))
        evictable = fast.num_free_of(hit_fast)  # (free hits leave the free queue when touched)
        assert evictable == sum(ref.ref.get(b, 0) == 0 for b in hit_ref)
        if want + evictable > fast.num_free():
            assert want + evictable > ref.num_free()
            continue
        if hit_ref:
            fast.touch(hit_fast.astype(np.int32), step)
            ref.touch(hit_ref)
            seen["hits"] += 1
        before = fast.evictions
        got = fast.allocate(want, step).tolist()
        assert got == ref.allocate(want), step
        assert fast.evictions == ref.evictions, step
        ev = fast.evictions - before
        if ev and fast.dups:
            seen["few" if ev <= 16 else "many"] += 1
        held[q] = (hit_ref, got)
    return seen


@pytest.mark.parametrize("seed", range(4))
def test_shared_keys_pool_matches_the_reference(seed):
    seen = _drive(seed)
    # evictions of a few and of many blocks with later carriers waiting, and prefix hits, all happened
    assert all(v > 0 for v in seen.values()), seen
