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
        max_k = self.max_steps - tick
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
        n = self._num_requests
        at_cap = self.num_running >= self.cfg.max_num_seqs
        return bool(self.windows_ok and self.lazy_active and not self.explicit_running and self.num_lazy
                    and not (self.waiting and not at_cap)
                    and (self.time_mode or self._pending >= n or self._arr[self._pending] - self._tick >= 2
                         or (at_cap and self.log is None and not self._external))
                    and (self._progress is None or not (n and self.t["finished"] / n >= self._next_report)))

    def _try_window(self, until, stats) -> bool:
        """Make a lazy window (True) and count its steps in ``stats``, or nothing (False)."""
        win = self._lazy_window(self._tick, self._next_arrival(), until, self.max_steps - self._tick)
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
        at_cap = self.num_running >= self.cfg.max_num_seqs
        if not (self.log is not None or not at_cap or self._external):
            next_arrival = None  # at the running cap (and unobserved) arrivals change nothing
        k = self._window_length(tick, next_arrival, until, max_k, at_cap)
        if k < 2:
            return None
        pool = self.pool
        free = pool.top + pool.nfifo
        starts, cnt, clock, need = self._window_steps(k, next_arrival, until, free)
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
        step0 = self.exec_step
        if u > u0:
            self._window_blocks(cnt, u - u0)
        self._log_decode_steps(starts, used, clock)
        self.clock = clock
        self.lazy_step = S + k
        self.exec_step = step0 + k
        self._lazy_batch = ([], [], S + k - 1, [])
        return k, used

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

    def _window_steps(self, k: int, next_arrival, until, free: int):
        """Step by step: its start on the clock (in time mode a step starts only before
        ``next_arrival`` and ``until``) and the blocks its crossing decoders take, while they fit in
        ``free``. Returns the starts, the blocks per step, the clock after the last and the blocks in all."""
        D, S, B = self.num_lazy, self.lazy_step, self.B
        buckets, terms, time_mode = self.buckets, self.step_clock.terms, self.time_mode
        if terms is None:
            dt = self.step_clock.step_time(D, D)
        else:
            base = self.lazy_base_sum + D * (S + 1)
            dstep = terms.decode_step(D)
        clock = self.clock
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

    def _window_blocks(self, cnt: list, total: int) -> None:
        """The crossing decoders' blocks (``cnt`` per step, ``total`` in all), step by step in running
        order, as :meth:`_fast_schedule` hands them out."""
        S, step0 = self.lazy_step, self.exec_step
        pos: list[int] = []
        steps: list[int] = []
        for j, c in enumerate(cnt):
            if c:
                pos += self._crossing_slots(S + j)
                steps += [step0 + j] * c
        now = steps[0] if steps[0] == steps[-1] else np.array(steps, np.int64)
        self.btab[np.array(pos, np.int64)] = self.pool.allocate(total, now)

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
        run = self.run[:R].copy()
        c = self.comp[run]
        tk = self.tok[run]
        if _cnz(tk - c - 1):
            return 0
        if not (self.log is not None or not at_cap or self._external):
            next_arrival = None  # at the running cap (and unobserved) arrivals change nothing
        k, starts = self._jump_length(c, tk, next_arrival, tick, max_k)
        if k < 2:
            return 0
        held = self.held[run]
        free = self.pool.num_free()
        k, extra, tot = self._jump_fit_blocks(c, held, k, free)
        if k < 2:
            return 0
        self.pool.check_passed(free - tot)  # the checks of the k single steps, the last the closest
        per_step_alloc = self._jump_blocks(run, c, held, extra, tot, k) if tot else np.zeros(k, np.int64)
        used = (self.pool.usable - free) + _acc(per_step_alloc)
        if starts is None:  # the linear clock, one step at a time
            dt = self.step_clock.step_time(R, R)
            starts = [self.clock]
            for _ in range(k):
                starts.append(starts[-1] + dt)
        self._jump_apply(run, c, tk, k, starts, used)
        return k

    def _jump_length(self, c: np.ndarray, tk: np.ndarray, next_arrival, tick: int, max_k: int):
        """Steps before the first completion, ``max_k`` and the next arrival (``next_arrival``, None:
        ignored); with a cost model also each step's start on the clock (else None)."""
        R = c.size
        run = self.run[:R]
        rem = self.final_len[run] - tk
        if self.max_model_len_binds:
            rem = np.minimum(rem, self.max_model_len - tk)
        k = min(int(rem.min()) - 1, max_k)
        starts = None
        terms = self.step_clock.terms
        if terms is not None and k >= 2:
            times = terms.decode_times(k, R, float(c.sum()) + R)
            # step j starts at starts[j], added up one step at a time as the stepping engine does
            starts = [self.clock]
            for dt in times.tolist():
                starts.append(starts[-1] + dt)
        if next_arrival is None:
            return k, starts
        if self.time_mode and starts is not None:
            k = bisect.bisect_left(starts, next_arrival, 0, k)
        elif self.time_mode:
            clock = self.clock
            dt = self.step_clock.step_time(R, R)
            j = 0
            while j < k and not (next_arrival <= clock):
                clock += dt
                j += 1
            k = j
        else:
            k = min(k, int(next_arrival) - tick)
        return k, starts

    def _jump_fit_blocks(self, c: np.ndarray, held: np.ndarray, k: int, free: int):
        """The most steps (up to ``k``) whose block-boundary crossings fit in ``free`` blocks, with
        each request's new blocks and their sum."""
        B = self.B
        extra = np.maximum(-(-(c + k) // B) - held, 0)
        tot = int(_add(extra))
        if tot <= free:
            return k, extra, tot
        lo, hi = 0, k
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if int(np.maximum(-(-(c + mid) // B) - held, 0).sum()) <= free:
                lo = mid
            else:
                hi = mid
        extra = np.maximum(-(-(c + lo) // B) - held, 0)
        return lo, extra, int(_add(extra))

    def _jump_blocks(self, run, c, held, extra, tot: int, k: int) -> np.ndarray:
        """Allocate the jump's ``tot`` blocks in (step, running order) order; the blocks taken per step."""
        B = self.B
        idx = np.repeat(np.arange(run.size), extra)
        m = np.arange(tot) - np.repeat(_acc(extra) - extra, extra)
        j = (held[idx] + m) * B - c[idx]
        ordr = np.lexsort((idx, j))
        pos = (self.koff[run][idx] + held[idx] + m)[ordr]
        j = j[ordr]
        self.btab[pos] = self.pool.allocate(tot, self.exec_step + j)
        self.held[run] = held + extra
        return np.bincount(j, minlength=k)

    def _jump_apply(self, run, c, tk, k: int, starts: list, used: np.ndarray) -> None:
        """The ``k`` jumped steps' effects: tokens, first tokens, publication, totals, series, clock."""
        R = run.size
        nf = run[self.first_token[run] < 0]
        if nf.size:
            self.first_token[nf] = self.exec_step
            self.first_token_t[nf] = starts[1]
        self.comp[run] = c + k
        self.tok[run] = tk + k
        if self.caching:
            self._publish(run, c + k)
        t = self.t
        t["num_schedule_calls"] += k
        t["num_steps"] += k
        t["total_scheduled_tokens"] += k * R
        t["total_decode_tokens"] += k * R
        t["kv_block_steps"] += int(used.sum())
        t["peak_kv_blocks_used"] = max(t["peak_kv_blocks_used"], int(used[-1]))
        # the jumped steps are schedule calls too: a run that ends at max_steps inside them has no later
        # call to count a queue that grew before the jump
        t["peak_waiting"] = max(t["peak_waiting"], len(self.waiting))
        self._log_decode_steps(starts[:k], used.tolist(), starts[k])
        self.clock = starts[k]
        self.exec_step += k

    def _log_decode_steps(self, starts: list, used: list, end: float) -> None:
        """Step series of ``len(starts)`` decode-only steps from ``exec_step`` (each running request one token),
        the last ending at ``end``; the steps' ends always (:attr:`FastEngine.step_ends`)."""
        self.step_ends.extend(starts[1:])
        self.step_ends.append(end)
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
