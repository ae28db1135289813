"""Accelerator: decode-only stretches of the general path in one go (jumps).

While every running request decodes one token a step, nothing can be admitted, nobody finishes
and enough blocks are free for the block-boundary crossings, ``k`` steps have a closed form. A
:class:`DecodeJumps` is one part of :class:`simulator.engine.core.FastEngine` (``engine.jumps``): it
hands out the blocks in (step, running order) order, records the pool margin of the ``k`` single
checks and writes the totals and the step series as ``k`` single steps would. The engine moves its
own time (``clock``, ``exec_step``, schedule calls) by what :meth:`DecodeJumps.jump` returns. The
lazy decoders' version over their implicit state (lazy windows) is
:meth:`simulator.engine.lazy_decoders.LazyDecoders.window`; both write the step series with
:func:`log_decode_steps`. Off with ``accelerate=False``, with async scheduling, a batched cost hook or
``kv_offload_threshold`` (:mod:`simulator.engine.accelerators`).
"""

from __future__ import annotations

import bisect

import numpy as np

_acc = np.add.accumulate  # cumsum of a 1-D int64 array, without np.cumsum's dispatch
_add = np.add.reduce
_cnz = np.count_nonzero  # a numpy int: int() it before it reaches a result


def log_decode_steps(step_ends, log, starts: list, used: list, end: float, step: int, running: int,
                     waiting: int) -> None:
    """Step series of ``len(starts)`` decode-only steps from engine step ``step`` (each of the ``running``
    requests one token, ``waiting`` waiting), the last ending at ``end``: the steps' ends always
    (:attr:`FastEngine.step_ends`), the rest when the steps are recorded (``log``)."""
    step_ends.extend(starts[1:])
    step_ends.append(end)
    if log is None:
        return
    k, R = len(starts), running
    log["step"].extend(range(step, step + k))
    log["time_s"].extend(starts)
    log["num_running"].extend([R] * k)
    log["num_waiting"].extend([waiting] * k)
    log["num_scheduled_tokens"].extend([R] * k)
    log["kv_blocks_used"].extend(used)
    log["num_preempted"].extend([0] * k)


