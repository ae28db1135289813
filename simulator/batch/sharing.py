"""Configurations that share one schedule: run one, derive the others exactly.

A sweep over KV blocks and running caps has many points where neither binds:
past the preemption cliff every block count gives the same schedule, and a cap
above the peak number of running requests never stops an admission. Such
configurations make the same decisions at every step, so their results differ
only in what the number of blocks measures directly.

**When two configurations make the same decisions.** Configurations that are
equal in every field but ``num_gpu_blocks`` and ``max_num_seqs`` (no KV tier,
no watermark, the vLLM prefix cache, no per-configuration cost hook) over a
workload whose content keys are each request's own (no shared prefix or
conversation) decide differently only where a cap or a free-block count is
compared:

* the cap: a run whose running requests peaked at ``p`` never compared the
  cap ``c`` with effect when ``p < c``; two caps above ``p`` give its schedule;
* free blocks: every check compares a need with the free blocks, and a pool of
  ``d`` blocks fewer has ``d`` fewer free blocks at every step while the
  schedules agree. The engine records the closest margins of its checks
  (:meth:`simulator.engine.core.FastPool.check_passed` and ``check_failed``):
  with ``d <= slack`` and ``-d < excess`` every check ends the same way;
* prefix hits: with own keys a request can only hit its own blocks after a
  preemption, and which of them survive depends on the pool. A run without
  preemptions has no hits in any pool size;
* unservable requests: the same ones must be dropped.

**What differs.** The block ids: in a smaller pool the first blocks freed come
back sooner. The pools of the other block counts (*shadow pools*) receive the
leader's allocations and releases in order and keep their own free queues, so
evictions and block residency come out as a run of their own would give them.
``kv_usage`` fractions are divided by their own usable blocks.

Every derived result is identical to simulating that configuration alone
(``tests/simulator/test_sharing.py`` compares them, JSON byte for byte).
A configuration the run does not cover runs as a leader in turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from simulator.engine import EngineConfig, FastPool, may_share_schedules

VARYING = ("num_gpu_blocks", "max_num_seqs")  # the fields a shared schedule may differ in


def share_key(cfg: EngineConfig, prep):
    """The configurations that may share a schedule with ``cfg`` have this key (None: none may).

    ``prep`` is the workload's :class:`simulator.engine.core.WorkloadPrep`.
    """
    # (own keys: no shared prefix, no conversation; see simulator/engine/accelerators.py, "shared_schedules")
    if not (may_share_schedules(cfg) and prep.keys(cfg.block_size).keyarr is None):
        return None
    return tuple(repr(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in VARYING)


class ShadowPools:
    """Pools of other sizes fed the leader's allocations and releases: their metrics, without block ids.

    With own keys and no prefix hits a pool is :class:`FastPool`'s queue: a
    stack of unhashed free blocks popped first (blocks pushed by releases on
    top of the fresh ones), then a FIFO of hashed free blocks, each pop from it
    an eviction. Pools of different sizes receive the same releases in the same
    order and differ only in how many fresh blocks they started with. So what
    their metrics need, the step each queued block was allocated at, is the same
    sequence in every pool:

    * the pushed part of every stack is the same (pops take the top ``k``, pushes
      add the same steps), kept once in ``pushed``;
    * every FIFO holds the same sequence of steps, kept as prefix sums ``fsum``;
      pool ``i`` has popped its first ``head[i]`` entries;
    * a pool's fresh blocks (``nfresh[i]``) are taken after the pushed ones and
      before the FIFO.

    Block lifetimes then follow without ids: each reallocation adds
    ``now - step allocated before``.
    """

    def __init__(self, sizes: Sequence[int], lead_usable: int) -> None:
        self.sizes = np.asarray(sizes, np.int64)
        self.delta = lead_usable - (self.sizes - 1)  # usable blocks fewer than the leader's
        self.nfresh = self.sizes - 1
        self.fresh_now = np.zeros(self.sizes.size, np.int64)  # sum of `now` over fresh pops
        self.head = np.zeros(self.sizes.size, np.int64)
        self.fresh_left = bool(self.sizes.size)
        self.shift = 0  # FIFO pops common to every pool once none has fresh blocks left
        self.pushed: list[int] = []
        self.pushed_popped = 0  # sum of the steps popped from the pushed stack
        # fsum[p - base]: sum of the first p FIFO steps (positions before every head dropped)
        self.fsum = np.zeros(1024, np.int64)
        self.base = 0
        self.tail = 0
        self.total_k = 0
        self.total_now = 0
        # With a KV tier (``tiered``, set before the first allocation): every FIFO key in order, and
        # per pool the demotion transfers its evictions make (distinct steps with an eviction, as
        # TierChain.demote counts them) and the step of its last eviction; once every pool's last
        # eviction step is the same (``c_last``), new transfers count in ``c_transfers`` for all.
        self.tiered: bool | None = None
        self.fkeys = np.zeros(0, np.int64)
        self.transfers = np.zeros(self.sizes.size, np.int64)
        self.last_step = np.full(self.sizes.size, -1, np.int64)
        self.c_last: int | None = None
        self.c_transfers = 0
        self._set()

    def _set(self) -> None:
        self.n = int(self.sizes.size)
        self.dmax = int(self.delta.max()) if self.n else 0
        self.dmin = int(self.delta.min()) if self.n else 0

    def keep(self, ok: np.ndarray) -> None:
        """Keep only the pools where ``ok``."""
        self._settle()
        self._settle_transfers()
        for name in ("sizes", "delta", "nfresh", "fresh_now", "head", "transfers", "last_step"):
            setattr(self, name, getattr(self, name)[ok])
        self._set()

    def prune(self, slack: int, excess: int) -> None:
        """Drop the pools whose checks could have ended otherwise."""
        self.keep((self.delta <= slack) & (-self.delta < excess))

    def _settle(self) -> None:
        if self.shift:
            self.head += self.shift
            self.shift = 0

    def allocate(self, k: int, now) -> None:
        """The leader took ``k`` blocks at step(s) ``now`` (int, or one per block)."""
        arr = type(now) is np.ndarray
        self.total_k += k
        self.total_now += int(now.sum()) if arr else now * k
        pushed = self.pushed
        a = k if k <= len(pushed) else len(pushed)
        if a:
            self.pushed_popped += sum(pushed[-a:])
            del pushed[-a:]
        r = k - a
        if not r:
            return
        if self.fresh_left:
            f = np.minimum(self.nfresh, r)
            if arr:
                cs = np.concatenate(([0], np.cumsum(now)))
                self.fresh_now += cs[a + f] - cs[a]
            else:
                self.fresh_now += now * f
            self.nfresh -= f
            self.head += r - f
            if self.tiered:
                self._count_transfers_each(now, a + f, k)
            self.fresh_left = bool(self.nfresh.any())
            over = self.head > self.tail
        else:
            self.shift += r
            if self.tiered:
                self._count_transfers_all(now, a, k)
            over = None if int(self.head.max()) + self.shift <= self.tail else self.head + self.shift > self.tail
        if over is not None and over.any():  # cannot happen while every check ends the same way; a guard
            self.keep(~over)

    def _count_transfers_each(self, now, start: np.ndarray, k: int) -> None:
        """Pool ``i`` evicted the blocks ``start[i]:k`` of an allocation at step(s) ``now``."""
        self._settle_transfers()
        for i in np.flatnonzero(start < k).tolist():
            if type(now) is np.ndarray:
                first, last, distinct = _distinct_steps(now[start[i]:k])
            else:
                first = last = now
                distinct = 1
            self.transfers[i] += distinct - (first == self.last_step[i])
            self.last_step[i] = last

    def _count_transfers_all(self, now, a: int, k: int) -> None:
        """Every pool evicted the blocks ``a:k`` of an allocation at step(s) ``now``."""
        if type(now) is np.ndarray:
            first, last, distinct = _distinct_steps(now[a:k])
        else:
            first = last = now
            distinct = 1
        if self.c_last is None:
            self.transfers += distinct - (self.last_step == first)
            self.last_step[:] = last
        else:
            self.c_transfers += distinct - (first == self.c_last)
        self.c_last = last

    def _settle_transfers(self) -> None:
        if self.c_last is not None:
            self.transfers += self.c_transfers
            self.last_step[:] = self.c_last
            self.c_transfers = 0
            self.c_last = None

    def release(self, steps: np.ndarray, nhashed: int, keys: np.ndarray | None = None) -> None:
        """The leader released a request's blocks, allocated at ``steps`` (the first ``nhashed`` hashed),
        as :meth:`FastPool.release_own` without ``keep``: hashed ones to the FIFO, last first."""
        if nhashed:
            seq = steps[nhashed - 1::-1] if nhashed < steps.size else steps[::-1]
            t = self.tail - self.base
            if t + nhashed + 1 > self.fsum.size:
                self._grow(nhashed)
                t = self.tail - self.base
            self.fsum[t + 1:t + 1 + nhashed] = self.fsum[t] + np.cumsum(seq)
            if keys is not None:  # the hashed blocks' keys, in the order they enter the FIFO
                t = self.tail
                if t + nhashed > self.fkeys.size:
                    self.fkeys = np.concatenate((self.fkeys, np.zeros(max(self.fkeys.size, 1024) + nhashed,
                                                                      np.int64)))
                self.fkeys[t:t + nhashed] = keys
            self.tail += nhashed
        if nhashed < steps.size:
            self.pushed.extend(steps[nhashed:].tolist())

    def _grow(self, extra: int) -> None:
        """Room for ``extra`` more FIFO entries: drop the sums before every pool's head, double if needed."""
        self._settle()
        lo = int(self.head.min()) if self.n else self.tail
        keep = self.fsum[lo - self.base:self.tail - self.base + 1]
        size = self.fsum.size
        if keep.size + extra > size // 2:
            size = 2 * (keep.size + extra) + 1024
        fsum = np.zeros(size, np.int64)
        fsum[:keep.size] = keep
        self.fsum = fsum
        self.base = lo

    def metrics(self, size: int) -> PoolMetrics | None:
        """The pool of ``size`` blocks, if it is still shadowed."""
        self._settle()
        hit = np.flatnonzero(self.sizes == size)
        if not hit.size:
            return None
        i = int(hit[0])
        head = int(self.head[i])
        fresh_pops = size - 1 - int(self.nfresh[i])
        life = (self.total_now - int(self.fresh_now[i])) - (self.pushed_popped + int(self.fsum[head - self.base]))
        self._settle_transfers()
        return PoolMetrics(usable=size - 1, evictions=head, reuses=self.total_k - fresh_pops,
                           lifetime_sum=life, idle_sum=life, transfers=int(self.transfers[i]))

    def evicted_keys(self, m: PoolMetrics) -> np.ndarray:
        """With a tier: the keys pool ``m`` evicted, in order (its first ``evictions`` FIFO entries)."""
        return self.fkeys[:m.evictions]


