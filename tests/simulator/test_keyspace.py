"""The engine's content keys (simulator/engine/keyspace.py): each request's shared blocks carry its parent's or its
named prefix's keys, set in whole-array pieces; and whether a request re-reads blocks its parent decodes."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.engine import keyspace
from simulator.engine.keyspace import KeySpace
from simulator.workload.requests import Workload


def keys_one_by_one(wl: Workload, B: int) -> np.ndarray:
    """The keys by their definition, request after request: a shared block has the key of the same block of the
    parent (set before, as the parent comes first) or of the named prefix (keys after all request slots)."""
    nblk = (wl.prompt_len + wl.output_len + 2 + B - 1) // B + 1
    koff = np.concatenate(([0], np.cumsum(nblk)))
    slots = int(koff[-1])
    poff = slots + np.concatenate(([0], np.cumsum((wl.prefix_len + B - 1) // B + 1)))
    keys = list(range(slots))
    for r, s in enumerate((wl.shared_len() // B).tolist()):
        for j in range(s):
            p = int(wl.parent[r])
            keys[koff[r] + j] = keys[koff[p] + j] if p >= 0 else int(poff[wl.prefix_id[r]]) + j
    return np.array(keys)


def random_sharing(rng: np.random.Generator, n: int, chain: bool) -> Workload:
    """Named prefixes, parents sharing part of their prompt or their whole context; ``chain``: each parent the
    request before (long chains of parents)."""
    prompt, out = rng.integers(1, 300, n), rng.integers(1, 100, n)
    plen = np.array([20, 64, 100])
    pid = rng.integers(-1, 3, n)
    prompt = prompt + np.where(pid >= 0, plen[np.maximum(pid, 0)], 0)
    parent, parent_len = np.full(n, -1), np.full(n, -1)
    for r in range(1, n):
        if rng.random() < 0.7:
            p = r - 1 if chain else int(rng.integers(0, r))
            parent[r] = p
            if rng.random() < 0.5:
                prompt[r] = prompt[p] + out[p] + rng.integers(1, 30)
            else:
                prompt[r] = max(int(prompt[r]), int(rng.integers(1, prompt[p] + 1)))
                parent_len[r] = int(rng.integers(1, min(prompt[p], prompt[r]) + 1))
    return Workload(prompt_len=prompt, output_len=out, arrival=np.arange(n, dtype=float), prefix_id=pid,
                    prefix_len=plen, parent=parent, parent_len=parent_len)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_shared_keys_equal_their_definition(monkeypatch, chunk):
    """In pieces of any size, with chains of parents longer than the whole-array passes settle."""
    monkeypatch.setattr(keyspace, "_SHARE_CHUNK", chunk)
    shared = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        wl = random_sharing(rng, int(rng.integers(1, 150)), chain=seed % 3 == 0)
        B = int(rng.choice([1, 4, 16]))
        ks = KeySpace(wl, B)
        want = keys_one_by_one(wl, B)
        got = np.arange(ks.slots) if ks.keyarr is None else ks.keyarr
        assert np.array_equal(got, want), seed
        shared += ks.keyarr is not None
    assert shared > 30


def test_outputs_shared_only_when_a_follow_up_starts_with_a_block_its_parent_decodes():
    B = 16
    base = dict(output_len=np.array([40, 10]), arrival=np.array([0.0, 1.0]), parent=np.array([-1, 0]))
    # the follow-up shares 30 of the parent's 50 prompt tokens (a trace's shared hash_ids): no
    inside = KeySpace(Workload(prompt_len=np.array([50, 60]), parent_len=np.array([-1, 30]), **base), B)
    assert inside.keyarr is not None and not inside.outputs_shared
    # the parent's whole context (50 + 40 tokens, blocks 0-4 full): blocks 3 and 4 hold its output: yes
    whole = KeySpace(Workload(prompt_len=np.array([50, 100]), **base), B)
    assert whole.outputs_shared
    # a whole context whose full blocks all lie in the parent's prompt (48 + 10 tokens: 3 full blocks): no
    short = KeySpace(Workload(prompt_len=np.array([48, 70]), output_len=np.array([10, 10]),
                              arrival=np.array([0.0, 1.0]), parent=np.array([-1, 0])), B)
    assert short.keyarr is not None and not short.outputs_shared


def test_keys_are_int32_while_they_fit():
    wl = Workload(prompt_len=np.array([50, 60]), output_len=np.array([5, 5]), arrival=np.array([0.0, 1.0]),
                  parent=np.array([-1, 0]), parent_len=np.array([-1, 40]))
    assert KeySpace(wl, 16).keyarr.dtype == np.int32
    assert keyspace.index_dtype(2**31 - 2) is np.int32 and keyspace.index_dtype(2**31 - 1) is np.int64
