"""Speculative decoding: vLLM v1's draft tokens, their verification and the acceptance model.

What vLLM does (``vllm/v1/core/sched/scheduler.py``, ``kv_cache_manager.py``; ``docs/speculative_decoding.md``):

* after a step that sampled a token for a request (it is not a prefill chunk), the proposer gives
  it ``k = num_speculative_tokens`` draft tokens (``update_draft_token_ids``); its
  ``num_tokens_with_spec`` is then ``num_tokens + k``;
* the next schedule call gives a running request ``num_tokens_with_spec - num_computed_tokens``
  tokens (``1 + k`` for a decoder), capped by the token budget and ``max_model_len - 1 -
  num_computed_tokens`` as any request; its drafts are cleared once it is scheduled;
* ``allocate_slots`` holds ``num_lookahead_tokens`` more slots than the tokens scheduled for a
  running request: ``k`` for EAGLE, EAGLE-3, MTP and a draft model (their proposer writes the
  drafts' KV), 0 for n-gram lookup, from admission on (rule R2);
* the draft model takes one more input slot per scheduled request (``max_num_new_slots_for_drafting``,
  rule R6): each request is capped at the input budget left less that slot;
* only verified tokens are published to the prefix cache (capped at ``num_tokens``);
* ``update_from_output``: of ``d`` drafts scored, ``a`` are accepted and ``a + 1`` tokens come out
  (the bonus or correction token), trimmed at the request's stop; ``num_computed_tokens`` goes
  back by the ``d - a`` rejected tokens. Their slots stay allocated: the request keeps its blocks
  and the next ``allocate_slots`` needs fewer new ones;
* a preempted request loses its drafts;
* under async scheduling (``AsyncScheduler``) the drafts are placeholders: after scheduling a
  request that samples with ``d`` drafts, its output placeholders grow by ``1 + d`` and it holds
  ``k`` draft placeholders for the next step (the worker fills them; ``update_draft_token_ids`` is
  not called), so the next step schedules ``1 + k`` before this one's output is known; running
  requests left out of a step keep theirs (rule R3); the output takes the rejected drafts off both
  ``num_computed_tokens`` and the placeholders (where above 0, not for a stale output), then the
  appended tokens off the placeholders.

The acceptance model gives the number of accepted drafts ``A`` in ``0..k`` of a verification;
with fewer drafts scored (``d < k``, the budget or ``max_model_len`` cut them) ``min(A, d)`` are
accepted. ``A`` is drawn from a counter-based hash of ``(seed, request, output tokens so far)``:
deterministic under the seed, independent of the schedule (two KV sizes see the same draws).

:class:`SpecDecoding` is one part of :class:`simulator.engine.core.FastEngine` (``engine.drafts``: synchronous
and asynchronous scheduling); beside it the configuration (:class:`SpeculativeConfig`) and the result totals
(:func:`spec_totals`). The drafter's step time is the step clock's (:mod:`simulator.engine.step_clock`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from simulator.base import unknown_message
from simulator.base.errors import FieldError
from simulator.speculative.acceptance import AcceptanceError, AcceptanceTrace, check_pattern

#: vLLM's speculative methods; those whose proposer writes KV for the drafts hold lookahead slots.
METHODS = ("eagle", "eagle3", "mtp", "draft_model", "ngram")
LOOKAHEAD_METHODS = ("eagle", "eagle3", "mtp", "draft_model")
#: Methods whose prefix-cache block hashes cover the next token too (vLLM's ``use_eagle()``: rule R4).
HASH_LOOKAHEAD_METHODS = ("eagle", "eagle3", "mtp")
#: Methods whose drafter keeps one more input slot per scheduled request (vLLM's
#: ``SpeculativeConfig.max_num_new_slots_for_drafting``: 1 for the draft model, rule R6).
DRAFT_SLOT_METHODS = ("draft_model",)
#: Most draft tokens per step accepted as input (vLLM suggests 1 to 5; beyond 16 nothing is gained).
MAX_SPECULATIVE_TOKENS = 16
_FIELDS = ("method", "num_speculative_tokens", "acceptance_rate", "position_acceptance_rates",
           "acceptance_length_probs", "seed", "draft_cost_model", "num_mtp_modules", "acceptance_pattern",
           "acceptance_trace")
#: The acceptance models, one per configuration (the last two replay given accepted lengths).
ACCEPTANCE_MODELS = ("acceptance_rate", "position_acceptance_rates", "acceptance_length_probs",
                     "acceptance_pattern", "acceptance_trace")


class SpeculativeError(FieldError):
    """A speculative decoding setting that cannot be simulated; the message names the field."""


def method_and_k_problem(method: Any, k: Any) -> str | None:
    """What is wrong with a method and ``num_speculative_tokens`` (``"speculative.FIELD: ..."``), or None."""
    if method not in METHODS:
        return f"speculative.method: must be one of {', '.join(METHODS)}, got {method!r}"
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_SPECULATIVE_TOKENS:
        return f"speculative.num_speculative_tokens: must be a whole number from 0 to {MAX_SPECULATIVE_TOKENS}, got {k!r}"
    return None


def _fraction(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise SpeculativeError(f"must be a number in [0, 1], got {v!r}", field=name)
    return float(v)


def _fractions(v: Any, name: str, length: int, what: str) -> tuple[float, ...]:
    if not isinstance(v, (list, tuple)) or len(v) != length:
        raise SpeculativeError(f"must be a list of {length} numbers ({what})", field=name)
    return tuple(_fraction(x, f"{name}[{i}]") for i, x in enumerate(v))


class Drafting:
    """What ``method`` and ``num_speculative_tokens`` imply (the engine's and the sizing's configurations)."""

    method: str
    num_speculative_tokens: int

    @property
    def enabled(self) -> bool:
        return self.num_speculative_tokens > 0

    @property
    def num_lookahead_tokens(self) -> int:
        """vLLM's ``num_lookahead_tokens``: KV slots held beyond the tokens scheduled."""
        return self.num_speculative_tokens if self.method in LOOKAHEAD_METHODS else 0

    #: MTP modules of the checkpoint (``num_nextn_predict_layers``; 1 for DeepSeek-V3)
    num_mtp_modules: int = 1

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        """vLLM's ``num_prefill_lookahead_tokens``: 1 for EAGLE, EAGLE-3 and MTP, ``k`` for multi-module
        MTP (more than one module and ``k > 1``: ``use_multi_module_mtp``, rule R8), 0 otherwise."""
        if not self.enabled or self.method not in HASH_LOOKAHEAD_METHODS:
            return 0
        k = self.num_speculative_tokens
        return k if self.method == "mtp" and self.num_mtp_modules > 1 and k > 1 else 1

    @property
    def num_hash_lookahead_tokens(self) -> int:
        """vLLM's ``num_hash_lookahead_tokens`` with prefix caching (rule R4): tokens after a block that
        its hash also covers, the prefill lookahead (1 for EAGLE, EAGLE-3 and MTP, ``k`` for multi-module
        MTP, 0 for the draft model and n-gram)."""
        return self.num_prefill_lookahead_tokens

    @property
    def num_draft_slots(self) -> int:
        """vLLM's ``max_num_new_slots_for_drafting``: input slots a scheduled request takes beyond its
        tokens (rule R6: 1 for the draft model, 0 otherwise)."""
        return 1 if self.enabled and self.method in DRAFT_SLOT_METHODS else 0