def _distinct_steps(steps: np.ndarray) -> tuple[int, int, int]:
    """First, last and number of distinct steps of per-block steps in step order (not empty)."""
    first, last = int(steps[0]), int(steps[-1])
    if first == last:
        return first, last, 1
    return first, last, 1 + int(np.count_nonzero(steps[1:] != steps[:-1]))


@dataclasses.dataclass(frozen=True)
class PoolMetrics:
    """What :func:`simulator.engine.results.assemble_result` reads of a pool."""

    usable: int
    evictions: int
    reuses: int
    lifetime_sum: int
    idle_sum: int
    transfers: int = 0  # with a tier: its demotion transfers


class SharedPool(FastPool):
    """The leader's pool; its allocations and releases also go to the shadow pools."""

    shadow: ShadowPools

    def allocate(self, k: int, now) -> np.ndarray:
        sh = self.shadow
        if sh.tiered is None:  # the engine sets on_evict (a KV tier) before the first allocation
            sh.tiered = self.on_evict is not None
        if sh.n:
            if self.slack < sh.dmax or self.excess <= -sh.dmin:
                sh.prune(self.slack, self.excess)
            if sh.n and k:
                sh.allocate(k, now)
        return super().allocate(k, now)

    def release_own(self, blocks: np.ndarray, nhashed: int, k0: int = 0, keep: bool = False) -> None:
        sh = self.shadow
        if sh.n:
            if keep:  # a preemption: the request may hit these blocks again, as each pool's queue decides
                sh.keep(np.zeros(sh.n, bool))
            else:
                sh.release(self.born[blocks], nhashed,
                           np.arange(k0 + nhashed - 1, k0 - 1, -1) if sh.tiered and nhashed else None)
        super().release_own(blocks, nhashed, k0, keep)

    def release(self, blocks: np.ndarray) -> None:
        raise AssertionError("shared schedules need own keys (release_own)")


