"""Accelerator: steady decoders kept implicit ("lazy"), one schedule call in O(changes).

A running request whose prefill is done and that decodes one token per step is a *lazy
decoder*: its state is implicit in ``lazy_base`` (``la``) and the lazy step counter
``lazy_step`` (``S``): it has computed ``la + S`` tokens, holds ``cdiv(la + S, B)`` blocks,
needs a new block when ``(la + S) % B == 0`` and finishes at ``S = prompt + max_tokens - la - 2``.
Decoders are grouped in buckets by ``(-la) % B`` (the step residue at which they cross a block
boundary; each bucket maps its decoders, in running order, to ``koff * B + la``, whence the block-table
slot of a crossing) and by finishing step (``finishing_at``). Only the other running requests
(``explicit_running``) are materialized in the arrays. :meth:`LazyDecoders.fast_schedule`
makes one schedule call that way and returns None when it needs the general path
(:class:`simulator.engine.scheduler.Scheduler`); the engine then writes the implicit state back
(:meth:`LazyDecoders.materialize`). Several lazy steps at once while every running request is a lazy
decoder (lazy windows, :meth:`LazyDecoders.window`) is the closed form of
:mod:`simulator.engine.decode_jumps` over this implicit state. Switched off with ``accelerate=False``; the
tests compare.
"""

from __future__ import annotations

import heapq

import numpy as np

from simulator.engine.scheduler import FINISHED, RUNNING

_WINDOW_STEPS = 64  # most lazy steps made at once by LazyDecoders.window
_SCALAR_CROSSINGS = 4  # decoders crossing a block boundary up to which a step allocates their blocks one by one


