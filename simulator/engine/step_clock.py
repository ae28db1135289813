"""The step clock: seconds of each engine step, from the batch scheduled.

A :class:`StepClock` is one part of :class:`simulator.engine.core.FastEngine` (``engine.step_clock``).
Three cost models sit behind it: the linear ``step_time_model`` (``step_time(tokens, requests)``), a
per-configuration :class:`simulator.clock.terms.StepCostTerms` (``terms.time``) and a batched hook
(``step_cost.step_time(...)[cost_index]``); under speculative decoding it adds the rejection sampler's
rows and the drafter's passes (``draft_terms``). The engine's time itself (``engine.clock``) stays on the
engine: the step clock says how long a step takes, the engine adds it up. (The batched hook is also how a
DP group gives its ranks one step time: :mod:`simulator.cluster.data_parallel`.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class StepClock:
    """Steps to seconds.

    Interface: :meth:`seconds` (a general-path step), :meth:`lazy_seconds` (a lazy decoders' step),
    :meth:`prefill_mask` and :meth:`step_terms` (a batch's cost-model inputs); the cost models as
    attributes, for the accelerators' closed forms (``step_time``, ``terms``).

    Parameters
    ----------
    comp, tok : ndarray of int64
        The request state's computed and received tokens
        (:class:`simulator.engine.request_state.RequestState`; read, never written).
    step_time : callable
        ``(num_scheduled_tokens, num_scheduled_reqs) -> seconds``: the linear clock, used when neither
        ``terms`` nor ``step_cost`` is set.
    terms : StepCostTerms or None
        The configuration's cost model (scalar evaluation).
    step_cost : batched cost hook or None
        ``step_cost.step_time(P, A, D, C, R, prefill_kv_tokens=PK)[cost_index]`` seconds a step.
    cost_index : int
    spec_k : int
        Draft tokens per verification (0: no speculative decoding).
    draft_terms : StepCostTerms or None
        The drafter's cost model (None: its passes are free).
    """

    __slots__ = ("comp", "tok", "step_time", "terms", "step_cost", "cost_index", "spec_k", "draft_terms", "_decode")

    def __init__(self, comp: np.ndarray, tok: np.ndarray, *, step_time: Callable[[int, int], float], terms,
                 step_cost, cost_index: int, spec_k: int, draft_terms) -> None:
        self.comp = comp
        self.tok = tok
        self.step_time = step_time
        self.terms = terms
        self.step_cost = step_cost
        self.cost_index = cost_index
        self.spec_k = spec_k
        self.draft_terms = draft_terms
        self._decode: dict[int, Callable[[int], float]] = {}  # n -> terms.decode_step(n) (lazy decode-only steps)

    def seconds(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray, ntok: int, nreq: int) -> float:
        """Seconds of the general path's step just scheduled (requests ``e``, ``ns`` tokens each, ``sampled``;
        ``comp`` already advanced), with the drafter's passes under speculative decoding."""
        if self.spec_k and e.size:
            extra = self._verify_sampler_seconds(e, ns, sampled)
            if self.draft_terms is not None:
                extra += self._draft_seconds(e, ns, sampled)
            return self._target_seconds(e, ns, sampled, ntok, nreq) + extra
        return self._target_seconds(e, ns, sampled, ntok, nreq)

    def lazy_seconds(self, batch, num_lazy: int, lazy_base_sum: int, ntok: int, nreq: int) -> float:
        """Seconds of a lazy decoders' step (:meth:`simulator.engine.lazy_decoders.LazyDecoders.fast_schedule`):
        ``batch`` its materialized entries ``(requests, sampled, lazy_step, tokens)``, plus ``num_lazy``
        implicit decoders whose contexts add up to ``lazy_base_sum + num_lazy * (lazy_step + 1)``."""
        if self.terms is not None:
            return self._lazy_step_seconds(batch, num_lazy, lazy_base_sum)
        if self.step_cost is None:
            return self.step_time(ntok, nreq)
        fe, fs, lazy_step, fns = batch
        return self._cost_time(self.step_terms(np.array(fe, np.int64), np.array(fns, np.int64), np.array(fs, bool),
                                               lazy=(lazy_step, num_lazy, lazy_base_sum)))

    def _verify_sampler_seconds(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> float:
        """The sampler's time for the draft positions a verification scores (vLLM's rejection sampler applies
        the requests' top-k / top-p to the target's logits at every draft position, a row each, beside the
        bonus token's row the target's clock already charges per request).  # s"""
        if self.terms is None or not self.terms.gpu_req_s:
            return 0.0
        dec = ~self.prefill_mask(e, ns, sampled)
        return self.terms.gpu_req_s * int((ns[dec] - 1).sum())

    def _draft_seconds(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> float:
        """The drafter's passes in the step just scheduled: one over the step's tokens, ``k - 1`` of one
        token for each request that sampled (vLLM's proposer drafts for each), their context growing a
        token a pass.  # s"""
        P, A, D, C, R, PK = self.step_terms(e, ns, sampled)
        if P + D <= 0:
            return 0.0
        drafting = int(sampled.sum())
        ctx = int(self.comp[e[sampled]].sum())
        dt = self.draft_terms
        s = dt.time(P, A, D, C, R, PK)
        for j in range(1, self.spec_k if drafting else 1):
            s += dt.time(0, 0, drafting, ctx + j * drafting, drafting, 0)
        return s

    def _target_seconds(self, e, ns, sampled, ntok: int, nreq: int) -> float:
        """Seconds of the target model's (general path) step."""
        if self.terms is not None:
            if not e.size:
                return 0.0
            return self.terms.time(*self.step_terms(e, ns, sampled))
        if self.step_cost is None:
            return self.step_time(ntok, nreq)
        return self._cost_time(self.step_terms(e, ns, sampled))

    def prefill_mask(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> np.ndarray:
        """Which scheduled requests computed prompt tokens: those that sampled nothing, or more than one
        token without draft tokens (a verification of ``1 + d`` tokens is decoding)."""
        pf = ~sampled | (ns > 1)
        if self.spec_k:
            pf &= self.comp[e] <= self.tok[e]  # (sync: comp > tok only with drafts scheduled)
        return pf

    def step_terms(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray, lazy: tuple | None = None):
        """Cost-model inputs of the step just scheduled (``comp`` already advanced).

        Returns ``(prefill_tokens, prefill_attention_tokens, decode_tokens,
        decode_context_tokens, num_reqs, prefill_kv_tokens)``: a prefill chunk
        of ``n`` tokens starting at ``c`` computed tokens attends to ``n * c +
        n (n + 1) / 2`` context tokens and reads ``c + n`` KV tokens; a decode
        token attends to ``c + 1``; a verification of ``n = 1 + d`` tokens (``d`` drafts) counts ``n``
        decode tokens and reads ``c + n`` KV tokens once. With ``lazy = (lazy_step, num_lazy,
        lazy_base_sum)`` (the fast step's counter before the step) the implicit decoders are added.
        """
        c0 = self.comp[e] - ns
        pf = self.prefill_mask(e, ns, sampled)
        npf = ns[pf]
        cpf = c0[pf]
        P = int(npf.sum())
        A = int((npf * cpf).sum() + (npf * (npf + 1) // 2).sum())
        PK = int(cpf.sum()) + P
        dec = ~pf
        if self.spec_k:
            D = int(ns[dec].sum())
            C = int((c0[dec] + ns[dec]).sum())
        else:
            D = int(dec.sum())
            C = int((c0[dec] + 1).sum())
        R = int(e.size)
        if lazy is not None and lazy[1]:
            S, num_lazy, base_sum = lazy
            D += num_lazy
            R += num_lazy
            C += base_sum + num_lazy * (S + 1)
        return P, A, D, C, R, PK

    def _cost_time(self, terms) -> float:
        P, A, D, C, R, PK = terms
        return float(self.step_cost.step_time(P, A, D, C, R, prefill_kv_tokens=PK)[self.cost_index])

    def _lazy_step_seconds(self, batch, num_lazy: int, lazy_base_sum: int) -> float:
        """Cost-model seconds of a lazy step (materialized entries ``batch`` + ``num_lazy`` implicit decoders)."""
        eq, sampled, S, en = batch
        if not eq:  # (decoders only, the usual step)
            return self._decode_seconds(num_lazy, lazy_base_sum + num_lazy * (S + 1))
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
        D = num_lazy
        C += lazy_base_sum + D * (S + 1)
        if not P:  # every entry decodes one token too
            return self._decode_seconds(Dm + D, C)
        return self.terms.time(P, A, Dm + D, C, len(eq) + D, PK)

    def _decode_seconds(self, n: int, C: int) -> float:
        """``terms.time(0, 0, n, C, n, 0)`` (a decode-only step of ``n`` requests, context ``C``), bit for bit,
        through :meth:`StepCostTerms.decode_step`'s closure for ``n``, made once."""
        f = self._decode.get(n)
        if f is None:
            f = self._decode[n] = self.terms.decode_step(n)
        return f(C)


__all__ = ["StepClock"]
