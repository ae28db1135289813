"""The clock: seconds of each engine step, from the batch scheduled.

Three cost models sit behind it: the linear ``step_time_model`` (``step_time(tokens,
requests)``), a per-configuration :class:`simulator.clock.cost_model.StepCostTerms` (``terms.time``)
and a batched hook (``step_cost.step_time(...)[cost_index]``). :meth:`StepClock._seconds_of_step`
picks one; the cost-model inputs of a batch are :meth:`StepClock.step_terms`. A mixin of
:class:`simulator.engine.core.FastEngine`.
"""

from __future__ import annotations

import numpy as np


class StepClock:
    """Steps to seconds (mixin of ``FastEngine``)."""

    def _seconds_of_step(self, lazy: bool, e, ns, sampled, ntok: int, nreq: int) -> float:
        """Seconds of the schedule call just made (``lazy``: by :meth:`LazyDecoders._fast_schedule`,
        its batch in ``_lazy_batch``; else the general path's ``(e, ns, sampled)``), with the
        drafter's passes under speculative decoding."""
        if self.spec_k and e.size:
            extra = self._verify_sampler_seconds(e, ns, sampled)
            if self.draft_terms is not None:
                extra += self._draft_seconds(e, ns, sampled)
            return self._target_seconds(lazy, e, ns, sampled, ntok, nreq) + extra
        return self._target_seconds(lazy, e, ns, sampled, ntok, nreq)

    def _verify_sampler_seconds(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> float:
        """The sampler's time for the draft positions a verification scores (vLLM's rejection sampler applies
        the requests' top-k / top-p to the target's logits at every draft position, a row each, beside the
        bonus token's row the target's clock already charges per request).  # s"""
        if self.terms is None or not self.terms.gpu_req_s:
            return 0.0
        dec = ~self._prefill_mask(e, ns, sampled)
        return self.terms.gpu_req_s * int((ns[dec] - 1).sum())

    def _draft_seconds(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> float:
        """The drafter's passes for the step just scheduled (:meth:`SpecDecoding._spec_seconds`)."""
        P, A, D, C, R, PK = self.step_terms(e, ns, sampled)
        drafting = sampled  # (vLLM's proposer drafts for every request of the batch that sampled)
        return self._spec_seconds(P, A, D, C, R, PK, int(drafting.sum()), int(self.comp[e[drafting]].sum()))

    def _target_seconds(self, lazy: bool, e, ns, sampled, ntok: int, nreq: int) -> float:
        """Seconds of the target model's step."""
        if self.terms is not None:
            return self._lazy_step_seconds() if lazy else self._step_seconds(e, ns, sampled)
        if self.step_cost is None:
            return self.step_time(ntok, nreq)
        if lazy:
            fe, fs, lazy_step, fns = self._lazy_batch
            return self._cost_time(self.step_terms(
                np.array(fe, np.int64), np.array(fns, np.int64), np.array(fs, bool), lazy_S=lazy_step))
        return self._cost_time(self.step_terms(e, ns, sampled))

    def _prefill_mask(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> np.ndarray:
        """Which scheduled requests computed prompt tokens: those that sampled nothing, or more than one
        token without draft tokens (a verification of ``1 + d`` tokens is decoding)."""
        pf = ~sampled | (ns > 1)
        if self.spec_k:
            pf &= self.comp[e] <= self.tok[e]  # (sync: comp > tok only with drafts scheduled)
        return pf

    def step_terms(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray, lazy_S: int | None = None):
        """Cost-model inputs of the step just scheduled (``comp`` already advanced).

        Returns ``(prefill_tokens, prefill_attention_tokens, decode_tokens,
        decode_context_tokens, num_reqs, prefill_kv_tokens)``: a prefill chunk
        of ``n`` tokens starting at ``c`` computed tokens attends to ``n * c +
        n (n + 1) / 2`` context tokens and reads ``c + n`` KV tokens; a decode
        token attends to ``c + 1``; a verification of ``n = 1 + d`` tokens (``d`` drafts) counts ``n``
        decode tokens and reads ``c + n`` KV tokens once. With ``lazy_S`` (the fast step's counter
        before the step) the implicit decoders are added.
        """
        c0 = self.comp[e] - ns
        pf = self._prefill_mask(e, ns, sampled)
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
        if lazy_S is not None and self.num_lazy:
            D += self.num_lazy
            R += self.num_lazy
            C += self.lazy_base_sum + self.num_lazy * (lazy_S + 1)
        return P, A, D, C, R, PK

    def _cost_time(self, terms) -> float:
        P, A, D, C, R, PK = terms
        return float(self.step_cost.step_time(P, A, D, C, R, prefill_kv_tokens=PK)[self.cost_index])

    def _lazy_step_seconds(self) -> float:
        """Cost-model seconds of the lazy step just scheduled (materialized entries + implicit decoders)."""
        eq, sampled, S, en = self._lazy_batch
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
        D = self.num_lazy
        C += self.lazy_base_sum + D * (S + 1)
        return self.terms.time(P, A, Dm + D, C, len(eq) + D, PK)

    def _step_seconds(self, e: np.ndarray, ns: np.ndarray, sampled: np.ndarray) -> float:
        """Cost-model seconds of the (general path) step just scheduled."""
        if not e.size:
            return 0.0
        return self.terms.time(*self.step_terms(e, ns, sampled))
