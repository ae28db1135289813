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

from simulator.engine.pool import FastPool

from .reference_blocks import BlockPool

KEYS_PER_REQUEST = 64


SEEDS = [*range(12), 29, 228, 582]


@pytest.mark.parametrize("seed", SEEDS)
def test_own_keys_pool_matches_the_reference(seed):
    checked = _drive(seed)
    assert checked["run"] > 0 and checked["sole"] > 0, checked


def test_release_runs_and_sole_carriers_meet_their_other_cases():
    """Over the seeds, both answers of FastPool.one_release_run and FastPool.sole_carriers occur."""
    total = dict(run=0, no_run=0, sole=0, not_sole=0)
    for seed in SEEDS:
        for k, v in _drive(seed).items():
            total[k] += v
    assert all(v > 0 for v in total.values()), total


def _drive(seed: int) -> dict[str, int]:
    """Random operations on both pools, compared at every step; also checks, after each release with
    ``keep``, the hits FastPool.one_release_run / run_left predict for the next lookup, and that
    blocks FastPool.sole_carriers approves come back, alone, from a lookup right after their release.
    Returns how often each of those answers occurred."""
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
    want_next: dict[int, int] = {}    # preempted request -> blocks it asks for when it comes back
    run: dict[int, int] = {}          # preempted request -> its hits per one_release_run (run_left)
    checked = dict(run=0, no_run=0, sole=0, not_sole=0)
    hits = 0
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
            m = int(rng.integers(1, 12)) - 1  # the keys its lookup will cover
            sole = again and nfull == len(blocks) <= m and fast.sole_carriers(k0, nfull, m)
            if again and nfull == len(blocks) <= m:
                checked["sole" if sole else "not_sole"] += 1
            fast.release_own(np.array(blocks, np.int64), nfull, k0, keep=again)
            ref.release(blocks)
            if again:
                preempted.append(q)
                want_next[q] = m + 1
                _note_run(fast, run, checked, q, k0, nfull, m)
                if sole:  # released and looked up again, it gets its blocks back (and no more)
                    assert fast.lookup_own(k0, m).tolist() == blocks, step
            continue
        want = want_next.pop(q, None) or int(rng.integers(1, 12))
        hit_fast = np.zeros(0, np.int64)
        if q in preempted:
            preempted.remove(q)
            expect = fast.run_left(k0, run.pop(q)) if q in run else None
            if step % 2:
                hit_fast = fast.lookup(np.arange(k0, k0 + want - 1))
            else:
                hit_fast = fast.lookup_own(k0, want - 1)
            if expect is not None:
                assert hit_fast.size == expect, step
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
                want_next[q] = want
                _note_run(fast, run, checked, q, k0, hit_fast.size, want - 1)
            continue
        got = fast.allocate(new, step).tolist()
        assert got == ref.allocate(new), step
        held[q] = hit_fast.tolist() + got
        nhit[q] = hit_fast.size
        full[q] = int(rng.integers(hit_fast.size, want + 1))
        assert fast.num_free() == ref.num_free()
        assert fast.evictions == ref.evictions
    assert hits > 0 and fast.compactions > 0
    return checked


def _note_run(fast, run, checked, q, k0, n, m):
    """After a release with ``keep``: the hits of ``q``'s next lookup are known when one_release_run says so."""
    known = fast.one_release_run(k0, n, m)
    fast.accelerate = False  # without the release's own record: the full check
    assert fast.one_release_run(k0, n, m) == known
    fast.accelerate = True
    if known:
        run[q] = min(n, m)
        checked["run"] += 1
    else:
        checked["no_run"] += 1
