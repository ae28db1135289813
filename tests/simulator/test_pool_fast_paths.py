"""The pool's fast paths against its general calls and the scalar reference pool, with shared keys.

The engine takes :meth:`FastPool.allocate_one` for a decoder crossing a block boundary, :meth:`FastPool.publish_range`
for a request's newly full blocks under its own consecutive keys and :meth:`FastPool.release_published` for a finished
request's blocks (its hashed ones first). Two pools follow the same random requests, one through the general calls
(``allocate``, ``publish``, ``release``), one through the fast paths; the reference pool follows too. After every
operation the two pools' state is the same, and their blocks, hits, evictions and residency metrics are the
reference's.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulator.engine.pool import FastPool

from .reference_blocks import BlockPool

NUM_KEYS = 48


def _state(p: FastPool) -> tuple:
    live = [int(b) for i, b in enumerate(p.fifo[p.fhead:p.ftail].tolist(), p.fhead) if p.fpos[b] == i]
    return (p.kblock.tolist(), p.hash.tolist(), p.ref.tolist(), p.born.tolist(), live, p.stack[:p.top].tolist(),
            {k: list(v) for k, v in p.dups.items()}, p.evictions, p.reuses, p.nfifo, p.top, p._now_all,
            p._now_realloc, p._touch_idle)


def _drive(seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(30, 70))
    general, fast, ref = FastPool(nb, True, NUM_KEYS), FastPool(nb, True, NUM_KEYS), BlockPool(nb, True)
    held: dict[int, tuple[list[int], list[int]]] = {}  # request -> (its prefix hits, its new blocks)
    seen = dict(scalar=0, range_fresh=0, range_carried=0, shared_release=0, unpublished_release=0)
    for step in range(800):
        ref.now = step
        q = int(rng.integers(8))
        if q in held:  # publish some of its new blocks under consecutive keys (overlapping ranges repeat keys)
            hits, new = held.pop(q)
            j = int(rng.integers(0, len(new) + 1))
            if j:
                k0 = int(rng.integers(0, NUM_KEYS - j + 1))
                seen["range_carried" if (fast.kblock[k0:k0 + j] >= 0).any() else "range_fresh"] += 1
                blocks = np.array(new[:j], np.int32)  # (int32, as the engine's block table holds them)
                general.publish(blocks, np.arange(k0, k0 + j), True)
                fast.publish_range(blocks, k0)
                for b, k in zip(new[:j], range(k0, k0 + j)):
                    ref.cache(b, k)
            blocks = hits + new
            seen["shared_release"] += any(ref.ref[b] > 1 for b in hits)
            seen["unpublished_release"] += j < len(new)
            general.release(np.array(blocks, np.int32))
            fast.release_published(np.array(blocks, np.int32), len(hits) + j)
            ref.release(blocks)
            assert _state(general) == _state(fast), step
            continue
        n = int(rng.integers(1, 6))
        k0 = int(rng.integers(0, NUM_KEYS - n + 1))
        keys = np.arange(k0, k0 + n, dtype=np.int32)
        hit = general.lookup(keys)
        assert hit.tolist() == fast.lookup(keys).tolist()
        hit_ref = ref.prefix_hits(keys.tolist())
        assert hit.tolist() == hit_ref, step
        want = int(rng.integers(1, 12))
        evictable = general.num_free_of(hit)
        if want + evictable > general.num_free():
            continue
        if hit_ref:
            general.touch(hit.astype(np.int32), step)
            fast.touch(hit.astype(np.int32), step)
            ref.touch(hit_ref)
        got = general.allocate(want, step).tolist()
        scalar = not fast.top and not fast.ndead
        got_fast = [fast.allocate_one(step) for _ in range(want)]
        seen["scalar"] += scalar
        assert got == got_fast == ref.allocate(want), step
        assert general.evictions == fast.evictions == ref.evictions, step
        assert _state(general) == _state(fast), step
        held[q] = (hit_ref, got)
    ref.now = 800
    for p in (general, fast):
        p.finalize_metrics()
        assert (p.lifetime_sum, p.idle_sum, p.reuses) == (ref.lifetime_sum, ref.idle_sum, ref.reuses)
    return seen


@pytest.mark.parametrize("seed", range(4))
def test_fast_paths_match_the_general_calls_and_the_reference(seed):
    seen = _drive(seed)
    # each fast path's own case happened: scalar allocations, fresh and carried key ranges, releases of shared
    # hits and of unpublished blocks
    assert all(v > 0 for v in seen.values()), seen
