"""Array-backed KV block pool with vLLM v1's prefix cache and free-queue order.

Same semantics as the scalar reference pool (``tests/simulator/reference_blocks.py``,
``vllm/v1/core/block_pool.py`` of vLLM 0.33.0), laid out so that a request's
blocks are freed, looked up and published with numpy operations:

* vLLM's free queue is always ``[unhashed free blocks][hashed free blocks]``:
  unhashed blocks only ever enter at the head (the initial blocks in id order,
  freed unhashed blocks prepended) and hashed blocks only at the tail
  (release order; ``touch`` removes from the middle; nothing changes a free
  block's hash). So the head part is a *stack* (``stack[:top]``, head at
  ``stack[top - 1]``) and the tail part a FIFO with lazy deletion
  (``fifo[fhead:ftail]``; an entry is live when ``fpos[block]`` is its index;
  a popped entry lies before ``fhead`` and is never looked at again, so its
  ``fpos`` is left stale until the block re-enters the FIFO).
* block 0 is the null block, so ``usable = num_gpu_blocks - 1``;
* the hash table maps an integer content key to the *oldest* block carrying it
  (``kblock``); further blocks with the same key (rare) sit in ``dups`` in
  insertion order, as vLLM's dict-of-dicts keeps them.

Residency metrics (born / last access per block, measured when a block is
reallocated) are kept per physical block exactly as the scalar pool does.

*Own keys* (``own_keys``: every content key belongs to one request, which alone
can hit it, and only after a preemption or a load from a lower tier) keep no
hash table for blocks in use:
publishing is a no-op, and a preempted request's released blocks are
*registered* under their keys together with their free-queue index. A lookup
trusts a registration while the block still sits at that index of the live
queue, so evicting (popping) a block clears nothing: the cache is exactly
vLLM's for every lookup that can happen, and an allocation is one write.
A key registered while an older registration of it is still cached (a block
the request's lookup did not reach: never the last prompt token) waits in
``odups`` behind it, as vLLM keeps using the older carrier first.
"""

from __future__ import annotations

import numpy as np

_NO_MARGIN = 1 << 62  # no check made yet
_INTP = np.dtype(np.intp)
_FEW = 16  # blocks up to which _drop_keys loops rather than masks
_DISJOINT = 512  # blocks up to which _drop_keys first tests the keys against ``dups`` as a set
# The constants of the array operations on a few blocks, as 0-d arrays of the arrays' dtype: numpy converts a
# Python int operand on every call, about 0.3 us on a few elements (as long as the operation itself), and a 0-d
# array of another dtype costs a cast (the key-to-block table's -1 is the pool's own, ``_kneg``, in its dtype).
_NEG = np.array(-1, np.int64)
_ZERO = np.array(0, np.int64)
_ONE = np.array(1, np.int64)


def _ix(a: np.ndarray) -> np.ndarray:
    """``a`` as numpy's index type. The block table, the keys and the key-to-block table are int32 while ids fit
    (half the memory), and numpy 2.x indexes with an int32 array at 2-5x the cost of an intp one (about 1 us more
    per call on a few blocks): the pool converts block ids and keys once where they come in."""
    return a if a.dtype is _INTP else a.astype(_INTP)


