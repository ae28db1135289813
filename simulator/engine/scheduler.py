"""vLLM v1's scheduler rules (``Scheduler.schedule`` and ``update_from_output``), one call at a time.

The rules, in the order vLLM applies them (``docs/simulator.md``, "Engine map"):

1. **schedule the running queue** (:meth:`Scheduler.schedule`): in running order each request
   gets the tokens it wants (capped by ``long_prefill_token_threshold``, ``max_model_len`` and
   what is left of the token budget) and the blocks they need; a request whose blocks do not
   fit preempts the policy's victim (:meth:`Scheduler._victim`: ``running[-1]``, or with
   priority scheduling the lowest-priority running request) until it fits or is itself preempted;
2. **admit** (:meth:`Scheduler.admit`), only if nothing was preempted: from the head of the
   waiting queue (:class:`FcfsQueue` or :class:`PriorityQueue`, the policy's order), each request's prefix hits
   looked up, admitted while its blocks (and the whole prompt with ``scheduler_reserve_full_isl``,
   plus the watermark) fit and budget is left;
3. **update after schedule**: computed tokens advance (async: output placeholders);
4. **process the step's outputs** (:meth:`Scheduler.process`): sampled tokens are received, full blocks
   are published to the prefix cache, finished requests (:meth:`Scheduler.finish_requests`) release their
   blocks (:meth:`Scheduler.release`) and leave the queues.

Every comparison with the free blocks goes through the pool (``can_allocate``, or the inline
margin record where a loop runs per step), which records the margins that shared schedules
need (:mod:`simulator.batch.sharing`). :class:`Scheduler` is an object the engine holds
(``engine.scheduler``, built by :class:`simulator.engine.core.FastEngine`) over the engine's parts: ``requests``
(:class:`~simulator.engine.request_state.RequestState`), ``pool``, ``tiers``, ``loads``
(:class:`~simulator.engine.tier_loads.TierLoads`), ``drafts`` (:class:`~simulator.speculative.SpecDecoding`),
``hooks``; its interface is in its docstring.
"""

from __future__ import annotations

import bisect
from collections import deque

import numpy as np

from simulator.engine.hooks import ADMIT, STOP, WAIT
from simulator.engine.keyspace import cdiv

WAITING, RUNNING, PREEMPTED, FINISHED, DROPPED = 0, 1, 2, 3, 4

_acc = np.add.accumulate  # cumsum of a 1-D int64 array, without np.cumsum's dispatch
_add = np.add.reduce
_cnz = np.count_nonzero  # a numpy int: int() it before it reaches a result


class FcfsQueue(deque):
    """The waiting queue of vLLM's ``fcfs`` policy (``FCFSRequestQueue``, ``vllm/v1/core/sched/request_queue.py``):
    a deque of request indices; an arrival joins the back (:meth:`add`), a preempted request the front
    (:meth:`prepend`). A preemption takes ``running[-1]`` (:meth:`victim`), and a request that preempted
    itself ends the running pass.

    Every queue of a policy is a deque in admission order (the scheduler reads ``[0]``, ``popleft``s the
    head, puts requests it passed over back with ``extendleft``, ``remove``s a finished one) with these
    three rules of its own.
    """

    __slots__ = ()
    add = deque.append
    prepend = deque.appendleft
    #: After a request preempted itself the running pass ends (vLLM: ``break``).
    self_preemption_ends_pass = True

    def victim(self, run: np.ndarray, num_running: int) -> int:
        """Index in the running queue ``run[:num_running]`` of the request a preemption takes."""
        return num_running - 1


class PriorityQueue(FcfsQueue):
    """The waiting queue of vLLM's ``priority`` policy (``PriorityRequestQueue``, ordered by ``Request.__lt__``,
    ``vllm/v1/request.py``): requests in (priority, arrival, request) order, lower first, arrivals and
    preempted requests alike; ties of (priority, arrival) in workload order (vLLM compares request ids).
    A preemption takes the first running request of the greatest (priority, arrival)
    (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``: ``max(self.running, key=lambda r:
    (r.priority, r.arrival_time))``), and a request that preempted itself lets the pass go on.
    """

    __slots__ = ("rank", "victim_key")
    self_preemption_ends_pass = False

    def __init__(self, priority: np.ndarray, arrival: np.ndarray) -> None:
        super().__init__()
        n = priority.shape[0]
        order = np.lexsort((np.arange(n), arrival, priority))
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n)
        self.rank = rank.tolist()  # each request's place in the queue's order
        p, a = priority[order], arrival[order]
        new = np.ones(n, bool)
        new[1:] = (p[1:] != p[:-1]) | (a[1:] != a[:-1])
        self.victim_key = np.empty(n, np.int64)  # (priority, arrival) as one number: the greatest is preempted
        self.victim_key[order] = np.cumsum(new)

    def add(self, q: int) -> None:
        """Request ``q`` joins the queue in its place (an arrival, or a preempted request)."""
        bisect.insort(self, q, key=self.rank.__getitem__)

    prepend = add

    def victim(self, run: np.ndarray, num_running: int) -> int:
        return int(self.victim_key[run[:num_running]].argmax())