class DecodeJumps:
    """Jumps over the general path's decode-only stretches.

    The accelerator ``decode_jumps`` (:mod:`simulator.engine.accelerators` says which runs it supports:
    synchronous scheduling, one clock per configuration, no offload after every step, no draft tokens);
    the engine holds one only for a run that takes it.

    Owns: when to try next (``retry_at``, an engine step) and the back-off after a try that found no
    stretch (``backoff``, doubling up to 16 steps).

    Interface: :meth:`jump` (the engine's time, step and running count in; the steps jumped and the
    clock after them out), :meth:`tried` (the back-off).

    Parameters
    ----------
    requests : RequestState
        Reads the running order, ``final_len`` and the waiting queue; writes ``comp``, ``tok``,
        ``held``, ``first_token``, ``first_token_t`` of the running requests.
    pool : FastPool
    step_clock : StepClock
        Its ``terms`` (closed-form decode step times) or linear ``step_time``.
    koff, btab :
        The block tables' layout (request ``q``'s blocks are ``btab[koff[q]:koff[q] + held[q]]``).
    block_size, max_num_seqs, max_num_batched_tokens, max_model_len : int
    max_model_len_binds : bool
        Some context can reach ``max_model_len`` (else it is not checked).
    time_mode : bool
        Arrivals are in seconds (else in schedule calls).
    publish : callable or None
        ``publish(ids, upto)``: the scheduler's publication of full blocks (None: no prefix caching).
    totals : dict
        The engine's totals (``FastEngine.t``), counted here for the jumped steps.
    step_ends, log :
        The engine's step series (:func:`log_decode_steps`).
    """

    def __init__(self, requests, pool, step_clock, *, koff, btab, block_size: int, max_num_seqs: int,
                 max_num_batched_tokens: int, max_model_len: int, max_model_len_binds: bool, time_mode: bool,
                 publish, totals: dict, step_ends, log) -> None:
        self.requests = requests
        self.pool = pool
        self.step_clock = step_clock
        self.koff = koff
        self.btab = btab
        self.B = block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        self.max_model_len_binds = max_model_len_binds
        self.time_mode = time_mode
        self.publish = publish
        self.t = totals
        self.step_ends = step_ends
        self.log = log
        self.retry_at = 0
        self.backoff = 1

    def tried(self, jumped: int, step: int) -> None:
        """A try made at engine step ``step`` jumped ``jumped`` steps: none, back off before the next try."""
        if jumped:
            self.backoff = 1
        else:
            self.retry_at = step + self.backoff
            self.backoff = min(2 * self.backoff, 16)

    def jump(self, next_arrival, tick: int, max_k: int, clock: float, step: int, running: int,
             observed: bool) -> tuple[int, float]:
        """Advance a decode-only stretch in one go from engine step ``step`` (schedule call ``tick``, at
        ``clock``, ``running`` requests running): the steps advanced (0 = none) and the clock after them.

        Sync mode only; the conditions and closed forms of the reference
        kernel's ``_jump`` (every running request decoding and within the
        budget, no admission possible, no completion, enough free blocks for
        every block-boundary crossing; blocks handed out in (step, running
        order) order). Stops before ``next_arrival`` (None: none) unless at the running cap and not
        ``observed`` (the step series recorded, or requests arriving from outside): there arrivals
        change nothing.
        """
        R = running
        if R > self.max_num_batched_tokens:
            return 0, clock
        at_cap = R >= self.max_num_seqs
        rs = self.requests
        if rs.waiting and not at_cap:
            return 0, clock
        run = rs.run[:R].copy()
        c = rs.comp[run]
        tk = rs.tok[run]
        if _cnz(tk - c - 1):
            return 0, clock
        if not (observed or not at_cap):
            next_arrival = None  # at the running cap (and unobserved) arrivals change nothing
        k, starts = self._jump_length(run, c, tk, next_arrival, tick, max_k, clock)
        if k < 2:
            return 0, clock
        held = rs.held[run]
        pool = self.pool
        free = pool.num_free()
        k, extra, tot = self._jump_fit_blocks(c, held, k, free)
        if k < 2:
            return 0, clock
        pool.check_passed(free - tot)  # the checks of the k single steps, the last the closest
        per_step_alloc = self._jump_blocks(run, c, held, extra, tot, k, step) if tot else np.zeros(k, np.int64)
        used = (pool.usable - free) + _acc(per_step_alloc)
        if starts is None:  # the linear clock, one step at a time
            dt = self.step_clock.step_time(R, R)
            starts = [clock]
            for _ in range(k):
                starts.append(starts[-1] + dt)
        self._jump_apply(run, c, tk, k, starts, used, step)
        return k, starts[k]

    def _jump_length(self, run: np.ndarray, c: np.ndarray, tk: np.ndarray, next_arrival, tick: int, max_k: int,
                     clock: float):
        """Steps before the first completion, ``max_k`` and the next arrival (``next_arrival``, None:
        ignored); with a cost model also each step's start on the clock (else None)."""
        R = c.size
        rem = self.requests.final_len[run] - tk
        if self.max_model_len_binds:
            rem = np.minimum(rem, self.max_model_len - tk)
        k = min(int(rem.min()) - 1, max_k)
        starts = None
        terms = self.step_clock.terms
        if terms is not None and k >= 2:
            times = terms.decode_times(k, R, float(c.sum()) + R)
            # step j starts at starts[j], added up one step at a time as the stepping engine does
            starts = [clock]
            for dt in times.tolist():
                starts.append(starts[-1] + dt)
        if next_arrival is None:
            return k, starts
        if self.time_mode and starts is not None:
            k = bisect.bisect_left(starts, next_arrival, 0, k)
        elif self.time_mode:
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

    def _jump_blocks(self, run, c, held, extra, tot: int, k: int, step: int) -> np.ndarray:
        """Allocate the jump's ``tot`` blocks in (step, running order) order; the blocks taken per step."""
        B = self.B
        idx = np.repeat(np.arange(run.size), extra)
        m = np.arange(tot) - np.repeat(_acc(extra) - extra, extra)
        j = (held[idx] + m) * B - c[idx]
        ordr = np.lexsort((idx, j))
        pos = (self.koff[run][idx] + held[idx] + m)[ordr]
        j = j[ordr]
        self.btab[pos] = self.pool.allocate(tot, step + j)
        self.requests.held[run] = held + extra
        return np.bincount(j, minlength=k)

    def _jump_apply(self, run, c, tk, k: int, starts: list, used: np.ndarray, step: int) -> None:
        """The ``k`` jumped steps' effects: tokens, first tokens, publication, totals, series, clock."""
        R = run.size
        rs = self.requests
        nf = run[rs.first_token[run] < 0]
        if nf.size:
            rs.first_token[nf] = step
            rs.first_token_t[nf] = starts[1]
        rs.comp[run] = c + k
        rs.tok[run] = tk + k
        if self.publish is not None:
            self.publish(run, c + k)
        t = self.t
        t["num_schedule_calls"] += k
        t["num_steps"] += k
        t["total_scheduled_tokens"] += k * R
        t["total_decode_tokens"] += k * R
        t["kv_block_steps"] += int(used.sum())
        t["peak_kv_blocks_used"] = max(t["peak_kv_blocks_used"], int(used[-1]))
        # the jumped steps are schedule calls too: a run that ends at max_steps inside them has no later
        # call to count a queue that grew before the jump
        nw = len(rs.waiting)
        t["peak_waiting"] = max(t["peak_waiting"], nw)
        log_decode_steps(self.step_ends, self.log, starts[:k], used.tolist(), starts[k], step, R, nw)


__all__ = ["DecodeJumps", "log_decode_steps"]
