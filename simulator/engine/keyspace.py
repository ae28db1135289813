"""Workload-derived state shared by every engine of a batch: content keys and arrival order.

vLLM names a full KV block by a chain hash of its tokens; the engine uses integer content keys
assigned up front (:class:`KeySpace`): a request's block ``j`` has slot ``koff[r] + j`` in the
flat block table, and its key is that slot unless the block lies inside a shared prefix or
a parent conversation (then the key of the same block there).
"""

from __future__ import annotations

import numpy as np

from simulator.workload import Workload


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative integers."""
    return -(-a // b)


_SHARE_CHUNK = 1 << 20  # shared blocks whose keys KeySpace sets at a time
_SHARE_PASSES = 8  # generations of parents within one such piece set by whole-array passes, then one by one


def index_dtype(top: int) -> type:
    """The narrowest of int32 and int64 that holds ``-1 .. top`` (the key and block arrays: a day's trace has
    tens of millions of block slots, each array half the memory in int32)."""
    return np.int32 if top < 2**31 - 1 else np.int64


class KeySpace:
    """Integer content keys standing for vLLM's chained block hashes, for one block size.

    Request ``r``'s block ``j`` has slot ``koff[r] + j`` in the flat block
    table; its content key is that slot number, unless the block lies wholly
    inside the prefix or parent context the request starts with: then it is
    the key of the same block of the parent (recursively) or of the named
    prefix (keys after all request slots). ``keyarr`` maps slot -> key and is
    None when no request shares a full block (key == slot); int32 while the keys fit. ``extra``: tokens a
    request may hold slots for beyond its context (speculative decoding's draft
    and lookahead slots, :mod:`simulator.speculative.drafting`).  # tokens
    ``hash_lookahead``: tokens after a block that its hash covers too (vLLM's
    ``num_hash_lookahead_tokens``, EAGLE-style drafters with prefix caching): a
    block is shared only when they lie in the shared part as well.  # tokens
    ``outputs_shared``: some request starts with full blocks its parent fills while decoding (a multi-turn
    parent's generated tokens, looked up by its follow-up); False when every shared block lies inside its
    parent's prompt, as a trace's shared leading blocks (``hash_ids``) do: no request then looks up
    another's decode blocks (the keys of a parent's prompt blocks are, recursively, prompt keys too).
    """

    def __init__(self, wl: Workload, B: int, extra: int = 0, hash_lookahead: int = 0) -> None:
        n = wl.n
        ctx = wl.prompt_len + wl.output_len + extra
        nblk = (ctx + 2 + B - 1) // B + 1
        self.koff = np.zeros(n + 1, np.int64)
        np.cumsum(nblk, out=self.koff[1:])
        self.slots = int(self.koff[-1])
        pb = (wl.prefix_len + B - 1) // B + 1
        poff = self.slots + np.concatenate(([0], np.cumsum(pb)))
        self.num_keys = int(poff[-1])
        shared = wl.shared_len()
        sb = np.maximum(shared - hash_lookahead, 0) // B
        self.keyarr = None
        self.outputs_shared = False
        if n and sb.max() > 0:
            par = wl.parent
            kids = np.flatnonzero((par >= 0) & (sb > 0))
            self.outputs_shared = bool((sb[kids] * B > wl.prompt_len[par[kids]]).any())
            keyarr = np.arange(self.slots, dtype=index_dtype(self.num_keys))
            rs = np.flatnonzero(sb > 0)
            ends = np.cumsum(sb[rs])
            i = 0
            while i < rs.size:  # (in pieces of about _SHARE_CHUNK blocks: bounded temporary arrays)
                j = max(int(np.searchsorted(ends, (ends[i - 1] if i else 0) + _SHARE_CHUNK, "right")), i + 1)
                self._share(keyarr, wl, rs[i:j], sb[rs[i:j]], poff)
                i = j
            self.keyarr = keyarr

    def _share(self, keyarr: np.ndarray, wl: Workload, rs: np.ndarray, s: np.ndarray, poff: np.ndarray) -> None:
        """The keys of the first ``s`` blocks of requests ``rs`` (in order): the same blocks' keys of their
        parent, or their named prefix's keys."""
        koff, par, pid = self.koff, wl.parent, wl.prefix_id
        rr = np.repeat(rs, s)
        j = np.arange(rr.size) - np.repeat(np.cumsum(s) - s, s)
        dst = koff[rr] + j
        p = par[rr]
        named = p < 0
        keyarr[dst[named]] = poff[pid[rr[named]]] + j[named]
        kid = ~named
        dst, src = dst[kid], koff[p[kid]] + j[kid]
        # a parent comes first (src < dst): one pass settles one more generation of parents within this
        # piece; nothing changing is the sequential loop's result
        for _ in range(_SHARE_PASSES):
            new = keyarr[src]
            if np.array_equal(new, keyarr[dst]):
                return
            keyarr[dst] = new
        for r, n in zip(rs.tolist(), s.tolist()):  # (long chains of parents in one piece: one by one)
            if par[r] >= 0:
                o, po = int(koff[r]), int(koff[par[r]])
                keyarr[o:o + n] = keyarr[po:po + n]


class WorkloadPrep:
    """Workload-derived arrays shared by every configuration of a batch."""

    def __init__(self, wl: Workload) -> None:
        self.wl = wl
        self.order = np.argsort(wl.arrival, kind="stable")
        self.arrival_sorted = wl.arrival[self.order]
        self.longest = int((wl.prompt_len + wl.output_len).max()) if wl.n else 0
        self._keys: dict[tuple[int, int, int], KeySpace] = {}

    def keys(self, B: int, extra: int = 0, hash_lookahead: int = 0) -> KeySpace:
        """The key space of block size ``B`` (``extra`` slots beyond each context, ``hash_lookahead``
        tokens in each hash beyond its block: see :class:`KeySpace`)."""
        key = (B, extra, hash_lookahead)
        ks = self._keys.get(key)
        if ks is None:
            ks = self._keys[key] = KeySpace(self.wl, B, extra, hash_lookahead)
        return ks