@dataclass(frozen=True)
class SpeculativeConfig(Drafting):
    """Speculative decoding of one engine configuration.

    Parameters
    ----------
    method : {"eagle", "eagle3", "mtp", "draft_model", "ngram"}
        vLLM's ``speculative_config.method``; all but ``ngram`` hold ``k`` lookahead KV slots.
    num_speculative_tokens : int
        ``k``, draft tokens per decoding request per step (0 = off: the engine as without it).
    acceptance_rate : float, optional
        ``alpha``: the probability that a draft is accepted when the drafts before it were
        (``P(A >= i) = alpha ** i``). Give this, or one of the two below.
    position_acceptance_rates : list of k floats, optional
        vLLM's "per-position acceptance rate" metric: the fraction of verifications in which
        draft ``i`` was accepted (``P(A >= i)``), non-increasing.
    acceptance_length_probs : list of k + 1 floats, optional
        A measured distribution of accepted drafts: ``P(A = 0), ..., P(A = k)``, summing to 1.
    seed : int
        Seed of the acceptance draws.
    draft_cost_model : StepCostTerms, optional
        The drafter's step time (in a configuration object, any ``cost_model`` form: see
        :meth:`from_dict`). Each step charges one
        drafter pass over the step's tokens and ``k - 1`` passes of one token per drafting request.
        None: the drafts cost no time (n-gram lookup runs on the CPU).
    num_mtp_modules : int
        MTP only: the checkpoint's MTP modules (``num_nextn_predict_layers``, 1 to 16; 1 for
        DeepSeek-V3). With more than one and ``k > 1`` vLLM keeps prefill chunks ``k`` tokens away
        from the prompt's end and hashes blocks with the ``k`` tokens after them (rule R8).
    acceptance_pattern : list of whole numbers in 0..k, optional
        The ``j``-th verification of request ``i`` (workload order) accepts
        ``min(pattern[(i + j) mod len(pattern)], d)`` of its ``d`` drafts scored.
    acceptance_trace : AcceptanceTrace, optional
        Accepted lengths recorded per request by vLLM (``{"requests": [...], "match", "beyond"}``,
        :mod:`simulator.speculative.acceptance`): the ``j``-th verification of a request replays
        ``min(a_j, d)`` of its line.
    """

    method: str = "eagle"
    num_speculative_tokens: int = 0
    acceptance_rate: float | None = None
    position_acceptance_rates: tuple[float, ...] | None = None
    acceptance_length_probs: tuple[float, ...] | None = None
    seed: int = 0
    draft_cost_model: Any = None
    num_mtp_modules: int = 1
    acceptance_pattern: tuple[int, ...] | None = None
    acceptance_trace: Any = None

    def __post_init__(self) -> None:
        p = "speculative."
        problem = method_and_k_problem(self.method, self.num_speculative_tokens)
        if problem:
            raise SpeculativeError(problem)
        s = self.seed
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**63:
            raise SpeculativeError(f"must be a whole number >= 0, got {s!r}", field=f"{p}seed")
        m = self.num_mtp_modules
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_SPECULATIVE_TOKENS:
            raise SpeculativeError(f"must be a whole number from 1 to {MAX_SPECULATIVE_TOKENS}, got {m!r}",
                                   field=f"{p}num_mtp_modules")
        if m > 1 and self.method != "mtp":
            raise SpeculativeError(f"only for method mtp, got method {self.method!r}", field=f"{p}num_mtp_modules")
        self._check_acceptance()
        if self.draft_cost_model is not None:
            if self.method == "ngram":
                raise SpeculativeError("n-gram lookup runs no draft model", field=f"{p}draft_cost_model")
            if not callable(getattr(self.draft_cost_model, "time", None)):
                raise SpeculativeError("must be a cost model (StepCostTerms)", field=f"{p}draft_cost_model")

    def _check_acceptance(self) -> None:
        p, k = "speculative.", self.num_speculative_tokens
        given = [n for n in ACCEPTANCE_MODELS if getattr(self, n) is not None]
        if len(given) > 1:
            raise SpeculativeError(f"give one acceptance model, not {' and '.join(given)}", field=f"{p}{given[1]}")
        if not given:
            if k:
                raise SpeculativeError("required with num_speculative_tokens > 0 (or give position_acceptance_rates, "
                                       "acceptance_length_probs, acceptance_pattern or acceptance_trace)",
                                       field=f"{p}acceptance_rate")
            return
        if self.acceptance_rate is not None:
            object.__setattr__(self, "acceptance_rate", _fraction(self.acceptance_rate, f"{p}acceptance_rate"))
        elif self.position_acceptance_rates is not None:
            r = _fractions(self.position_acceptance_rates, f"{p}position_acceptance_rates", k,
                           "one per draft position")
            if any(b > a for a, b in zip(r, r[1:])):
                raise SpeculativeError("must not increase (a draft is accepted "
                                       "only when the drafts before it were)", field=f"{p}position_acceptance_rates")
            object.__setattr__(self, "position_acceptance_rates", r)
        elif self.acceptance_length_probs is not None:
            q = _fractions(self.acceptance_length_probs, f"{p}acceptance_length_probs", k + 1,
                           "P(0 accepted) ... P(k accepted)")
            if abs(sum(q) - 1.0) > 1e-6:
                raise SpeculativeError(f"must sum to 1, got {sum(q):.6g}", field=f"{p}acceptance_length_probs")
            object.__setattr__(self, "acceptance_length_probs", q)
        else:
            self._check_replay()

    def _check_replay(self) -> None:
        """``acceptance_pattern`` or ``acceptance_trace`` (their errors re-raised as SpeculativeError)."""
        k = self.num_speculative_tokens
        try:
            if self.acceptance_pattern is not None:
                object.__setattr__(self, "acceptance_pattern", check_pattern(self.acceptance_pattern, k))
            else:
                tr = self.acceptance_trace
                if not isinstance(tr, AcceptanceTrace):
                    tr = AcceptanceTrace(tr)
                tr.check_k(k)
                object.__setattr__(self, "acceptance_trace", tr)
        except AcceptanceError as exc:
            raise SpeculativeError(exc.message, field=exc.field) from exc

    @property
    def replays(self) -> bool:
        """Acceptance given per verification (a pattern or a trace), not drawn from an aggregate."""
        return self.acceptance_pattern is not None or self.acceptance_trace is not None

    def survival(self) -> np.ndarray:
        """``P(A >= i)`` for ``i = 1..k``, shape ``(k,)``, non-increasing (a pattern's or a trace's
        pooled entries for the replaying models)."""
        k = self.num_speculative_tokens
        if self.replays:
            a = np.array(self.acceptance_pattern, np.int64) if self.acceptance_pattern is not None \
                else self.acceptance_trace.accepted
            return (np.minimum(a, k)[:, None] >= np.arange(1, k + 1)[None, :]).mean(axis=0) if a.size \
                else np.zeros(k)
        if self.acceptance_rate is not None:
            return self.acceptance_rate ** np.arange(1, k + 1, dtype=np.float64)
        if self.position_acceptance_rates is not None:
            return np.array(self.position_acceptance_rates, np.float64)
        q = np.array(self.acceptance_length_probs or (1.0,), np.float64)
        return np.clip(1.0 - np.cumsum(q)[:-1], 0.0, 1.0)

    def expected_tokens_per_step(self) -> float:
        """Expected tokens a decoding request gains per verification: ``1 + sum_i P(A >= i)``."""
        return 1.0 + float(self.survival().sum())

    @classmethod
    def from_dict(cls, data: Any, parse_cost_model: Callable[[Any], Any] | None = None) -> SpeculativeConfig:
        """From a JSON object of the fields above; unknown keys name themselves. ``parse_cost_model``
        turns a ``draft_cost_model`` object into a cost model (:func:`simulator.engine.config.parse_cost_model`;
        its errors are re-raised naming ``speculative.draft_cost_model``)."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise SpeculativeError("must be an object with method, num_speculative_tokens and "
                                   "an acceptance model", field="speculative")
        bad = sorted(set(data) - set(_FIELDS))
        if bad:
            raise SpeculativeError(f"{unknown_message(bad[0], _FIELDS)}", field=f"speculative.{bad[0]}")
        dcm = data.get("draft_cost_model")
        if dcm is not None and parse_cost_model is not None and not callable(getattr(dcm, "time", None)):
            try:
                data = {**data, "draft_cost_model": parse_cost_model(dcm)}
            except ValueError as exc:
                raise SpeculativeError.nested(exc, "speculative.draft", join="_") from exc
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}  # (asdict would deep-copy a trace)
        for n in ("position_acceptance_rates", "acceptance_length_probs", "acceptance_pattern"):
            if d[n] is not None:
                d[n] = list(d[n])
        for n in ("acceptance_pattern", "acceptance_trace"):  # (absent unless given: as before)
            if d[n] is None:
                del d[n]
        if self.acceptance_trace is not None:
            d["acceptance_trace"] = self.acceptance_trace.to_dict()
        if self.draft_cost_model is not None:
            d["draft_cost_model"] = {"kind": "terms", **self.draft_cost_model.to_dict()}
        if self.num_mtp_modules == 1:
            del d["num_mtp_modules"]  # (the default: configurations without it read as before)
        return d


_M1, _M2, _M3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def uniform_draws(seed: int, req: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Uniforms in [0, 1) from a splitmix64 hash of ``(seed, req, pos)``, shape of ``req``."""
    with np.errstate(over="ignore"):
        x = (np.uint64(seed) * _M1 + req.astype(np.uint64) * _M2 + pos.astype(np.uint64) * _M3 + _M1)
        x = (x ^ (x >> np.uint64(30))) * _M2
        x = (x ^ (x >> np.uint64(27))) * _M3
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


