"""N engine instances whose router-visible state lies along an instance axis.

>>> fleet = Fleet(workload, config, 4, prep=WorkloadPrep(workload))  # doctest: +SKIP
>>> fleet.advance(t); fleet.waiting, fleet.running, fleet.kv_usage()  # doctest: +SKIP

Each instance is a full :class:`simulator.engine.core.FastEngine` (its own scheduler
and KV cache) run in external mode. What a router reads of them is kept as
arrays of shape ``(N,)`` over the instance axis: each instance's time
(``now``), whether it has work (``busy``), its waiting and running requests and
its free KV blocks; they are refreshed whenever an instance moves (an advance
or a submission), so a decision reads N values in one numpy operation instead
of asking N engine objects. The prefix caches are one ``(N, num_keys)`` matrix:
row ``i`` *is* instance ``i``'s hash table (``FastPool.kblock``, the block
holding each content key, -1 when none), so "how much of this prompt does
each instance hold" is one gather over the matrix.

Time: :meth:`advance` moves every busy instance whose time is before ``t`` to
its first step boundary at or after ``t``, picking them with one comparison
over the axis. An idle instance does not move (its state cannot change while it
waits); it catches up when it next gets a request (:meth:`submit`).
"""

from __future__ import annotations

import numpy as np

from simulator.engine import EngineConfig, FastEngine, FastPool, WorkloadPrep
from simulator.workload import Workload


class Fleet:
    """``num_instances`` identical engine instances with their state as arrays over the instance axis.

    Parameters
    ----------
    workload : Workload
        Every request any instance may be given.
    config : EngineConfig
        Each instance's configuration (its own ``num_gpu_blocks``).
    num_instances : int
    prep : WorkloadPrep
        The workload's shared precomputation.
    record_steps : bool
        Keep each instance's step series.
    engine_factory : callable, optional
        Builds each instance (default :class:`FastEngine`; a subclass with the
        same constructor, such as :mod:`simulator.cluster.disaggregated`'s decode engine).

    Attributes
    ----------
    engines : list of FastEngine, length N
    now : ndarray of float64, shape (N,)
        Each instance's time (seconds, or schedule calls for arrivals in steps).
    busy : ndarray of bool, shape (N,)
        Something is running or waiting (or in flight) on the instance.
    waiting, running, free : ndarray of int64, shape (N,)
        Waiting requests, running requests, free KV blocks (cached-but-free
        count as free).  # requests, requests, blocks
    usable : int
        KV blocks an instance can hand out (``num_gpu_blocks - 1``; token
        slots for the radix cache).  # blocks
    block_size : int
        Tokens per content key (1 for the radix cache).  # tokens
    koff, keyarr
        The key space (:meth:`WorkloadPrep.keys`) the instances' caches use.
    kblock : ndarray of int64, shape (N, num_keys), or None
        The instances' hash tables, one row each (None without prefix caching).
    """

    def __init__(self, workload: Workload, config: EngineConfig, num_instances: int, *,
                 prep: WorkloadPrep, record_steps: bool = False, engine_factory=FastEngine) -> None:
        N = num_instances
        self.kblock: np.ndarray | None = None

        def pool_of(i: int):
            def make(num_gpu_blocks: int, caching: bool, num_keys: int) -> FastPool:
                if caching and self.kblock is None:
                    self.kblock = np.full((N, num_keys), -1, np.int64)
                return FastPool(num_gpu_blocks, caching, num_keys,
                                kblock=self.kblock[i] if caching else None)
            return make

        self.engines = [engine_factory(workload, config, prep=prep, record_steps=record_steps, pool_factory=pool_of(i))
                        for i in range(N)]
        first = self.engines[0]
        self.block_size = first.B
        self.koff, self.keyarr = first.koff, first.keyarr
        self.usable = first.pool.usable
        self.now = np.zeros(N)
        self.busy = np.zeros(N, bool)
        self.waiting = np.zeros(N, np.int64)
        self.running = np.zeros(N, np.int64)
        self.free = np.full(N, self.usable, np.int64)

    def __len__(self) -> int:
        return len(self.engines)

    def start(self) -> None:
        for i, e in enumerate(self.engines):
            e.start(external=True)
            self._sync(i)

    def _sync(self, i: int) -> None:
        """Copy instance ``i``'s router-visible state into the arrays."""
        e = self.engines[i]
        self.now[i] = e.now
        self.busy[i] = e.busy
        self.waiting[i] = len(e.requests.waiting)
        self.running[i] = e.num_running
        self.free[i] = e.pool.num_free()

    def advance(self, t: float) -> None:
        """Bring every busy instance to its first step boundary at or after ``t``."""
        for i in np.flatnonzero(self.busy & (self.now < t)).tolist():
            self.engines[i].advance(t)
            self._sync(i)

    def submit(self, i: int, q: int, t: float) -> None:
        """Request ``q`` arrives at instance ``i`` at time ``t`` (the instance catches up first)."""
        e = self.engines[i]
        if self.now[i] < t:
            e.advance(t)
        e.submit(q)
        self._sync(i)

    def finish(self) -> None:
        """Run every instance until its work is done, and close the runs."""
        for i, e in enumerate(self.engines):
            e.advance(None)
            e.close()
            self._sync(i)

    def kv_usage(self) -> np.ndarray:
        """Fraction of each instance's usable KV blocks not free, shape (N,)."""
        return 1.0 - self.free / self.usable

    def held_prefix(self, keys: np.ndarray) -> np.ndarray:
        """How many of ``keys`` (a prompt's leading content keys) each instance holds as a leading run,
        shape (N,), from the hash tables as they are now (GPU-resident blocks only)."""
        m = keys.size
        if self.kblock is None or not m:
            return np.zeros(len(self.engines), np.int64)
        hit = self.kblock[:, keys] >= 0
        return np.where(hit.all(axis=1), m, hit.argmin(axis=1))


__all__ = ["Fleet"]