def waiting_queue(policy: str, workload) -> FcfsQueue:
    """The waiting queue of scheduling ``policy`` (``EngineConfig.policy``) over ``workload``'s requests."""
    if policy == "priority":
        return PriorityQueue(workload.priority, workload.arrival)
    return FcfsQueue()


class Scheduler:
    """vLLM v1's schedule / admit / preempt / finish rules over the engine's parts (``engine.scheduler``).

    It holds the request state (``requests``: the per-request arrays under their own names here too, as
    :meth:`RequestState.share_with` gives them, and the queues), the block pool, the tiers, the loads
    (:class:`~simulator.engine.tier_loads.TierLoads`), the drafts (:class:`~simulator.speculative.SpecDecoding`,
    None without) and the hooks (:class:`~simulator.engine.hooks.EngineHooks`, None without); it holds no
    reference to the engine. What the engine decided once (block layout, limits, which accelerators the run
    takes) comes in as keywords and stays constant.

    Interface (what the engine, its parts and the lazy decoders call):

    * :meth:`at`: the engine's time (step, clock) for the calls that follow, set before each schedule call;
    * :meth:`schedule`: one ``Scheduler.schedule()``; :meth:`admit`: its admission on its own (the lazy
      decoders' schedule path);
    * :meth:`process`: one ``update_from_output()`` (the step's outputs); :meth:`finish_requests`: requests done;
    * :meth:`preempt`, :meth:`release` (a request's blocks back to the pool), :meth:`allocate`,
      :meth:`publish`, :meth:`publish_one` (full blocks to the prefix cache).

    Keywords: ``cfg`` (:class:`~simulator.engine.config.EngineConfig`); ``block_size`` (tokens a block: 1 with
    RadixCache); ``koff``, ``keyarr``, ``btab`` (the key space: each request's first slot, its content keys or
    None for own keys, the flat block table); ``max_model_len`` and ``max_model_len_binds``;
    ``watermark_blocks``; speculative decoding's ``spec_k``, ``lookahead``, ``draft_slots``,
    ``prefill_lookahead`` and ``hash_lookahead`` (0: off); ``caching``, ``async_mode``; the accelerators'
    ``own_keys``, ``full_isl_own``, ``full_isl_untiered``, ``hit_run`` and ``load_from_run`` (None: off; see
    :meth:`simulator.engine.core.FastEngine._init_shortcuts`); the run's ``totals`` and ``shortcuts`` counters.
    """

    def __init__(self, requests, pool, tiers, loads, drafts, hooks, *, cfg, block_size: int, koff, keyarr, btab,
                 max_model_len: int, max_model_len_binds: bool, watermark_blocks: int, spec_k: int, lookahead: int,
                 draft_slots: int, prefill_lookahead: int, hash_lookahead: int, caching: bool, async_mode: bool,
                 own_keys: bool, full_isl_own: bool, full_isl_untiered: bool, hit_run, load_from_run,
                 totals: dict, shortcuts: dict) -> None:
        self.requests = requests
        requests.share_with(self)
        self.pool, self.tiers, self.loads, self.drafts, self.hooks = pool, tiers, loads, drafts, hooks
        self.cfg = cfg
        self.B = block_size
        self.koff, self.keyarr, self.btab = koff, keyarr, btab
        self.max_model_len, self.max_model_len_binds = max_model_len, max_model_len_binds
        self.watermark_blocks = watermark_blocks
        self.spec_k, self.lookahead, self.draft_slots = spec_k, lookahead, draft_slots
        self.prefill_lookahead, self.hash_lookahead = prefill_lookahead, hash_lookahead
        self.caching, self.async_mode = caching, async_mode
        self.own_keys, self.full_isl_own, self.full_isl_untiered = own_keys, full_isl_own, full_isl_untiered
        self.hit_run, self.load_from_run = hit_run, load_from_run
        self.t, self.shortcuts = totals, shortcuts
        self.exec_step = 0
        self.clock = 0.0

    def at(self, exec_step: int, clock: float) -> None:
        """The engine's time for the calls that follow: ``exec_step`` (steps that scheduled tokens so far: what
        blocks allocated now are stamped with) and ``clock`` (s: loads done by then are ready)."""
        self.exec_step = exec_step
        self.clock = clock

    def publish(self, ids: np.ndarray, upto: np.ndarray) -> None:
        """Publish each request's full blocks below ``upto`` tokens (``cache_blocks``), in order; a block
        whose hash covers tokens not yet known is not (rule R4: ``upto <= tok - hash_lookahead``)."""
        if self.hash_lookahead:
            upto = np.minimum(upto, self.tok[ids] - self.hash_lookahead)
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

    def publish_one(self, q: int, upto: int) -> None:
        if self.hash_lookahead:
            upto = min(upto, int(self.tok[q]) - self.hash_lookahead)
        full = upto // self.B
        nc = int(self.ncached[q])
        if full <= nc:
            return
        o = int(self.koff[q])
        if self.own_keys and not self.npre[q]:
            # keys only this request publishes, in order, and it never lost its blocks
            self.pool.publish_new(self.btab[o + nc:o + full], o + nc)
        elif self.keyarr is None or self.keyarr[o + nc] == o + nc:
            # its own keys from block nc on (a request's shared blocks lead: KeySpace), the keys are the slots
            self.pool.publish_range(self.btab[o + nc:o + full], o + nc)
        else:
            self.pool.publish(self.btab[o + nc:o + full], self.keyarr[o + nc:o + full], True)
        self.ncached[q] = full

    def allocate(self, q: int, new: int) -> None:
        h = int(self.held[q])
        o = int(self.koff[q]) + h
        self.btab[o:o + new] = self.pool.allocate(new, self.exec_step)
        self.held[q] = h + new

    def release(self, q: int, keep_keys: bool = False) -> None:
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
            else:  # (its first nc blocks are the hashed ones: its published prefix and hits)
                self.pool.release_published(self.btab[o:o + h], nc)
        if keep_keys and self.hit_run is not None:
            m = (int(self.tok[q]) - 1) // self.B
            self.hit_run[q] = min(nc, m) if self.pool.one_release_run(o, nc, m) else -1
        self.held[q] = 0
        self.ncached[q] = 0

    def preempt(self, q: int) -> None:
        self.release(q, keep_keys=True)
        self.status[q] = PREEMPTED
        self.comp[q] = 0
        self.stale[q] = self.inflight[q]
        self.placeholders[q] = 0
        if self.spec_k:
            self.drafts.clear(q)
        self.npre[q] += 1
        self.waiting.prepend(q)

    def _allocate_running(self, q: int, n: int) -> bool:
        """Blocks for ``n`` more tokens of running request ``q`` (False: they do not fit)."""
        c = int(self.comp[q])
        need = min(c + n + self.lookahead, self.max_model_len)
        new = cdiv(need, self.B) - int(self.held[q])
        if not self.pool.can_allocate(new):
            return False
        if new > 0:
            self.allocate(q, new)
        if self.caching:
            self.publish_one(q, min(c + n, int(self.tok[q])))
        return True

    def schedule(self):
        """One ``Scheduler.schedule()``: (ids, tokens, sampled) arrays in order, and preemptions.

        The running queue first (:meth:`_schedule_running`), then admission if nothing was
        preempted (:meth:`admit`), then ``_update_after_schedule`` (:meth:`_after_schedule`).
        """
        cfg, rs = self.cfg, self.requests
        budget = cfg.max_num_batched_tokens
        thr = cfg.long_prefill_token_threshold if rs.num_running + len(self.waiting) > 1 else 0
        ids_l: list = []
        n_l: list = []
        npre = 0
        if rs.num_running:
            budget, npre = self._schedule_running(budget, thr, ids_l, n_l)
        if npre == 0 and self.waiting and budget > 0 and rs.num_running < cfg.max_num_seqs:
            budget = self.admit(budget, thr, ids_l, n_l)[0]
        if not ids_l:
            e = np.zeros(0, np.int64)
            ns = e
        elif len(ids_l) == 1:
            e, ns = ids_l[0], n_l[0]
        else:
            e = np.concatenate(ids_l)
            ns = np.concatenate(n_l)
        return e, ns, self._after_schedule(e, ns), npre

    def _after_schedule(self, e: np.ndarray, ns: np.ndarray) -> np.ndarray:
        """``_update_after_schedule`` (+ AsyncScheduler placeholders): computed tokens advance; which
        scheduled requests sample a token."""
        if not e.size:
            return np.zeros(0, bool)
        comp, tok = self.comp, self.tok
        comp[e] += ns
        if self.spec_k:
            self.drafts.spec[e] = 0  # drafts scheduled (or cut by the budget) are cleared
        if self.async_mode:
            self.inflight[e] += ns
            sampled = comp[e] >= tok[e] + self.placeholders[e]
        else:
            sampled = comp[e] >= tok[e]
        if self.spec_k:
            self.drafts.chunk[e] = ~sampled  # vLLM's is_prefill_chunk (rule R7)
            if self.async_mode:
                self.drafts.placeholders_after_schedule(e, sampled)
        elif self.async_mode:
            self.placeholders[e[sampled]] += 1
        return sampled

    def _running_wants(self, run: np.ndarray, c: np.ndarray, t: np.ndarray, budget: int, thr: int) -> np.ndarray:
        """Tokens each running request gets if blocks allow: what it wants, capped by the prefill
        threshold, ``max_model_len`` and, by cumulative sum in running order, the budget."""
        if self.async_mode:
            p = self.placeholders[run]
            n0 = t + p - c
            if self.spec_k:
                n0 += self.drafts.spec[run]  # the draft placeholders of its step in flight
            n0[(p > 0) & (c + 2 - p >= self.final_len[run])] = 0  # its last token is in flight
        else:
            n0 = t - c
            if self.spec_k:
                n0 += self.drafts.spec[run]  # num_tokens_with_spec - num_computed_tokens
        if thr:
            np.minimum(n0, thr, out=n0)
        if self.max_model_len_binds:
            np.minimum(n0, self.max_model_len - c - 1, out=n0)
        np.maximum(n0, 0, out=n0)
        s = self.draft_slots
        # each request scheduled takes its tokens (+ s input slots, rule R6) of the budget, in order
        cs = _acc(n0 + s * (n0 > 0)) if s else _acc(n0)
        if cs.item(-1) > budget:
            k = int(cs.searchsorted(budget, "right"))
            n0[k] = max(budget - (cs.item(k - 1) if k else 0) - s, 0)
            n0[k + 1:] = 0
        return n0

    def _input_cap(self, budget: int, ids_l: list | None, more: int = 0) -> int:
        """The most tokens the next request may get: the token budget left, less the draft model's
        input slots (vLLM's ``min(token_budget, input_budget - draft_slots)``, rule R6; both budgets
        start at ``max_num_batched_tokens`` and each request scheduled takes its tokens plus
        ``draft_slots`` of the input budget). ``more``: requests scheduled beside ``ids_l``."""
        s = self.draft_slots
        if not s:
            return budget
        done = more + (sum(ids.size for ids in ids_l) if ids_l is not None else 0)
        return budget - s * (done + 1)

    def _schedule_running(self, budget: int, thr: int, ids_l: list, n_l: list) -> tuple[int, int]:
        """The running queue in running order: tokens and blocks; preemptions where blocks run out.

        Array work up to the first request whose blocks do not fit (its blocks popped in one go,
        as sequential pops would), then request by request (:meth:`_schedule_one_by_one`).
        Returns the budget left and the number of preemptions.
        """
        if self.prefill_lookahead > 1:  # (rule R8 cuts chunks one by one: the budget left moves on)
            return self._schedule_one_by_one(0, budget, thr, ids_l, n_l)
        B, pool, held = self.B, self.pool, self.held
        R = self.requests.num_running
        run = self.run[:R].copy()
        c = self.comp[run]
        t = self.tok[run]
        n0 = self._running_wants(run, c, t, budget, thr)
        newc = c + n0
        tgt = newc + self.lookahead if self.lookahead else newc  # allocate_slots' lookahead slots
        if self.max_model_len_binds:
            tgt = np.minimum(tgt, self.max_model_len)
        h = held[run]
        need = (tgt + (B - 1)) // B - h
        if self.lookahead:
            need[n0 == 0] = 0  # (vLLM calls allocate_slots only for requests it schedules tokens)
        np.maximum(need, 0, out=need)
        cn = _acc(need)
        free = pool.num_free()
        f = R if cn.item(-1) <= free else int(cn.searchsorted(free, "right"))
        if f:
            pool.can_allocate(cn.item(f - 1), free)  # (passes: the margin of the f requests' checks)
            ids, nn = run[:f], n0[:f]
            tot = cn.item(f - 1)
            if tot:
                nd = need[:f]
                blocks = pool.allocate(tot, self.exec_step)
                pos = np.repeat(self.koff[ids] + h[:f] - (cn[:f] - nd), nd) + np.arange(tot)
                self.btab[pos] = blocks
                held[ids] = h[:f] + nd
            sel = nn > 0
            if _cnz(sel) < sel.size:
                ids, nn = ids[sel], nn[sel]
                tgt_pub = np.minimum(newc[:f][sel], t[:f][sel])
            else:
                tgt_pub = np.minimum(newc[:f], t[:f])
            if self.caching and ids.size:
                self.publish(ids, tgt_pub)
            ids_l.append(ids)
            n_l.append(nn)
            budget -= int(nn.sum())
        if f < R:
            return self._schedule_one_by_one(f, budget, thr, ids_l, n_l)
        return budget, 0

    def _schedule_one_by_one(self, i: int, budget: int, thr: int, ids_l: list, n_l: list) -> tuple[int, int]:
        """The running queue from request ``i`` on, one request at a time: one whose blocks do not fit
        preempts the policy's victim until it fits or is preempted itself (:meth:`_make_room`), which ends
        the pass (FCFS) or goes on with the next request (priority, as vLLM)."""
        comp, tok, ph, final_len = self.comp, self.tok, self.placeholders, self.final_len
        mml = self.max_model_len
        rs = self.requests
        npre = 0
        while i < rs.num_running and budget > 0:
            cap = self._input_cap(budget, ids_l)
            if cap <= 0:  # (the input budget is spent: rule R6)
                break
            q = int(self.run[i])
            cq = int(comp[q])
            pq = int(ph[q])
            if pq > 0 and cq + 2 - pq >= int(final_len[q]):
                i += 1
                continue
            n = int(tok[q]) + pq - cq
            if self.spec_k:
                n += int(self.drafts.spec[q])
            if 0 < thr < n:
                n = thr
            n = min(n, cap, mml - cq - 1)
            if self.prefill_lookahead > 1:
                n = self._reserve_prefill_lookahead(q, cq, n)
            if n <= 0:
                i += 1
                continue
            fits, i, budget, k = self._make_room(q, n, i, budget, ids_l, n_l)
            npre += k
            if not fits:
                if self.waiting.self_preemption_ends_pass:
                    return budget, npre
                continue  # (q left the running queue: request i is the next one)
            ids_l.append(np.array([q]))
            n_l.append(np.array([n]))
            budget -= n
            i += 1
        return budget, npre

    def _make_room(self, q: int, n: int, i: int, budget: int, ids_l: list, n_l: list):
        """Blocks for ``n`` tokens of running request ``q`` (``run[i]``), preempting victims until they fit or
        ``q`` is preempted itself. A victim already scheduled this step (priority scheduling) gives its tokens
        back. Returns (fits, ``q``'s index now, the budget, preemptions)."""
        npre = 0
        while not self._allocate_running(q, n):
            v = self._victim()
            victim = int(self.run[v])
            if v == self.requests.num_running - 1:
                self.requests.num_running -= 1
            else:
                self.run[v:self.requests.num_running - 1] = self.run[v + 1:self.requests.num_running].copy()
                self.requests.num_running -= 1
            if v < i:
                i -= 1
                budget += self._unschedule(victim, ids_l, n_l)
            self.preempt(victim)
            npre += 1
            if victim == q:
                return False, i, budget, npre
        return True, i, budget, npre

    def _victim(self) -> int:
        """Index in the running queue of the request a preemption takes (the policy's: the waiting queue's
        :meth:`FcfsQueue.victim`)."""
        return self.waiting.victim(self.run, self.requests.num_running)

    @staticmethod
    def _unschedule(q: int, ids_l: list, n_l: list) -> int:
        """Take request ``q`` out of this step's scheduled requests; the tokens it had (0: none)."""
        for j, ids in enumerate(ids_l):
            at = (ids == q).nonzero()[0]
            if at.size:
                k = int(at[0])
                n = int(n_l[j][k])
                ids_l[j] = np.delete(ids, k)
                n_l[j] = np.delete(n_l[j], k)
                return n
        return 0

    def admit(self, budget: int, thr: int, ids_l: list | None, n_l: list | None):
        """vLLM's admission: FCFS from the head of the waiting queue while the token budget, the
        running cap and the blocks allow. Requests in the middle of a recompute of tokens in flight
        (``stale``) and those still loading from a tier are passed over (they keep their place).
        Returns the budget left, the requests admitted and their tokens (also appended to
        ``ids_l``, ``n_l`` unless None)."""
        waiting = self.waiting
        B = self.B
        max_seqs = self.cfg.max_num_seqs
        chunked = self.cfg.enable_chunked_prefill
        skipped: list[int] = []
        admitted: list[int] = []
        ns: list[int] = []
        rs = self.requests
        while budget > 0 and waiting and rs.num_running < max_seqs:
            cap = self._input_cap(budget, ids_l, len(admitted))
            if cap <= 0:  # (the input budget is spent: rule R6)
                break
            q = waiting[0]
            kept = self._loads_done(q)  # blocks it keeps as its prefix hits (its loads are done)
            if kept < 0:
                skipped.append(waiting.popleft())
                continue
            num_tokens = int(self.tok[q])
            capped = num_tokens if num_tokens < self.max_model_len else self.max_model_len
            if self._whole_prompt_cannot_fit(q, capped):
                break
            nh, hit, verdict = self._admission_hits(q, num_tokens, kept)
            if verdict == WAIT:
                skipped.append(waiting.popleft())
                continue
            if verdict == STOP:
                break
            n = num_tokens - nh * B
            if 0 < thr < n:
                n = thr
            if not chunked and n > cap:
                if self._drop_if_never_schedulable(q, kept, budget):
                    continue
                break
            n = self._admission_tokens(q, n, nh, kept, cap, ids_l)
            if n < 0:
                break
            new = self._admission_blocks(nh, hit, kept, nh * B + n, capped)
            if new < 0:
                if kept:
                    self.release(q, keep_keys=True)
                break
            self._admit_one(q, nh, hit, kept, new, n, num_tokens)
            admitted.append(q)
            ns.append(n)
            budget -= n
        if skipped:
            waiting.extendleft(reversed(skipped))
        if admitted and ids_l is not None:
            ids_l.append(np.array(admitted, np.int64))
            n_l.append(np.array(ns, np.int64))
        return budget, admitted, ns

    def _admission_tokens(self, q: int, n: int, nh: int, kept: int, cap: int, ids_l) -> int:
        """Tokens admission gives waiting request ``q`` (``n`` to compute past ``nh`` hit blocks): R7's
        padding, the cap, R8's chunk end; -1 when admission stops here."""
        n = self._pad_admission(q, n, nh, kept, cap, ids_l)
        if n < 0:
            return -1
        n = min(n, cap)
        if self.prefill_lookahead > 1:
            n = self._reserve_prefill_lookahead(q, nh * self.B, n)
            if n == 0:
                if kept:
                    self.release(q, keep_keys=True)
                return -1
        return n

    def _reserve_prefill_lookahead(self, q: int, computed: int, n: int) -> int:
        """vLLM's ``Scheduler._reserve_prefill_lookahead`` (multi-module MTP, rule R8): a chunk of ``n``
        tokens at ``computed`` that would end ``0 < r < L`` tokens before request ``q``'s known tokens
        end is shortened by ``L - r`` (to 0 at least), ``L`` the prefill lookahead (``k``)."""
        L = self.prefill_lookahead
        r = int(self.tok[q]) - computed - n
        if 0 < r < L:
            return max(n - (L - r), 0)
        return n

    def _pad_admission(self, q: int, n: int, nh: int, kept: int, budget: int, ids_l) -> int:
        """vLLM's ``pad_spec_decode`` (rule R7): a 1-token admission gets ``k`` dummy drafts (``1 + k``
        tokens) when no running request scheduled in this call is a prefill chunk, some running request
        was scheduled or it has hits, and ``1 + k`` more tokens fit ``max_model_len``; -1 (admission stops)
        when ``1 + k`` exceeds the budget left. Else ``n``, the tokens it has to compute."""
        if n != 1 or not self.spec_k or ids_l is None:
            return n
        ran = [ids for ids in ids_l if ids.size]
        if (not ran and nh == 0) or any(self.drafts.chunk[ids].any() for ids in ran):
            return n
        if nh * self.B + 1 + self.spec_k + 1 > self.max_model_len:
            return n
        if 1 + self.spec_k > budget:
            if kept:
                self.release(q, keep_keys=True)
            return -1
        return 1 + self.spec_k

    def _loads_done(self, q: int) -> int:
        """Waiting request ``q``: -1 when admission passes it over (stale tokens in flight, or loads
        not done), else the blocks it keeps as prefix hits (0 unless its loads just finished)."""
        if self.stale[q] > 0:
            return -1
        loading = self.loads.loading
        if loading:
            ready = loading.get(q)
            if ready is not None:
                if ready > self.clock:
                    return -1
                del loading[q]  # its blocks are on the GPU now: they are its prefix hits
                return self.loads.keep_loaded(q)
        return 0

    def _whole_prompt_cannot_fit(self, q: int, capped: int) -> bool:
        """Accelerator (own keys): the full-ISL check fails whatever the prefix hits (with its own keys
        a waiting request's hits are all free blocks, counted back as evictable)."""
        if not (self.full_isl_own or (self.full_isl_untiered and not self.tiered[q])):
            return False
        pool = self.pool
        need = -(-capped // self.B) + (self.watermark_blocks if self.requests.num_running else 0)
        return not pool.can_allocate(need) if need > pool.top + pool.nfifo else False

    def _admission_hits(self, q: int, num_tokens: int, kept: int):
        """Waiting request ``q``'s GPU prefix hits and what admission does with it: ``(blocks, their ids or
        None, verdict)``: :data:`WAIT` when it started loading its prefix from a tier instead (it waits), else
        the hooks' (:meth:`EngineHooks.admission`), :data:`ADMIT` without hooks."""
        nh, hit, loading = self._gpu_hits(q, num_tokens, kept)
        if loading:
            return nh, hit, WAIT
        if self.hooks is None:
            return nh, hit, ADMIT
        return nh, hit, self.hooks.admission(q, num_tokens, kept, nh, hit)

    def _gpu_hits(self, q: int, num_tokens: int, kept: int):
        """Waiting request ``q``'s GPU prefix hits: ``(blocks, their ids or None, loading)``;
        ``loading``: it started loading its prefix from a tier instead (it waits)."""
        o = int(self.koff[q])
        if kept:
            return kept, self.btab[o:o + kept], False
        m = (num_tokens - 1) // self.B
        if not self.caching or m <= 0:
            return 0, None, False
        pool, keyarr = self.pool, self.keyarr
        # (async: a step in flight at a preemption may publish one more of its blocks after the release)
        hit_run = None if self.async_mode else self.hit_run
        # its hits are known from its release on (see _head_blocked): what lookup_own gives
        r = int(hit_run[q]) if hit_run is not None and self.tiered[q] else -1
        nh, hit = 0, None
        if pool.kblock[o if keyarr is None else int(keyarr[o])] >= 0:
            if r >= 0:
                self.shortcuts["hit_runs"] += 1
                hit = pool.kblock[o:o + pool.run_left(o, r)].copy()
            elif self.own_keys:
                hit = pool.lookup_own(o, m)
            else:
                hit = pool.lookup(np.arange(o, o + m) if keyarr is None else keyarr[o:o + m])
            nh = hit.size
        loads = self.loads
        g = loads.gate
        if g is not None and self.status[g] >= FINISHED:
            g = loads.gate = None
        if (self.tiers is not None and nh < m and g is None and (self.tiered[q] or not self.own_keys)
                and loads.start_onboard(q, o, nh, m, hit, self.requests.num_running, self.exec_step, self.clock)):
            if hit_run is not None:
                self.load_from_run[q] = r >= 0
            return nh, hit, True
        return nh, hit, False

    def _drop_if_never_schedulable(self, q: int, kept: int, budget: int) -> bool:
        """Without chunked prefill the head's uncached tokens exceed the budget left. If they exceed
        the whole budget and nothing runs, nothing will free budget or cache more of its prompt: it
        can never be scheduled. vLLM refuses such a config (max_num_batched_tokens < max_model_len
        without chunked prefill); here it is dropped as unservable (True: admission goes on) instead
        of blocking the queue (False: admission stops)."""
        if kept:
            self.release(q, keep_keys=True)
        if self.requests.num_running or budget != self.cfg.max_num_batched_tokens or self.loads.loading:
            return False
        self.waiting.popleft()
        self.status[q] = DROPPED
        self.t["dropped_unservable"] += 1
        if q == self.loads.gate:
            self.loads.gate = None
        return True

    def _admission_blocks(self, nh: int, hit, kept: int, tokens: int, capped: int) -> int:
        """Admission's block checks: the whole prompt (``scheduler_reserve_full_isl``) and the blocks
        for ``tokens``, each with the evictable hits and the watermark. New blocks to allocate, or -1."""
        pool, B = self.pool, self.B
        wm = self.watermark_blocks if self.requests.num_running else 0
        if kept:  # counted as if let go: free and evictable
            evictable = kept
            free = pool.top + pool.nfifo + kept
        else:
            evictable = pool.num_free_of(hit) if nh else 0
            free = pool.top + pool.nfifo
        if self.cfg.scheduler_reserve_full_isl:
            need_full = max(-(-capped // B) - nh, 0) + evictable
            if not pool.can_allocate(need_full + wm, free):
                return -1
        # allocate_slots' lookahead slots (EAGLE, draft model) are held from admission on
        new = max(-(-min(tokens + self.lookahead, self.max_model_len) // B) - nh, 0)
        if not pool.can_allocate(new + evictable + wm, free):
            return -1
        return new

    def _admit_one(self, q: int, nh: int, hit, kept: int, new: int, n: int, num_tokens: int) -> None:
        """Admit waiting request ``q`` with ``nh`` hit blocks, ``new`` new blocks and ``n`` tokens."""
        if self.hooks is not None:
            self.hooks.admitted(q)
        pool, btab, B, t = self.pool, self.btab, self.B, self.t
        h = nh * B
        o = int(self.koff[q])
        if kept:
            pool.retouch(hit, self.exec_step)
        elif nh:
            pool.touch(hit, self.exec_step)
            btab[o:o + nh] = hit
        pre_q = self.npre[q] > 0
        blocks = None
        if new > 0:
            blocks = pool.allocate(new, self.exec_step)
            btab[o + nh:o + nh + new] = blocks
        self.held[q] = nh + new
        self.ncached[q] = nh
        if self.spec_k:
            self.drafts.dummy[q] = n > num_tokens - h  # admission's padded drafts (rule R7)
        if self.caching:
            full = min(h + n, num_tokens - self.hash_lookahead) // B
            if full > nh:
                if self.own_keys and not pre_q:
                    # its own keys, never published (see _publish_one); the blocks just allocated
                    pool.publish_new(blocks[:full - nh], o + nh)
                    self.ncached[q] = full
                elif blocks is not None and full - nh <= new and (self.keyarr is None or self.keyarr[o + nh] == o + nh):
                    # publish_one's range, its own keys: the blocks just allocated (no block-table read)
                    pool.publish_range(blocks[:full - nh], o + nh)
                    self.ncached[q] = full
                else:
                    self.publish_one(q, full * B)
            prefix = "preempted_prefix_cache_" if pre_q else "prefix_cache_"
            t[prefix + "queries"] += num_tokens
            t[prefix + "hits"] += h
            t[prefix + "requests"] += 1
        if pre_q:
            t["recomputed_tokens"] += num_tokens - h
        self.waiting.popleft()
        rs = self.requests
        self.run[rs.num_running] = q
        rs.num_running += 1
        self.admission_seq[q] = rs.next_admission_seq
        rs.next_admission_seq += 1
        if self.status[q] == WAITING:
            self.first_sched[q] = self.exec_step
            self.hit_first[q] = h
        self.status[q] = RUNNING
        self.comp[q] = h

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
        drafts = self.drafts.inflight.popleft() if self.spec_k and self.async_mode else None
        a = e[act]
        if not a.size:
            return
        tok = self.tok
        if self.spec_k:
            gained = self.drafts.receive_verified(a, None if drafts is None else drafts[act],
                                                  None if drafts is None else ~st)
        else:
            tok[a] += 1
        ft = a[self.first_token[a] < 0]
        if ft.size:
            self.first_token[ft] = step
            self.first_token_t[ft] = t_end
        stopped = tok[a] >= self.final_len[a]
        if self.max_model_len_binds:
            stopped |= tok[a] >= self.max_model_len
        if self.async_mode:
            ph = self.placeholders
            had_ph = ph[a] > 0
            before_running = status[a] == RUNNING
            dec = ~st & had_ph
            ph[a[dec]] -= gained[dec] if self.spec_k else 1
            cc = a[dec & before_running]
            if cc.size and self.caching:
                self.publish(cc, self.comp[cc] - self.inflight[cc])
        if self.spec_k and not self.async_mode:
            if self.caching:  # verified full blocks are cached at once (rule R1; comp trimmed by R5)
                self.publish(a, self.comp[a])
            self.drafts.propose(a, stopped)
        if _cnz(stopped):
            self.finish_requests(a[stopped], step, t_end)

    def finish_requests(self, fin: np.ndarray, step: int, t_end: float) -> None:
        """Requests ``fin`` finished with step ``step`` (ended at ``t_end``): their blocks are released (unless
        a hook keeps them), they leave the running (or waiting) queue."""
        status = self.status
        self.finish[fin] = step
        self.finish_t[fin] = t_end
        self.t["requests_cut_short"] += int(_cnz(self.tok[fin] < self.final_len[fin]))
        in_wait = []
        hooks = self.hooks
        for q in fin.tolist():
            if hooks is None or not hooks.finished(q, t_end):
                self.release(q)
            if status[q] != RUNNING:
                in_wait.append(q)
        self.gone[fin] = True
        R = self.requests.num_running
        run = self.run[:R]
        keep = run[~self.gone[run]]
        self.requests.num_running = keep.size
        self.run[:keep.size] = keep
        for q in in_wait:
            self.waiting.remove(q)
        status[fin] = FINISHED
        self.t["finished"] += fin.size
