"""Loads: KV blocks landing on the GPU for a waiting request before it is admitted, and early offloads.

A :class:`TierLoads` is one part of :class:`simulator.engine.core.FastEngine` (``engine.loads``). The
tiers themselves (:mod:`simulator.engine.tiers`) hang off the block pool: the pool's evictions are
demoted into them (``pool.on_evict``). Admission (:meth:`simulator.engine.scheduler.Scheduler.admit`)
asks :meth:`TierLoads.start_onboard` whether a waiting request's prefix continues in a tier; the
request then takes GPU blocks for it and waits until they are loaded (``loading[q]``), passed over
by admission. A hook's transfer (:mod:`simulator.cluster.disaggregated`) lands the same way
(:meth:`TierLoads.start_load`), with or without tiers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class TierLoads:
    """Blocks loading onto the GPU for waiting requests (tier onboarding, a hook's transfers) and
    ``kv_offload_threshold``'s early offloads.

    Owns: ``loading`` (request -> time its loaded blocks are on the GPU, s), ``gate`` (after a load
    stall no request starts loads until this one has finished, None: open) and ``offload_at`` (blocks
    in use above which cached free blocks are offloaded early, None: off).

    Interface: :meth:`start_onboard` (admission), :meth:`start_load` (a hook), :meth:`keep_loaded`
    (a request whose loads are done), :meth:`let_go`, :meth:`first_ready` (a stall), :meth:`offload_early`.
    The engine's time (``clock``, ``step``) and its running count come in as arguments.

    Parameters
    ----------
    requests : RequestState
        Reads ``tok``; writes ``held`` and ``ncached`` of the requests it loads for.
    pool : FastPool
    tiers : TierChain or None
    koff, keyarr, btab :
        The block tables' layout: request ``q``'s block table is ``btab[koff[q]:koff[q] + held[q]]``, its
        content keys ``keyarr[koff[q]:...]`` (None: own keys, ``koff[q] + i``).
    block_size : int
        Tokens a block (1 with the radix cache).
    watermark_blocks : int
    free : callable
        ``free(q, keep_keys=True)``: the scheduler's release of request ``q``'s blocks.
    offload_at : int or None
    sole_carriers_check : bool
        :meth:`keep_loaded` may keep a request's loaded blocks (own keys, accelerated).
    load_from_run : ndarray of bool or None
        Whether each request's last load started from its release run (written by admission).
    shortcuts : dict
        The engine's shortcut counters (``kept_loads`` is counted here).
    """

    def __init__(self, requests, pool, tiers, *, koff, keyarr, btab, block_size: int, watermark_blocks: int,
                 free: Callable[..., None], offload_at: int | None, sole_carriers_check: bool,
                 load_from_run, shortcuts: dict) -> None:
        self.requests = requests
        self.pool = pool
        self.tiers = tiers
        self.koff = koff
        self.keyarr = keyarr
        self.btab = btab
        self.B = block_size
        self.watermark_blocks = watermark_blocks
        self.free = free
        self.offload_at = offload_at
        self.sole_carriers_check = sole_carriers_check
        self.load_from_run = load_from_run
        self.shortcuts = shortcuts
        self.loading: dict[int, float] = {}
        # After a load stall no request starts loads until this one (the head of the queue then)
        # has finished: otherwise loads (its own or those of requests behind it) take the blocks
        # it needs again, or preempt it once admitted, and the stall repeats for ever.
        self.gate: int | None = None

    def start_onboard(self, q: int, o: int, nh: int, m: int, hit, running: int, step: int, clock: float) -> bool:
        """Prefix blocks after the GPU hit that a lower tier holds: start loading them (True) or not.

        Waiting request ``q`` (block-table offset ``o``, ``m`` full prompt blocks, ``nh`` GPU hits
        ``hit``) takes GPU blocks for its GPU hits and the loaded keys (published at once: they are
        the keys' GPU copies) and waits in the queue until ``loading[q]``; it is then admitted with
        them as hits. ``running``: requests running (the watermark applies when some do).
        """
        keyarr = self.keyarr
        pool = self.pool
        evictable = pool.num_free_of(hit) if nh else 0
        wm = self.watermark_blocks if running else 0
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
        self._take_prefix_blocks(q, o, nh, hit, k, keys, step)
        self.loading[q] = self.tiers.onboard(keys, counts, self.B, clock)
        return True

    def _take_prefix_blocks(self, q: int, o: int, nh: int, hit, k: int, keys, step: int) -> None:
        """Waiting request ``q`` (block-table offset ``o``) takes its ``nh`` GPU hit blocks (``hit``) and ``k``
        new blocks for its next ``keys``, published at once: their KV lands there."""
        pool = self.pool
        held, ncached = self.requests.held, self.requests.ncached
        if nh:
            pool.touch(hit, step)
            self.btab[o:o + nh] = hit
        held[q] = nh
        ncached[q] = nh
        if k > 0:
            self.btab[o + nh:o + nh + k] = pool.allocate(k, step)
            held[q] = nh + k
            pool.publish(self.btab[o + nh:o + nh + k], keys, True)
            ncached[q] = nh + k

    def start_load(self, q: int, nh: int, hit, k: int, ready: float, step: int) -> None:
        """Waiting request ``q`` takes GPU blocks for its ``nh`` prefix hits (``hit``) and its next ``k`` blocks
        of KV, which land there by ``ready`` (s; a hook's transfer); it waits in the queue until then and is
        then admitted with them as its prefix hits."""
        o = int(self.koff[q])
        keys = np.arange(o + nh, o + nh + k) if self.keyarr is None else self.keyarr[o + nh:o + nh + k]
        self._take_prefix_blocks(q, o, nh, hit, k, keys, step)
        self.loading[q] = ready

    def let_go(self) -> None:
        """Every request waiting for loaded blocks lets them go (they stay cached, hit again at its admission)."""
        free = self.free
        for q in list(self.loading):
            free(q, keep_keys=True)
        self.loading.clear()

    def keep_loaded(self, q: int) -> int:
        """A request whose loads are done takes the blocks it holds (its GPU hits and the loaded
        blocks) as its prefix hits: how many, or 0 after letting them go to be looked up again.

        Keeping them is what releasing and looking them up again gives, without the free queue's
        dead entries, when they are their keys' only cached carriers (own keys) and the lookup
        would stop after them; an admission check that then fails lets them go as before. A load
        that started from the request's release run (``load_from_run``) needs no check: its GPU hits
        were that run's cached blocks, its other keys had no cached carrier, only its own release
        registers its keys, and it has held its blocks since.
        """
        rs = self.requests
        n = int(rs.held[q])
        if self.sole_carriers_check and n and n == int(rs.ncached[q]) and (
                (self.load_from_run is not None and self.load_from_run[q])
                or self.pool.sole_carriers(int(self.koff[q]), n, (int(rs.tok[q]) - 1) // self.B)):
            self.shortcuts["kept_loads"] += 1
            return n
        self.free(q, keep_keys=True)
        return 0

    def offload_early(self, step: int) -> None:
        """``kv_offload_threshold``: move LRU cached free blocks to the CPU tier while the GPU holds too many."""
        pool = self.pool
        over = (pool.usable - pool.top) - self.offload_at
        if over > 0 and pool.nfifo:
            pool.offload(min(over, pool.nfifo), step)

    def first_ready(self, clock: float, waiting) -> float:
        """Only requests waiting for loaded blocks are left: the time the first load is done (s).

        If every load is done at ``clock``, yet nothing could be admitted, the head of the queue
        needs the blocks that loaded requests behind it hold: those let them go (they stay cached)
        so the queue moves (vLLM would wait here for ever), and no load starts until that head
        (``waiting[0]``) has finished.
        """
        nxt_t = min(self.loading.values())
        if nxt_t <= clock:
            self.let_go()
            self.tiers.load_stalls += 1
            self.gate = waiting[0] if waiting else None
        return nxt_t


__all__ = ["TierLoads"]
