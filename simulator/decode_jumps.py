"""Accelerators: decode-only stretches in one go (jumps) and several lazy steps at once (windows).

While every running request decodes one token a step, nothing can be admitted, nobody finishes
and enough blocks are free for the block-boundary crossings, ``k`` steps have a closed form:
:meth:`DecodeJumps._jump` (general path state) and :meth:`DecodeJumps._lazy_window` (lazy
decoders). Both hand out blocks in (step, running order) order, record the pool margin of the
``k`` single checks and write the step series as ``k`` single steps would. Off with
``accelerate=False``, with async scheduling, a batched cost hook or ``kv_offload_threshold``.
"""

from __future__ import annotations

import bisect

import numpy as np

_acc = np.add.accumulate  # cumsum of a 1-D int64 array, without np.cumsum's dispatch
_add = np.add.reduce
_cnz = np.count_nonzero  # a numpy int: int() it before it reaches a result
_WINDOW_STEPS = 64  # most lazy steps made at once by DecodeJumps._lazy_window


class DecodeJumps:
    """Jumps over decode-only stretches and lazy windows (mixin of ``FastEngine``)."""

    def _try_jump(self, until) -> bool:
        """Jump over a decode-only stretch if one starts now (True); else back off before trying again."""
        nxt = self._next_arrival()
        if until is not None and (nxt is None or until < nxt):
            nxt = until
        tick = self._tick
        max_k = self.cfg.max_steps - tick
        if not self.lazy_active:
            jumped = self._jump(nxt, tick, max_k)
        elif self._jump_precheck(nxt, tick):
            self._materialize(keep=True)
            jumped = self._jump(nxt, tick, max_k)
            self._relazify(jumped)
        else:
            jumped = 0
        if jumped:
            self.shortcuts["jumped_steps"] += jumped
            self._tick += jumped
            self._backoff = 1
            return True
        self._retry_jump_at = self.exec_step + self._backoff
        self._backoff = min(2 * self._backoff, 16)
        return False

    def _window_possible(self) -> bool:
        """Cheap tests before :meth:`_lazy_window` (most of its first ones, no progress report due)."""
        n = self.wl.n
        at_cap = self.num_running >= self.cfg.max_num_seqs
        return bool(self.windows_ok and self.lazy_active and not self.explicit_running and self.num_lazy
                    and not (self.waiting and not at_cap)
                    and (self.time_mode or self._pending >= n or self._arr[self._pending] - self._tick >= 2
                         or (at_cap and self.log is None and not self._external))
                    and (self._progress is None or not (n and self.t["finished"] / n >= self._next_report)))

    def _try_window(self, until, stats) -> bool:
        """Make a lazy window (True) and count its steps in ``stats``, or nothing (False)."""
        win = self._lazy_window(self._tick, self._next_arrival(), until, self.cfg.max_steps - self._tick)
        if win is None:
            return False
        k, used = win
        self.shortcuts["window_steps"] += k
        stats.calls += k
        stats.steps += k
        stats.tokens += k * self.num_lazy
        stats.block_steps += sum(used)
        if used[-1] > stats.peak_used:
            stats.peak_used = used[-1]
        if self.num_running > stats.peak_running:
            stats.peak_running = self.num_running
        if len(self.waiting) > stats.peak_waiting:
            stats.peak_waiting = len(self.waiting)
        self._tick += k
        return True

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
        D = self.num_lazy
        waiting = self.waiting
        at_cap = self.num_running >= cfg.max_num_seqs
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
        S = self.lazy_step
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
            base = self.lazy_base_sum + D * (S + 1)
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
        self.lazy_step = S + k
        self.exec_step = step0 + k
        self._lazy_batch = ([], [], S + k - 1, [])
        return k, used

    def _jump_precheck(self, next_arrival, tick: int) -> bool:
        """In lazy mode: could :meth:`_jump` advance at least 2 steps (cheap, no materializing)?"""
        if self.explicit_running or not self.num_lazy:
            return False
        at_cap = self.num_running >= self.cfg.max_num_seqs
        if self.waiting and not at_cap:
            return False
        if self.num_running > self.cfg.max_num_batched_tokens:
            return False
        if self._first_finish() - self.lazy_step < 2:
            return False
        if (self.log is not None or not at_cap or self._external) and next_arrival is not None and not self.time_mode:
            if int(next_arrival) - tick < 2:
                return False
        return True

    def _jump(self, next_arrival, tick: int, max_k: int) -> int:
        """Advance a decode-only stretch in one go; return the steps advanced (0 = none).

        Sync mode only; the conditions and closed forms of the reference
        kernel's ``_jump`` (every running request decoding and within the
        budget, no admission possible, no completion, enough free blocks for
        every block-boundary crossing; blocks handed out in (step, running
        order) order).
        """
        cfg = self.cfg
        R = self.num_running
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
        rem = self.final_len[run] - tk
        if self.max_model_len_binds:
            rem = np.minimum(rem, self.max_model_len - tk)
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
        k, R = len(starts), self.num_running
        log["step"].extend(range(self.exec_step, self.exec_step + k))
        log["time_s"].extend(starts)
        log["num_running"].extend([R] * k)
        log["num_waiting"].extend([len(self.waiting)] * k)
        log["num_scheduled_tokens"].extend([R] * k)
        log["kv_blocks_used"].extend(used)
        log["num_preempted"].extend([0] * k)