class LazyDecoders:
    """Lazy decoders: enter, schedule, process and leave lazy mode, and lazy windows; the engine holds it as
    ``engine.lazy`` where the run takes the accelerator (None otherwise).

    It owns the lazy state (below) and works on the scheduler's (:class:`~simulator.engine.scheduler.Scheduler`,
    which it holds): the request arrays under their own names, as the scheduler has them (writes through them
    are the scheduler's state), the pool, the loads, and the scheduler's calls (``admit``, ``allocate``,
    ``preempt``, ``publish``, ``publish_one``, ``release``). It holds no reference to the engine: the engine's
    time comes in as arguments (and the scheduler's :meth:`~simulator.engine.scheduler.Scheduler.at`), and the
    engine's batch queue as ``queue`` (set by the engine's ``start``).

    What it supports: :data:`ACCELERATORS` names its two accelerators; which runs each supports is their
    ``supports`` in :mod:`simulator.engine.accelerators` (the engine builds this object only where the run
    takes ``lazy_decoders``; ``windows_ok``: it takes ``lazy_windows`` too).

    Interface (the engine's calls): :meth:`lazify`, :meth:`fast_schedule` (one schedule call, or None),
    :meth:`process_step` (its output), :meth:`materialize` (back to the general path), :meth:`relazify`
    (after a decode jump), :meth:`jump_precheck`, :meth:`window_possible` and :meth:`window` (lazy windows).

    State: ``lazy_active`` (in lazy mode), ``retry_at`` (the engine step before which :meth:`lazify` is not
    tried again after the general path was needed), ``is_lazy`` and ``lazy_base`` (per request: a lazy decoder,
    its ``la``), ``lazy_step`` (``S``), ``num_lazy`` and ``lazy_base_sum`` (the lazy decoders, the sum of their
    ``la``), ``buckets`` and ``finishing_at`` (see the module docstring), ``explicit_running`` (the other
    running requests, in running order), ``batch`` (the last lazy step's materialized entries ``(requests,
    sampled, S, tokens)``, for the step clock and :meth:`process_step`).
    """

    #: The accelerators of :mod:`simulator.engine.accelerators` this object implements.
    ACCELERATORS = ("lazy_decoders", "lazy_windows")

    def __init__(self, scheduler, step_clock, *, defer_pub: bool, windows_ok: bool, time_mode: bool) -> None:
        sch = self.scheduler = scheduler
        self.requests = rs = sch.requests
        rs.share_with(self)
        self.pool, self.loads, self.t = sch.pool, sch.loads, sch.t
        self.cfg, self.B, self.koff, self.keyarr, self.btab = sch.cfg, sch.B, sch.koff, sch.keyarr, sch.btab
        self.caching, self.async_mode, self.own_keys = sch.caching, sch.async_mode, sch.own_keys
        self.hit_run, self.watermark_blocks, self.max_model_len = sch.hit_run, sch.watermark_blocks, sch.max_model_len
        self.full_isl_own, self.full_isl_untiered = sch.full_isl_own, sch.full_isl_untiered
        self.step_clock = step_clock
        # decoders' newly full blocks are published when they leave lazy mode (no multi-turn parent looks
        # them up while they run: RunFacts.deferred_publication)
        self.defer_pub = defer_pub
        self.windows_ok = windows_ok
        self.time_mode = time_mode  # (arrivals in seconds)
        self.queue = None  # the engine's batch queue (its start sets it)
        n = self.n = rs.tok.size
        self.lazy_active = False
        self.retry_at = 0
        self.is_lazy = np.zeros(n, bool)
        self.lazy_base = np.zeros(n, np.int64)
        self.slot_base = (self.koff[:n] * self.B).tolist()
        self.lazy_step = 0
        self.num_lazy = 0
        self.lazy_base_sum = 0                # sum of la over the lazy decoders
        # residue of -la -> {decoder: koff * B + la} in running order (see _bucket_add)
        self.buckets: dict[int, dict[int, int]] = {}
        self.finishing_at: dict[int, list] = {}
        self._finishing_heap: list[int] = []  # the keys of fin_at, and keys deleted since (see _first_finish)
        self.explicit_running: list[int] = []
        self.batch = None
        self._lazy_in_flight = None  # async lazy mode: the step in flight (eq, sampled, tokens, step, t_end)
        self._finishing: list[int] = []  # async lazy mode: decoders skipped this step, finished by its output

    def lazify(self) -> None:
        """Enter lazy mode: steady decoders of the running queue become implicit."""
        R = self.requests.num_running
        run = self.run[:R]
        c = self.comp[run]
        if self.async_mode:
            dec = self._lazify_async(run, c)
            if dec is None:
                return
        else:
            dec = (c == self.tok[run] - 1) & (self.first_token[run] >= 0)
        qs = run[dec]
        S = self.lazy_step
        a = c[dec] - S
        self.is_lazy[qs] = True
        self.lazy_base[qs] = a
        B = self.B
        fin_at = self.finishing_at
        fin = (self.final_len[qs] - a - 2).tolist()
        ql = qs.tolist()
        if ql:
            # buckets by residue (empty here: materialize cleared them)
            for q, slot in zip(ql, (self.koff[qs] * B + a).tolist()):
                self._bucket_add(q, slot)
        for q, f in zip(ql, fin):
            lst = fin_at.get(f)
            if lst is None:
                fin_at[f] = [q]
            else:
                lst.append(q)
        self._finishing_heap = list(fin_at)
        heapq.heapify(self._finishing_heap)
        self.explicit_running = run[~dec].tolist()
        self.num_lazy = int(qs.size)
        self.lazy_base_sum = int(a.sum())
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
        queue = self.queue
        if len(queue) != 1:
            return None
        e, ns, sampled, step, t_end = queue[0]
        mark = np.zeros(self.n, bool)
        mark[run] = False
        mark[e[(ns == 1) & sampled]] = True
        dec = ((c == self.tok[run]) & (self.placeholders[run] == 1) & (self.inflight[run] == 1)
               & (self.first_token[run] >= 0) & (self.status[run] == RUNNING) & mark[run])
        queue.clear()
        mark[e] = False
        mark[run[dec]] = True
        rest = ~mark[e]
        self._lazy_in_flight = (e[rest].tolist(), sampled[rest].tolist(), ns[rest].tolist(), step, t_end)
        self._finishing = []
        return dec

    def materialize(self, keep: bool = False) -> None:
        """Leave lazy mode: write the implicit decoder state back to the arrays.

        ``keep``: for a jump, when every running request is a lazy decoder:
        only the arrays the jump reads are written; the decoders stay lazy
        (``lz``), as do the buckets and finishing steps, for
        :meth:`relazify`. Deferred publication stays deferred: the jump
        publishes each decoder's full blocks in one go (decode blocks carry
        the request's own keys, so the order across requests is immaterial).
        """
        R = self.requests.num_running
        run = self.run[:R]
        if keep:
            c = self.lazy_base[run] + self.lazy_step
            self.comp[run] = c
            self.tok[run] = c + 1
            self.held[run] = (c + (self.B - 1)) // self.B
            if not self.defer_pub and self.caching:
                self.ncached[run] = c // self.B
            self.lazy_active = False
            return
        qs = run[self.is_lazy[run]]
        amode = self.async_mode
        if qs.size:
            c = self.lazy_base[qs] + self.lazy_step
            self.comp[qs] = c
            # async: the token of the step in flight is computed (one placeholder), not yet received
            self.tok[qs] = c if amode else c + 1
            self.held[qs] = (c + (self.B - 1)) // self.B
            if amode:
                self.placeholders[qs] = 1
                self.inflight[qs] = 1
            if self.defer_pub:
                self.scheduler.publish(qs, c - 1 if amode else c)
            elif self.caching:
                self.ncached[qs] = c // self.B
            self.is_lazy[qs] = False
        if amode:
            self._unlazy_in_flight(qs)
        self.lazy_active = False
        self.buckets = {}
        self.finishing_at = {}
        self._finishing_heap = []
        self.explicit_running = []
        self.num_lazy = 0
        self.lazy_base_sum = 0

    def _unlazy_in_flight(self, qs: np.ndarray) -> None:
        """Async: the step in flight as the general path's batch-queue entry (decoders ``qs`` explicit)."""
        pend = self._lazy_in_flight
        self._lazy_in_flight = None
        if pend is None:
            return
        eq, smp, en, step, t_end = pend
        if not qs.size and not eq:
            return
        ids = qs.tolist() + eq
        ns = [1] * qs.size + en
        sampled = [True] * qs.size + smp
        rseq = self.admission_seq
        order = sorted(range(len(ids)), key=lambda i: rseq[ids[i]])
        self.queue.appendleft((np.array([ids[i] for i in order], np.int64),
                                np.array([ns[i] for i in order], np.int64),
                                np.array([sampled[i] for i in order], bool), step, t_end))

    def relazify(self, k: int) -> None:
        """Back to lazy mode after ``materialize(keep=True)`` and a jump of ``k`` steps.

        Every running request was a lazy decoder and still is: a decoder's
        ``la + S`` computed tokens moved on by ``k`` as its arrays did, so
        ``S`` does, and the buckets, finishing steps (none before ``S + k``:
        the jump stops short of every completion), positions and ``la_sum``
        stay what a fresh :meth:`lazify` would derive.
        """
        self.lazy_step += k
        self.lazy_active = True

    def fast_schedule(self):
        """One schedule call in lazy mode, or None (nothing changed) when it needs the general path.

        Applies when every running request gets all the tokens it wants
        within the budget (the last running request may take what is left);
        decoders take one token each and the blocks go, in running order, to
        decoders at a block boundary and to prefill chunks; when blocks run
        short, :meth:`_lazy_pressure` preempts as vLLM does. Returns
        ``(tokens, prefill tokens, scheduled requests, preemptions)``.
        """
        cfg, B, pool = self.cfg, self.B, self.pool
        thr = cfg.long_prefill_token_threshold if self.requests.num_running + len(self.waiting) > 1 else 0
        S = self.lazy_step
        # async: decoders whose last token is in flight are skipped (and finished by its output)
        fin = self.finishing_at.get(S - 1) if self.async_mode else None
        left = cfg.max_num_batched_tokens - (self.num_lazy - len(fin) if fin else self.num_lazy)
        if left < 0:
            return None
        if self.explicit_running:
            wants = self._explicit_wants(thr, left)
            if wants is None:
                return None
            pre, tot_need, left = wants
        else:  # (the usual step: decoders only)
            pre, tot_need = [], 0
        cross = self.buckets.get(S % B)
        ncross = len(cross) if cross else 0
        if fin and ncross:
            ncross -= len(cross.keys() & fin)
        tot = tot_need + ncross
        npre = 0
        if not pool.can_allocate(tot):
            if self.async_mode:
                return None  # preemption with a step in flight: the general path
            pre, npre = self._lazy_pressure(pre, cross, S)
            tot = 0  # blocks handed out there
        if fin:
            self._skip_finishing(fin, S)
        if tot:
            self._lazy_blocks(pre, tot, tot_need, cross if ncross else None, S)
        if self.caching and (pre or not self.defer_pub):
            self._lazy_publish(pre, S)
        eq = [x[0] for x in pre]
        en = [x[1] for x in pre]
        if self.waiting and left > 0 and not npre and self.requests.num_running < cfg.max_num_seqs:
            x = self._head_blocked()
            if x:  # what _admit would find first, without the call
                pool.check_failed(x)
            else:
                _, adm, ans = self.scheduler.admit(left, thr, None, None)
                eq += adm
                en += ans
                self.explicit_running.extend(adm)
        D = self.num_lazy
        ntok, n_prefill, sampled = self._explicit_after_schedule(eq, en, D) if eq else (D, 0, [])
        self.lazy_step = S + 1
        self.batch = (eq, sampled, S, en)
        return ntok, n_prefill, D + len(eq), npre

    def _explicit_wants(self, thr: int, left: int):
        """The explicit running requests' ``(request, tokens, new blocks)`` in running order, their
        blocks in all and the budget left; None when the budget runs out before the last request."""
        comp, tok, held = self.comp, self.tok, self.held
        ph, final_len, amode, B = self.placeholders, self.final_len, self.async_mode, self.B
        pre = []
        tot_need = 0
        nl = self.explicit_running
        last = len(nl) - 1
        for i, q in enumerate(nl):
            c = int(comp[q])
            if amode:
                p = int(ph[q])
                if p > 0 and c + 2 - p >= final_len[q]:
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
                if i != last or q != int(self.run[self.requests.num_running - 1]):
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
        return pre, tot_need, left

    def _skip_finishing(self, fin: list, S: int) -> None:
        """Async: decoders whose last token is in flight leave lazy mode (finished by its output)."""
        del self.finishing_at[S - 1]
        for q in fin:
            self._unlazy(q, S)
            self.placeholders[q] = 0
            self.inflight[q] = 0
        self.num_lazy -= len(fin)
        self._finishing = fin

    def _lazy_blocks(self, pre: list, tot: int, tot_need: int, cross, S: int) -> None:
        """``tot`` blocks from one allocation, in running order: explicit requests' new blocks and one
        per decoder crossing a block boundary (``cross``)."""
        held = self.held
        if not tot_need:
            if tot <= _SCALAR_CROSSINGS:  # (a few blocks: scalar calls; this trace averages about 7)
                B, btab, now, one = self.B, self.btab, self.scheduler.exec_step, self.pool.allocate_one
                for slot in self.buckets[S % B].values():
                    btab[(slot + S) // B] = one(now)
                return
            pos = np.array(self._crossing_slots(S), np.int64)
        else:
            rseq, koff = self.admission_seq, self.koff
            ent = [(rseq[q], q, int(koff[q]) + int(held[q]), need) for q, n, need in pre if need]
            pos = self._slots(ent, cross, S)
            for q, _n, need in pre:
                if need:
                    held[q] += need
        self.btab[pos] = self.pool.allocate(tot, self.scheduler.exec_step)

    def _lazy_publish(self, pre: list, S: int) -> None:
        """Publication, in running order: explicit requests' newly full blocks, and the block each
        decoder fills this step (unless deferred)."""
        B, comp, tok, rseq, koff = self.B, self.comp, self.tok, self.admission_seq, self.koff
        pub = None if self.defer_pub else self.buckets.get((S + 1) % B)
        ent = []
        for q, n, _need in pre:
            full = min(int(comp[q]) + n, int(tok[q])) // B
            nc = int(self.ncached[q])
            if full > nc:
                ent.append((rseq[q], q, int(koff[q]) + nc, full - nc))
                self.ncached[q] = full
        if not ent and not pub:
            return
        if not ent:
            qa = np.array(sorted(pub, key=rseq.__getitem__), np.int64)
            pos = koff[qa] + (self.lazy_base[qa] + S + 1) // B - 1
        else:
            # the block a decoder fills this step is the one it was handed one step later
            pos = self._slots(ent, pub or None, S + 1, back=1)
        keys = pos if self.keyarr is None else self.keyarr[pos]
        self.pool.publish(self.btab[pos], keys)

    def _explicit_after_schedule(self, eq: list, en: list, D: int):
        """``_update_after_schedule`` for the explicit entries: ``(tokens, prefill tokens, sampled)``."""
        comp, tok, ph = self.comp, self.tok, self.placeholders
        ntok = D
        n_prefill = 0
        if self.async_mode:
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
        return ntok, n_prefill, sampled

    def _head_blocked(self) -> int:
        """By how many blocks the head of the queue misses admission's early full-prompt check (0: it does not).

        The first test :meth:`_admit` makes of a ready head with own keys: its whole
        prompt (or ``max_model_len``) in blocks, plus the watermark, against the free blocks.
        Requests still loading from a lower tier are passed over, as admission passes them.
        """
        q = self.waiting[0]
        loading = self.loads.loading
        if loading:
            i = 0
            while q in loading:
                if loading[q] <= self.scheduler.clock:
                    return 0  # its loads are done: admission takes it
                i += 1
                if i == len(self.waiting):
                    return 0
                q = self.waiting[i]
        if self.stale[q]:
            return 0
        if not (self.full_isl_own or (self.full_isl_untiered and not self.tiered[q])):
            # A head that let its blocks go (``tiered``) is offered loads first, and loads nothing
            # without room for one block beyond its GPU hits (TierLoads.start_onboard). From its release on its
            # hits are known without a lookup (``hit_run``, FastPool.one_release_run): they only shrink,
            # as its blocks are evicted last block first. Without that room the full-prompt check fails
            # too: its hits are all free blocks (own keys) and fewer than its whole prompt.
            if self.hit_run is None or not self.requests.num_running:
                return 0
            r = int(self.hit_run[q])
            if r < 0:
                return 0
            pool = self.pool
            if 1 + pool.run_left(int(self.koff[q]), r) + self.watermark_blocks <= pool.top + pool.nfifo:
                return 0  # room to load: admission looks at the tiers
        n = int(self.tok[q])
        if n > self.max_model_len:
            n = self.max_model_len
        pool = self.pool
        x = -(-n // self.B) + (self.watermark_blocks if self.requests.num_running else 0) - pool.top - pool.nfifo
        return x if x > 0 else 0

    def _first_finish(self) -> int:
        """``min(self.finishing_at)``: the first fast step a lazy decoder finishes at."""
        h, fin_at = self._finishing_heap, self.finishing_at
        while h[0] not in fin_at:
            heapq.heappop(h)
        return h[0]

    def _crossing_slots(self, S: int) -> list[int]:
        """The block-table slots that the lazy decoders crossing a block boundary at step ``S`` fill
        (``(koff * B + la + S) // B``), in running order."""
        B = self.B
        return [(slot + S) // B for slot in self.buckets[S % B].values()]

    def _bucket_add(self, q: int, slot: int) -> None:
        """Lazy decoder ``q`` (``slot = koff * B + la``) joins the bucket of its residue, in running order."""
        bk = self.buckets.setdefault(-slot % self.B, {})  # residue (-la) % B
        rseq = self.admission_seq
        if bk and rseq[q] < rseq[next(reversed(bk))]:  # (rare: it runs before the last of its bucket)
            items = sorted([*bk.items(), (q, slot)], key=lambda item: rseq[item[0]])
            bk.clear()
            bk.update(items)
        else:
            bk[q] = slot

    def _slots(self, ent: list, decoders, S: int, back: int = 0) -> np.ndarray:
        """Flat block-table slots of ``ent`` (``(rseq, q, first slot, count)``) plus one slot per lazy decoder.

        A decoder's slot is its block ``(la + S) // B - back``. All entries are
        taken in running order (``rseq``), each entry's slots consecutive.
        """
        koff, la, B = self.koff, self.lazy_base, self.B
        if decoders:
            ent = ent + [(self.admission_seq[q], q, -1, 1) for q in decoders]
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
        rseq, pool, rs = self.admission_seq, self.pool, self.requests
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
                    rs.num_running -= 1
                    v = int(self.run[rs.num_running])
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
        koff, btab, now = self.koff, self.btab, self.scheduler.exec_step
        if len(take) == 1:
            q, need, dec = take[0]
            if dec:
                btab[int(koff[q]) + (int(self.lazy_base[q]) + S) // self.B] = self.pool.allocate(1, now)[0]
            else:
                self.scheduler.allocate(q, need)
            return
        if all(dec for _, _, dec in take):
            qs = np.array([q for q, _, _ in take], np.int64)
            btab[koff[qs] + (self.lazy_base[qs] + S) // self.B] = self.pool.allocate(qs.size, now)
            return
        blocks = self.pool.allocate(sum(need for _, need, _ in take), now)
        i = 0
        for q, need, dec in take:
            if dec:
                btab[int(koff[q]) + (int(self.lazy_base[q]) + S) // self.B] = blocks[i]
            else:
                h = int(self.held[q])
                o = int(koff[q]) + h
                btab[o:o + need] = blocks[i:i + need]
                self.held[q] = h + need
            i += need

    def _preempt_lazy(self, v: int, S: int) -> None:
        """Preempt running request ``v`` during a lazy step."""
        if self.is_lazy[v]:
            B = self.B
            a = int(self.lazy_base[v])
            c = a + S
            self.comp[v] = c
            self.tok[v] = c + 1
            self.held[v] = -(-c // B)
            if self.defer_pub:
                self.scheduler.publish_one(v, c)
            elif self.caching:
                self.ncached[v] = c // B
            self.is_lazy[v] = False
            del self.buckets[(-a) % B][v]
            f = int(self.final_len[v]) - a - 2
            lst = self.finishing_at[f]
            lst.remove(v)
            if not lst:
                del self.finishing_at[f]
            self.num_lazy -= 1
            self.lazy_base_sum -= a
        else:
            self.explicit_running.remove(v)
        self.scheduler.preempt(v)

    def _fast_process(self, step: int, t_end: float) -> None:
        """``update_from_output()`` after :meth:`fast_schedule` (scalar: few entries per step)."""
        e, sampled, S_old, _ = self.batch
        S = self.lazy_step
        comp, Pmax = self.comp, self.final_len
        fins = []
        dec = self.finishing_at.pop(S_old, None)
        if dec:
            for q in dec:
                self._unlazy(q, S)
            self.num_lazy -= len(dec)
            fins = dec
        if e:
            nl = self.explicit_running
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
        :meth:`fast_schedule`): they finish. An entry whose prefill ended in
        it and that the schedule just made gave one decode token becomes a
        lazy decoder, and that token's output implicit.
        """
        eq, sampled, en, step, t_end = pend
        fins = self._finishing
        self._finishing = []
        if eq:
            comp, ph, inflight, Pmax = self.comp, self.placeholders, self.inflight, self.final_len
            nl = self.explicit_running
            cur_eq, cur_smp, _, cur_en = self.batch
            for q, smp, n in zip(eq, sampled, en):
                inflight[q] -= n
                if not smp:
                    continue
                t1 = self._receive_token(q, step, t_end)
                ph[q] -= 1
                if self.caching:
                    self.scheduler.publish_one(q, int(comp[q]) - int(inflight[q]))
                if t1 >= Pmax[q]:
                    nl.remove(q)
                    fins = fins + [q] if fins else [q]
                    continue
                if ph[q] == 1 and inflight[q] == 1 and q in cur_eq:
                    i = cur_eq.index(q)
                    if cur_en[i] == 1 and cur_smp[i]:
                        del cur_eq[i], cur_smp[i], cur_en[i]
                        nl.remove(q)
                        self._make_lazy(q, int(comp[q]) - self.lazy_step)
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
        self.is_lazy[q] = True
        self.lazy_base[q] = a
        self._bucket_add(q, self.slot_base[q] + a)
        f = int(self.final_len[q]) - a - 2
        lst = self.finishing_at.get(f)
        if lst is None:
            self.finishing_at[f] = [q]
            heapq.heappush(self._finishing_heap, f)
        else:
            lst.append(q)
        self.num_lazy += 1
        self.lazy_base_sum += a

    def _unlazy(self, q: int, S: int) -> None:
        """Lazy decoder ``q`` leaves lazy mode having computed ``la + S`` tokens (and received one more).

        Its deferred publication waits for its release (own keys, see
        :meth:`_finish_all`) or happens now; the caller adjusts ``D``.
        """
        B = self.B
        a = int(self.lazy_base[q])
        c = a + S
        self.comp[q] = c
        self.tok[q] = c + 1
        self.held[q] = -(-c // B)
        if self.defer_pub:
            if not (self.own_keys and not self.npre[q]):
                self.scheduler.publish_one(q, c)
            # else: published together with the release (_finish_all)
        elif self.caching:
            self.ncached[q] = c // B
        self.is_lazy[q] = False
        self.lazy_base_sum -= a
        del self.buckets[(-a) % B][q]

    def _finish_all(self, fins: list, step: int, t_end: float) -> None:
        """Finish requests ``fins`` (output of ``step``): release their blocks in running order."""
        B = self.B
        comp, npre = self.comp, self.npre
        own_pub = self.own_keys and self.defer_pub
        if fins:
            if len(fins) > 1:
                fins = sorted(fins, key=self.admission_seq.__getitem__)
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
                            self.scheduler.publish_one(q, full * B)
                        else:
                            pool.publish_new(blocks[nc:full], o + nc)
                        nc = full
                    if h:
                        pool.release_own(blocks, nc, o)
                    held[q] = 0
                    ncached[q] = 0
                else:
                    self.scheduler.release(q)
                gone[q] = True
                status[q] = FINISHED
            run = self.run[:self.requests.num_running]
            keep = run[~gone[run]]
            self.requests.num_running = keep.size
            self.run[:keep.size] = keep
            self.t["finished"] += len(fins)

    def process_step(self, step: int, clock: float) -> None:
        """The output of a lazy schedule call (engine step ``step``, ended at ``clock``, s): at once (sync), or
        that of the step before (async)."""
        if self.async_mode:
            pend = self._lazy_in_flight
            fe, fs, _, fn = self.batch
            self._lazy_in_flight = (fe, fs, fn, step, clock)
            if pend is not None:
                self._fast_process_async(pend)
        else:
            self._fast_process(step, clock)

    # ------------------------------------------------------------------ lazy windows (accelerator)

    def window_possible(self) -> bool:
        """Cheap tests of the lazy state before :meth:`window` (most of its first ones; the engine adds its own:
        arrivals, a progress report due)."""
        at_cap = self.requests.num_running >= self.cfg.max_num_seqs
        return bool(self.windows_ok and self.lazy_active and not self.explicit_running and self.num_lazy
                    and not (self.waiting and not at_cap))

    def window(self, tick: int, next_arrival, until, max_k: int, exec_step: int, clock: float, observed: bool):
        """Several lazy steps at once, identical to as many :meth:`fast_schedule` calls.

        Sync lazy mode with every running request a lazy decoder, no admission
        possible, no completion, no arrival or ``until`` inside (arrivals ignored
        at the running cap, as the decode jumps do, unless ``observed``: a step series
        or a router watches) and enough free blocks for the decoders that cross a
        block boundary. ``tick``: the engine's schedule calls so far, ``exec_step``
        its steps, ``clock`` its time (s). Returns None, or ``(k, starts, used,
        clock)``: the steps made, the clock at each one's start, the blocks in use
        after each and the clock after the last. This advances ``S`` and the block
        tables; the caller counts the steps and moves its clock, ``exec_step`` and
        step series.
        """
        at_cap = self.requests.num_running >= self.cfg.max_num_seqs
        if not (observed or not at_cap):
            next_arrival = None  # at the running cap (and unobserved) arrivals change nothing
        k = self._window_length(tick, next_arrival, until, max_k, at_cap)
        if k < 2:
            return None
        pool = self.pool
        free = pool.top + pool.nfifo
        starts, cnt, clock, need = self._window_steps(k, next_arrival, until, free, clock)
        k = len(starts)
        if k < 2:
            return None
        pool.check_passed(free - need)  # the k single steps' checks, the last the closest
        u = u0 = pool.usable - free
        used = []
        for c in cnt:
            u += c
            used.append(u)
        S = self.lazy_step
        if u > u0:
            self._window_blocks(cnt, u - u0, exec_step)
        self.lazy_step = S + k
        self.batch = ([], [], S + k - 1, [])
        return k, starts, used, clock

    def _window_length(self, tick: int, next_arrival, until, max_k: int, at_cap: bool) -> int:
        """Most steps a lazy window may make (< 2: none): no admission possible, the budget holds the
        decoders, no arrival (``next_arrival``) or ``until`` inside (counted in steps), no completion."""
        left = self.cfg.max_num_batched_tokens - self.num_lazy
        if left < 0 or (self.waiting and not at_cap and left > 0):
            return 0
        k = max_k if max_k < _WINDOW_STEPS else _WINDOW_STEPS
        if not self.time_mode:
            if next_arrival is not None and int(next_arrival) - tick < k:
                k = int(next_arrival) - tick
            if until is not None and int(until) - tick < k:
                k = int(until) - tick
            if k < 2:
                return 0
        f = self._first_finish() - self.lazy_step
        return f if f < k else k

    def _window_steps(self, k: int, next_arrival, until, free: int, clock: float):
        """Step by step: its start on the clock (in time mode a step starts only before
        ``next_arrival`` and ``until``; the first at ``clock``) and the blocks its crossing decoders take, while
        they fit in ``free``. Returns the starts, the blocks per step, the clock after the last and the blocks in all."""
        D, S, B = self.num_lazy, self.lazy_step, self.B
        buckets, terms, time_mode = self.buckets, self.step_clock.terms, self.time_mode
        if terms is None:
            dt = self.step_clock.step_time(D, D)
        else:
            base = self.lazy_base_sum + D * (S + 1)
            dstep = terms.decode_step(D)
        starts = []
        cnt = []
        need = 0
        for j in range(k):
            if j and time_mode and ((next_arrival is not None and clock >= next_arrival)
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
        return starts, cnt, clock, need

    def _window_blocks(self, cnt: list, total: int, step0: int) -> None:
        """The crossing decoders' blocks (``cnt`` per step, ``total`` in all), step by step in running
        order, as :meth:`fast_schedule` hands them out; the first step is engine step ``step0``."""
        S = self.lazy_step
        pos: list[int] = []
        steps: list[int] = []
        for j, c in enumerate(cnt):
            if c:
                pos += self._crossing_slots(S + j)
                steps += [step0 + j] * c
        now = steps[0] if steps[0] == steps[-1] else np.array(steps, np.int64)
        self.btab[np.array(pos, np.int64)] = self.pool.allocate(total, now)

    def jump_precheck(self, next_arrival, tick: int, observed: bool) -> bool:
        """In lazy mode: could a decode jump advance at least 2 steps (cheap, no materializing)? ``observed``: a
        step series or a router watches (arrivals count at the running cap too)."""
        if self.explicit_running or not self.num_lazy:
            return False
        at_cap = self.requests.num_running >= self.cfg.max_num_seqs
        if self.waiting and not at_cap:
            return False
        if self.requests.num_running > self.cfg.max_num_batched_tokens:
            return False
        if self._first_finish() - self.lazy_step < 2:
            return False
        if (observed or not at_cap) and next_arrival is not None and not self.time_mode:
            if int(next_arrival) - tick < 2:
                return False
        return True
