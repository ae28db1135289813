"""Fast decision kernel: vLLM 0.33.0's v1 scheduler over struct-of-arrays state.

Same rules and the same results, bit for bit, as the scalar reference kernel
(``tests/simulator/reference_core.py``, which the 25 oracle cases pin to vLLM);
see that module and ``docs/simulator.md`` for the rules and their sources.
What differs is the layout:

* request state lives in per-request numpy arrays (computed tokens, tokens,
  placeholders, held and published block counts ...), a request's block table
  is a slice of one flat array (``btab[koff[r]:koff[r] + held[r]]``), and
  the running queue is an array of request indices in running order;
* the running pass is array work over the running queue: tokens wanted, the
  token budget by cumulative sum, new blocks by cumulative sum against the
  free blocks; requests before the first allocation failure are applied at
  once (blocks popped in one go, in running order, as sequential pops would),
  and only from a failure on (preemption of ``running[-1]``) the pass goes on
  request by request;
* the block pool is :class:`simulator._pool.FastPool` (stack of unhashed free
  blocks + FIFO of hashed free blocks, hash table indexed by integer content
  keys assigned up front, see :class:`KeySpace`);
* admission (FCFS, head of line) is per admitted request, its prefix lookup
  one array read over the request's key slice;
* decode-only stretches (sync mode) advance in one jump, in closed form;
  steady decoders are kept *lazy* (implicit in buckets by block-boundary
  residue and finishing step), and short stretches of lazy steps where
  nothing can change are made several at once (:meth:`FastEngine._lazy_window`).
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Callable

import numpy as np

from simulator._pool import FastPool
from simulator.config import EngineConfig
from simulator.tiers import TierChain
from simulator.workload import Workload

WAITING, RUNNING, PREEMPTED, FINISHED, DROPPED = 0, 1, 2, 3, 4

StepTimeFn = Callable[[int, int], float]

_acc = np.add.accumulate  # cumsum of a 1-D int64 array, without np.cumsum's dispatch
_add = np.add.reduce
_cnz = np.count_nonzero  # a numpy int: int() it before it reaches a result
_WINDOW_STEPS = 64  # most lazy steps made at once by FastEngine._lazy_window


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative integers."""
    return -(-a // b)


class KeySpace:
    """Integer content keys standing for vLLM's chained block hashes, for one block size.

    Request ``r``'s block ``j`` has slot ``koff[r] + j`` in the flat block
    table; its content key is that slot number, unless the block lies wholly
    inside the prefix or parent context the request starts with: then it is
    the key of the same block of the parent (recursively) or of the named
    prefix (keys after all request slots). ``keyarr`` maps slot -> key and is
    None when no request shares a full block (key == slot).
    """

    def __init__(self, wl: Workload, B: int) -> None:
        n = wl.n
        ctx = wl.prompt_len + wl.output_len
        nblk = (ctx + 2 + B - 1) // B + 1
        self.koff = np.zeros(n + 1, np.int64)
        np.cumsum(nblk, out=self.koff[1:])
        self.slots = int(self.koff[-1])
        pb = (wl.prefix_len + B - 1) // B + 1
        poff = self.slots + np.concatenate(([0], np.cumsum(pb)))
        self.num_keys = int(poff[-1])
        shared = wl.shared_len()
        sb = shared // B
        self.keyarr = None
        if n and sb.max() > 0:
            keyarr = np.arange(self.slots, dtype=np.int64)
            koff = self.koff
            par, pid = wl.parent, wl.prefix_id
            for r in np.flatnonzero(sb > 0).tolist():
                s = int(sb[r])
                o = int(koff[r])
                p = int(par[r])
                if p >= 0:
                    po = int(koff[p])
                    keyarr[o:o + s] = keyarr[po:po + s]
                else:
                    keyarr[o:o + s] = np.arange(poff[pid[r]], poff[pid[r]] + s)
            self.keyarr = keyarr


class WorkloadPrep:
    """Workload-derived arrays shared by every configuration of a batch."""

    def __init__(self, wl: Workload) -> None:
        self.wl = wl
        self.order = np.argsort(wl.arrival, kind="stable")
        self.arrival_sorted = wl.arrival[self.order]
        self.longest = int((wl.prompt_len + wl.output_len).max()) if wl.n else 0
        self._keys: dict[int, KeySpace] = {}

    def keys(self, B: int) -> KeySpace:
        ks = self._keys.get(B)
        if ks is None:
            ks = self._keys[B] = KeySpace(self.wl, B)
        return ks


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
        :mod:`simulator.sharing`).
    """

    def __init__(self, workload: Workload, config: EngineConfig, *,
                 step_time: StepTimeFn | None = None, record_steps: bool = False,
                 prep: WorkloadPrep | None = None, step_cost=None, cost_index: int = 0,
                 pool_factory: Callable[[int, bool, int], FastPool] | None = None,
                 accelerate: bool = True) -> None:
        self.wl = wl = workload
        # accelerate=False: every shortcut off (lazy decoders, jumps, windows, own-key paths, kept loads);
        # the results are the same, only slower (tests compare the two)
        self.accelerate = accelerate
        # what the shortcuts did (tests check each is taken; all 0 with accelerate=False)
        self.shortcuts = dict(lazy_steps=0, window_steps=0, jumped_steps=0, kept_loads=0, hit_runs=0)
        self.cfg = cfg = config
        self.prep = prep = prep or WorkloadPrep(workload)
        n = wl.n
        # SGLang's RadixCache (prefix_cache="radix"): token granularity, the same memory in token slots
        self.radix = cfg.prefix_cache == "radix"
        self.B = B = 1 if self.radix else cfg.block_size
        num_blocks = (cfg.num_gpu_blocks - 1) * cfg.block_size + 1 if self.radix else cfg.num_gpu_blocks
        self.mml = cfg.max_model_len or max(prep.longest + 16, cfg.max_num_batched_tokens)
        # max_model_len can only bind when some context gets near it
        self.mml_binds = prep.longest + 4 >= self.mml
        self.caching = cfg.enable_prefix_caching
        ks = prep.keys(B)
        self.koff = ks.koff
        self.keyarr = ks.keyarr
        self.pool = (pool_factory or FastPool)(num_blocks, self.caching, ks.num_keys if self.caching else 0)
        # Lower KV tiers (CPU, disk): GPU evictions are demoted, prefix hits onboarded.
        tiers = [(nm, tc) for nm, tc in (("cpu", cfg.cpu_tier), ("disk", cfg.disk_tier)) if tc is not None]
        bpb = cfg.kv_bytes_per_block
        if bpb and self.radix:
            bpb = max(bpb // cfg.block_size, 1)  # per token slot
        self.tiers = TierChain(tiers, bpb, ks.num_keys) if tiers and self.caching else None
        if self.tiers is not None:
            self.pool.on_evict = self.tiers.demote
        self.offload_at = (int(cfg.kv_offload_threshold * self.pool.usable)
                           if self.tiers is not None and cfg.kv_offload_threshold is not None else None)
        self.loading: dict[int, float] = {}  # request -> time its onboarded blocks are on the GPU
        # After a load stall no request starts loads until this one (the head of the queue then)
        # has finished: otherwise loads (its own or those of requests behind it) take the blocks
        # it needs again, or preempt it once admitted, and the stall repeats for ever.
        self._onboard_gate: int | None = None
        # Every content key is a request's own (no shared prefix, no parent): a block is then
        # held by at most one request, and a request's keys are published only by it, in order
        # (fast paths in _free, _publish_one), or loaded by it from a lower tier.
        self.own_keys = self.keyarr is None and accelerate
        # admission's early "the whole prompt cannot fit" check (_admit; with a tier, loads are tried first
        # for a request whose keys a tier may hold: one that let its blocks go while waiting to hit them
        # again, ``tiered``; with own keys nobody else's release puts its keys there)
        self.full_isl_own = self.own_keys and cfg.scheduler_reserve_full_isl and self.tiers is None
        self.full_isl_untiered = self.own_keys and cfg.scheduler_reserve_full_isl and self.tiers is not None
        self.tiered = np.zeros(n, bool)
        # _head_blocked may answer for a tiered head that has no room to load (see there; exact with
        # chunked prefill, max_model_len out of reach and no early offloads, which evict without allocating):
        # per request, its GPU hits are the first this many keys' blocks still cached (-1: unknown)
        tight = (self.full_isl_untiered and cfg.enable_chunked_prefill and not self.mml_binds
                 and self.offload_at is None)
        self.hit_run = np.full(n, -1, np.int64) if tight else None
        # per request, whether its last load started from its release run with synchronous scheduling:
        # the blocks it then holds are its keys' only cached carriers (_keep_loaded)
        self.load_from_run = np.zeros(n, bool) if tight else None
        self.pool.track_refs = not self.own_keys
        self.pool.accelerate = accelerate
        self.pool.own_keys = self.own_keys and self.caching
        if self.tiers is not None and self.own_keys:
            # own keys: evictions are demoted in bulk, before the tiers are next read
            self.pool.defer_evictions = True
            self.pool.fkey = np.empty(self.pool.fifo.size, np.int64)
            self.tiers.before_read = self.pool.deliver_evictions
            # each key is demoted once at most until a request lets blocks go to hit them again
            self.tiers.fresh = True
        if self.tiers is not None:
            self.tiers.accelerate = accelerate
        self.btab = np.zeros(ks.slots, np.int64)
        self.watermark_blocks = int(cfg.watermark * num_blocks)
        self.async_mode = cfg.async_scheduling
        stm = cfg.step_time_model
        self.step_time = step_time or (
            lambda t, r: stm.base_s + stm.per_token_s * t + stm.per_req_s * r)
        self.time_mode = wl.arrival_unit == "s"
        self.record_steps = record_steps
        # Batched cost model hook (``BatchStepTime``-like): when set, each step's
        # time is ``step_cost.step_time(prefill_tokens, prefill_attention_tokens,
        # decode_tokens, decode_context_tokens, num_reqs)[cost_index]``.
        self.step_cost = step_cost
        self.cost_index = cost_index
        # Per-configuration cost model (StepCostTerms, scalar evaluation) unless the hook is set.
        self.terms = cfg.cost_model if step_cost is None else None
        self.P = wl.prompt_len
        self.Pmax = wl.prompt_len + wl.output_len
        z = lambda: np.zeros(n, np.int64)  # noqa: E731
        self.tok = wl.prompt_len.copy()      # prompt + output tokens received
        self.comp = z()                      # computed tokens (incl. in flight)
        self.ph = z()                        # async output placeholders
        self.inflight = z()
        self.stale = z()
        self.status = z()
        self.held = z()                      # blocks held
        self.ncached = z()                   # leading blocks published
        self.npre = z()
        self.first_sched = np.full(n, -1, np.int64)
        self.first_token = np.full(n, -1, np.int64)
        self.finish = np.full(n, -1, np.int64)
        self.first_token_t = np.full(n, np.nan)
        self.finish_t = np.full(n, np.nan)
        self.hit_first = np.full(n, -1, np.int64)
        self.gone = np.zeros(n, bool)
        self.run = np.zeros(max(min(cfg.max_num_seqs, n), 1) + 1, np.int64)
        self.R = 0
        self.waiting: deque[int] = deque()
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
        self.exec_step = 0
        self.clock = 0.0
        self.unfinished = 0
        self._retry_jump_at = 0
        self._backoff = 1
        # Lazy steady decoders (sync mode, max_model_len never binding): a
        # running request whose prefill is done holds comp = la + S, tok =
        # comp + 1, held = cdiv(comp, B), ncached = comp // B implicitly,
        # where S counts fast steps; it needs a block when (la + S) % B == 0,
        # publishes one when (la + S + 1) % B == 0, and finishes at the fast
        # step S = P + max_tokens - la - 2. Only the other running requests
        # (``nl``, running order) are materialized.
        # Without multi-turn parents nobody can look up a running decoder's
        # newly full blocks (they are its own keys, and it is not waiting),
        # so their publication waits until the decoder is materialized.
        self.defer_pub = self.caching and not bool((wl.parent >= 0).any())
        # Asynchronous scheduling (batch queue of depth 2): the same lazy
        # decoders, one step in flight (see _lazify_async); with deferred (or
        # no) publication. KV tiers too (byte-identical to the general path on
        # 900 random async tier runs, session 6).
        self.lazy_ok = accelerate and not self.mml_binds and (not self.async_mode or self.defer_pub or not self.caching)
        self.lazy_active = False
        self._lazy_retry_at = 0
        self.lz = np.zeros(n, bool)
        self.la = np.zeros(n, np.int64)
        self.kla = np.zeros(n, np.int64)  # koff * B + la (block-table position of token la, x B)
        self.kbase = (self.koff[:n] * B).tolist()
        self.rseq = [0] * n            # admission sequence number (running order)
        self.seq = 0
        self.S = 0
        self.D = 0
        self.la_sum = 0                # sum of la over the lazy decoders
        self.buckets: dict[int, set] = {}
        self.bcache: dict[int, np.ndarray] = {}  # residue -> koff * B + la of its decoders, running order
        self.fin_at: dict[int, list] = {}
        self._fin_heap: list[int] = []  # the keys of fin_at, and keys deleted since (see _first_finish)
        self.nl: list[int] = []
        self._fp = None
        self._fp_prev = None  # async lazy mode: the step in flight (eq, sampled, tokens, step, t_end)
        self._finishing: list[int] = []  # async lazy mode: decoders skipped this step, finished by its output

    # ------------------------------------------------------------- helpers
    def _publish(self, ids: np.ndarray, upto: np.ndarray) -> None:
        """Publish each request's full blocks below ``upto`` tokens (``cache_blocks``), in order."""
        full = upto // self.B
        nc = self.ncached[ids]
        g = (full > nc).nonzero()[0]
        if not g.size:
            return
        if g.size < ids.size:
            ids, full, nc = ids[g], full[g], nc[g]
        cnt = full - nc
        cs = _acc(cnt)
        tot = cs.item(-1)
        if tot == ids.size:  # one block each (decoders)
            pos = self.koff[ids] + nc
        else:
            pos = np.repeat(self.koff[ids] + nc - (cs - cnt), cnt) + np.arange(tot)
        if self.keyarr is None:
            self.pool.publish(self.btab[pos], pos, True)  # own keys: distinct
        else:
            self.pool.publish(self.btab[pos], self.keyarr[pos])
        self.ncached[ids] = full

    def _publish_one(self, q: int, upto: int) -> None:
        full = upto // self.B
        nc = int(self.ncached[q])
        if full <= nc:
            return
        o = int(self.koff[q])
        if self.own_keys and not self.npre[q]:
            # keys only this request publishes, in order, and it never lost its blocks
            self.pool.publish_new(self.btab[o + nc:o + full], o + nc)
        elif self.keyarr is None:
            self.pool.publish(self.btab[o + nc:o + full], np.arange(o + nc, o + full), True)
        else:
            self.pool.publish(self.btab[o + nc:o + full], self.keyarr[o + nc:o + full], True)
        self.ncached[q] = full

    def _alloc_blocks(self, q: int, new: int) -> None:
        h = int(self.held[q])
        o = int(self.koff[q]) + h
        self.btab[o:o + new] = self.pool.allocate(new, self.exec_step)
        self.held[q] = h + new

    def _free(self, q: int, keep_keys: bool = False) -> None:
        """Release request ``q``'s blocks; ``keep_keys``: it may hit them again (preempted, or its
        tier loads let go while it waits)."""
        o = int(self.koff[q])
        h = int(self.held[q])
        if keep_keys:
            self.tiered[q] = True
            if self.tiers is not None:
                self.tiers.fresh = False
        nc = int(self.ncached[q])
        if h:
            if self.own_keys:
                # nobody else can hold these blocks; the published ones lead
                self.pool.release_own(self.btab[o:o + h], nc, o, keep_keys)
            else:
                self.pool.release(self.btab[o:o + h])
        if keep_keys and self.hit_run is not None:
            m = (int(self.tok[q]) - 1) // self.B
            self.hit_run[q] = min(nc, m) if self.pool.one_release_run(o, nc, m) else -1
        self.held[q] = 0
        self.ncached[q] = 0

    def _preempt(self, q: int) -> None:
        self._free(q, keep_keys=True)
        self.status[q] = PREEMPTED
        self.comp[q] = 0
        self.stale[q] = self.inflight[q]
        self.ph[q] = 0
        self.npre[q] += 1
        self.waiting.appendleft(q)

    def _allocate_running(self, q: int, n: int) -> bool:
        c = int(self.comp[q])
        need = min(c + n, self.mml)
        new = cdiv(need, self.B) - int(self.held[q])
        pool = self.pool
        free = pool.num_free()
        if new > free:
            pool.check_failed(new - free)
            return False
        pool.check_passed(free - new)
        if new > 0:
            self._alloc_blocks(q, new)
        if self.caching:
            self._publish_one(q, min(c + n, int(self.tok[q])))
        return True

    # ------------------------------------------------------------- schedule
    def schedule(self):
        """One ``Scheduler.schedule()``: (ids, tokens, sampled) arrays in order, and preemptions."""
        cfg = self.cfg
        B = self.B
        pool = self.pool
        budget = cfg.max_num_batched_tokens
        waiting = self.waiting
        R = self.R
        thr = cfg.long_prefill_token_threshold if R + len(waiting) > 1 else 0
        mml = self.mml
        ids_l: list = []
        n_l: list = []
        npre = 0
        comp, tok, held = self.comp, self.tok, self.held
        if R:
            run = self.run[:R].copy()
            c = comp[run]
            t = tok[run]
            if self.async_mode:
                p = self.ph[run]
                n0 = t + p - c
                skip = (p > 0) & (c + 2 - p >= self.Pmax[run])
                n0[skip] = 0
            else:
                n0 = t - c
            if thr:
                np.minimum(n0, thr, out=n0)
            if self.mml_binds:
                np.minimum(n0, mml - c - 1, out=n0)
            np.maximum(n0, 0, out=n0)
            cs = _acc(n0)
            if cs.item(-1) > budget:
                k = int(cs.searchsorted(budget, "right"))
                n0[k] = budget - (cs.item(k - 1) if k else 0)
                n0[k + 1:] = 0
            newc = c + n0
            tgt = np.minimum(newc, mml) if self.mml_binds else newc
            h = held[run]
            need = (tgt + (B - 1)) // B - h
            np.maximum(need, 0, out=need)
            cn = _acc(need)
            free = pool.num_free()
            f = R if cn.item(-1) <= free else int(cn.searchsorted(free, "right"))
            if f:
                x = free - cn.item(f - 1)
                if x < pool.slack:  # pool.check_passed, inline: this runs per step
                    pool.slack = x
                ids = run[:f]
                nn = n0[:f]
                tot = cn.item(f - 1)
                if tot:
                    nd = need[:f]
                    blocks = pool.allocate(tot, self.exec_step)
                    pos = np.repeat(self.koff[ids] + h[:f] - (cn[:f] - nd), nd) + np.arange(tot)
                    self.btab[pos] = blocks
                    held[ids] = h[:f] + nd
                sel = nn > 0
                if _cnz(sel) < sel.size:
                    ids = ids[sel]
                    nn = nn[sel]
                    tgt_pub = np.minimum(newc[:f][sel], t[:f][sel])
                else:
                    tgt_pub = np.minimum(newc[:f], t[:f])
                if self.caching and ids.size:
                    self._publish(ids, tgt_pub)
                ids_l.append(ids)
                n_l.append(nn)
                budget -= int(nn.sum())
            if f < R:
                # request by request from the first allocation failure on
                i = f
                Pmax, ph = self.Pmax, self.ph
                while i < self.R and budget > 0:
                    q = int(self.run[i])
                    cq = int(comp[q])
                    pq = int(ph[q])
                    if pq > 0 and cq + 2 - pq >= int(Pmax[q]):
                        i += 1
                        continue
                    n = int(tok[q]) + pq - cq
                    if 0 < thr < n:
                        n = thr
                    n = min(n, budget, mml - cq - 1)
                    if n <= 0:
                        i += 1
                        continue
                    ok = False
                    while True:
                        if self._allocate_running(q, n):
                            ok = True
                            break
                        self.R -= 1
                        victim = int(self.run[self.R])
                        self._preempt(victim)
                        npre += 1
                        if victim == q:
                            break
                    if not ok:
                        break
                    ids_l.append(np.array([q]))
                    n_l.append(np.array([n]))
                    budget -= n
                    i += 1

        if npre == 0 and waiting and budget > 0 and self.R < cfg.max_num_seqs:
            budget = self._admit(budget, thr, ids_l, n_l)[0]

        if not ids_l:
            e = np.zeros(0, np.int64)
            ns = e
        elif len(ids_l) == 1:
            e, ns = ids_l[0], n_l[0]
        else:
            e = np.concatenate(ids_l)
            ns = np.concatenate(n_l)
        # _update_after_schedule (+ AsyncScheduler placeholders)
        if e.size:
            comp[e] += ns
            if self.async_mode:
                self.inflight[e] += ns
                sampled = comp[e] >= tok[e] + self.ph[e]
                self.ph[e[sampled]] += 1
            else:
                sampled = comp[e] >= tok[e]
        else:
            sampled = np.zeros(0, bool)
        return e, ns, sampled, npre

    def _start_onboard(self, q: int, o: int, nh: int, m: int, hit) -> bool:
        """Prefix blocks after the GPU hit that a lower tier holds: start loading them (True) or not.

        The request takes GPU blocks for its GPU hits and the loaded keys
        (published at once: they are the keys' GPU copies) and waits in the
        queue until ``self.loading[q]``; it is then admitted with them as hits.
        """
        keyarr = self.keyarr
        pool = self.pool
        evictable = pool.num_free_of(hit) if nh else 0
        wm = self.watermark_blocks if self.R else 0
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
        if nh:
            pool.touch(hit, self.exec_step)
            self.btab[o:o + nh] = hit
        self.held[q] = nh
        self.ncached[q] = nh
        self._alloc_blocks(q, k)
        keys = rest[:k]
        pool.publish(self.btab[o + nh:o + nh + k], keys, True)
        self.ncached[q] = nh + k
        self.loading[q] = self.tiers.onboard(keys, counts, self.B, self.clock)
        return True

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

    def _head_blocked(self) -> int:
        """By how many blocks the head of the queue misses admission's early full-prompt check (0: it does not).

        The first test :meth:`_admit` makes of a ready head with own keys: its whole
        prompt (or ``max_model_len``) in blocks, plus the watermark, against the free blocks.
        Requests still loading from a lower tier are passed over, as admission passes them.
        """
        q = self.waiting[0]
        if self.loading:
            loading = self.loading
            i = 0
            while q in loading:
                if loading[q] <= self.clock:
                    return 0  # its loads are done: admission takes it
                i += 1
                if i == len(self.waiting):
                    return 0
                q = self.waiting[i]
        if self.stale[q]:
            return 0
        if not (self.full_isl_own or (self.full_isl_untiered and not self.tiered[q])):
            # A head that let its blocks go (``tiered``) is offered loads first, and loads nothing
            # without room for one block beyond its GPU hits (_start_onboard). From its release on its
            # hits are known without a lookup (``hit_run``, FastPool.one_release_run): they only shrink,
            # as its blocks are evicted last block first. Without that room the full-prompt check fails
            # too: its hits are all free blocks (own keys) and fewer than its whole prompt.
            if self.hit_run is None or not self.R:
                return 0
            r = int(self.hit_run[q])
            if r < 0:
                return 0
            pool = self.pool
            if 1 + pool.run_left(int(self.koff[q]), r) + self.watermark_blocks <= pool.top + pool.nfifo:
                return 0  # room to load: admission looks at the tiers
        n = int(self.tok[q])
        if n > self.mml:
            n = self.mml
        pool = self.pool
        x = -(-n // self.B) + (self.watermark_blocks if self.R else 0) - pool.top - pool.nfifo
        return x if x > 0 else 0

    def _admit(self, budget: int, thr: int, ids_l: list, n_l: list) -> int:
        cfg = self.cfg
        B = self.B
        pool = self.pool
        waiting = self.waiting
        caching = self.caching
        mml = self.mml
        t = self.t
        skipped: list[int] = []
        koff, keyarr = self.koff, self.keyarr
        admitted: list[int] = []
        own_keys = self.own_keys
        # (with a tier, loads are started before that check: see _start_onboard)
        full_isl_own = self.full_isl_own
        full_isl_untiered = self.full_isl_untiered
        tiered = self.tiered
        # (async: a step in flight at a preemption may publish one more of its blocks after the release)
        hit_run = None if self.async_mode else self.hit_run
        ns: list[int] = []
        while budget > 0 and waiting:
            if self.R >= cfg.max_num_seqs:
                break
            q = waiting[0]
            if self.stale[q] > 0:
                skipped.append(waiting.popleft())
                continue
            kept = 0  # blocks the request keeps as its prefix hits (its loads are done)
            if self.loading:
                ready = self.loading.get(q)
                if ready is not None:
                    if ready > self.clock:
                        skipped.append(waiting.popleft())
                        continue
                    # its blocks are on the GPU now: they are its prefix hits below
                    del self.loading[q]
                    kept = self._keep_loaded(q)
            num_tokens = int(self.tok[q])
            capped = num_tokens if num_tokens < mml else mml  # min(), without the call
            if full_isl_own or (full_isl_untiered and not tiered[q]):
                x = -(-capped // B) + (self.watermark_blocks if self.R else 0) - pool.top - pool.nfifo
                if x > 0:
                    # the full-ISL check below fails whatever the prefix hits: with its own keys a
                    # waiting request's hits are all free blocks, counted back as evictable
                    pool.check_failed(x)
                    break
            nh = 0
            hit = None
            if kept:
                nh = kept
                hit = self.btab[int(koff[q]):int(koff[q]) + nh]
            elif caching:
                m = (num_tokens - 1) // B
                if m > 0:
                    o = int(koff[q])
                    k0 = o if keyarr is None else int(keyarr[o])
                    # its hits are known from its release on (see _head_blocked): what lookup_own gives
                    r = int(hit_run[q]) if hit_run is not None and tiered[q] else -1
                    if pool.kblock[k0] >= 0:
                        if r >= 0:
                            self.shortcuts["hit_runs"] += 1
                            left = pool.run_left(o, r)
                            hit = pool.kblock[o:o + left].copy()
                        elif own_keys:
                            hit = pool.lookup_own(o, m)
                        else:
                            hit = pool.lookup(np.arange(o, o + m) if keyarr is None else keyarr[o:o + m])
                        nh = hit.size
                    g = self._onboard_gate
                    if g is not None and self.status[g] >= FINISHED:
                        g = self._onboard_gate = None
                    if self.tiers is not None and nh < m and g is None and (tiered[q] or not own_keys):
                        if self._start_onboard(q, o, nh, m, hit):
                            if hit_run is not None:
                                self.load_from_run[q] = r >= 0
                            skipped.append(waiting.popleft())
                            continue
            h = nh * B
            n = num_tokens - h
            if 0 < thr < n:
                n = thr
            if not cfg.enable_chunked_prefill and n > budget:
                if not self.R and budget == cfg.max_num_batched_tokens and not self.loading:
                    # Its uncached tokens exceed the whole budget and nothing runs, so nothing will
                    # free budget or cache more of its prompt: it can never be scheduled. vLLM refuses
                    # such a config (max_num_batched_tokens < max_model_len without chunked prefill);
                    # here the request is dropped as unservable instead of blocking the queue.
                    if kept:
                        self._free(q, keep_keys=True)
                    waiting.popleft()
                    self.status[q] = DROPPED
                    t["dropped_unservable"] += 1
                    if q == self._onboard_gate:
                        self._onboard_gate = None
                    continue
                if kept:
                    self._free(q, keep_keys=True)
                break
            if n > budget:
                n = budget
            wm = self.watermark_blocks if self.R else 0
            if kept:  # counted as if let go: free and evictable
                evictable = kept
                free = pool.top + pool.nfifo + kept
            else:
                evictable = pool.num_free_of(hit) if nh else 0
                free = pool.top + pool.nfifo
            need_full = 0
            if cfg.scheduler_reserve_full_isl:
                need_full = -(-capped // B) - nh
                if need_full < 0:
                    need_full = 0
                need_full += evictable
                if need_full + wm > free:
                    pool.check_failed(need_full + wm - free)
                    if kept:
                        self._free(q, keep_keys=True)
                    break
            need_slot = h + n if h + n < mml else mml
            new = -(-need_slot // B) - nh
            if new < 0:
                new = 0
            if new + evictable + wm > free:
                pool.check_failed(new + evictable + wm - free)
                if kept:
                    self._free(q, keep_keys=True)
                break
            # both checks passed (pool.check_passed, inline: this runs per admission)
            x = free - wm - (need_full if need_full > new + evictable else new + evictable)
            if x < pool.slack:
                pool.slack = x
            o = int(koff[q])
            btab = self.btab
            if kept:
                pool.retouch(hit, self.exec_step)
            elif nh:
                pool.touch(hit, self.exec_step)
                btab[o:o + nh] = hit
            pre_q = self.npre[q] > 0
            if new > 0:
                blocks = pool.allocate(new, self.exec_step)
                btab[o + nh:o + nh + new] = blocks
            self.held[q] = nh + new
            self.ncached[q] = nh
            if caching:
                full = (h + n if h + n < num_tokens else num_tokens) // B
                if full > nh:
                    if own_keys and not pre_q:
                        # its own keys, never published (see _publish_one); the blocks just allocated
                        pool.publish_new(blocks[:full - nh], o + nh)
                        self.ncached[q] = full
                    else:
                        self._publish_one(q, full * B)
                if pre_q:
                    t["preempted_prefix_cache_queries"] += num_tokens
                    t["preempted_prefix_cache_hits"] += h
                    t["preempted_prefix_cache_requests"] += 1
                else:
                    t["prefix_cache_queries"] += num_tokens
                    t["prefix_cache_hits"] += h
                    t["prefix_cache_requests"] += 1
            if pre_q:
                t["recomputed_tokens"] += num_tokens - h
            waiting.popleft()
            self.run[self.R] = q
            self.R += 1
            self.rseq[q] = self.seq
            self.seq += 1
            if self.status[q] == WAITING:
                self.first_sched[q] = self.exec_step
                self.hit_first[q] = h
            self.status[q] = RUNNING
            self.comp[q] = h
            admitted.append(q)
            ns.append(n)
            budget -= n
        if skipped:
            waiting.extendleft(reversed(skipped))
        if admitted and ids_l is not None:
            ids_l.append(np.array(admitted, np.int64))
            n_l.append(np.array(ns, np.int64))
        return budget, admitted, ns

    # ------------------------------------------------------------- outputs
    def process(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray,
                step: int, t_end: float) -> None:
        """One ``update_from_output()`` for a schedule call's batch."""
        if not e.size:
            return
        status = self.status
        if self.async_mode:
            self.inflight[e] -= ns
            st = self.stale[e] > 0
            if _cnz(st):
                self.stale[e[st]] -= ns[st]
            act = sampled & (status[e] != FINISHED)
            st = st[act]
        else:
            act = sampled
        a = e[act]
        if not a.size:
            return
        tok = self.tok
        tok[a] += 1
        ft = a[self.first_token[a] < 0]
        if ft.size:
            self.first_token[ft] = step
            self.first_token_t[ft] = t_end
        stopped = tok[a] >= self.Pmax[a]
        if self.mml_binds:
            stopped |= tok[a] >= self.mml
        if self.async_mode:
            ph = self.ph
            had_ph = ph[a] > 0
            before_running = status[a] == RUNNING
            dec = ~st & had_ph
            ph[a[dec]] -= 1
            cc = a[dec & before_running]
            if cc.size and self.caching:
                self._publish(cc, self.comp[cc] - self.inflight[cc])
        if _cnz(stopped):
            fin = a[stopped]
            self.finish[fin] = step
            self.finish_t[fin] = t_end
            self.t["requests_cut_short"] += int(_cnz(tok[fin] < self.Pmax[fin]))
            in_wait = []
            for q in fin.tolist():
                self._free(q)
                if status[q] != RUNNING:
                    in_wait.append(q)
            self.gone[fin] = True
            R = self.R
            run = self.run[:R]
            keep = run[~self.gone[run]]
            self.R = keep.size
            self.run[:keep.size] = keep
            for q in in_wait:
                self.waiting.remove(q)
            status[fin] = FINISHED
            self.t["finished"] += fin.size

    # ------------------------------------------------------- lazy decoders
    def _lazify(self) -> None:
        """Enter lazy mode: steady decoders of the running queue become implicit."""
        R = self.R
        run = self.run[:R]
        c = self.comp[run]
        if self.async_mode:
            dec = self._lazify_async(run, c)
            if dec is None:
                return
        else:
            dec = (c == self.tok[run] - 1) & (self.first_token[run] >= 0)
        qs = run[dec]
        S = self.S
        a = c[dec] - S
        self.lz[qs] = True
        self.la[qs] = a
        self.kla[qs] = self.koff[qs] * self.B + a
        B = self.B
        buckets = self.buckets
        self.bcache = {}
        fin_at = self.fin_at
        fin = (self.Pmax[qs] - a - 2).tolist()
        ql = qs.tolist()
        if ql:
            # buckets by residue (empty here: _materialize cleared them)
            rr = (-a) % B
            order = rr.argsort(kind="stable")
            rs = rr[order]
            qo = qs[order].tolist()
            cuts = ((rs[1:] != rs[:-1]).nonzero()[0] + 1).tolist()
            lo = 0
            for hi in cuts + [len(ql)]:
                bk = buckets.get(rs.item(lo))
                if bk is None:
                    buckets[rs.item(lo)] = set(qo[lo:hi])
                else:
                    bk.update(qo[lo:hi])
                lo = hi
        for q, f in zip(ql, fin):
            lst = fin_at.get(f)
            if lst is None:
                fin_at[f] = [q]
            else:
                lst.append(q)
        self._fin_heap = list(fin_at)
        heapq.heapify(self._fin_heap)
        self.nl = run[~dec].tolist()
        self.D = int(qs.size)
        self.la_sum = int(a.sum())
        self.lazy_active = True

    def _lazify_async(self, run: np.ndarray, c: np.ndarray):
        """Asynchronous scheduling: which running requests become lazy decoders (mask), or None.

        Applies between the output of step ``S - 2`` and the schedule of
        ``S`` with step ``S - 1`` in flight (the batch queue holds just it).
        A steady decoder was scheduled one token in that step and holds
        ``comp = tok = la + S``, one placeholder and one token in flight; its
        output in the step in flight becomes implicit, the other entries of
        that step stay explicit (``_fp_prev``), processed by
        :meth:`_fast_process_async` after the next schedule.
        """
        queue = self._queue
        if len(queue) != 1:
            return None
        e, ns, sampled, step, t_end = queue[0]
        mark = np.zeros(self.wl.n, bool)
        mark[run] = False
        mark[e[(ns == 1) & sampled]] = True
        dec = ((c == self.tok[run]) & (self.ph[run] == 1) & (self.inflight[run] == 1)
               & (self.first_token[run] >= 0) & (self.status[run] == RUNNING) & mark[run])
        queue.clear()
        mark[e] = False
        mark[run[dec]] = True
        rest = ~mark[e]
        self._fp_prev = (e[rest].tolist(), sampled[rest].tolist(), ns[rest].tolist(), step, t_end)
        self._finishing = []
        return dec

    def _materialize(self, keep: bool = False) -> None:
        """Leave lazy mode: write the implicit decoder state back to the arrays.

        ``keep``: for a jump, when every running request is a lazy decoder:
        only the arrays the jump reads are written; the decoders stay lazy
        (``lz``), as do the buckets and finishing steps, for
        :meth:`_relazify`. Deferred publication stays deferred: the jump
        publishes each decoder's full blocks in one go (decode blocks carry
        the request's own keys, so the order across requests is immaterial).
        """
        R = self.R
        run = self.run[:R]
        if keep:
            c = self.la[run] + self.S
            self.comp[run] = c
            self.tok[run] = c + 1
            self.held[run] = (c + (self.B - 1)) // self.B
            if not self.defer_pub and self.caching:
                self.ncached[run] = c // self.B
            self.lazy_active = False
            return
        qs = run[self.lz[run]]
        amode = self.async_mode
        if qs.size:
            c = self.la[qs] + self.S
            self.comp[qs] = c
            # async: the token of the step in flight is computed (one placeholder), not yet received
            self.tok[qs] = c if amode else c + 1
            self.held[qs] = (c + (self.B - 1)) // self.B
            if amode:
                self.ph[qs] = 1
                self.inflight[qs] = 1
            if self.defer_pub:
                self._publish(qs, c - 1 if amode else c)
            elif self.caching:
                self.ncached[qs] = c // self.B
            self.lz[qs] = False
        if amode:
            self._unlazy_in_flight(qs)
        self.lazy_active = False
        self.buckets = {}
        self.bcache = {}
        self.fin_at = {}
        self._fin_heap = []
        self.nl = []
        self.D = 0
        self.la_sum = 0

    def _unlazy_in_flight(self, qs: np.ndarray) -> None:
        """Async: the step in flight as the general path's batch-queue entry (decoders ``qs`` explicit)."""
        pend = self._fp_prev
        self._fp_prev = None
        if pend is None:
            return
        eq, smp, en, step, t_end = pend
        if not qs.size and not eq:
            return
        ids = qs.tolist() + eq
        ns = [1] * qs.size + en
        sampled = [True] * qs.size + smp
        rseq = self.rseq
        order = sorted(range(len(ids)), key=lambda i: rseq[ids[i]])
        self._queue.appendleft((np.array([ids[i] for i in order], np.int64),
                                np.array([ns[i] for i in order], np.int64),
                                np.array([sampled[i] for i in order], bool), step, t_end))

    def _relazify(self, k: int) -> None:
        """Back to lazy mode after ``_materialize(keep=True)`` and a jump of ``k`` steps.

        Every running request was a lazy decoder and still is: a decoder's
        ``la + S`` computed tokens moved on by ``k`` as its arrays did, so
        ``S`` does, and the buckets, finishing steps (none before ``S + k``:
        the jump stops short of every completion), positions and ``la_sum``
        stay what a fresh :meth:`_lazify` would derive.
        """
        self.S += k
        self.lazy_active = True

    def _fast_schedule(self):
        """One schedule call in lazy mode, or None (nothing changed) when it needs the general path.

        Applies when every running request gets all the tokens it wants
        within the budget (the last running request may take what is left);
        decoders take one token each and the blocks go, in running order, to
        decoders at a block boundary and to prefill chunks; when blocks run
        short, :meth:`_lazy_pressure` preempts as vLLM does. Returns
        ``(tokens, prefill tokens, scheduled requests, preemptions)``.
        """
        cfg = self.cfg
        B = self.B
        R = self.R
        waiting = self.waiting
        thr = cfg.long_prefill_token_threshold if R + len(waiting) > 1 else 0
        D = self.D
        S = self.S
        amode = self.async_mode
        # async: decoders whose last token is in flight are skipped (and finished by its output)
        fin = self.fin_at.get(S - 1) if amode else None
        left = cfg.max_num_batched_tokens - (D - len(fin) if fin else D)
        if left < 0:
            return None
        comp, tok, held, rseq = self.comp, self.tok, self.held, self.rseq
        ph, Pmax = self.ph, self.Pmax
        pre = []
        tot_need = 0
        nl = self.nl
        last = len(nl) - 1
        for i, q in enumerate(nl):
            c = int(comp[q])
            if amode:
                p = int(ph[q])
                if p > 0 and c + 2 - p >= Pmax[q]:
                    continue  # its last token is in flight
                n = int(tok[q]) + p - c
                if n <= 0:
                    continue
            else:
                n = int(tok[q]) - c
            if 0 < thr < n:
                n = thr
            if n > left:
                # the budget runs out at this request: fine when nothing comes after it
                if i != last or q != int(self.run[R - 1]):
                    return None
                n = left
                if n <= 0:
                    break
            left -= n
            need = -(-(c + n) // B) - int(held[q])
            if need < 0:
                need = 0
            pre.append((q, n, need))
            tot_need += need
        cross = self.buckets.get(S % B)
        ncross = len(cross) if cross else 0
        if fin and ncross:
            ncross -= len(cross.intersection(fin))
        tot = tot_need + ncross
        pool = self.pool
        koff, la, btab = self.koff, self.la, self.btab
        npre = 0
        free = pool.top + pool.nfifo
        if tot > free:
            pool.check_failed(tot - free)
            if amode:
                return None  # preemption with a step in flight: the general path
            pre, npre = self._lazy_pressure(pre, cross, S)
            tot = 0  # blocks handed out there
            D = self.D
        elif free - tot < pool.slack:  # pool.check_passed, inline: this runs per step
            pool.slack = free - tot
        if fin:
            del self.fin_at[S - 1]
            for q in fin:
                self._unlazy(q, S)
                ph[q] = 0
                self.inflight[q] = 0
            self.D -= len(fin)
            D = self.D
            self._finishing = fin
        # blocks, in running order
        if tot:
            if not tot_need:
                r = S % B
                kl = self.bcache.get(r)
                if kl is None:
                    kl = self._crossing_kl(r)
                pos = (kl + S) // B
            else:
                ent = [(rseq[q], q, int(koff[q]) + int(held[q]), need) for q, n, need in pre if need]
                pos = self._slots(ent, cross if ncross else None, S)
                for q, n, need in pre:
                    if need:
                        held[q] += need
            btab[pos] = pool.allocate(tot, self.exec_step)
        # publication, in running order
        if self.caching:
            pub = None if self.defer_pub else self.buckets.get((S + 1) % B)
            ent = []
            for q, n, need in pre:
                full = min(int(comp[q]) + n, int(tok[q])) // B
                nc = int(self.ncached[q])
                if full > nc:
                    ent.append((rseq[q], q, int(koff[q]) + nc, full - nc))
                    self.ncached[q] = full
            if ent or pub:
                if not ent:
                    qa = np.array(sorted(pub, key=rseq.__getitem__), np.int64)
                    pos = koff[qa] + (la[qa] + S + 1) // B - 1
                else:
                    # the block a decoder fills this step is the one it was handed one step later
                    pos = self._slots(ent, pub or None, S + 1, back=1)
                keys = pos if self.keyarr is None else self.keyarr[pos]
                pool.publish(btab[pos], keys)
        eq = [x[0] for x in pre]
        en = [x[1] for x in pre]
        if waiting and left > 0 and not npre and self.R < cfg.max_num_seqs:
            x = self._head_blocked()
            if x:  # what _admit would find first, without the call
                pool.check_failed(x)
                adm = None
            else:
                _, adm, ans = self._admit(left, thr, None, None)
            if adm:
                eq += adm
                en += ans
                self.nl.extend(adm)
        ntok = D
        n_prefill = 0
        if amode:
            sampled = []
            inflight = self.inflight
            for q, n in zip(eq, en):
                c = int(comp[q]) + n
                comp[q] = c
                inflight[q] += n
                smp = c >= tok[q] + ph[q]
                if smp:
                    ph[q] += 1
                sampled.append(smp)
                ntok += n
                if n > 1 or not smp:
                    n_prefill += n
        elif len(eq) <= 8:
            sampled = []
            for q, n in zip(eq, en):
                c = int(comp[q]) + n
                comp[q] = c
                smp = c >= tok[q]
                sampled.append(smp)
                ntok += n
                if n > 1 or not smp:
                    n_prefill += n
        else:
            e, ns = np.array(eq, np.int64), np.array(en, np.int64)
            comp[e] += ns
            smp = comp[e] >= tok[e]
            ntok += int(ns.sum())
            n_prefill = int(ns[~smp | (ns > 1)].sum())
            sampled = smp.tolist()
        self.S = S + 1
        self._fp = (eq, sampled, S, en)
        return ntok, n_prefill, D + len(eq), npre

    def _first_finish(self) -> int:
        """``min(self.fin_at)``: the first fast step a lazy decoder finishes at."""
        h, fin_at = self._fin_heap, self.fin_at
        while h[0] not in fin_at:
            heapq.heappop(h)
        return h[0]

    def _crossing_kl(self, r: int) -> np.ndarray:
        """``koff * B + la`` of the lazy decoders in bucket ``r`` (residue of ``-la``), in running order."""
        kl = self.bcache.get(r)
        if kl is None:
            qa = np.array(sorted(self.buckets[r], key=self.rseq.__getitem__), np.int64)
            kl = self.bcache[r] = self.kla[qa]
        return kl

    def _lazy_window(self, tick: int, next_arrival, until, max_k: int):
        """Several lazy steps at once, identical to as many :meth:`_fast_schedule` calls.

        Sync lazy mode with every running request a lazy decoder, no admission
        possible, no completion, no arrival or ``until`` inside (arrivals ignored
        at the running cap, as :meth:`_jump` does) and enough free blocks for
        the decoders that cross a block boundary. Returns None, or ``(k,
        used)``: the steps made and the blocks in use after each. The caller
        counts the steps; this advances the clock, the block tables, ``S``,
        ``exec_step`` and the step series.
        """
        cfg = self.cfg
        D = self.D
        waiting = self.waiting
        at_cap = self.R >= cfg.max_num_seqs
        left = cfg.max_num_batched_tokens - D
        if left < 0 or (waiting and not at_cap and left > 0):
            return None
        time_mode = self.time_mode
        bound = self.log is not None or not at_cap or self._external
        k = max_k if max_k < _WINDOW_STEPS else _WINDOW_STEPS
        if not time_mode:
            if bound and next_arrival is not None and int(next_arrival) - tick < k:
                k = int(next_arrival) - tick
            if until is not None and int(until) - tick < k:
                k = int(until) - tick
            if k < 2:
                return None
        S = self.S
        f = self._first_finish() - S
        if f < k:
            k = f
            if k < 2:
                return None
        B = self.B
        buckets = self.buckets
        pool = self.pool
        free = pool.top + pool.nfifo
        terms = self.terms
        if terms is None:
            dt = self.step_time(D, D)
        else:
            base = self.la_sum + D * (S + 1)
            dstep = terms.decode_step(D)
        # step by step: its start on the clock (in time mode a step starts only before the next
        # arrival, when bounded, and before ``until``) and the blocks its crossing decoders take
        clock = self.clock
        starts = []
        cnt = []
        need = 0
        for j in range(k):
            if j and time_mode and ((bound and next_arrival is not None and clock >= next_arrival)
                                    or (until is not None and clock >= until)):
                break
            b = buckets.get((S + j) % B)
            c = len(b) if b else 0
            if need + c > free:
                break
            need += c
            cnt.append(c)
            starts.append(clock)
            clock += dt if terms is None else dstep(base + D * j)
        k = len(starts)
        if k < 2:
            return None
        if free - need < pool.slack:  # pool.check_passed of the k single steps' checks, the last the closest
            pool.slack = free - need
        u = u0 = pool.usable - free
        used = []
        for c in cnt:
            u += c
            used.append(u)
        step0 = self.exec_step
        if u > u0:
            # the crossing decoders' slots, step by step in running order, as _fast_schedule hands them out
            kls, ss, cs = [], [], []
            for j, c in enumerate(cnt):
                if c:
                    kls.append(self._crossing_kl((S + j) % B))
                    ss.append(j)
                    cs.append(c)
            if len(kls) == 1:
                pos = (kls[0] + (S + ss[0])) // B
                now = step0 + ss[0]
            else:
                sj = np.repeat(np.array(ss, np.int64), cs)
                pos = (np.concatenate(kls) + (sj + S)) // B
                now = sj + step0
            self.btab[pos] = pool.allocate(u - u0, now)
        self._log_decode_steps(starts, used)
        self.clock = clock
        self.S = S + k
        self.exec_step = step0 + k
        self._fp = ([], [], S + k - 1, [])
        return k, used

    def _slots(self, ent: list, decoders, S: int, back: int = 0) -> np.ndarray:
        """Flat block-table slots of ``ent`` (``(rseq, q, first slot, count)``) plus one slot per lazy decoder.

        A decoder's slot is its block ``(la + S) // B - back``. All entries are
        taken in running order (``rseq``), each entry's slots consecutive.
        """
        koff, la, B = self.koff, self.la, self.B
        if decoders:
            ent = ent + [(self.rseq[q], q, -1, 1) for q in decoders]
            ent.sort()
        qa = np.array([x[1] for x in ent], np.int64)
        cnt = np.array([x[3] for x in ent], np.int64)
        start = np.array([x[2] for x in ent], np.int64)
        if decoders:
            d = start < 0
            start[d] = koff[qa[d]] + (la[qa[d]] + S) // B - back
        cs = np.cumsum(cnt)
        return np.repeat(start - (cs - cnt), cnt) + np.arange(int(cs[-1]))

    def _lazy_pressure(self, pre: list, cross, S: int):
        """Blocks of a lazy step when they run short: vLLM's sequential rule.

        Requests in running order take their blocks one by one; one that
        cannot preempts ``running[-1]`` (materialized first if lazy) until it
        fits or preempted itself, which ends the pass. Returns the prefill
        entries still scheduled and the number of preemptions.
        """
        rseq, pool = self.rseq, self.pool
        ent = [(rseq[q], q, n, need, False) for q, n, need in pre]
        if cross:
            ent += [(rseq[q], q, 1, 1, True) for q in cross]
        ent.sort()
        npre = 0
        victims = set()
        kept = []
        take: list = []  # requests that took their blocks since the last preemption, in order
        free = pool.num_free()
        for _, q, n, need, dec in ent:
            if q in victims:
                break  # every request after it was preempted too
            if need > free:
                self._lazy_take(take, S)  # (one allocation: what one allocation each gives)
                take = []
                stop = False
                while need > pool.num_free():
                    self.R -= 1
                    v = int(self.run[self.R])
                    self._preempt_lazy(v, S)
                    victims.add(v)
                    npre += 1
                    if v == q:
                        stop = True
                        break
                if stop:
                    break
                free = pool.num_free()
            if need:
                take.append((q, need, dec))
                free -= need
            if not dec:
                kept.append((q, n, need))
        self._lazy_take(take, S)
        return kept, npre

    def _lazy_take(self, take: list, S: int) -> None:
        """Blocks for ``(request, blocks, decoder)`` entries in order, from one allocation: a decoder's
        block for its slot ``S`` ahead, a prefill's after those it holds."""
        if not take:
            return
        koff, btab = self.koff, self.btab
        if len(take) == 1:
            q, need, dec = take[0]
            if dec:
                btab[int(koff[q]) + (int(self.la[q]) + S) // self.B] = self.pool.allocate(1, self.exec_step)[0]
            else:
                self._alloc_blocks(q, need)
            return
        if all(dec for _, _, dec in take):
            qs = np.array([q for q, _, _ in take], np.int64)
            btab[koff[qs] + (self.la[qs] + S) // self.B] = self.pool.allocate(qs.size, self.exec_step)
            return
        blocks = self.pool.allocate(sum(need for _, need, _ in take), self.exec_step)
        i = 0
        for q, need, dec in take:
            if dec:
                btab[int(koff[q]) + (int(self.la[q]) + S) // self.B] = blocks[i]
            else:
                h = int(self.held[q])
                o = int(koff[q]) + h
                btab[o:o + need] = blocks[i:i + need]
                self.held[q] = h + need
            i += need

    def _preempt_lazy(self, v: int, S: int) -> None:
        """Preempt running request ``v`` during a lazy step."""
        if self.lz[v]:
            B = self.B
            a = int(self.la[v])
            c = a + S
            self.comp[v] = c
            self.tok[v] = c + 1
            self.held[v] = -(-c // B)
            if self.defer_pub:
                self._publish_one(v, c)
            elif self.caching:
                self.ncached[v] = c // B
            self.lz[v] = False
            r = (-a) % B
            self.buckets[r].discard(v)
            self.bcache.pop(r, None)
            f = int(self.Pmax[v]) - a - 2
            lst = self.fin_at[f]
            lst.remove(v)
            if not lst:
                del self.fin_at[f]
            self.D -= 1
            self.la_sum -= a
        else:
            self.nl.remove(v)
        self._preempt(v)

    def _fast_process(self, step: int, t_end: float) -> None:
        """``update_from_output()`` after :meth:`_fast_schedule` (scalar: few entries per step)."""
        e, sampled, S_old, _ = self._fp
        S = self.S
        comp, Pmax = self.comp, self.Pmax
        fins = []
        dec = self.fin_at.pop(S_old, None)
        if dec:
            for q in dec:
                self._unlazy(q, S)
            self.D -= len(dec)
            fins = dec
        if e:
            nl = self.nl
            for q, smp in zip(e, sampled):
                if not smp:
                    continue
                t1 = self._receive_token(q, step, t_end)
                nl.remove(q)
                if t1 >= Pmax[q]:
                    fins = fins + [q] if fins else [q]
                    continue
                self._make_lazy(q, int(comp[q]) - S)
        if fins:
            self._finish_all(fins, step, t_end)

    def _fast_process_async(self, pend: tuple) -> None:
        """Async lazy mode: the output of the step in flight ``pend``, after the next schedule.

        The general path's ``process`` for its explicit entries (tokens in
        flight, placeholders, publication up to the computed tokens,
        completion); its implicit decoders need nothing, except those whose
        last token it was (skipped by the schedule just made, see
        :meth:`_fast_schedule`): they finish. An entry whose prefill ended in
        it and that the schedule just made gave one decode token becomes a
        lazy decoder, and that token's output implicit.
        """
        eq, sampled, en, step, t_end = pend
        fins = self._finishing
        self._finishing = []
        if eq:
            comp, ph, inflight, Pmax = self.comp, self.ph, self.inflight, self.Pmax
            nl = self.nl
            cur_eq, cur_smp, _, cur_en = self._fp
            for q, smp, n in zip(eq, sampled, en):
                inflight[q] -= n
                if not smp:
                    continue
                t1 = self._receive_token(q, step, t_end)
                ph[q] -= 1
                if self.caching:
                    self._publish_one(q, int(comp[q]) - int(inflight[q]))
                if t1 >= Pmax[q]:
                    nl.remove(q)
                    fins = fins + [q] if fins else [q]
                    continue
                if ph[q] == 1 and inflight[q] == 1 and q in cur_eq:
                    i = cur_eq.index(q)
                    if cur_en[i] == 1 and cur_smp[i]:
                        del cur_eq[i], cur_smp[i], cur_en[i]
                        nl.remove(q)
                        self._make_lazy(q, int(comp[q]) - self.S)
        if fins:
            self._finish_all(fins, step, t_end)

    def _receive_token(self, q: int, step: int, t_end: float) -> int:
        """Request ``q`` receives a sampled token from the output of ``step``; returns its token count."""
        t1 = int(self.tok[q]) + 1
        self.tok[q] = t1
        if self.first_token[q] < 0:
            self.first_token[q] = step
            self.first_token_t[q] = t_end
        return t1

    def _make_lazy(self, q: int, a: int) -> None:
        """Running request ``q`` becomes a lazy decoder with ``la = a``."""
        B = self.B
        self.lz[q] = True
        self.la[q] = a
        self.kla[q] = self.kbase[q] + a
        r = (-a) % B
        bk = self.buckets.get(r)
        if bk is None:
            self.buckets[r] = {q}
        else:
            bk.add(q)
        self.bcache.pop(r, None)
        f = int(self.Pmax[q]) - a - 2
        lst = self.fin_at.get(f)
        if lst is None:
            self.fin_at[f] = [q]
            heapq.heappush(self._fin_heap, f)
        else:
            lst.append(q)
        self.D += 1
        self.la_sum += a

    def _unlazy(self, q: int, S: int) -> None:
        """Lazy decoder ``q`` leaves lazy mode having computed ``la + S`` tokens (and received one more).

        Its deferred publication waits for its release (own keys, see
        :meth:`_finish_all`) or happens now; the caller adjusts ``D``.
        """
        B = self.B
        a = int(self.la[q])
        c = a + S
        self.comp[q] = c
        self.tok[q] = c + 1
        self.held[q] = -(-c // B)
        if self.defer_pub:
            if not (self.own_keys and not self.npre[q]):
                self._publish_one(q, c)
            # else: published together with the release (_finish_all)
        elif self.caching:
            self.ncached[q] = c // B
        self.lz[q] = False
        self.la_sum -= a
        r = (-a) % B
        self.buckets[r].discard(q)
        self.bcache.pop(r, None)

    def _finish_all(self, fins: list, step: int, t_end: float) -> None:
        """Finish requests ``fins`` (output of ``step``): release their blocks in running order."""
        B = self.B
        comp, npre = self.comp, self.npre
        own_pub = self.own_keys and self.defer_pub
        if fins:
            if len(fins) > 1:
                fins = sorted(fins, key=self.rseq.__getitem__)
            finish, finish_t, gone, status = self.finish, self.finish_t, self.gone, self.status
            if own_pub:
                pool, koff, btab, held, ncached = self.pool, self.koff, self.btab, self.held, self.ncached
            for q in fins:
                finish[q] = step
                finish_t[q] = t_end
                if own_pub:
                    # _publish_one(q, comp) (its own keys; a no-op unless deferred above) + _free(q)
                    o = int(koff[q])
                    h = int(held[q])
                    nc = int(ncached[q])
                    full = int(comp[q]) // B
                    blocks = btab[o:o + h]
                    if full > nc:
                        if npre[q]:
                            self._publish_one(q, full * B)
                        else:
                            pool.publish_new(blocks[nc:full], o + nc)
                        nc = full
                    if h:
                        pool.release_own(blocks, nc, o)
                    held[q] = 0
                    ncached[q] = 0
                else:
                    self._free(q)
                gone[q] = True
                status[q] = FINISHED
            run = self.run[:self.R]
            keep = run[~gone[run]]
            self.R = keep.size
            self.run[:keep.size] = keep
            self.t["finished"] += len(fins)

    def _jump_precheck(self, next_arrival, tick: int) -> bool:
        """In lazy mode: could :meth:`_jump` advance at least 2 steps (cheap, no materializing)?"""
        if self.nl or not self.D:
            return False
        at_cap = self.R >= self.cfg.max_num_seqs
        if self.waiting and not at_cap:
            return False
        if self.R > self.cfg.max_num_batched_tokens:
            return False
        if self._first_finish() - self.S < 2:
            return False
        if (self.log is not None or not at_cap or self._external) and next_arrival is not None and not self.time_mode:
            if int(next_arrival) - tick < 2:
                return False
        return True

    # ------------------------------------------------------------ step cost
    def step_terms(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray, lazy_S: int | None = None):
        """Cost-model inputs of the step just scheduled (``comp`` already advanced).

        Returns ``(prefill_tokens, prefill_attention_tokens, decode_tokens,
        decode_context_tokens, num_reqs, prefill_kv_tokens)``: a prefill chunk
        of ``n`` tokens starting at ``c`` computed tokens attends to ``n * c +
        n (n + 1) / 2`` context tokens and reads ``c + n`` KV tokens; a decode
        token attends to ``c + 1``. With ``lazy_S`` (the fast step's counter
        before the step) the implicit decoders are added.
        """
        c0 = self.comp[e] - ns
        pf = ~sampled | (ns > 1)
        npf = ns[pf]
        cpf = c0[pf]
        P = int(npf.sum())
        A = int((npf * cpf).sum() + (npf * (npf + 1) // 2).sum())
        PK = int(cpf.sum()) + P
        dec = ~pf
        D = int(dec.sum())
        C = int((c0[dec] + 1).sum())
        R = int(e.size)
        if lazy_S is not None and self.D:
            D += self.D
            R += self.D
            C += self.la_sum + self.D * (lazy_S + 1)
        return P, A, D, C, R, PK

    def _cost_time(self, terms) -> float:
        P, A, D, C, R, PK = terms
        return float(self.step_cost.step_time(P, A, D, C, R, prefill_kv_tokens=PK)[self.cost_index])

    def _lazy_step_seconds(self) -> float:
        """Cost-model seconds of the lazy step just scheduled (materialized entries + implicit decoders)."""
        eq, sampled, S, en = self._fp
        comp = self.comp
        P = A = PK = Dm = C = 0
        for q, smp, n in zip(eq, sampled, en):
            c0 = int(comp[q]) - n
            if n > 1 or not smp:
                P += n
                A += n * c0 + n * (n + 1) // 2
                PK += c0 + n
            else:
                Dm += 1
                C += c0 + 1
        D = self.D
        C += self.la_sum + D * (S + 1)
        return self.terms.time(P, A, Dm + D, C, len(eq) + D, PK)

    def _step_seconds(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> float:
        """Cost-model seconds of the (general path) step just scheduled."""
        if not e.size:
            return 0.0
        return self.terms.time(*self.step_terms(e, ns, sampled))

    # ----------------------------------------------------------------- run
    def _unservable(self, usable: int | None = None) -> np.ndarray:
        """Requests that can never fit in ``usable`` blocks (default: this pool's), dropped on arrival."""
        wl = self.wl
        if usable is None:
            usable = self.pool.usable
        ctx = np.minimum(wl.prompt_len + wl.output_len - 1, self.mml)
        return (-(-ctx // self.B) > usable) | (wl.prompt_len >= self.mml)

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
        self._pending = self.wl.n if external else 0
        self._tick = 0
        self._queue: deque = deque()
        self._progress = progress
        self._next_report = 0.05
        self._done = False
        self._external = external

    @property
    def now(self) -> float:
        """The engine's time: seconds for arrivals in seconds, else schedule calls."""
        return self.clock if self.time_mode else self._tick

    @property
    def busy(self) -> bool:
        """Something is running, waiting or in flight."""
        return bool(self.R or self.waiting or self._queue)

    def submit(self, q: int) -> None:
        """Request ``q`` arrives now (external mode): dropped if unservable, else queued."""
        if self._drop[q]:
            self.status[q] = DROPPED
            self.t["dropped_unservable"] += 1
        else:
            self.waiting.append(q)

    def close(self) -> None:
        """Close the run: write lazy state back, finalize pool metrics, count unfinished requests."""
        if self.lazy_active:
            self._materialize()
        self.pool.finalize_metrics()
        status = self.status
        self.unfinished = int(((status != FINISHED) & (status != DROPPED)).sum())

    def advance(self, until: float | None = None) -> bool:
        """Run schedule calls until the engine's time reaches ``until`` (None: until all work is done).

        An idle engine waits (its time jumps to ``until``). Returns True when
        the run is over (no work left and no arrival of its own to come, or
        ``max_steps`` reached).
        """
        if self._done:
            return True
        wl = self.wl
        cfg = self.cfg
        n = wl.n
        order = self._order
        arr_sorted = self._arr
        drop = self._drop
        pending = self._pending
        tick = self._tick
        depth = 2 if self.async_mode else 1
        queue = self._queue
        t = self.t
        pool = self.pool
        usable = pool.usable
        time_mode = self.time_mode
        log = self.log
        waiting = self.waiting
        status = self.status
        step_time = self.step_time
        max_steps = cfg.max_steps
        progress = self._progress
        next_report = self._next_report
        done = False
        # additive totals and peaks kept in locals, merged into ``t`` on the way out
        calls = steps = tokens = prefill = block_steps = 0
        pk_used, pk_run, pk_wait = t["peak_kv_blocks_used"], t["peak_running"], t["peak_waiting"]
        # no jumps (nor lazy windows) with kv_offload_threshold: it offloads after every step
        jumps = self.accelerate and not self.async_mode and self.step_cost is None and self.offload_at is None
        lazy_ok = self.lazy_ok
        # several lazy steps at once (sync; blocks published on release or never)
        window = jumps and (self.defer_pub or not self.caching)
        max_seqs = cfg.max_num_seqs
        while True:
            now = self.clock if time_mode else tick
            if until is not None and now >= until:
                break
            while pending < n and arr_sorted[pending] <= now:
                q = order[pending]
                pending += 1
                if drop[q]:
                    status[q] = DROPPED
                    t["dropped_unservable"] += 1
                else:
                    waiting.append(q)
            has_req = bool(self.R or waiting)
            if not has_req and not queue:
                if pending >= n:
                    if until is None:
                        done = True
                    elif time_mode:
                        self.clock = max(self.clock, float(until))
                    else:
                        tick = max(tick, int(until))
                    break
                nxt = arr_sorted[pending]
                if until is not None and nxt > until:
                    nxt = until
                if time_mode:
                    self.clock = max(self.clock, float(nxt))
                else:
                    tick = max(tick, int(nxt))
                continue
            if tick >= max_steps:
                done = True
                break
            if jumps and has_req and not queue and self.R and self.exec_step >= self._retry_jump_at:
                nxt = arr_sorted[pending] if pending < n else None
                if until is not None and (nxt is None or until < nxt):
                    nxt = until
                if self.lazy_active:
                    if self._jump_precheck(nxt, tick):
                        self._materialize(keep=True)
                        jumped = self._jump(nxt, tick, max_steps - tick)
                        self._relazify(jumped)
                    else:
                        jumped = 0
                else:
                    jumped = self._jump(nxt, tick, max_steps - tick)
                if jumped:
                    self.shortcuts["jumped_steps"] += jumped
                    tick += jumped
                    self._backoff = 1
                    continue
                self._retry_jump_at = self.exec_step + self._backoff
                self._backoff = min(2 * self._backoff, 16)
            if has_req:
                res = None
                if lazy_ok:
                    if not self.lazy_active and self.exec_step >= self._lazy_retry_at:
                        self._lazify()
                    if (window and self.lazy_active and not self.nl and self.D
                            and not (waiting and self.R < max_seqs)  # (most of) _lazy_window's first test
                            and (time_mode or pending >= n or arr_sorted[pending] - tick >= 2
                                 or (self.R >= max_seqs and log is None and not self._external))
                            and (progress is None or not (n and t["finished"] / n >= next_report))):
                        win = self._lazy_window(
                            tick, arr_sorted[pending] if pending < n else None, until, max_steps - tick)
                        if win is not None:
                            k, used = win
                            self.shortcuts["window_steps"] += k
                            calls += k
                            steps += k
                            tokens += k * self.D
                            block_steps += sum(used)
                            if used[-1] > pk_used:
                                pk_used = used[-1]
                            if self.R > pk_run:
                                pk_run = self.R
                            if len(waiting) > pk_wait:
                                pk_wait = len(waiting)
                            tick += k
                            continue
                    if self.lazy_active:
                        res = self._fast_schedule()
                        if res is None:
                            self._materialize()
                            self._lazy_retry_at = self.exec_step + 1
                if res is None:
                    e, ns, sampled, npre = self.schedule()
                    ntok = int(ns.sum()) if ns.size else 0
                    n_prefill = int(ns[~sampled | (ns > 1)].sum()) if ntok else 0
                    nreq = int(e.size)
                else:
                    ntok, n_prefill, nreq, npre = res
                    self.shortcuts["lazy_steps"] += 1
                calls += 1
                if npre:
                    t["preemptions"] += npre
                used = usable - pool.top - pool.nfifo
                if used > pk_used:
                    pk_used = used
                nr, nw = self.R, len(waiting)
                if nr > pk_run:
                    pk_run = nr
                if nw > pk_wait:
                    pk_wait = nw
                step = self.exec_step
                if log is not None and (ntok > 0 or npre > 0):
                    log["step"].append(step)
                    log["time_s"].append(self.clock)
                    log["num_running"].append(nr)
                    log["num_waiting"].append(nw)
                    log["num_scheduled_tokens"].append(ntok)
                    log["kv_blocks_used"].append(used)
                    log["num_preempted"].append(npre)
                if ntok > 0:
                    steps += 1
                    tokens += ntok
                    prefill += n_prefill
                    block_steps += used
                    self.exec_step += 1
                tick += 1
                if self.terms is not None:
                    self.clock += self._lazy_step_seconds() if res is not None else self._step_seconds(e, ns, sampled)
                elif self.step_cost is None:
                    self.clock += step_time(ntok, nreq)
                elif res is not None:
                    fe, fs, fS, fns = self._fp
                    self.clock += self._cost_time(self.step_terms(
                        np.array(fe, np.int64), np.array(fns, np.int64), np.array(fs, bool), lazy_S=fS))
                else:
                    self.clock += self._cost_time(self.step_terms(e, ns, sampled))
                if self.loading and ntok == 0 and not self.R:
                    # only requests waiting for onboarded blocks: wait for the first load (or arrival)
                    nxt_t = min(self.loading.values())
                    if nxt_t <= self.clock:
                        # every load is done, yet nothing could be admitted: the head of the queue
                        # needs the blocks that loaded requests behind it hold. Let those go (they
                        # stay cached) so the queue moves; vLLM would wait here for ever.
                        for q in list(self.loading):
                            self._free(q, keep_keys=True)
                        self.loading.clear()
                        self.tiers.load_stalls += 1
                        self._onboard_gate = self.waiting[0] if self.waiting else None
                    if pending < n and time_mode:
                        nxt_t = min(nxt_t, arr_sorted[pending])
                    if until is not None and time_mode:
                        nxt_t = min(nxt_t, until)
                    self.clock = max(self.clock, nxt_t)
                if self.offload_at is not None:
                    self._offload_early()
                if res is not None:
                    if self.async_mode:
                        pend = self._fp_prev
                        fe, fs, _, fn = self._fp
                        self._fp_prev = (fe, fs, fn, step, self.clock)
                        if pend is not None:
                            self._fast_process_async(pend)
                    else:
                        self._fast_process(step, self.clock)
                    if progress is not None and n and t["finished"] / n >= next_report:
                        progress(min(1.0, (t["finished"] + t["dropped_unservable"]) / n))
                        next_report += 0.05
                    continue
                queue.appendleft((e, ns, sampled, step, self.clock))
                if len(queue) < depth and (ntok > 0 or self.R or waiting):
                    continue
            elif not queue:
                continue
            e, ns, sampled, step, t_end = queue.pop()
            self.process(e, ns, sampled, step, t_end)
            if progress is not None and n and t["finished"] / n >= next_report:
                progress(min(1.0, (t["finished"] + t["dropped_unservable"]) / n))
                next_report += 0.05
        t["peak_kv_blocks_used"] = max(t["peak_kv_blocks_used"], pk_used)
        t["peak_running"] = max(t["peak_running"], pk_run)
        t["peak_waiting"] = max(t["peak_waiting"], pk_wait)
        t["num_schedule_calls"] += calls
        t["num_steps"] += steps
        t["total_scheduled_tokens"] += tokens
        t["total_prefill_tokens"] += prefill
        t["total_decode_tokens"] += tokens - prefill
        t["kv_block_steps"] += block_steps
        self._pending = pending
        self._tick = tick
        self._next_report = next_report
        self._done = done
        return done

    # ---------------------------------------------------------------- jumps
    def _jump(self, next_arrival, tick: int, max_k: int) -> int:
        """Advance a decode-only stretch in one go; return the steps advanced (0 = none).

        Sync mode only; the conditions and closed forms of the reference
        kernel's ``_jump`` (every running request decoding and within the
        budget, no admission possible, no completion, enough free blocks for
        every block-boundary crossing; blocks handed out in (step, running
        order) order).
        """
        cfg = self.cfg
        R = self.R
        if R > cfg.max_num_batched_tokens:
            return 0
        at_cap = R >= cfg.max_num_seqs
        if self.waiting and not at_cap:
            return 0
        B = self.B
        run = self.run[:R].copy()
        c = self.comp[run]
        tk = self.tok[run]
        if _cnz(tk - c - 1):
            return 0
        held = self.held[run]
        rem = self.Pmax[run] - tk
        if self.mml_binds:
            rem = np.minimum(rem, self.mml - tk)
        k = int(rem.min()) - 1
        k = min(k, max_k)
        times = None
        if self.terms is not None and k >= 2:
            times = self.terms.decode_times(k, R, float(c.sum()) + R)
            # step j starts at starts[j], added up one step at a time as the stepping engine does
            starts = [self.clock]
            for dt in times.tolist():
                starts.append(starts[-1] + dt)
        if self.log is not None or not at_cap or self._external:
            if next_arrival is not None:
                if self.time_mode and times is not None:
                    k = bisect.bisect_left(starts, next_arrival, 0, k)
                elif self.time_mode:
                    clock = self.clock
                    dt = self.step_time(R, R)
                    j = 0
                    while j < k and not (next_arrival <= clock):
                        clock += dt
                        j += 1
                    k = j
                else:
                    k = min(k, int(next_arrival) - tick)
        if k < 2:
            return 0
        pool = self.pool
        free = pool.num_free()

        def need(kk: int) -> int:
            return int(np.maximum(-(-(c + kk) // B) - held, 0).sum())

        extra = np.maximum(-(-(c + k) // B) - held, 0)
        tot = int(_add(extra))
        if tot > free:
            lo, hi = 0, k
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if need(mid) <= free:
                    lo = mid
                else:
                    hi = mid
            k = lo
            if k < 2:
                return 0
            extra = np.maximum(-(-(c + k) // B) - held, 0)
            tot = int(_add(extra))
        pool.check_passed(free - tot)  # the checks of the k single steps, the last the closest
        usable = pool.usable
        used0 = usable - free
        per_step_alloc = np.zeros(k, np.int64)
        if tot:
            idx = np.repeat(np.arange(R), extra)
            m = np.arange(tot) - np.repeat(_acc(extra) - extra, extra)
            j = (held[idx] + m) * B - c[idx]
            ordr = np.lexsort((idx, j))
            pos = (self.koff[run][idx] + held[idx] + m)[ordr]
            j = j[ordr]
            per_step_alloc = np.bincount(j, minlength=k)
            self.btab[pos] = pool.allocate(tot, self.exec_step + j)
            self.held[run] = held + extra
        used = used0 + _acc(per_step_alloc)
        t = self.t
        if times is None:  # the linear clock, one step at a time
            dt = self.step_time(R, R)
            starts = [self.clock]
            for _ in range(k):
                starts.append(starts[-1] + dt)
        first_t = starts[1]
        nf = run[self.first_token[run] < 0]
        if nf.size:
            self.first_token[nf] = self.exec_step
            self.first_token_t[nf] = first_t
        self.comp[run] = c + k
        self.tok[run] = tk + k
        if self.caching:
            self._publish(run, c + k)
        t["num_schedule_calls"] += k
        t["num_steps"] += k
        t["total_scheduled_tokens"] += k * R
        t["total_decode_tokens"] += k * R
        t["kv_block_steps"] += int(used.sum())
        t["peak_kv_blocks_used"] = max(t["peak_kv_blocks_used"], int(used[-1]))
        # the jumped steps are schedule calls too: a run that ends at max_steps inside them has no later
        # call to count a queue that grew before the jump
        t["peak_waiting"] = max(t["peak_waiting"], len(self.waiting))
        self._log_decode_steps(starts[:k], used.tolist())
        self.clock = starts[k]
        self.exec_step += k
        return k

    def _log_decode_steps(self, starts: list, used: list) -> None:
        """Step series of ``len(starts)`` decode-only steps from ``exec_step`` (each running request one token)."""
        log = self.log
        if log is None:
            return
        k, R = len(starts), self.R
        log["step"].extend(range(self.exec_step, self.exec_step + k))
        log["time_s"].extend(starts)
        log["num_running"].extend([R] * k)
        log["num_waiting"].extend([len(self.waiting)] * k)
        log["num_scheduled_tokens"].extend([R] * k)
        log["kv_blocks_used"].extend(used)
        log["num_preempted"].extend([0] * k)
