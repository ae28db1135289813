"""The engine: vLLM 0.33.0's v1 scheduler over struct-of-arrays state, assembled from its parts.

Same rules and the same results, bit for bit, as the scalar reference kernel
(``tests/simulator/reference_core.py``, which the oracle cases pin to vLLM). The parts
(``docs/simulator.md``, "Engine map") are objects the engine holds, each documenting what it owns,
what it reads and its calls:

* ``requests``: :class:`simulator.engine.request_state.RequestState` (per-request arrays, the queues; a
  request's block table is a slice of one flat array, ``btab[koff[r]:koff[r] + held[r]]``);
* ``pool``: :class:`simulator.engine.pool.FastPool` (allocate, release, lookup, publish, ``can_allocate``;
  it records the free-block margins :mod:`simulator.batch.sharing` needs), with ``tiers``
  (:class:`simulator.engine.tiers.TierChain`) attached as where its evictions go;
* ``drafts``: :class:`simulator.speculative.SpecDecoding` (speculative decoding's state; None without);
* ``step_clock``: :class:`simulator.engine.step_clock.StepClock` (steps to seconds: linear model, cost model
  terms or a batched hook);
* ``loads``: :class:`simulator.engine.tier_loads.TierLoads` (blocks loading for waiting requests: tier
  onboarding, a hook's transfers; early offloads);
* ``scheduler``: :class:`simulator.engine.scheduler.Scheduler` (vLLM's rules over the request state, the pool,
  the tiers, the loads, the drafts and the hooks: schedule the running queue, preempt, admit, process a step's
  outputs, finish);
* ``jumps``: :class:`simulator.engine.decode_jumps.DecodeJumps` (accelerator: decode-only stretches in one go;
  None where the run does not take it);
* ``lazy``: :class:`simulator.engine.lazy_decoders.LazyDecoders` (accelerator over the scheduler: steady
  decoders kept implicit, with the lazy windows; None where the run does not take it);
* ``hooks``: :class:`simulator.engine.hooks.EngineHooks` (where a deployment plugs in; None: none).

:class:`FastEngine` has no base class and no part works on it: only the hooks are handed the engine (their
interface, :mod:`simulator.engine.hooks`); a part that calls back into another holds that part's method
(weakly where that part holds it: :func:`_weak_call`). All accelerators are off with ``accelerate=False``
(results unchanged); :mod:`simulator.engine.accelerators` says which runs each supports.

This module builds the parts and holds the loop that drives one schedule call after another
(:meth:`FastEngine.advance`), with the engine's time (``clock``, ``exec_step``, schedule calls), which it
hands the scheduler before each schedule call (:meth:`Scheduler.at`) and the accelerators as arguments.
"""

from __future__ import annotations

import weakref
from array import array
from collections import deque
from collections.abc import Callable

import numpy as np

from simulator.clock import overlapped
from simulator.engine.accelerators import RunFacts, choose
from simulator.engine.config import EngineConfig, step_limit
from simulator.engine.decode_jumps import DecodeJumps, log_decode_steps
from simulator.engine.hooks import EngineHooks
from simulator.engine.keyspace import KeySpace, WorkloadPrep, cdiv, index_dtype
from simulator.engine.lazy_decoders import LazyDecoders
from simulator.engine.pool import FastPool
from simulator.engine.request_state import RequestState
from simulator.engine.scheduler import DROPPED, FINISHED, PREEMPTED, RUNNING, WAITING, Scheduler
from simulator.engine.step_clock import StepClock
from simulator.engine.tier_loads import TierLoads
from simulator.engine.tiers import TierChain
from simulator.speculative import SpecDecoding
from simulator.workload import Workload

__all__ = ["DROPPED", "FINISHED", "PREEMPTED", "RUNNING", "WAITING", "FastEngine", "KeySpace",
           "StepTimeFn", "WorkloadPrep", "cdiv"]

StepTimeFn = Callable[[int, int], float]


def _weak_call(method: Callable) -> Callable:
    """``method`` (a part's own) as another part it holds may hold it without keeping it alive (the loads hold the
    scheduler's ``release``; the scheduler holds the loads): a bound method held back is a reference cycle, and a
    finished engine's arrays (hundreds of MiB at 100,000 requests) then waited for the cyclic garbage collector, one
    engine after another in a batch."""
    ref = weakref.WeakMethod(method)

    def call(*args, **kwargs):
        return ref()(*args, **kwargs)

    return call