def shared_pool_factory(sizes: Sequence[int]) -> Callable[[int, bool, int], SharedPool]:
    """A ``pool_factory`` for :class:`simulator.engine.core.FastEngine` whose pool shadows ``sizes``."""
    def make(num_gpu_blocks: int, caching: bool, num_keys: int) -> SharedPool:
        pool = SharedPool(num_gpu_blocks, caching, num_keys)
        pool.shadow = ShadowPools(sizes, num_gpu_blocks - 1)
        return pool
    return make


def covers(sim, cfg: EngineConfig, drop_of: Callable[[int], np.ndarray]):
    """How the finished leader ``sim`` gives ``cfg``'s result: ``(pool, tiers)`` (the leader's own, or a
    shadow pool's metrics and its KV tiers fed that pool's evictions), or None.

    ``drop_of(usable)`` is the unservable mask for a pool of that many usable blocks.
    """
    lead = sim.cfg
    t = sim.t
    if cfg.max_num_seqs != lead.max_num_seqs and t["peak_running"] >= min(cfg.max_num_seqs, lead.max_num_seqs):
        return None
    if cfg.num_gpu_blocks == lead.num_gpu_blocks:
        return sim.pool, sim.tiers
    pool = sim.pool
    if t["preemptions"] or not isinstance(pool, SharedPool):
        return None
    tiers = sim.tiers
    if tiers is not None and (tiers.reads or any(tiers.onboarded) or tiers.load_stalls):
        return None  # the tier was read: what it held mattered
    d = lead.num_gpu_blocks - cfg.num_gpu_blocks  # usable blocks fewer than the leader's
    if not (d <= pool.slack and -d < pool.excess):
        return None  # some check would have ended otherwise
    m = pool.shadow.metrics(cfg.num_gpu_blocks)
    if m is None or not np.array_equal(drop_of(m.usable), sim._drop):
        return None
    if tiers is None:
        return m, None
    # a tier nobody read: what it holds is what this pool's evictions, in order, put there
    chain = tiers.empty_copy()
    chain.demoted_in_bulk(pool.shadow.evicted_keys(m), m.transfers)
    return m, chain