class SpecDecoding:
    """Draft tokens, verification and acceptance: one engine's speculative decoding (``engine.drafts``;
    module docstring). Built only when ``num_speculative_tokens > 0``.

    Owns: ``spec`` (draft tokens each request holds), ``dummy`` (its drafts in flight are admission's
    padding, always rejected), ``chunk`` (vLLM's ``is_prefill_chunk`` as the last schedule call left
    it), ``inflight`` (async scheduling: the drafts each step in flight scheduled, oldest first), the
    acceptance model (survival curve, seed, a pattern's or a trace's replay state) and ``stats`` (the
    totals :func:`spec_totals` reports).

    Interface: :meth:`clear` (a preempted request), :meth:`placeholders_after_schedule` (async),
    :meth:`receive_verified` (a step's output), :meth:`propose` (sync).

    Parameters
    ----------
    sc : SpeculativeConfig
    requests : RequestState
        Reads ``final_len``; writes ``tok``, ``comp`` and ``placeholders`` of verified requests.
    workload : Workload
        Its ``prompt_len`` (the draws' position: output tokens so far) and ``ids`` (a trace's lines).
    max_model_len : int
    max_model_len_binds : bool
    """

    def __init__(self, sc: SpeculativeConfig, requests, workload, max_model_len: int,
                 max_model_len_binds: bool) -> None:
        n = workload.n
        self.k = sc.num_speculative_tokens
        self.requests = requests
        self.prompt_len = workload.prompt_len
        self.max_model_len = max_model_len
        self.max_model_len_binds = max_model_len_binds
        self.spec = np.zeros(n, np.int64)
        self.dummy = np.zeros(n, bool)
        self.chunk = np.zeros(n, bool)
        self.inflight: deque[np.ndarray] = deque()
        self._survival = sc.survival()
        self._spec_seed = sc.seed
        self.stats = {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0,
                      "accepted_per_pos": np.zeros(self.k, np.int64)}
        self._replay = sc.replays
        if self._replay:
            self._init_replay(sc, workload)

    def _init_replay(self, sc: SpeculativeConfig, workload) -> None:
        """A pattern's or a trace's state: each request's real verifications so far (padded ones of
        rule R7 excluded) and, for a trace, the entries of the line it replays."""
        self._nver = np.zeros(workload.n, np.int64)
        self._pattern = None if sc.acceptance_pattern is None else np.array(sc.acceptance_pattern, np.int64)
        tr = sc.acceptance_trace
        if tr is None:
            return
        try:
            line = tr.rows(workload.ids)
        except AcceptanceError as exc:
            raise SpeculativeError(exc.message, field=exc.field) from exc
        skip = (tr.padded & (tr.lengths > 0)).astype(np.int64)[line]  # (vLLM's padded first entry)
        self._t_start = tr.offsets[:-1][line] + skip
        self._t_len = tr.lengths[line] - skip
        self._t_acc = tr.accepted
        self._t_histogram = tr.beyond == "histogram"
        if self._t_histogram:
            self._t_survival = tr.survival(self.k)[line]
        self.stats["trace_verifications"] = 0
        self.stats["trace_replayed"] = 0

    def clear(self, q: int) -> None:
        """Preempted request ``q`` loses its drafts."""
        self.spec[q] = 0
        self.dummy[q] = False

    def _replayed(self, q: np.ndarray, real: np.ndarray) -> np.ndarray:
        """Drafts the pattern or the trace accepts (before the cap at the drafts scored) for verifications
        of ``q``; those ``real`` marks (not admission's padding) take their request's next entry."""
        j = self._nver[q]
        self._nver[q[real]] += 1
        if self._pattern is not None:
            return self._pattern[(q + j) % self._pattern.size]
        n = self._t_len[q]
        covered = j < n
        st = self.stats
        st["trace_verifications"] += int(real.sum())
        st["trace_replayed"] += int((covered & real).sum())
        out = np.zeros(q.size, np.int64)
        if self._t_histogram:
            beyond = ~covered
            if beyond.any():
                qb = q[beyond]
                u = uniform_draws(self._spec_seed, qb, self.requests.tok[qb] - self.prompt_len[qb])
                out[beyond] = (u[:, None] < self._t_survival[qb]).sum(axis=1)
        else:
            covered = n > 0  # (cycle: restart the request's own list; a line without entries accepts none)
        if covered.any():
            jc = j[covered] % n[covered] if not self._t_histogram else j[covered]
            out[covered] = self._t_acc[self._t_start[q[covered]] + jc]
        return out

    def _spec_accept(self, a: np.ndarray, d: np.ndarray | None = None, keep: np.ndarray | None = None) -> np.ndarray:
        """Sampled requests ``a`` (before their tokens are added): tokens each gains this step.

        ``d`` drafts were scored (sync: ``comp - tok``; async: what the step scheduled); the accepted
        ones keep their KV, the rejected ones are taken off ``comp`` (``num_computed_tokens -=
        num_rejected``), under async scheduling also off the output placeholders, each where it is
        above 0 and only for the requests ``keep`` marks (an output that is not stale).
        """
        if d is None:
            d = self.requests.comp[a] - self.requests.tok[a]
        gain = np.ones(a.size, np.int64)
        v = d > 0
        if not v.any():
            return gain
        q, dv = a[v], d[v]
        dm = self.dummy[q]
        if self._replay:
            acc = np.minimum(self._replayed(q, ~dm), dv)
        else:
            u = uniform_draws(self._spec_seed, q, self.requests.tok[q] - self.prompt_len[q])
            acc = np.minimum((u[:, None] < self._survival[None, :]).sum(axis=1), dv)
        if dm.any():  # admission's padded drafts: rejected without a draw
            acc[dm] = 0
            self.dummy[q] = False
        if keep is None:
            self.requests.comp[q] -= dv - acc
        else:
            self._roll_back_async(q[keep[v]], (dv - acc)[keep[v]])
        gain[v] += acc
        st = self.stats
        st["num_drafts"] += int(q.size)
        st["num_draft_tokens"] += int(dv.sum())
        st["num_accepted_tokens"] += int(acc.sum())
        st["accepted_per_pos"] += np.bincount(acc, minlength=self.k + 1)[::-1].cumsum()[::-1][1:]
        return gain

    def _roll_back_async(self, q: np.ndarray, rejected: np.ndarray) -> None:
        """Async scheduling: the rejected drafts come off ``comp`` and the placeholders, each where above 0."""
        for arr in (self.requests.comp, self.requests.placeholders):
            pos = arr[q] > 0
            arr[q[pos]] -= rejected[pos]

    def receive_verified(self, a: np.ndarray, d: np.ndarray | None = None,
                          keep: np.ndarray | None = None) -> np.ndarray:
        """``_update_request_with_output``: each sampled request appends its accepted drafts and one more
        token, trimmed at its stop (its output length, or ``max_model_len``); the tokens the stop cut
        come off ``comp`` too (rule R5: ``num_computed_tokens -= len(new_token_ids) - num_new``, so the
        block the last token completes is not cached), except for a stale output. Returns the tokens
        each appended (``d``, ``keep``: :meth:`_spec_accept`)."""
        old = self.requests.tok[a]
        gained = old + self._spec_accept(a, d, keep)
        new = np.minimum(gained, self.requests.final_len[a])
        if self.max_model_len_binds:
            np.minimum(new, self.max_model_len, out=new)
        cut = gained - new
        if keep is not None:
            cut[~keep] = 0
        if cut.any():
            self.requests.comp[a] -= cut
        self.requests.tok[a] = new
        return new - old

    def placeholders_after_schedule(self, e: np.ndarray, sampled: np.ndarray) -> None:
        """vLLM's ``AsyncScheduler._update_after_schedule`` with drafts: a scheduled request that samples
        (not a prompt chunk) gets ``1 + d`` output placeholders for its ``d`` drafts scheduled and ``k``
        draft placeholders for its next step (the worker fills them: no ``update_draft_token_ids``);
        running requests left out of this step keep theirs (rule R3: only those scheduled were cleared,
        in :meth:`Scheduler._after_schedule`). Records ``d`` for :meth:`process`."""
        ph, s = self.requests.placeholders, e[sampled]
        d = np.zeros(e.size, np.int64)
        d[sampled] = self.requests.comp[s] - self.requests.tok[s] - ph[s]  # (0 for a prompt's last chunk)
        ph[s] += 1 + d[sampled]
        self.spec[s] = self.k
        self.inflight.append(d)

    def propose(self, a: np.ndarray, stopped: np.ndarray) -> None:
        """The proposer: ``k`` drafts for each request that sampled and goes on."""
        self.spec[a[~stopped]] = self.k