class FastEngine:
    """Simulate one :class:`EngineConfig` over one :class:`Workload` (array kernel).

    Parameters
    ----------
    workload : Workload
    config : EngineConfig
    step_time : callable, optional
        ``(num_scheduled_tokens, num_scheduled_reqs) -> seconds``; defaults to
        the config's linear ``step_time_model``.
    record_steps : bool
    prep : WorkloadPrep, optional
        Shared precomputation (batches).
    pool_factory : callable, optional
        ``(num_gpu_blocks, caching, num_keys) -> FastPool`` (a subclass: see
        :mod:`simulator.batch.sharing`).
    hooks : EngineHooks, optional
        Named hook points a deployment's engine plugs in through
        (:mod:`simulator.engine.hooks`); None: none are called.
    """

    def __init__(self, workload: Workload, config: EngineConfig, *,
                 step_time: StepTimeFn | None = None, record_steps: bool = False,
                 prep: WorkloadPrep | None = None, step_cost=None, cost_index: int = 0,
                 pool_factory: Callable[[int, bool, int], FastPool] | None = None,
                 accelerate: bool = True, hooks: EngineHooks | None = None) -> None:
        self.wl = workload
        self.hooks = hooks
        self.cfg = cfg = config
        self.max_steps = step_limit(cfg, workload)  # schedule calls (the config's, or derived from the workload)
        self.prep = prep = prep or WorkloadPrep(workload)
        # SGLang's RadixCache (prefix_cache="radix"): token granularity, the same memory in token slots
        self.radix = cfg.prefix_cache == "radix"
        self.B = 1 if self.radix else cfg.block_size
        num_blocks = (cfg.num_gpu_blocks - 1) * cfg.block_size + 1 if self.radix else cfg.num_gpu_blocks
        self.max_model_len = cfg.max_model_len or max(prep.longest + 16, cfg.max_num_batched_tokens)
        # max_model_len can only bind when some context gets near it
        self.max_model_len_binds = prep.longest + 4 >= self.max_model_len
        self.caching = cfg.enable_prefix_caching
        self.watermark_blocks = int(cfg.watermark * num_blocks)
        self.async_mode = cfg.async_scheduling
        self.time_mode = workload.arrival_unit == "s"
        self.record_steps = record_steps
        self._init_pool(num_blocks, pool_factory)
        self._init_requests(record_steps)
        self._init_spec()
        self._init_clock(step_time, step_cost, cost_index)
        self._init_shortcuts(accelerate)
        self._init_loads()
        self._init_scheduler()
        self._init_jumps()
        self._init_lazy()
        if hooks is not None:
            hooks.attach(self)

    def _init_pool(self, num_blocks: int, pool_factory) -> None:
        """The block pool over the workload's key space, and the KV tiers attached to it."""
        cfg = self.cfg
        sc = cfg.speculative  # (draft and lookahead slots beyond a request's context)
        # EAGLE-style hashes cover the next token(s) too (rule R4): fewer shared blocks, later publishing
        self.hash_lookahead = (sc.num_hash_lookahead_tokens if sc is not None and self.caching
                               and not self.radix else 0)
        ks = self.prep.keys(self.B, sc.num_speculative_tokens + sc.num_lookahead_tokens if sc is not None else 0,
                            self.hash_lookahead)
        self.koff = ks.koff
        self.keyarr = ks.keyarr
        self.outputs_shared = ks.outputs_shared
        self.btab = np.zeros(ks.slots, index_dtype(num_blocks))  # (block ids: int32 as a rule)
        self.pool = (pool_factory or FastPool)(num_blocks, self.caching, ks.num_keys if self.caching else 0)
        self.pool.configure(cfg)
        # Lower KV tiers (CPU, disk): GPU evictions are demoted, prefix hits onboarded.
        tiers = [(nm, tc) for nm, tc in (("cpu", cfg.cpu_tier), ("disk", cfg.disk_tier)) if tc is not None]
        bpb = cfg.kv_bytes_per_block
        if bpb and self.radix:
            bpb = max(bpb // cfg.block_size, 1)  # per token slot
        self.tiers = TierChain(tiers, bpb, ks.num_keys) if tiers and self.caching else None
        if self.tiers is not None:
            self.pool.on_evict = self.tiers.demote

    def _init_spec(self) -> None:
        """Speculative decoding: ``spec_k`` draft tokens a verification (0: off), the slots beyond a request's
        context its drafts hold (``lookahead``), rule R6's input slot (``draft_slots``), rule R8's prefill
        lookahead, and the drafts' state (:class:`SpecDecoding`, ``drafts``; None when off)."""
        sc = self.cfg.speculative
        self.spec_k = sc.num_speculative_tokens if sc is not None else 0
        self.lookahead = sc.num_lookahead_tokens if self.spec_k else 0
        self.draft_slots = sc.num_draft_slots if self.spec_k else 0  # rule R6 (the input budget)
        # multi-module MTP keeps prefill chunks this far from the prompt's end (rule R8; 1: no effect)
        self.prefill_lookahead = sc.num_prefill_lookahead_tokens if self.spec_k else 0
        self.drafts = (SpecDecoding(sc, self.requests, self.wl, self.max_model_len, self.max_model_len_binds)
                       if self.spec_k else None)

    def _init_clock(self, step_time, step_cost, cost_index: int) -> None:
        """The step clock (:class:`StepClock`: seconds of each step) and the engine's time (``clock``, s;
        ``exec_step``, steps that scheduled tokens). After the request state and ``spec_k``."""
        stm = self.cfg.step_time_model
        sc = self.cfg.speculative
        self.step_clock = StepClock(
            self.requests.comp, self.requests.tok,
            step_time=step_time or (lambda t, r: stm.base_s + stm.per_token_s * t + stm.per_req_s * r),
            # Per-configuration cost model (StepCostTerms, scalar evaluation) unless the batched hook
            # (``BatchStepTime``-like) is set. (async scheduling: a step's CPU time runs under the
            # previous step's GPU work, simulator.clock.terms)
            terms=overlapped(self.cfg.cost_model, self.async_mode) if step_cost is None else None,
            step_cost=step_cost, cost_index=cost_index, spec_k=self.spec_k,
            draft_terms=sc.draft_cost_model if self.spec_k else None)
        self.exec_step = 0
        self.clock = 0.0

    def _init_requests(self, record_steps: bool) -> None:
        """The request state (:class:`RequestState`: per-request arrays, the queues), the totals and the step series."""
        self.requests = RequestState(self.wl, self.cfg.max_num_seqs, self.cfg.policy)
        self.t = dict(
            preemptions=0, finished=0, prefix_cache_queries=0, prefix_cache_hits=0,
            prefix_cache_requests=0, preempted_prefix_cache_queries=0,
            preempted_prefix_cache_hits=0, preempted_prefix_cache_requests=0,
            peak_kv_blocks_used=0, peak_running=0, peak_waiting=0, num_steps=0,
            num_schedule_calls=0, total_scheduled_tokens=0, total_prefill_tokens=0,
            total_decode_tokens=0, dropped_unservable=0, recomputed_tokens=0,
            requests_cut_short=0, kv_block_steps=0,
        )
        self.log: dict[str, list] | None = (
            {k: [] for k in ("step", "time_s", "num_running", "num_waiting",
                             "num_scheduled_tokens", "kv_blocks_used", "num_preempted")}
            if record_steps else None)
        self.unfinished = 0
        self.step_ends = array("d")  # the clock at the end of each engine step (its tokens' time), 8 bytes a step

    def _init_shortcuts(self, accelerate: bool) -> None:
        """The accelerators this run takes (:mod:`simulator.engine.accelerators`: those that support it; none with
        ``accelerate=False``, same results, slower) and the state they keep."""
        cfg = self.cfg
        n = self.wl.n
        self.accelerate = accelerate
        self.accelerators = taken = choose(RunFacts(
            config=cfg, own_keys=self.keyarr is None, outputs_shared=self.outputs_shared,
            max_model_len_binds=self.max_model_len_binds, has_tiers=self.tiers is not None,
            batched_cost_hook=self.step_clock.step_cost is not None,
            holds_finished_blocks=self.hooks is not None and self.hooks.holds_finished_blocks), accelerate)
        # what the shortcuts did (tests check each is taken; all 0 with accelerate=False)
        self.shortcuts = dict(lazy_steps=0, window_steps=0, jumped_steps=0, kept_loads=0, hit_runs=0)
        # Every content key is a request's own (no shared prefix, no parent): a block is then
        # held by at most one request, and a request's keys are published only by it, in order
        # (fast paths in _free, _publish_one), or loaded by it from a lower tier.
        self.own_keys = "own_keys" in taken
        # admission's early "the whole prompt cannot fit" check (_admit; with a tier, loads are tried first
        # for a request whose keys a tier may hold: one that let its blocks go while waiting to hit them
        # again, ``tiered``; with own keys nobody else's release puts its keys there)
        # (blocks a hook holds are neither a running request's nor free: the check does not count them)
        self.full_isl_own = (self.own_keys and cfg.scheduler_reserve_full_isl and self.tiers is None
                             and not (self.hooks is not None and self.hooks.holds_blocks))
        self.full_isl_untiered = self.own_keys and cfg.scheduler_reserve_full_isl and self.tiers is not None
        # release runs: per request, its GPU hits are the first this many keys' blocks still cached (-1:
        # unknown), so _head_blocked may answer for a tiered head that has no room to load; and whether its
        # last load started from its release run with synchronous scheduling: the blocks it then holds are
        # its keys' only cached carriers (TierLoads.keep_loaded)
        release_runs = "release_runs" in taken
        self.hit_run = np.full(n, -1, np.int64) if release_runs else None
        self.load_from_run = np.zeros(n, bool) if release_runs else None
        self.pool.track_refs = not self.own_keys
        self.pool.accelerate = "sure_checks" in taken
        self.pool.own_keys = self.own_keys and self.caching
        if self.tiers is not None and self.own_keys:
            # own keys: evictions are demoted in bulk, before the tiers are next read
            self.pool.defer_evictions = True
            self.pool.fkey = np.empty(self.pool.fifo.size, np.int64)
            self.tiers.before_read = self.pool.deliver_evictions
            # each key is demoted once at most until a request lets blocks go to hit them again
            self.tiers.fresh = True
        if self.tiers is not None:
            self.tiers.accelerate = "sure_checks" in taken
        # Lazy steady decoders (``lazy``, see simulator/engine/lazy_decoders.py). Unless a follow-up re-reads its
        # parent's output (``outputs_shared``), nobody can look up a running decoder's newly full blocks (they are
        # its own keys, in no other request's prompt, and it is not waiting), so their publication waits until
        # the decoder is materialized.
        self.defer_pub = self.caching and not self.outputs_shared
        self.lazy_ok = "lazy_decoders" in taken
        self.jumps_ok = "decode_jumps" in taken
        self.windows_ok = "lazy_windows" in taken

    def _init_loads(self) -> None:
        """Blocks loading onto the GPU for waiting requests (:class:`TierLoads`: tier onboarding, a hook's
        transfers) and ``kv_offload_threshold``'s early offloads. After the shortcuts."""
        cfg, pool = self.cfg, self.pool
        self.loads = TierLoads(
            self.requests, pool, self.tiers, koff=self.koff, keyarr=self.keyarr, btab=self.btab, block_size=self.B,
            watermark_blocks=self.watermark_blocks, free=None,  # (the scheduler's release: _init_scheduler)
            offload_at=(int(cfg.kv_offload_threshold * pool.usable)
                        if self.tiers is not None and cfg.kv_offload_threshold is not None else None),
            sole_carriers_check=self.own_keys and self.accelerate, load_from_run=self.load_from_run,
            shortcuts=self.shortcuts)

    def _init_scheduler(self) -> None:
        """vLLM's scheduler rules (:class:`Scheduler`) over the request state, the pool, the tiers, the loads, the
        drafts and the hooks; the loads release blocks through it (held weakly: it holds the loads). After the
        loads."""
        self.scheduler = sch = Scheduler(
            self.requests, self.pool, self.tiers, self.loads, self.drafts, self.hooks, cfg=self.cfg,
            block_size=self.B, koff=self.koff, keyarr=self.keyarr, btab=self.btab, max_model_len=self.max_model_len,
            max_model_len_binds=self.max_model_len_binds, watermark_blocks=self.watermark_blocks, spec_k=self.spec_k,
            lookahead=self.lookahead, draft_slots=self.draft_slots, prefill_lookahead=self.prefill_lookahead,
            hash_lookahead=self.hash_lookahead, caching=self.caching, async_mode=self.async_mode,
            own_keys=self.own_keys, full_isl_own=self.full_isl_own, full_isl_untiered=self.full_isl_untiered,
            hit_run=self.hit_run, load_from_run=self.load_from_run, totals=self.t, shortcuts=self.shortcuts)
        self.loads.free = _weak_call(sch.release)

    def _init_jumps(self) -> None:
        """Decode jumps (:class:`DecodeJumps`: the general path's decode-only stretches in one go), where the
        run takes them (``jumps_ok``; else ``jumps`` is None)."""
        cfg = self.cfg
        self.jumps = None if not self.jumps_ok else DecodeJumps(
            self.requests, self.pool, self.step_clock, koff=self.koff, btab=self.btab, block_size=self.B,
            max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens,
            max_model_len=self.max_model_len, max_model_len_binds=self.max_model_len_binds,
            time_mode=self.time_mode, publish=self.scheduler.publish if self.caching else None, totals=self.t,
            step_ends=self.step_ends, log=self.log)

    def _init_lazy(self) -> None:
        """The lazy decoders (:class:`LazyDecoders`, ``lazy``: an accelerator over the scheduler, with the lazy
        windows) where the run takes them; else None. After the scheduler."""
        self.lazy = LazyDecoders(self.scheduler, self.step_clock, defer_pub=self.defer_pub, windows_ok=self.windows_ok,
                                 time_mode=self.time_mode) if self.lazy_ok else None

    def _unservable(self, usable: int | None = None) -> np.ndarray:
        """Requests that can never fit in ``usable`` blocks (default: this pool's), dropped on arrival."""
        wl = self.wl
        if usable is None:
            usable = self.pool.usable
        # (speculative decoding: the last verification holds k draft slots and the lookahead beyond)
        ctx = np.minimum(wl.prompt_len + wl.output_len - 1 + self.spec_k + self.lookahead, self.max_model_len)
        return (-(-ctx // self.B) > usable) | (wl.prompt_len >= self.max_model_len)

    def run_all(self, progress: Callable[[float], None] | None = None) -> None:
        """Drive the engine until every request finished or was dropped."""
        self.start(progress)
        self.advance()
        self.close()

    def start(self, progress: Callable[[float], None] | None = None, *, external: bool = False) -> None:
        """Prepare a run. ``external``: requests arrive only through :meth:`submit` (a router's instance)."""
        self._order = self.prep.order.tolist()
        self._arr = self.prep.arrival_sorted.tolist()
        self._drop = self._unservable()
        self._num_requests = self.wl.n
        self._pending = self._num_requests if external else 0
        self._tick = 0
        self._queue: deque = deque()  # the batch queue: steps scheduled, output not yet processed
        self._depth = 2 if self.async_mode else 1  # its depth (async scheduling: one step in flight)
        self._progress = progress
        self._next_report = 0.05
        self._done = False
        self._external = external
        if self.lazy is not None:
            self.lazy.queue = self._queue

    @property
    def now(self) -> float:
        """The engine's time: seconds for arrivals in seconds, else schedule calls."""
        return self.clock if self.time_mode else self._tick

    @property
    def num_running(self) -> int:
        """Requests in the running queue (:attr:`RequestState.num_running`)."""
        return self.requests.num_running

    @property
    def busy(self) -> bool:
        """Something is running, waiting or in flight."""
        return bool(self.requests.num_running or self.requests.waiting or self._queue)

    def submit(self, q: int) -> None:
        """Request ``q`` arrives now (external mode): dropped if unservable, else queued."""
        if self._drop[q]:
            self.requests.status[q] = DROPPED
            self.t["dropped_unservable"] += 1
        else:
            self.requests.waiting.add(q)

    def close(self) -> None:
        """Close the run: write lazy state back, finalize pool metrics, count unfinished requests."""
        if self.lazy is not None and self.lazy.lazy_active:
            self.lazy.materialize()
        self.pool.finalize_metrics()
        status = self.requests.status
        self.unfinished = int(((status != FINISHED) & (status != DROPPED)).sum())

    def advance(self, until: float | None = None) -> bool:
        """Run schedule calls until the engine's time reaches ``until`` (None: until all work is done).

        An idle engine waits (its time jumps to ``until``). Returns True when
        the run is over (no work left and no arrival of its own to come, or
        ``max_steps`` reached). One pass of the loop: arrivals join the waiting
        queue; an idle engine waits for the next arrival; a decode-only stretch
        is jumped (:meth:`DecodeJumps._try_jump`); else one schedule call
        (:meth:`_schedule_call`), and the output of the oldest step in flight is
        processed (:meth:`Scheduler.process`).
        """
        if self._done:
            return True
        stats = _StepTotals(self.t)
        rs, process = self.requests, self.scheduler.process
        done = False
        while True:
            now = self.clock if self.time_mode else self._tick
            if until is not None and now >= until:
                break
            if self._pending < self._num_requests and self._arr[self._pending] <= now:
                self._take_arrivals(now)
            has_req = bool(rs.num_running or rs.waiting)
            if not has_req and not self._queue:
                if self._pending >= self._num_requests:
                    done = self._wait_until(until)
                    break
                self._wait_for_arrival(until)
                continue
            if self._tick >= self.max_steps:
                done = True
                break
            if (self.jumps_ok and has_req and not self._queue and rs.num_running
                    and self.exec_step >= self.jumps.retry_at and self._try_jump(until)):
                continue
            if has_req:
                if self._schedule_call(until, stats):
                    continue
            elif not self._queue:
                continue
            process(*self._queue.pop())
            if self._progress is not None:
                self._report_progress()
        stats.merge_into(self.t)
        self._done = done
        return done

    def _try_jump(self, until) -> bool:
        """Jump over a decode-only stretch if one starts now (True: :class:`DecodeJumps`, the lazy decoders
        written back for it and lazy again after); else back off before trying again."""
        nxt = self._next_arrival()
        if until is not None and (nxt is None or until < nxt):
            nxt = until
        tick = self._tick
        max_k = self.max_steps - tick
        lazy = self.lazy
        if lazy is None or not lazy.lazy_active:
            jumped = self._jump(nxt, tick, max_k)
        elif lazy.jump_precheck(nxt, tick, self.log is not None or self._external):
            lazy.materialize(keep=True)
            jumped = self._jump(nxt, tick, max_k)
            lazy.relazify(jumped)
        else:
            jumped = 0
        self.jumps.tried(jumped, self.exec_step)
        if jumped:
            self.shortcuts["jumped_steps"] += jumped
            self._tick += jumped
            return True
        return False

    def _jump(self, next_arrival, tick: int, max_k: int) -> int:
        """:meth:`DecodeJumps.jump` from now; the engine's time moves past the steps jumped (how many)."""
        k, clock = self.jumps.jump(next_arrival, tick, max_k, self.clock, self.exec_step, self.requests.num_running,
                                   self.log is not None or self._external)
        if k:
            self.clock = clock
            self.exec_step += k
        return k

    def _take_arrivals(self, now: float) -> None:
        """Requests arrived by ``now`` join the waiting queue (unservable ones are dropped)."""
        order, arrival, drop = self._order, self._arr, self._drop
        pending, n = self._pending, self._num_requests
        while pending < n and arrival[pending] <= now:
            q = order[pending]
            pending += 1
            if drop[q]:
                self.requests.status[q] = DROPPED
                self.t["dropped_unservable"] += 1
            else:
                self.requests.waiting.add(q)
        self._pending = pending

    def _next_arrival(self):
        """The arrival time of the next request of the workload's own (None: none left)."""
        return self._arr[self._pending] if self._pending < self._num_requests else None

    def _wait_until(self, until) -> bool:
        """Idle with nothing left to arrive: the time moves to ``until``; True (done) when None."""
        if until is None:
            return True
        self.idle_until(until)
        return False

    def _wait_for_arrival(self, until) -> None:
        """Idle: the time moves to the next arrival (or ``until``, if earlier)."""
        nxt = self._next_arrival()
        if until is not None and nxt > until:
            nxt = until
        self.idle_until(nxt)

    def idle_until(self, t) -> None:
        """The engine's time moves to ``t`` (if later) with no step; the hooks are told how long (``idle``)."""
        if self.time_mode:
            self._clock_to(float(t))
        else:
            self._tick = max(self._tick, int(t))

    def _clock_to(self, t) -> None:
        """The clock moves to ``t`` (s) if later, with no step (the hooks are told)."""
        if t > self.clock:
            if self.hooks is not None:
                self.hooks.idle(t - self.clock)
            self.clock = t

    @property
    def schedule_calls(self) -> int:
        """Schedule calls made so far (the step clock of arrivals in steps)."""
        return self._tick

    def release(self, q: int) -> None:
        """Request ``q``'s blocks go back to the pool (a hook giving back the blocks it kept)."""
        self.scheduler.release(q)

    def start_load(self, q: int, nh: int, hit, k: int, ready: float) -> None:
        """Waiting request ``q`` takes GPU blocks for its ``nh`` prefix hits (``hit``) and its next ``k`` blocks
        of KV, which land there by ``ready`` (s; a hook's transfer): :meth:`TierLoads.start_load`."""
        self.loads.start_load(q, nh, hit, k, ready, self.exec_step)

    def let_loads_go(self) -> None:
        """Every request waiting for loaded blocks lets them go (they stay cached): :meth:`TierLoads.let_go`."""
        self.loads.let_go()

    def _wait_for_loads(self, until) -> None:
        """Only requests waiting for loaded blocks: the clock moves to the first load done (or arrival, or
        ``until``)."""
        nxt_t = self.loads.first_ready(self.clock, self.requests.waiting)
        if self._pending < self._num_requests and self.time_mode:
            nxt_t = min(nxt_t, self._arr[self._pending])
        if until is not None and self.time_mode:
            nxt_t = min(nxt_t, until)
        self._clock_to(nxt_t)

    def _report_progress(self) -> None:
        n, t = self._num_requests, self.t
        if self._progress is not None and n and t["finished"] / n >= self._next_report:
            self._progress(min(1.0, (t["finished"] + t["dropped_unservable"]) / n))
            self._next_report += 0.05

    def _schedule_call(self, until, stats: _StepTotals) -> bool:
        """One schedule call (or a lazy window of several); False when the output of the oldest step
        in flight is due now (the general path's batch queue is full, or nothing is left to schedule)."""
        res = None
        hooks = self.hooks
        if hooks is not None:
            hooks.before_schedule()
        sch, lazy = self.scheduler, self.lazy
        sch.at(self.exec_step, self.clock)
        if lazy is not None:
            if not lazy.lazy_active and self.exec_step >= lazy.retry_at:
                lazy.lazify()
            if lazy.windows_ok and lazy.window_possible() and self._window_quiet() and self._try_window(until, stats):
                return True
            if lazy.lazy_active:
                res = lazy.fast_schedule()
                if res is None:
                    lazy.materialize()
                    lazy.retry_at = self.exec_step + 1
        if res is None:
            e, ns, sampled, npre = sch.schedule()
            ntok = int(ns.sum()) if ns.size else 0
            n_prefill = int(ns[self.step_clock.prefill_mask(e, ns, sampled)].sum()) if ntok else 0
            nreq = int(e.size)
        else:
            e = ns = sampled = None
            ntok, n_prefill, nreq, npre = res
            self.shortcuts["lazy_steps"] += 1
        step = self.exec_step
        self._count_step(stats, ntok, n_prefill, npre)
        if res is None:
            self.clock += self.step_clock.seconds(e, ns, sampled, ntok, nreq)
        else:
            self.clock += self.step_clock.lazy_seconds(lazy.batch, lazy.num_lazy, lazy.lazy_base_sum, ntok, nreq)
        if ntok > 0:
            self.step_ends.append(self.clock)
        loads = self.loads
        if loads.loading and ntok == 0 and not self.requests.num_running and (hooks is None or not hooks.stalled(until)):
            self._wait_for_loads(until)
        if loads.offload_at is not None:
            loads.offload_early(self.exec_step)
        if res is not None:
            lazy.process_step(step, self.clock)
            if self._progress is not None:
                self._report_progress()
            return True
        self._queue.appendleft((e, ns, sampled, step, self.clock))
        if hooks is not None:
            hooks.scheduled(e, until)
        return len(self._queue) < self._depth and bool(ntok > 0 or self.requests.num_running or self.requests.waiting)

    def _window_quiet(self) -> bool:
        """The engine's side of a lazy window's first tests (:meth:`LazyDecoders.window_possible` has the lazy
        state's): no arrival of its own in the next two schedule calls (in steps; at the running cap,
        unobserved, arrivals change nothing) and no progress report due."""
        n = self._num_requests
        at_cap = self.requests.num_running >= self.cfg.max_num_seqs
        return bool((self.time_mode or self._pending >= n or self._arr[self._pending] - self._tick >= 2
                     or (at_cap and self.log is None and not self._external))
                    and (self._progress is None or not (n and self.t["finished"] / n >= self._next_report)))

    def _try_window(self, until, stats: _StepTotals) -> bool:
        """Make a lazy window (True: :meth:`LazyDecoders.window`; the clock, the steps and the step series move on)
        and count its steps in ``stats``, or nothing (False)."""
        tick = self._tick
        win = self.lazy.window(tick, self._next_arrival(), until, self.max_steps - tick, self.exec_step, self.clock,
                               self.log is not None or self._external)
        if win is None:
            return False
        k, starts, used, clock = win
        nr, nw = self.requests.num_running, len(self.requests.waiting)
        log_decode_steps(self.step_ends, self.log, starts, used, clock, self.exec_step, nr, nw)
        self.clock = clock
        self.exec_step += k
        self.shortcuts["window_steps"] += k
        stats.calls += k
        stats.steps += k
        stats.tokens += k * self.lazy.num_lazy
        stats.block_steps += sum(used)
        if used[-1] > stats.peak_used:
            stats.peak_used = used[-1]
        if nr > stats.peak_running:
            stats.peak_running = nr
        if nw > stats.peak_waiting:
            stats.peak_waiting = nw
        self._tick = tick + k
        return True

    def _count_step(self, stats: _StepTotals, ntok: int, n_prefill: int, npre: int) -> None:
        """Totals, peaks and the step series of the schedule call just made; the step counters move on."""
        stats.calls += 1
        if npre:
            self.t["preemptions"] += npre
        pool = self.pool
        used = pool.usable - pool.top - pool.nfifo
        if used > stats.peak_used:
            stats.peak_used = used
        nr, nw = self.requests.num_running, len(self.requests.waiting)
        if nr > stats.peak_running:
            stats.peak_running = nr
        if nw > stats.peak_waiting:
            stats.peak_waiting = nw
        log = self.log
        if log is not None and (ntok > 0 or npre > 0):
            log["step"].append(self.exec_step)
            log["time_s"].append(self.clock)
            log["num_running"].append(nr)
            log["num_waiting"].append(nw)
            log["num_scheduled_tokens"].append(ntok)
            log["kv_blocks_used"].append(used)
            log["num_preempted"].append(npre)
        if ntok > 0:
            stats.steps += 1
            stats.tokens += ntok
            stats.prefill += n_prefill
            stats.block_steps += used
            self.exec_step += 1
        self._tick += 1


class _StepTotals:
    """Additive totals and peaks of one :meth:`FastEngine.advance` call, merged into the totals at its end."""

    __slots__ = ("calls", "steps", "tokens", "prefill", "block_steps", "peak_used", "peak_running", "peak_waiting")

    def __init__(self, t: dict) -> None:
        self.calls = self.steps = self.tokens = self.prefill = self.block_steps = 0
        self.peak_used, self.peak_running, self.peak_waiting = (
            t["peak_kv_blocks_used"], t["peak_running"], t["peak_waiting"])

    def merge_into(self, t: dict) -> None:
        t["peak_kv_blocks_used"] = max(t["peak_kv_blocks_used"], self.peak_used)
        t["peak_running"] = max(t["peak_running"], self.peak_running)
        t["peak_waiting"] = max(t["peak_waiting"], self.peak_waiting)
        t["num_schedule_calls"] += self.calls
        t["num_steps"] += self.steps
        t["total_scheduled_tokens"] += self.tokens
        t["total_prefill_tokens"] += self.prefill
        t["total_decode_tokens"] += self.tokens - self.prefill
        t["kv_block_steps"] += self.block_steps
