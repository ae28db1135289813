"""KV tiers seen from the scheduler: loads started at admission, loaded blocks kept, early offloads.

The tiers themselves (:mod:`simulator.engine.tiers`) hang off the block pool: the pool's evictions
are demoted into them (``pool.on_evict``). Admission (:meth:`simulator.engine.scheduler.Scheduler._admit`)
asks :meth:`TierLoads._start_onboard` whether a waiting request's prefix continues in a tier;
the request then waits until its blocks are loaded. A mixin of :class:`simulator.engine.core.FastEngine`.
"""

from __future__ import annotations

import numpy as np


class TierLoads:
    """Onboarding from the lower KV tiers and ``kv_offload_threshold``."""

    def _start_onboard(self, q: int, o: int, nh: int, m: int, hit) -> bool:
        """Prefix blocks after the GPU hit that a lower tier holds: start loading them (True) or not.

        The request takes GPU blocks for its GPU hits and the loaded keys
        (published at once: they are the keys' GPU copies) and waits in the
        queue until ``self.loading[q]``; it is then admitted with them as hits.
        """
        keyarr = self.keyarr
        pool = self.pool
        evictable = pool.num_free_of(hit) if nh else 0
        wm = self.watermark_blocks if self.num_running else 0
        free = pool.top + pool.nfifo
        if 1 + evictable + wm > free:
            return False  # no room to load even one block: the tiers are not looked at
        rest = np.arange(o + nh, o + m) if keyarr is None else keyarr[o + nh:o + m]
        counts = self.tiers.match(rest)
        k = sum(counts)
        if not k:
            return False
        if k + evictable + wm > free:
            return False  # no room to load into: admit normally (recompute) if it fits
        keys = rest[:k]
        self._take_prefix_blocks(q, o, nh, hit, k, keys)
        self.loading[q] = self.tiers.onboard(keys, counts, self.B, self.clock)
        return True

    def _take_prefix_blocks(self, q: int, o: int, nh: int, hit, k: int, keys) -> None:
        """Waiting request ``q`` (block-table offset ``o``) takes its ``nh`` GPU hit blocks (``hit``) and ``k``
        new blocks for its next ``keys``, published at once: their KV lands there."""
        pool = self.pool
        if nh:
            pool.touch(hit, self.exec_step)
            self.btab[o:o + nh] = hit
        self.held[q] = nh
        self.ncached[q] = nh
        if k > 0:
            self._alloc_blocks(q, k)
            pool.publish(self.btab[o + nh:o + nh + k], keys, True)
            self.ncached[q] = nh + k

    def start_load(self, q: int, nh: int, hit, k: int, ready: float) -> None:
        """Waiting request ``q`` takes GPU blocks for its ``nh`` prefix hits (``hit``) and its next ``k`` blocks
        of KV, which land there by ``ready`` (s; a hook's transfer); it waits in the queue until then and is
        then admitted with them as its prefix hits."""
        o = int(self.koff[q])
        keys = np.arange(o + nh, o + nh + k) if self.keyarr is None else self.keyarr[o + nh:o + nh + k]
        self._take_prefix_blocks(q, o, nh, hit, k, keys)
        self.loading[q] = ready

    def let_loads_go(self) -> None:
        """Every request waiting for loaded blocks lets them go (they stay cached, hit again at its admission)."""
        for q in list(self.loading):
            self._free(q, keep_keys=True)
        self.loading.clear()

    def _keep_loaded(self, q: int) -> int:
        """A request whose loads are done takes the blocks it holds (its GPU hits and the loaded
        blocks) as its prefix hits: how many, or 0 after letting them go to be looked up again.

        Keeping them is what releasing and looking them up again gives, without the free queue's
        dead entries, when they are their keys' only cached carriers (own keys) and the lookup
        would stop after them; an admission check that then fails lets them go as before. A load
        that started from the request's release run (``load_from_run``) needs no check: its GPU hits
        were that run's cached blocks, its other keys had no cached carrier, only its own release
        registers its keys, and it has held its blocks since.
        """
        n = int(self.held[q])
        if self.own_keys and self.accelerate and n and n == int(self.ncached[q]) and (
                (self.load_from_run is not None and self.load_from_run[q])
                or self.pool.sole_carriers(int(self.koff[q]), n, (int(self.tok[q]) - 1) // self.B)):
            self.shortcuts["kept_loads"] += 1
            return n
        self._free(q, keep_keys=True)
        return 0

    def _offload_early(self) -> None:
        """``kv_offload_threshold``: move LRU cached free blocks to the CPU tier while the GPU holds too many."""
        pool = self.pool
        over = (pool.usable - pool.top) - self.offload_at
        if over > 0 and pool.nfifo:
            pool.offload(min(over, pool.nfifo), self.exec_step)

    def _wait_for_loads(self, until) -> None:
        """Only requests waiting for onboarded blocks: the clock moves to the first load done (or arrival)."""
        nxt_t = min(self.loading.values())
        if nxt_t <= self.clock:
            # every load is done, yet nothing could be admitted: the head of the queue
            # needs the blocks that loaded requests behind it hold. Let those go (they
            # stay cached) so the queue moves; vLLM would wait here for ever.
            self.let_loads_go()
            self.tiers.load_stalls += 1
            self._onboard_gate = self.waiting[0] if self.waiting else None
        if self._pending < self._num_requests and self.time_mode:
            nxt_t = min(nxt_t, self._arr[self._pending])
        if until is not None and self.time_mode:
            nxt_t = min(nxt_t, until)
        self._clock_to(nxt_t)