class FastPool:
    """Blocks, ref counts, free queue and hash table of one engine (numpy arrays).

    Parameters
    ----------
    num_gpu_blocks : int
        vLLM's ``num_gpu_blocks`` (including the null block).
    caching : bool
        Prefix caching on.
    num_keys : int
        Size of the content-key space (``kblock`` length) when caching.
    kblock : ndarray of int64, shape (num_keys,), optional
        Storage for the hash table's key -> block map, all -1 (a row of a
        cluster's instances x keys matrix, :class:`simulator.cluster.fleet.Fleet`).
    """

    def __init__(self, num_gpu_blocks: int, caching: bool, num_keys: int, *,
                 kblock: np.ndarray | None = None) -> None:
        nb = num_gpu_blocks
        self.usable = nb - 1  # blocks
        self.caching = caching
        self.stack = np.arange(nb - 1, 0, -1, dtype=np.int64)  # head of the queue at the end
        self.top = nb - 1
        self.nfresh = nb - 1  # never-allocated blocks: always the bottom of the stack
        self.ref = np.zeros(nb, np.int64)
        # born (step of last allocation, -1 = never) and last (step of last access); an allocation
        # writes both (two 1-D writes: with numpy 2.x, one write of (k, 2) rows takes 3x as long)
        self.born = np.full(nb, -1, np.int64)
        self.last = np.zeros(nb, np.int64)
        self.nfifo = 0
        if caching:
            self.hash = np.full(nb, -1, np.int64)
            self.fifo = np.empty(max(1024, 2 * nb), np.int64)
            self.fpos = np.full(nb, -1, np.int64)
            self.fhead = 0
            self.ftail = 0
            self.ndead = 0  # touched (lazily deleted) entries in fifo[fhead:ftail]
            # key -> block (int32 while block ids fit: one entry per key of the workload)
            self.kblock = (np.full(num_keys, -1, np.int32 if nb < 2**31 - 1 else np.int64) if kblock is None
                           else kblock)
            self._kneg = np.array(-1, self.kblock.dtype)
            self.dups: dict[int, list[int]] = {}
            # own keys: the free-queue index a registered key's block was appended at
            # (allocated at the first registration), and the key ranges registered
            # (rewritten when the queue is compacted)
            self.kidx: np.ndarray | None = None
            self.named: list[np.ndarray] = []
            self.odups: dict[int, list[tuple[int, int]]] = {}  # key -> later (block, index) carriers
        # (k0, n) of the last release_own that registered all its n keys (see one_release_run)
        self._whole_run: tuple[int, int] | None = None
        self.accelerate = True  # False: one_release_run makes its full check always (tests compare)
        self.compactions = 0  # free-queue compactions (tests check they happen)
        # Reference counts. An engine whose blocks are each held by one request at most, and
        # only prefix-hit while free (every content key a request's own), turns them off:
        # a held block is then known to have ref 1 and a hit one ref 0.
        self.track_refs = True
        self.own_keys = False  # see the module docstring; set by the engine before any use
        self.evictions = 0
        self.releases = 0  # release calls (the engine's _head_blocked: nothing freed since a look)
        self.on_evict = None  # called with the content keys of evicted blocks and their step(s) (KV tiers)
        # Own keys with a tier: evictions from the live FIFO are recorded as (index, count, step(s)) and
        # handed to on_evict together, in order, by deliver_evictions (before the tier is next read,
        # before an eviction handed over at once, and before the FIFO is compacted); ``fkey`` holds the
        # key of each FIFO entry.
        self.defer_evictions = False
        self.fkey: np.ndarray | None = None
        self._evicted: list[list[int]] = []  # [index, count] ranges of the FIFO, merged when adjacent
        # their steps (in order): how many distinct, the first and the last (None: none recorded)
        self._ev_steps = 0
        self._ev_first: int | None = None
        self._ev_last: int | None = None
        self.lifetime_sum = 0  # set by finalize_metrics
        self.idle_sum = 0
        self.reuses = 0
        self._now_all = 0       # sum of `now` over every allocated block
        self._now_realloc = 0   # ... over reallocated blocks
        self._touch_idle = 0    # sum over touches of (now - last access before)
        # The closest margins of the engine's free-block checks against this pool: the least
        # ``free - need`` of a check that passed and the least ``need - free`` of one that
        # failed. A pool of d blocks fewer (or more) gives every check the same outcome when
        # d <= slack (-d < excess): see simulator/batch/sharing.py.
        self.slack = _NO_MARGIN
        self.excess = _NO_MARGIN

    def configure(self, config) -> None:
        """Read the pool's own knobs of the engine configuration (an :class:`EngineConfig`); the engine
        calls this once, before any use, on every pool it builds (plain, a cluster instance's, a batch's
        shared pool).

        There are none today beyond prefix caching (given at construction): vLLM's free queue, least
        recently released evicted first, is the only eviction order. A new eviction policy reads its
        field here and picks its victims in :meth:`_pop_fifo`, where every eviction takes its blocks
        (``docs/simulator.md``, "How to add a feature").
        """

    def can_allocate(self, need: int, free: int | None = None) -> bool:
        """Whether ``need`` blocks fit in ``free`` (default: the free blocks); the check's margin is
        recorded for shared schedules (:mod:`simulator.batch.sharing`), so every free-block comparison of
        the engine goes through here (or, for several steps' checks made at once, through
        :meth:`check_passed` with their closest margin)."""
        if free is None:
            free = self.top + self.nfifo
        if need > free:
            if need - free < self.excess:
                self.excess = need - free
            return False
        if free - need < self.slack:
            self.slack = free - need
        return True

    def check_passed(self, margin: int) -> None:
        """A free-block check passed with ``free - need = margin``."""
        if margin < self.slack:
            self.slack = margin

    def check_failed(self, margin: int) -> None:
        """A free-block check failed with ``need - free = margin`` (> 0)."""
        if margin < self.excess:
            self.excess = margin

    def num_free(self) -> int:
        """Blocks with ref count 0 (cached-but-free blocks count as free)."""
        return self.top + self.nfifo

    # ---------------------------------------------------------------- allocate
    def allocate_one(self, now: int) -> int:
        """:meth:`allocate` of one block at step ``now``, its id. Scalar reads and writes when the block is the
        live head of a FIFO of cached blocks and its eviction is handed to nobody (the usual case under load: a
        decoder crossing a block boundary); successive calls give what one :meth:`allocate` of as many gives."""
        if (self.top or self.ndead or self.own_keys or self.on_evict is not None
                or type(self).allocate is not FastPool.allocate):
            return int(self.allocate(1, now)[0])
        h = self.fhead
        b = int(self.fifo[h])
        self.fhead = h + 1
        self.nfifo -= 1
        hsh = self.hash
        key = int(hsh[b])
        hsh[b] = -1
        if key in self.dups:
            self._drop_keys(np.array([b]), np.array([key]))
        else:
            self.kblock[key] = -1  # its only carrier
        self.evictions += 1
        self._now_all += now
        self._now_realloc += now
        self.born[b] = now
        self.reuses += 1
        if self.track_refs:
            self.ref[b] = 1
        return b

    def allocate(self, k: int, now) -> np.ndarray:
        """Pop ``k`` blocks from the head of the free queue (caller checked ``k <= num_free``).

        ``now`` is the step (int, or one per block) for the residency metrics.
        The result may be a view of the free queue: use it before the next
        release. Unhashed free blocks (the stack) go first, then the least
        recently used cached ones (evicted from the prefix cache).
        """
        top = self.top
        if not top and k and not self.ndead and (self.on_evict is None or self.defer_evictions):
            return self._allocate_cached(k, now)
        if top:
            m = k if k <= top else top
            out = self.stack[top - m:top][::-1].copy()
            self.top = top - m
            fresh = m - (top - self.nfresh)
            if fresh > 0:
                self.nfresh -= fresh
            else:
                fresh = 0
        else:
            # the common case under load: every free block is a cached one
            if not k:
                return np.zeros(0, np.int64)
            fresh = m = 0
        rest = k - m
        if rest:
            ev = self._evict_head(rest, now if type(now) is not np.ndarray else now[m:])
            out = np.concatenate((out, ev)) if m else ev
        self._note_allocation(out, now, k, m, fresh)
        return out

    def _allocate_cached(self, k: int, now) -> np.ndarray:
        """:meth:`allocate` with no unhashed free block and the next ``k`` queue entries all live."""
        # the common case under load: the next k cached free blocks, all live
        h = self.fhead
        out = self.fifo[h:h + k]
        self.fhead = h + k
        self.nfifo -= k
        if self.defer_evictions:
            ev = self._evicted  # (_record_evictions inline: the usual case under load)
            if ev and ev[-1][0] + ev[-1][1] == h:
                ev[-1][1] += k
            else:
                ev.append([h, k])
            if type(now) is not int:
                self._record_steps(now)
            elif now != self._ev_last:
                if self._ev_last is None:
                    self._ev_first = now
                self._ev_steps += 1
                self._ev_last = now
        elif not self.own_keys:
            hsh = self.hash
            keys = hsh[out]
            hsh[out] = _NEG
            self._drop_keys(out, keys)
        self.evictions += k
        if type(now) is int:
            self._now_all += now * k
            self._now_realloc += now * k
        else:
            tot = int(now.sum())
            self._now_all += tot
            self._now_realloc += tot
        self.born[out] = now
        self.reuses += k
        if self.track_refs:
            self.ref[out] = _ONE
        return out

    def _evict_head(self, rest: int, now) -> np.ndarray:
        """Take ``rest`` cached blocks from the head of the free queue, evicting their content."""
        deferred = False
        if self.ndead:
            ev = self._pop_fifo(rest)
        else:  # no touched entries in the way: the next `rest` entries are live
            h = self.fhead
            ev = self.fifo[h:h + rest]
            self.fhead = h + rest
            self.nfifo -= rest
            deferred = self.defer_evictions
        if deferred:
            self._record_evictions(h, rest, now)
            self.evictions += rest
        elif self.on_evict is not None or self.dups:
            self._evict(ev, now)
        elif self.own_keys:
            self.evictions += rest
        else:
            hsh = self.hash
            self.kblock[hsh[ev]] = self._kneg
            hsh[ev] = _NEG
            self.evictions += rest
        return ev

    def _note_allocation(self, out: np.ndarray, now, k: int, m: int, fresh: int) -> None:
        """Residency metrics without per-block reads: every allocation's ``now`` becomes the block's
        ``born`` and is consumed at its next reallocation (see finalize_metrics); touches add their
        idle increments there. ``m`` blocks came from the stack, ``fresh`` of them never used."""
        if type(now) is np.ndarray:
            tot = int(now.sum())
            self._now_all += tot
            self._now_realloc += tot - (int(now[m - fresh:m].sum()) if fresh else 0)
        else:
            self._now_all += now * k
            self._now_realloc += now * (k - fresh)
        self.reuses += k - fresh
        if self.track_refs:
            self.ref[out] = _ONE
        self.born[out] = now

    def _pop_fifo(self, rest: int) -> np.ndarray:
        """The next ``rest`` victims: the least recently released live entries of the FIFO, popped (every
        eviction takes its blocks here: :meth:`_evict_head` for an allocation, :meth:`offload`; the
        allocation fast paths inline the case with no touched entries in the way)."""
        got = []
        fifo, fpos = self.fifo, self.fpos
        h = self.fhead
        if not self.ndead:  # no touched entries in the way: the next `rest` entries are live
            seg = fifo[h:h + rest]
            self.fhead = h + rest
            self.nfifo -= rest
            return seg
        while rest > 0:
            end = min(self.ftail, h + max(2 * rest, 32))
            seg = fifo[h:end]
            v = np.flatnonzero(fpos[seg] == np.arange(h, end))
            if v.size >= rest:
                v = v[:rest]
                got.append(seg[v])
                nh = h + int(v[-1]) + 1
                self.ndead -= (nh - h) - rest
                h = nh
                rest = 0
            else:
                got.append(seg[v])
                self.ndead -= (end - h) - v.size
                h = end
                rest -= v.size
        self.fhead = h
        ev = got[0] if len(got) == 1 else np.concatenate(got)
        self.nfifo -= ev.size
        return ev

    def _record_evictions(self, h: int, k: int, now) -> None:
        """Record the eviction of FIFO entries ``h .. h + k - 1`` at step(s) ``now`` (delivered later)."""
        ev = self._evicted
        if ev and ev[-1][0] + ev[-1][1] == h:
            ev[-1][1] += k
        else:
            ev.append([h, k])
        self._record_steps(now)

    def _record_steps(self, now) -> None:
        """Count the distinct steps of recorded evictions: ``now`` is a step or one per block, in order."""
        if type(now) is int:
            first = last = now
            d = 1
        else:
            first, last = int(now[0]), int(now[-1])
            d = 1 if first == last else 1 + int(np.count_nonzero(now[1:] != now[:-1]))
        if self._ev_last is None:
            self._ev_first = first
            self._ev_steps = d
        else:
            self._ev_steps += d - (first == self._ev_last)
        self._ev_last = last

    def deliver_evictions(self) -> None:
        """Hand the recorded evictions to ``on_evict``, in order, as one call (their steps as
        ``(distinct steps, first, last)``)."""
        got = self._evicted
        if not got:
            return
        self._evicted = []
        steps = (self._ev_steps, self._ev_first, self._ev_last)
        self._ev_steps = 0
        self._ev_first = self._ev_last = None
        fkey = self.fkey
        if len(got) == 1:
            h, k = got[0]
            keys = fkey[h:h + k]
        else:
            keys = np.concatenate([fkey[h:h + k] for h, k in got])
        self.on_evict(keys, steps)  # (a view of fkey when one range: on_evict keeps a copy)

    def _evict(self, ev: np.ndarray, steps=None) -> None:
        if self._evicted:
            self.deliver_evictions()
        hsh = self.hash
        keys = hsh[ev]
        hsh[ev] = _NEG
        self.evictions += ev.size
        if self.on_evict is not None:
            self.on_evict(keys, steps)
        if self.own_keys:
            return  # registrations are checked at lookup (see the module docstring)
        self._drop_keys(ev, keys)

    def _drop_keys(self, ev: np.ndarray, keys: np.ndarray) -> None:
        """The hash table after evicting blocks ``ev`` that carried ``keys``: a later carrier of a key
        takes over from its first, else the key is gone."""
        kb = self.kblock
        if not self.dups:
            kb[keys] = self._kneg
            return
        dups = self.dups
        if ev.size <= _DISJOINT and dups.keys().isdisjoint(keys.tolist()):
            kb[keys] = self._kneg  # (the usual case: no evicted key has a later carrier; one set test, no loop)
            return
        # the keys without later carriers (most): their block is the key's only one (a later carrier
        # exists only beside a carrier, see publish), it goes; the others in order, one by one (a few
        # blocks, the usual allocation under load: all one by one, cheaper than the masks)
        if ev.size > _FEW:
            m = _among(keys, dups)
            hit = np.count_nonzero(m)
            if not hit:
                kb[keys] = self._kneg
                return
            if hit < m.size:
                kb[keys[~m]] = self._kneg
                ev, keys = ev[m], keys[m]
        for b, key in zip(ev.tolist(), keys.tolist()):
            lst = dups.get(key)
            if lst is None:
                kb[key] = -1  # its only carrier
            elif kb[key] == b:
                kb[key] = lst.pop(0)
                if not lst:
                    del dups[key]
            else:
                lst.remove(b)
                if not lst:
                    del dups[key]

    def offload(self, k: int, step=None) -> None:
        """Evict the ``k`` least recently freed cached blocks now (caller checked ``k <= nfifo``).

        Their keys go to ``on_evict`` (the CPU tier); the blocks become plain
        free blocks at the head of the free queue.
        """
        ev = self._pop_fifo(k)
        self._evict(ev, step)
        top = self.top
        self.stack[top:top + ev.size] = ev[::-1]
        self.top = top + ev.size

    # ------------------------------------------------------------------ cache
    def publish(self, blocks: np.ndarray, keys: np.ndarray, distinct: bool = False) -> None:
        """Publish full ``blocks`` under ``keys`` (in order, as sequential ``cache`` calls).

        ``distinct``: the caller knows ``keys`` has no repeats. A no-op with
        own keys (registered when released by a preemption, see :meth:`release_own`).
        """
        if self.own_keys:
            return
        blocks, keys = _ix(blocks), _ix(keys)
        self.hash[blocks] = keys
        kb = self.kblock
        carried = kb[keys] > self._kneg
        if not np.count_nonzero(carried):
            # (no key carried: none has later carriers either, whatever ``dups`` holds)
            kb[keys] = blocks
            if distinct or np.count_nonzero(kb[keys] != blocks) == 0:
                return
            kb[keys] = -1  # a key repeats within the batch: do it in order
        elif distinct or np.unique(keys).size == keys.size:
            # distinct keys: the uncarried ones carried by their block now, the others queue behind
            kb[keys[~carried]] = blocks[~carried]
            dups = self.dups
            for b, key in zip(blocks[carried].tolist(), keys[carried].tolist()):
                dups.setdefault(key, []).append(b)
            return
        dups = self.dups
        for b, key in zip(blocks.tolist(), keys.tolist()):
            if kb[key] < 0:
                kb[key] = b
            else:
                dups.setdefault(key, []).append(b)

    def publish_range(self, blocks: np.ndarray, k0: int) -> None:
        """:meth:`publish` of ``blocks`` under the consecutive keys ``k0, k0 + 1, ...`` (distinct): the keys are a
        slice of the key-to-block table, read and written as one (no index arrays) when no block carries any of
        them yet, the usual case; else :meth:`publish`."""
        if self.own_keys:
            return
        k1 = k0 + blocks.size
        kbs = self.kblock[k0:k1]
        if kbs.max() >= 0:
            self.publish(blocks, np.arange(k0, k1), True)
            return
        self.hash[_ix(blocks)] = np.arange(k0, k1)
        kbs[:] = blocks

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Blocks of the longest cached prefix of ``keys`` (oldest carrier of each)."""
        bl = _ix(self.kblock[_ix(keys)])
        if not self.own_keys:
            miss = (bl < _ZERO).nonzero()[0]
            return bl[: miss[0]] if miss.size else bl
        if self.kidx is None:  # nothing registered yet
            return bl[:0]
        miss = (~self._registered(bl, self.kidx[keys])).nonzero()[0].tolist()
        for j in miss:
            b = self._promote(int(keys[j]))
            if b < 0:
                return bl[:j]
            bl[j] = b
        return bl

    def _odups_in(self, k0: int, k1: int) -> bool:
        """Whether a later carrier waits for a key in ``k0 .. k1 - 1`` (the shorter loop of the two)."""
        od = self.odups
        if len(od) <= k1 - k0:
            return any(k0 <= k < k1 for k in od)
        return any(k in od for k in range(k0, k1))

    def lookup_own(self, k0: int, m: int) -> np.ndarray:
        """:meth:`lookup` of the consecutive keys ``k0 .. k0 + m - 1`` with own keys (by slices)."""
        if self.kidx is None:  # nothing registered yet
            return self.kblock[:0]
        bl = self.kblock[k0:k0 + m].astype(_INTP)
        ok = self._registered(bl, self.kidx[k0:k0 + m])
        if ok.all():
            return bl
        for j in (~ok).nonzero()[0].tolist():
            b = self._promote(k0 + j)
            if b < 0:
                return bl[:j]
            bl[j] = b
        return bl

    def one_release_run(self, k0: int, n: int, m: int) -> bool:
        """Own keys: whether the blocks a request just released for its keys ``k0 .. k0 + n - 1``
        are what its lookups over ``m`` keys hit until it is admitted: they sit in the free queue
        last block first with nothing between them, the lookup would stop after them (at key
        ``k0 + n``, no cached carrier, when ``n < m``), and no later carrier waits for one of its
        keys (none can be promoted). Its hits are then :meth:`run_left`: nothing registers its
        keys while it waits, and the queue evicts its blocks from the last one."""
        if self.odups and self._odups_in(k0, k0 + m):
            return False
        if n < m and self.kidx is not None:
            b = self.kblock[k0 + n]
            if b >= 0 and self._holds(int(b), int(self.kidx[k0 + n])):
                return False
        if n < 2 or (self.accelerate and self._whole_run == (k0, n)):
            return True  # (the release just made registered all n keys, appended last block first)
        idx = self.kidx[k0:k0 + n]
        return bool((idx == idx[0] - np.arange(n)).all())

    def run_left(self, k0: int, n: int) -> int:
        """Own keys: how many of the ``n`` hits of :meth:`one_release_run` are still cached (the
        free-queue index of a live block only moves with a compaction, which keeps their order)."""
        if not n:
            return 0
        b = self.kblock[k0]
        i = self.kidx[k0]
        if b < 0 or i < self.fhead or self.fpos[b] != i:
            return 0
        left = int(i) - self.fhead + 1
        return left if left < n else n

    def _registered(self, bl: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Own keys: which registrations (block, free-queue index) still hold their cached block."""
        return (bl >= 0) & (idx >= self.fhead) & (self.fpos[bl] == idx)

    def _holds(self, b: int, i: int) -> bool:
        """:meth:`_registered` for one registration."""
        return i >= self.fhead and self.fpos[b] == i

    def _promote(self, key: int) -> int:
        """Own keys: the oldest later carrier of ``key`` still cached becomes its registration (-1: none)."""
        lst = self.odups.get(key)
        while lst:
            b, i = lst.pop(0)
            if self._holds(b, i):
                self.kblock[key] = b
                self.kidx[key] = i
                self.named.append(np.array([key], np.int64))
                if not lst:
                    del self.odups[key]
                return b
        self.odups.pop(key, None)
        return -1

    def _register(self, k0: int, blocks: np.ndarray, hit: np.ndarray) -> bool:
        """Own keys: ``blocks`` (just appended to the free queue) carry keys ``k0, k0 + 1, ...``;
        ``hit``: which of them the request found cached and has held since. Returns whether every
        key now names its block of ``blocks`` (none waits behind an older carrier)."""
        keys = np.arange(k0, k0 + blocks.size)
        idx = self.fpos[blocks]
        if self.kidx is None:
            self.kidx = np.full(self.kblock.size, -1, np.int64)
        cur = self.kblock[keys]
        # a block the request found cached and held since is still the key's carrier
        same = (cur == blocks) & hit
        older = self._registered(cur, self.kidx[keys]) & ~same
        if self.odups:  # an older carrier may wait behind a registration gone stale
            for j in (~(older | same)).nonzero()[0].tolist():
                if int(keys[j]) in self.odups and self._promote(int(keys[j])) >= 0:
                    older[j] = True
        whole = not older.any()
        if not whole:
            for key, b, i in zip(keys[older].tolist(), blocks[older].tolist(), idx[older].tolist()):
                self.odups.setdefault(key, []).append((b, i))
            keep = ~older
            keys, blocks, idx = keys[keep], blocks[keep], idx[keep]
        self.kblock[keys] = blocks
        self.kidx[keys] = idx
        self.named.append(keys)
        return whole

    def num_free_of(self, blocks: np.ndarray) -> int:
        """How many of ``blocks`` (prefix hits) are free (ref count 0), i.e. evictable."""
        if not self.track_refs:
            return blocks.size
        return int(np.count_nonzero(self.ref[_ix(blocks)] == _ZERO))

    def touch(self, blocks: np.ndarray, now: int) -> None:
        """A prefix hit adopts ``blocks``: ref + 1, leaving the free queue."""
        blocks = _ix(blocks)
        z = blocks[self.ref[blocks] == _ZERO] if self.track_refs else blocks
        if z.size:
            self.fpos[z] = _NEG
            self.nfifo -= z.size
            self.ndead += z.size
        if self.track_refs:
            self.ref[blocks] += _ONE
        self.retouch(blocks, now)

    def retouch(self, blocks: np.ndarray, now: int) -> None:
        """The residency bookkeeping of :meth:`touch` alone: a request takes ``blocks``, which it
        holds, as prefix hits (what releasing and touching them again would leave, but for dead
        entries in the free queue)."""
        blocks = _ix(blocks)
        # a block's last access is its allocation or its last touch since (``last`` is written by touches only:
        # one written before the block's allocation is older than ``born``)
        self._touch_idle += int(now * blocks.size - np.maximum(self.last[blocks], self.born[blocks]).sum())
        self.last[blocks] = now

    def sole_carriers(self, k0: int, n: int, m: int) -> bool:
        """Own keys: whether a request holding blocks for its keys ``k0 .. k0 + n - 1``, released and
        looked up again over ``m >= n`` keys, would get exactly those blocks back: no other cached
        block carries one of them (a live registration or a later carrier) nor key ``k0 + n`` (when
        ``n < m``), so its lookup stops there."""
        k1 = k0 + n + (n < m)
        if self.odups and self._odups_in(k0, k1):
            return False
        if self.kidx is None:
            return True
        return not self._registered(self.kblock[k0:k1], self.kidx[k0:k1]).any()

    def finalize_metrics(self) -> None:
        """Set ``lifetime_sum`` and ``idle_sum`` (steps, over reallocated blocks).

        The scalar pool adds ``now - born`` and ``now - last`` for each
        reallocated block. Summed: the ``now`` of reallocations, minus the
        ``born`` values they consumed = every allocation's ``now`` except each
        block's final one; idle also subtracts the touch increments consumed
        (all touches minus those still pending in the final ``last - born``).
        """
        used = self.born >= 0
        born_final = int(self.born[used].sum())
        consumed_born = self._now_all - born_final
        self.lifetime_sum = self._now_realloc - consumed_born
        pending_touch = int((np.maximum(self.last[used], self.born[used]) - self.born[used]).sum())
        self.idle_sum = self.lifetime_sum - (self._touch_idle - pending_touch)

    # ---------------------------------------------------------------- release
    def release(self, blocks: np.ndarray) -> None:
        """Free a request's blocks (given in allocation order; all distinct)."""
        self.releases += 1
        bl = blocks[::-1].astype(_INTP)  # (a contiguous copy: numpy 2.x indexes with a reversed view 3x slower)
        ref = self.ref
        left = ref[bl] - 1  # (distinct blocks: one read, one write)
        ref[bl] = left
        z = bl[left == _ZERO]
        if not z.size:
            return
        if self.caching:
            hashed = self.hash[z] > _NEG
            nh = np.count_nonzero(hashed)
            if nh == z.size:  # (every freed block hashed: no masks)
                self._append(z)
                return
            if nh:
                self._append(z[hashed])
                z = z[~hashed]
        if z.size:
            top = self.top
            self.stack[top:top + z.size] = z[::-1]
            self.top = top + z.size

    def release_published(self, blocks: np.ndarray, nhashed: int) -> None:
        """:meth:`release` of a request's blocks whose first ``nhashed`` are the hashed ones (its published prefix
        and prefix hits; the caller knows): the rest, its own unpublished blocks, are held by it alone (a block is
        shared only as a prefix hit, which needs a hash) and go back unhashed; no hash is read."""
        if not self.caching:
            self.release(blocks)
            return
        self.releases += 1
        m = blocks.size - nhashed
        ref = self.ref
        if nhashed:
            hb = (blocks[nhashed - 1::-1] if m else blocks[::-1]).astype(_INTP)  # (contiguous: see release)
            left = ref[hb] - _ONE
            ref[hb] = left
            z = hb[left == _ZERO]
            if z.size:
                self._append(z)
        if m:
            ub = blocks[nhashed:]
            ref[_ix(ub)] = _ZERO
            top = self.top
            self.stack[top:top + m] = ub
            self.top = top + m

    def release_own(self, blocks: np.ndarray, nhashed: int, k0: int = 0, keep: bool = False) -> None:
        """:meth:`release` for blocks held by one request only (ref count 1 each).

        The caller knows the first ``nhashed`` blocks are the hashed ones (a
        request's published prefix, keys ``k0, k0 + 1, ...``) and the rest
        unhashed; the result is what :meth:`release` gives for them. With own
        keys, ``keep``: the request can hit them again (it was preempted, or
        loaded them from a lower tier): register them; and with a tier, the
        blocks carry their keys in the free queue (an eviction demotes them).
        """
        self.releases += 1
        self._whole_run = None
        blocks = _ix(blocks)
        if self.track_refs:
            self.ref[blocks] = _ZERO
        if nhashed:
            own = self.own_keys
            hb = blocks[:nhashed]
            if own and keep:
                hit = self.fpos[hb] == -1  # taken by a prefix hit (touch), never evicted since
            if own and self.on_evict is not None:
                self.hash[hb] = np.arange(k0, k0 + nhashed)
            self._append(blocks[nhashed - 1::-1] if nhashed < blocks.size else blocks[::-1])
            if own:
                if keep:
                    self._whole_run = (k0, nhashed) if self._register(k0, hb, hit) else None
        m = blocks.size - nhashed
        if m:
            top = self.top
            self.stack[top:top + m] = blocks[nhashed:]
            self.top = top + m

    def publish_new(self, blocks: np.ndarray, k0: int) -> None:
        """:meth:`publish` of ``blocks`` under the consecutive keys ``k0, k0 + 1, ...``
        that no block carries (the caller knows; no duplicate bookkeeping needed)."""
        if self.own_keys:
            return
        k1 = k0 + blocks.size
        self.hash[_ix(blocks)] = np.arange(k0, k1)
        self.kblock[k0:k1] = blocks

    def _append(self, tail: np.ndarray) -> None:
        t = self.ftail
        m = tail.size
        if t + m > self.fifo.size:
            self._compact(m)
            t = self.ftail
        seg = self.fifo[t:t + m]
        seg[:] = tail
        # indexed by the contiguous copy: numpy 2.x indexes with a reversed view (the usual tail) 3x slower
        if self.defer_evictions:
            self.fkey[t:t + m] = self.hash[seg]
        self.fpos[seg] = np.arange(t, t + m)
        self.ftail = t + m
        self.nfifo += m

    def _compact(self, extra: int) -> None:
        self.compactions += 1
        if self._evicted:
            self.deliver_evictions()  # their FIFO indices are about to change
        own = self.own_keys
        if own:
            # registrations still holding their block keep it, at its new index; the rest are dropped
            live = np.zeros(0, np.int64)
            if self.named:
                keys = np.concatenate(self.named)
                bl = self.kblock[keys]
                ok = self._registered(bl, self.kidx[keys])
                live = keys[ok]
                # a block its request found cached and holds now (touched: fpos -1) is still
                # the key's carrier: kept, with an index no lookup accepts
                held = ~ok & (bl >= 0) & (self.fpos[bl] == -1)
                self.kidx[keys[held]] = -2
                self.kblock[keys[~ok & ~held]] = -1
            dups = {k: [b for b, i in lst if self._holds(b, i)] for k, lst in self.odups.items()}
        self.fifo, self.ftail = compact_fifo(self.fifo, self.fpos, self.fhead, self.ftail, extra)
        self.fhead = 0
        self.ndead = 0
        if self.defer_evictions:
            self.fkey = np.empty(self.fifo.size, np.int64)
            self.fkey[:self.ftail] = self.hash[self.fifo[:self.ftail]]
        if own:
            self.named = [live] if live.size else []
            if live.size:
                self.kidx[live] = self.fpos[self.kblock[live]]
            self.odups = {k: [(b, int(self.fpos[b])) for b in lst] for k, lst in dups.items() if lst}


def _among(keys: np.ndarray, dups: dict) -> np.ndarray:
    """Mask of ``keys`` that are keys of ``dups`` (a few, as a rule)."""
    if len(dups) > 8:
        return np.isin(keys, np.fromiter(dups, np.int64, len(dups)))
    it = iter(dups)
    m = keys == next(it)
    for k in it:
        m |= keys == k
    return m


def compact_fifo(fifo: np.ndarray, pos: np.ndarray, head: int, tail: int, extra: int) -> tuple[np.ndarray, int]:
    """Drop the dead entries of a FIFO with lazy deletion and make room for ``extra`` more.

    An entry ``fifo[i]`` is live when ``pos[fifo[i]] == i``. The live entries
    move to the front (``pos`` rewritten), in order; the array doubles when
    they and ``extra`` would fill more than half of it. Returns the new array
    and its tail (the head is 0).
    """
    seg = fifo[head:tail]
    live = seg[pos[seg] == np.arange(head, tail)]
    size = fifo.size
    if live.size + extra > size // 2:
        size = 2 * (live.size + extra) + 1024
    out = np.empty(size, np.int64)
    out[:live.size] = live
    pos[live] = np.arange(live.size)
    return out, live.size
