"""One engine configuration driven step by step, as vLLM 0.33.0's v1 scheduler.

This module is the decision kernel: :class:`EngineSim` owns the request
states, the waiting and running queues and a :class:`~tests.simulator.reference_blocks.BlockPool`,
and :meth:`EngineSim.run` drives them the way the project's oracle drives
vLLM (``schedule()`` → fake forward → ``update_from_output()``, or vLLM's
``step_with_batch_queue`` with a queue of depth 2 for async scheduling).

Rules and their sources (``vllm/v1/core/sched/scheduler.py`` unless noted):

* running pass first, in running order, while budget is left; new tokens =
  ``num_tokens + placeholders - computed``, capped by
  ``long_prefill_token_threshold`` only when more than one request is
  running or waiting, then by the budget and by ``max_model_len``;
* a running request that cannot get its blocks preempts ``running[-1]``
  (recompute: all blocks freed, computed tokens reset, generated tokens kept,
  victim prepended to waiting) until it fits or preempted itself;
* priority scheduling (``policy="priority"``; ``request_queue.py`` ``PriorityRequestQueue``,
  ``request.py`` ``Request.__lt__``): the waiting queue is kept in (priority, arrival, request)
  order, preempted requests included; the victim is ``max(running, key=(priority, arrival))``, the
  first such in running order; a victim scheduled earlier in the pass gives its tokens back; a
  request that preempted itself ends its turn, not the pass;
* the waiting pass runs only when nothing was preempted this step; it stops
  at the running cap, the budget, or the first request whose blocks do not
  fit (``scheduler_reserve_full_isl`` full-sequence gate, then the chunk);
  in async mode a preempted request whose stale output is still in flight is
  skipped for the step without blocking the queue;
* async scheduling: a scheduled decode adds an output placeholder; a running
  request whose in-flight token is its last is not scheduled again; outputs
  arrive one step late, and blocks of finished requests are freed then.

One schedule call at a time: no shortcut of the engine's (no decode jumps, no lazy decoders), so the
engine's accelerators are checked against plain stepping.

Time: the clock advances per schedule call through a *step-time function*
(``step_time(num_tokens, num_reqs) -> seconds``), so a later cost model can
replace the linear ``StepTimeModel`` without touching the kernel.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simulator.engine.config import EngineConfig, step_limit
from simulator.workload.requests import Workload
from tests.simulator.reference_blocks import BlockPool
from tests.simulator.reference_tiers import ScalarTiers

WAITING, RUNNING, PREEMPTED, FINISHED, DROPPED = 0, 1, 2, 3, 4

StepTimeFn = Callable[[int, int], float]


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative integers."""
    return -(-a // b)


class Req:
    """Mutable state of one request inside the kernel (vLLM's ``Request``)."""

    __slots__ = (
        "idx", "P", "max_tokens", "num_out", "computed", "ph", "in_flight",
        "stale", "status", "blocks", "ncached", "npre", "prefill_chunk",
        "first_sched", "first_token", "finish", "first_token_t", "finish_t",
        "hit_first",
    )

    def __init__(self, idx: int, prompt: int, max_tokens: int) -> None:
        self.idx = idx
        self.P = prompt            # tokens
        self.max_tokens = max_tokens
        self.num_out = 0           # output tokens received
        self.computed = 0          # tokens with KV (incl. in-flight placeholders)
        self.ph = 0                # async output placeholders
        self.in_flight = 0         # scheduled tokens whose output is pending
        self.stale = 0             # in-flight tokens from before a preemption
        self.status = WAITING
        self.blocks: list[int] = []
        self.ncached = 0           # leading blocks already published
        self.npre = 0
        self.prefill_chunk = False
        self.first_sched = -1
        self.first_token = -1
        self.finish = -1
        self.first_token_t = float("nan")
        self.finish_t = float("nan")
        self.hit_first = -1


@dataclass
class StepLog:
    """Per schedule call series (only calls that scheduled tokens or preempted)."""

    step: list[int] = field(default_factory=list)
    time_s: list[float] = field(default_factory=list)
    num_running: list[int] = field(default_factory=list)
    num_waiting: list[int] = field(default_factory=list)
    num_scheduled_tokens: list[int] = field(default_factory=list)
    kv_blocks_used: list[int] = field(default_factory=list)
    num_preempted: list[int] = field(default_factory=list)


class EngineSim:
    """Simulate one :class:`EngineConfig` over one :class:`Workload`.

    Parameters
    ----------
    workload : Workload
    config : EngineConfig
    step_time : callable, optional
        ``(num_scheduled_tokens, num_scheduled_reqs) -> seconds`` of one
        schedule call; defaults to the config's linear ``step_time_model``.
    record_steps : bool
        Keep the per-step series.
    """

    def __init__(self, workload: Workload, config: EngineConfig, *,
                 step_time: StepTimeFn | None = None, record_steps: bool = False) -> None:
        self.wl = workload
        self.cfg = config
        n = workload.n
        self.B = config.block_size
        self.pool = BlockPool(config.num_gpu_blocks, config.enable_prefix_caching)
        longest = int((workload.prompt_len + workload.output_len).max()) if n else 0
        self.max_model_len = config.max_model_len or max(longest + 16, config.max_num_batched_tokens)
        self.watermark_blocks = int(config.watermark * config.num_gpu_blocks)
        self.async_mode = config.async_scheduling
        stm = config.step_time_model
        self.step_time = step_time or (
            lambda t, r: stm.base_s + stm.per_token_s * t + stm.per_req_s * r)
        self.time_mode = workload.arrival_unit == "s"
        self.record_steps = record_steps
        self.log = StepLog() if record_steps else None
        self.reqs = [Req(i, int(p), int(o)) for i, (p, o) in
                     enumerate(zip(workload.prompt_len, workload.output_len))]
        self.running: list[Req] = []
        self.waiting: deque[Req] = deque()
        self.by_priority = config.policy == "priority"
        # block keys: canonical owner of each block's token content
        self._shared = workload.shared_len()
        self._parent = workload.parent
        self._pid = workload.prefix_id
        self._plen = workload.prefix_len
        self.t = dict(
            preemptions=0, finished=0, prefix_cache_queries=0, prefix_cache_hits=0,
            prefix_cache_requests=0, preempted_prefix_cache_queries=0,
            preempted_prefix_cache_hits=0, preempted_prefix_cache_requests=0,
            peak_kv_blocks_used=0, peak_running=0, peak_waiting=0, num_steps=0,
            num_schedule_calls=0, total_scheduled_tokens=0, total_prefill_tokens=0,
            total_decode_tokens=0, dropped_unservable=0, recomputed_tokens=0,
            requests_cut_short=0, kv_block_steps=0,
        )
        self.exec_step = 0
        self.clock = 0.0
        self.step_ends: list[float] = []  # the clock at the end of each step with tokens (for the token gaps)
        self.unfinished = 0
        self._init_cpu_tier()

    # -------------------------------------------------------------- CPU tier
    def _init_cpu_tier(self) -> None:
        """The KV tiers (``cpu_tier``, ``disk_tier``): every block evicted from the GPU is demoted into them, and
        a waiting request whose prefix continues there after its GPU hits loads those blocks first.

        The tier store is :class:`tests.simulator.reference_tiers.ScalarTiers` (one key at a time, an ordered
        dict per tier), not the engine's: the engine's tiers are held to it, not to themselves.
        """
        cfg = self.cfg
        self.tiers = None
        self.offload_at = None
        self.loading: dict[int, float] = {}  # request -> time its loaded blocks are on the GPU
        self._onboard_gate: int | None = None
        tiers = [(name, t) for name, t in (("cpu", cfg.cpu_tier), ("disk", cfg.disk_tier)) if t is not None]
        if not tiers or not cfg.enable_prefix_caching:
            return
        assert cfg.prefix_cache == "vllm"
        self.tiers = ScalarTiers(tiers, cfg.kv_bytes_per_block)
        self.pool.on_evict = self.tiers.demote
        if cfg.kv_offload_threshold is not None:
            self.offload_at = int(cfg.kv_offload_threshold * self.pool.usable)

    def _offload_early(self) -> None:
        """``kv_offload_threshold``: after a schedule call, while the GPU holds more than the threshold's blocks
        (in use or cached), the least recently freed cached blocks are demoted to the CPU tier and become
        plain free blocks at the head of the free queue."""
        pool = self.pool
        cached_free = [b for b in pool.free if b in pool.hash_of]
        over = (pool.usable - (pool.num_free() - len(cached_free))) - self.offload_at
        if over > 0 and cached_free:
            pool.offload(cached_free[:over], self.exec_step)

    def _start_onboard(self, q: Req, hit_blocks: list[int], m: int) -> bool:
        """Start loading ``q``'s prefix blocks after its GPU hits from the tier (True), or not: no room
        for one block beyond the hits, none in the tier, or no room for those it holds."""
        pool, B = self.pool, self.B
        nh = len(hit_blocks)
        evictable = sum(1 for b in hit_blocks if pool.ref.get(b, 0) == 0)
        wm = self.watermark_blocks if self.running else 0
        free = pool.num_free()
        if 1 + evictable + wm > free:
            return False
        rest = [self.key(q.idx, j) for j in range(nh, m)]
        counts = self.tiers.match(rest)
        k = sum(counts)
        if not k or k + evictable + wm > free:
            return False
        if hit_blocks:
            pool.touch(hit_blocks)
        q.blocks = list(hit_blocks) + pool.allocate(k)
        for j in range(nh, nh + k):
            pool.cache(q.blocks[j], self.key(q.idx, j))
        q.ncached = nh + k
        self.loading[q.idx] = self.tiers.onboard(rest[:k], counts, B, self.clock)
        return True

    def _wait_for_loads(self, next_arrival) -> None:
        """Nothing runs and nothing was scheduled: the clock moves to the first load done (or the
        next arrival, in seconds). If every load is done yet nothing could be admitted, the loaded
        requests let their blocks go (they stay cached) and no request starts loads until the head
        of the queue has finished (a load stall)."""
        nxt_t = min(self.loading.values())
        if nxt_t <= self.clock:
            for r in list(self.loading):
                self._free(self.reqs[r])
            self.loading.clear()
            self.tiers.load_stalls += 1
            self._onboard_gate = self.waiting[0].idx if self.waiting else None
        if next_arrival is not None:
            nxt_t = min(nxt_t, next_arrival)
        self.clock = max(self.clock, nxt_t)

    # ---------------------------------------------------------------- content
    def key(self, r: int, j: int) -> int:
        """Integer standing for vLLM's chained hash of block ``j`` of request ``r``."""
        end = (j + 1) * self.B
        parent, shared, pid = self._parent, self._shared, self._pid
        while parent[r] >= 0 and end <= shared[r]:
            r = int(parent[r])
        if parent[r] < 0 and pid[r] >= 0 and end <= self._plen[pid[r]]:
            return ((self.wl.n + int(pid[r])) << 32) | j
        return (r << 32) | j

    def _cache_blocks(self, q: Req, num_tokens: int) -> None:
        """Publish ``q``'s full blocks up to ``num_tokens`` (vLLM ``cache_blocks``)."""
        if not self.pool.caching:
            return
        full = num_tokens // self.B
        if q.ncached >= full:
            return
        for j in range(q.ncached, full):
            self.pool.cache(q.blocks[j], self.key(q.idx, j))
        q.ncached = full

    # ------------------------------------------------------------- allocation
    def _allocate_running(self, q: Req, n: int) -> bool:
        need = min(q.computed + n, self.max_model_len)
        new = cdiv(need, self.B) - len(q.blocks)
        if new > self.pool.num_free():
            return False
        if new > 0:
            q.blocks.extend(self.pool.allocate(new))
        self._cache_blocks(q, min(q.computed + n, q.P + q.num_out))
        return True

    def _free(self, q: Req) -> None:
        self.pool.release(q.blocks)
        q.blocks = []
        q.ncached = 0

    def _preempt(self, q: Req) -> None:
        self._free(q)
        self.t["recomputed_tokens"] += 0  # counted at re-admission
        q.status = PREEMPTED
        q.computed = 0
        q.stale = q.in_flight
        q.ph = 0
        q.npre += 1
        self._enqueue(q, front=True)

    def _enqueue(self, q: Req, front: bool) -> None:
        """FCFS: an arrival at the back, a preempted request at the front. Priority: every request in its
        (priority, arrival, index) place."""
        if not self.by_priority:
            if front:
                self.waiting.appendleft(q)
            else:
                self.waiting.append(q)
            return
        key = self._wait_key(q)
        i = 0
        while i < len(self.waiting) and self._wait_key(self.waiting[i]) < key:
            i += 1
        self.waiting.insert(i, q)

    def _wait_key(self, q: Req) -> tuple:
        return (int(self.wl.priority[q.idx]), float(self.wl.arrival[q.idx]), q.idx)

    def _victim_key(self, q: Req) -> tuple:
        return (int(self.wl.priority[q.idx]), float(self.wl.arrival[q.idx]))

    # --------------------------------------------------------------- schedule
    def schedule(self) -> tuple[list[tuple[Req, int, bool]], int]:
        """One ``Scheduler.schedule()``.

        Returns
        -------
        scheduled : list of (Req, int, bool)
            Scheduled requests in order, their tokens, and whether the step
            samples a token for them (the prefill is complete).
        num_preempted : int
        """
        cfg = self.cfg
        B = self.B
        pool = self.pool
        budget = cfg.max_num_batched_tokens
        running = self.running
        waiting = self.waiting
        thr = cfg.long_prefill_token_threshold if len(running) + len(waiting) > 1 else 0
        sched: list[tuple[Req, int]] = []
        npre = 0
        mml = self.max_model_len
        i = 0
        while i < len(running) and budget > 0:
            q = running[i]
            if q.ph > 0 and q.computed + 2 - q.ph >= q.P + q.max_tokens:
                i += 1
                continue
            n = q.P + q.num_out + q.ph - q.computed
            if 0 < thr < n:
                n = thr
            n = min(n, budget, mml - q.computed - 1)
            if n <= 0:
                i += 1
                continue
            ok = False
            while True:
                if self._allocate_running(q, n):
                    ok = True
                    break
                if self.by_priority:
                    victim = max(running, key=self._victim_key)
                    vi = running.index(victim)
                    del running[vi]
                    if vi < i:
                        i -= 1
                    for j, (r, rn) in enumerate(sched):
                        if r is victim:
                            del sched[j]
                            budget += rn
                            break
                else:
                    victim = running.pop()
                self._preempt(victim)
                npre += 1
                if victim is q:
                    break
            if not ok:
                if self.by_priority:
                    continue
                break
            sched.append((q, n))
            budget -= n
            i += 1

        if npre == 0:
            skipped: list[Req] = []
            caching = pool.caching
            while budget > 0 and waiting:
                if len(running) >= cfg.max_num_seqs:
                    break
                q = waiting[0]
                if q.stale > 0:
                    skipped.append(waiting.popleft())
                    continue
                ready = self.loading.get(q.idx)
                if ready is not None:
                    if ready > self.clock:
                        skipped.append(waiting.popleft())
                        continue
                    del self.loading[q.idx]
                    self._free(q)  # its loaded blocks stay cached: the lookup below finds them
                num_tokens = q.P + q.num_out
                hit_blocks: list[int] = []
                m = (num_tokens - 1) // B
                if caching:
                    for j in range(m):
                        b = pool.lookup(self.key(q.idx, j))
                        if b is None:
                            break
                        hit_blocks.append(b)
                if caching and m > 0:
                    g = self._onboard_gate
                    if g is not None and self.reqs[g].status >= FINISHED:
                        g = self._onboard_gate = None
                    if (self.tiers is not None and len(hit_blocks) < m and g is None
                            and self._start_onboard(q, hit_blocks, m)):
                        skipped.append(waiting.popleft())
                        continue
                h = len(hit_blocks) * B
                n = num_tokens - h
                if 0 < thr < n:
                    n = thr
                if not cfg.enable_chunked_prefill and n > budget:
                    break
                n = min(n, budget)
                # KVCacheManager.allocate_slots for a waiting request
                wm = self.watermark_blocks if running else 0
                evictable = sum(1 for b in hit_blocks if pool.ref.get(b, 0) == 0)
                free = pool.num_free()
                if cfg.scheduler_reserve_full_isl:
                    full = min(num_tokens, mml)
                    need_full = max(cdiv(full, B) - len(hit_blocks), 0) + evictable
                    if need_full + wm > free:
                        break
                need_slot = min(h + n, mml)
                new = max(cdiv(need_slot, B) - len(hit_blocks), 0)
                if new + evictable + wm > free:
                    break
                if hit_blocks:
                    pool.touch(hit_blocks)
                q.blocks = list(hit_blocks)
                q.ncached = len(hit_blocks)
                if new > 0:
                    q.blocks.extend(pool.allocate(new))
                self._cache_blocks(q, min(h + n, num_tokens))
                if caching:
                    t = self.t
                    if q.npre > 0:
                        t["preempted_prefix_cache_queries"] += num_tokens
                        t["preempted_prefix_cache_hits"] += h
                        t["preempted_prefix_cache_requests"] += 1
                    else:
                        t["prefix_cache_queries"] += num_tokens
                        t["prefix_cache_hits"] += h
                        t["prefix_cache_requests"] += 1
                if q.npre > 0:
                    self.t["recomputed_tokens"] += num_tokens - h
                waiting.popleft()
                running.append(q)
                if q.status == WAITING:
                    q.first_sched = self.exec_step
                    q.hit_first = h
                q.status = RUNNING
                q.computed = h
                sched.append((q, n))
                budget -= n
            if skipped and self.by_priority:
                for q in skipped:
                    self._enqueue(q, front=True)
            elif skipped:
                waiting.extendleft(reversed(skipped))

        # _update_after_schedule (+ AsyncScheduler placeholders)
        out = []
        for q, n in sched:
            q.computed += n
            q.in_flight += n
            q.prefill_chunk = q.computed < q.P + q.num_out + q.ph
            sampled = not q.prefill_chunk
            if self.async_mode and sampled:
                q.ph += 1
            out.append((q, n, sampled))
        return out, npre

    # ---------------------------------------------------------------- outputs
    def process(self, sched: list[tuple[Req, int, bool]], step: int, t_end: float) -> None:
        """One ``update_from_output()`` for a schedule call's batch."""
        finished: list[Req] = []
        for q, n, sampled in sched:
            q.in_flight -= n
            stale = False
            if q.stale > 0:
                stale = True
                q.stale -= n
            if q.status == FINISHED or not sampled:
                continue
            status_before = q.status
            had_ph = q.ph > 0
            q.num_out += 1
            if q.first_token < 0:
                q.first_token = step
                q.first_token_t = t_end
            stopped = q.num_out >= q.max_tokens or q.P + q.num_out >= self.max_model_len
            if not stale and q.ph > 0:
                q.ph -= 1
            if not stale and status_before == RUNNING and had_ph:
                self._cache_blocks(q, q.computed - q.in_flight)
            if stopped:
                q.finish = step
                q.finish_t = t_end
                if q.num_out < q.max_tokens:
                    self.t["requests_cut_short"] += 1
                self._free(q)
                finished.append(q)
        if finished:
            for q in finished:
                if q.status == RUNNING:
                    self.running.remove(q)
                else:
                    self.waiting.remove(q)
                q.status = FINISHED
            self.t["finished"] += len(finished)

    # ------------------------------------------------------------------- run
    def _unservable(self) -> np.ndarray:
        """Requests that can never complete: their whole context cannot fit."""
        wl = self.wl
        usable = self.pool.usable
        ctx = np.minimum(wl.prompt_len + wl.output_len - 1, self.max_model_len)
        return (-(-ctx // self.B) > usable) | (wl.prompt_len >= self.max_model_len)

    def run(self, progress: Callable[[float], None] | None = None) -> None:
        """Drive the engine until every request finished or was dropped."""
        wl = self.wl
        limit = step_limit(self.cfg, wl)
        n = wl.n
        order = np.argsort(wl.arrival, kind="stable")
        arrival = wl.arrival
        drop = self._unservable()
        reqs = self.reqs
        pending = 0
        tick = 0
        depth = 2 if self.async_mode else 1
        queue: deque = deque()
        t = self.t
        pool = self.pool
        usable = pool.usable
        time_mode = self.time_mode
        log = self.log
        next_report = 0.05
        while True:
            now = self.clock if time_mode else tick
            while pending < n and arrival[order[pending]] <= now:
                q = reqs[order[pending]]
                pending += 1
                if drop[q.idx]:
                    q.status = DROPPED
                    t["dropped_unservable"] += 1
                else:
                    self._enqueue(q, front=False)
            has_req = bool(self.running or self.waiting)
            if not has_req and not queue:
                if pending >= n:
                    break
                nxt = arrival[order[pending]]
                if time_mode:
                    self.clock = max(self.clock, float(nxt))
                else:
                    tick = max(tick, int(nxt))
                continue
            if tick >= limit:
                break
            if has_req:
                pool.now = self.exec_step
                sched, npre = self.schedule()
                t["num_schedule_calls"] += 1
                ntok = 0
                n_prefill = 0
                for q, k, sampled in sched:
                    ntok += k
                    if not sampled or k > 1:
                        n_prefill += k
                t["preemptions"] += npre
                used = usable - pool.num_free()
                if used > t["peak_kv_blocks_used"]:
                    t["peak_kv_blocks_used"] = used
                nr, nw = len(self.running), len(self.waiting)
                if nr > t["peak_running"]:
                    t["peak_running"] = nr
                if nw > t["peak_waiting"]:
                    t["peak_waiting"] = nw
                step = self.exec_step
                if log is not None and (ntok > 0 or npre > 0):
                    log.step.append(step)
                    log.time_s.append(self.clock)
                    log.num_running.append(nr)
                    log.num_waiting.append(nw)
                    log.num_scheduled_tokens.append(ntok)
                    log.kv_blocks_used.append(used)
                    log.num_preempted.append(npre)
                if ntok > 0:
                    t["num_steps"] += 1
                    t["total_scheduled_tokens"] += ntok
                    t["total_prefill_tokens"] += n_prefill
                    t["total_decode_tokens"] += ntok - n_prefill
                    t["kv_block_steps"] += used
                    self.exec_step += 1
                tick += 1
                self.clock += self.step_time(ntok, len(sched))
                if ntok > 0:
                    self.step_ends.append(self.clock)
                if self.loading and ntok == 0 and not self.running:
                    self._wait_for_loads(float(arrival[order[pending]]) if pending < n and time_mode else None)
                if self.offload_at is not None:
                    self._offload_early()
                queue.appendleft((sched, step, self.clock))
                if len(queue) < depth and (ntok > 0 or self.running or self.waiting):
                    continue
            elif not queue:
                continue
            sched, step, t_end = queue.pop()
            self.process(sched, step, t_end)
            if progress is not None and n and t["finished"] / n >= next_report:
                progress(min(1.0, (t["finished"] + t["dropped_unservable"]) / n))
                next_report += 0.05
        self.unfinished = sum(1 for q in reqs if q.status not in (FINISHED, DROPPED))