class LeaderQueue:
    """Which configuration to run next, and which others it may cover.

    Within a share group, leaders go by block count then cap, largest first.
    While a leader runs, configurations with its block count or its cap wait
    (it may well cover them) if anything else can run.
    """

    def __init__(self, configs: Sequence[EngineConfig], keys: Sequence) -> None:
        self.configs = configs
        self.left: dict = {}
        for b, key in enumerate(keys):
            self.left.setdefault(("alone", b) if key is None else key, []).append(b)
        for lst in self.left.values():
            lst.sort(key=lambda b: (configs[b].num_gpu_blocks, configs[b].max_num_seqs), reverse=True)
        self.running: dict[int, object] = {}  # leader -> its group key

    def next(self) -> tuple[int, list[int]] | None:
        """``(leader, candidates)``, or None when nothing should start now."""
        first = None
        for key, lst in self.left.items():
            busy = [self.configs[b] for b, k in self.running.items() if k == key]
            for b in lst:
                if b in self.running:
                    continue
                c = self.configs[b]
                if first is None:
                    first = (key, b)
                if not any(c.num_gpu_blocks == r.num_gpu_blocks or c.max_num_seqs == r.max_num_seqs for r in busy):
                    return self._start(key, b)
        if first is not None and not self.running:
            return self._start(*first)
        return None

    def _start(self, key, b: int) -> tuple[int, list[int]]:
        self.running[b] = key
        others = [x for x in self.left[key] if x != b and x not in self.running]
        return b, others

    def done(self, lead: int, finished: Sequence[int]) -> None:
        key = self.running.pop(lead)
        gone = set(finished)
        lst = [b for b in self.left.get(key, ()) if b not in gone]
        if lst:
            self.left[key] = lst
        else:
            self.left.pop(key, None)

    def empty(self) -> bool:
        return not self.left