def spec_totals(sim) -> dict[str, Any]:
    """Result totals of a run with speculative decoding (empty without).

    ``spec_acceptance_rate`` = accepted / scored drafts (vLLM's "draft acceptance rate");
    ``spec_mean_acceptance_length`` = 1 + accepted / verifications (tokens a verified request
    gains per step, vLLM's "mean acceptance length"); ``spec_position_acceptance_rates``;
    ``output_tokens_per_step`` = output tokens / engine steps.
    """
    drafts = getattr(sim, "drafts", None)
    if drafts is None:
        return {}
    st = drafts.stats
    n, dt, acc = st["num_drafts"], st["num_draft_tokens"], st["num_accepted_tokens"]
    out_tokens = int((sim.requests.tok - sim.wl.prompt_len).sum())
    steps = sim.t["num_steps"]
    return {
        "spec_num_speculative_tokens": sim.spec_k,
        "spec_num_drafts": n,
        "spec_num_draft_tokens": dt,
        "spec_num_accepted_tokens": acc,
        "spec_acceptance_rate": acc / dt if dt else 0.0,
        "spec_mean_acceptance_length": 1.0 + acc / n if n else 0.0,
        "spec_position_acceptance_rates": [int(x) / n if n else 0.0 for x in st["accepted_per_pos"]],
        "output_tokens_per_step": out_tokens / steps if steps else 0.0,
        **({"spec_trace_coverage": st["trace_replayed"] / st["trace_verifications"] if st["trace_verifications"]
            else 0.0} if "trace_verifications" in st else {}),
    }
