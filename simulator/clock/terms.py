"""The step clock's per-configuration coefficient row and its batched evaluation.

One engine step is timed as the **sum of its operator groups**, each bounded by
its own roofline (the GEMMs, the attention and the MoE experts of a forward pass
run one after another, so their times add; see ``docs/cost-model.md``)::

    gemm      = max(weights_s, tok_s * T + gemm_fixed_s + req_s * R)
    attention = max(attn_full_s * A (+ sliding), kv_read_full_s * PK (+ sliding))    prefill part
              + dec_attn_s * C (+ sliding)                                          decode part (KV read)
              + kv_write_s * T
    moe       = max(experts_s * touched(T), expert_tok_s * T + expert_fixed_s + expert_pad_s * touched(T))
    comm      = min(comm_fixed_s + comm_tok_s * T,                                  (T > 0)
                    comm_large_fixed_s + comm_large_tok_s * T)    (the second when given: NCCL for large messages)
    fixed     = gpu_fixed_s + gpu_req_s * R                                         (per busy step: kernel latencies, sampling)
    cpu       = base_s + per_token_s * T + per_req_s * R

    step = gemm + attention + moe + comm + fixed + cpu       (0 when nothing is scheduled)
    step = max(gemm + attention + moe + comm + fixed, cpu)   (cpu_overlap: async scheduling)

With ``cpu_overlap`` set (the engine sets it for a run with vLLM's async
scheduling, :func:`overlapped`), the CPU work of a step (scheduling, input
preparation, launches) runs while the GPU executes the previous step, so a
step lasts the longer of the two instead of their sum.

``T`` = prefill + decode tokens, ``R`` = scheduled requests, ``A`` = prefill
attention context sum, ``PK`` = prefill KV read, ``C`` = decode context sum,
``touched(T) = 1 - expert_keep ** T`` = the expected fraction of experts that
``T`` tokens routed top-k over ``E`` experts reach (``expert_keep = 1 - k/E``).
``gemm_fixed_s`` is the token-count-dependent GEMM efficiency written as a
linear term: efficiency ``mfu * T / (T + T_half)`` gives ``tok_s * (T + T_half)``.

The engine calls :meth:`StepCostTerms.time` every step, :meth:`StepCostTerms.decode_step`
for each step of a lazy decode window and :meth:`StepCostTerms.decode_times` for a
jump of decode-only steps; the three agree to the last bit.

The serving fields (``serve_request_s``, ``serve_prompt_token_s``,
``serve_output_token_s``, ``serve_async_lag_steps``) are not part of a step: the
result layer adds them to each request's TTFT and E2E
(:func:`simulator.engine.serving.apply_serving`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from simulator.base import unknown_field
from simulator.base.errors import FieldError


class CostModelError(FieldError):
    """A cost model that cannot be built; the message names the field."""


def _known_fields(cls, data: Any, name: str, prefix: str, what: str) -> None:
    """Refuse a non-object or a key that is not a field of dataclass ``cls`` (the message names it)."""
    if not isinstance(data, dict):
        raise CostModelError("must be an object", field=name)
    bad = unknown_field(cls, data, what=what.removeprefix("unknown "))
    if bad:
        raise CostModelError(f"{bad[1]}", field=f"{prefix}{bad[0]}")


_TUPLES = ("attn_sliding_s", "windows", "kv_read_sliding_s", "dec_sliding_s")


@dataclass(frozen=True)
class StepCostTerms:
    """One configuration's step time as coefficients of the scheduled sums (module docstring).

    All ``*_s`` fields are seconds per unit (per token, per request, per
    context token, per step); ``windows`` are tokens.
    """

    tok_s: float = 0.0  # s per scheduled token (dense body GEMMs at full efficiency)
    gemm_fixed_s: float = 0.0  # s per step (tok_s x the half-efficiency token count)
    req_s: float = 0.0  # s per scheduled request (LM head)
    attn_full_s: float = 0.0  # s per (prefill query token x context token), full layers
    attn_sliding_s: tuple[float, ...] = ()  # same, one per distinct window
    windows: tuple[int, ...] = ()  # tokens, ascending
    weights_s: float = 0.0  # s per step (dense weights read once)
    experts_s: float = 0.0  # s per step if every expert is read
    expert_keep: float = 1.0  # 1 - experts_per_token / num_experts
    expert_tok_s: float = 0.0  # s per token (routed-expert GEMMs at full efficiency)
    expert_fixed_s: float = 0.0  # s per step (expert_tok_s x the half-efficiency token count)
    expert_pad_s: float = 0.0  # s per step x the fraction of experts touched (grouped GEMMs' padding per expert)
    kv_read_full_s: float = 0.0  # s per KV token read by prefill, full layers
    kv_read_sliding_s: tuple[float, ...] = ()  # s per KV token read, per window
    dec_attn_s: float = 0.0  # s per decode context token, full layers (KV read or attention FLOPs)
    dec_sliding_s: tuple[float, ...] = ()  # same, per window
    kv_write_s: float = 0.0  # s per new token's KV written
    comm_fixed_s: float = 0.0  # s per step (all-reduce latencies)
    comm_tok_s: float = 0.0  # s per scheduled token (all-reduce bytes)
    comm_large_fixed_s: float = 0.0  # s per step, the large-message all-reduce path (0 and 0: none)
    comm_large_tok_s: float = 0.0  # s per scheduled token, the large-message path
    gpu_fixed_s: float = 0.0  # s per step on the GPU whatever its size (each layer's kernels' fixed latencies)
    gpu_req_s: float = 0.0  # s per scheduled request on the GPU outside the GEMMs (sampling over the vocabulary)
    base_s: float = 0.0  # s per step (CPU: scheduling, input preparation, sampling, launches)
    per_token_s: float = 0.0  # s per scheduled token
    per_req_s: float = 0.0  # s per scheduled request (CPU)
    serve_request_s: float = 0.0  # s per request outside the steps (API server, first-token streaming)
    serve_prompt_token_s: float = 0.0  # s per prompt token outside the steps (tokenization)
    serve_output_token_s: float = 0.0  # s per output token after the first (detokenize, stream)
    serve_async_lag_steps: float = 0.0  # steps a request joins later under async scheduling (vLLM: 1)
    cpu_overlap: float = 0.0  # 1: the CPU part runs under the previous step's GPU work (async scheduling)

    def __post_init__(self) -> None:
        if not (len(self.windows) == len(self.attn_sliding_s) == len(self.kv_read_sliding_s)):
            raise CostModelError("one attention and one KV coefficient per window", field="windows")
        if self.dec_sliding_s and len(self.dec_sliding_s) != len(self.windows):
            raise CostModelError("one decode coefficient per window", field="dec_sliding_s")
        if self.windows and not self.dec_sliding_s:  # older rows: the KV read bounds decode attention
            object.__setattr__(self, "dec_sliding_s", tuple(self.kv_read_sliding_s))
        if list(self.windows) != sorted(self.windows):
            raise CostModelError("must be ascending", field="windows")
        if self.cpu_overlap not in (0.0, 1.0):
            raise CostModelError("must be 0 (CPU time adds to the step) or 1 (it overlaps the GPU's)", field="cpu_overlap")

    # -- scalar evaluation (the engine's per-step clock) ---------------------

    def _gemm_moe(self, T: float, R: float) -> tuple[float, float]:
        gemm = self.tok_s * T + self.gemm_fixed_s + self.req_s * R
        if gemm < self.weights_s:
            gemm = self.weights_s
        moe = 0.0
        if self.experts_s:
            moe = self.experts_s * (1.0 - self.expert_keep ** T)
            flops = self.expert_tok_s * T + self.expert_fixed_s
            if self.expert_pad_s:
                flops += self.expert_pad_s * (1.0 - self.expert_keep ** T)
            if flops > moe:
                moe = flops
        return gemm, moe

    def _comm(self, T: float) -> float:
        """All-reduce seconds of a step of ``T`` tokens: the faster of the two paths.  # s"""
        comm = self.comm_fixed_s + self.comm_tok_s * T
        if self.comm_large_tok_s or self.comm_large_fixed_s:
            large = self.comm_large_fixed_s + self.comm_large_tok_s * T
            if large < comm:
                comm = large
        return comm

    def time(self, P: float, A: float, D: float, C: float, R: float, PK: float | None = None) -> float:
        """Seconds of one step, in plain floats; equals :meth:`BatchStepTime.step_time` for one row.  # s

        ``P`` prefill tokens, ``A`` prefill attention context, ``D`` decode
        tokens, ``C`` decode context, ``R`` requests, ``PK`` prefill KV read
        (``None`` = ``P``). This is what the engine calls every step, so it
        avoids numpy (a few microseconds instead of tens).
        """
        T = P + D
        if T <= 0 and R <= 0:
            return 0.0
        if PK is None:
            PK = P
        gemm, moe = self._gemm_moe(T, R)
        attn = 0.0
        if P > 0:
            flops = self.attn_full_s * A
            kv = self.kv_read_full_s * PK
            if self.windows:
                mean_a = A / P
                for w, ca, ck in zip(self.windows, self.attn_sliding_s, self.kv_read_sliding_s):
                    flops += ca * (P * min(mean_a, w))
                    kv += ck * min(PK, P + w)
            attn = flops if flops > kv else kv
        attn = attn + self.dec_attn_s * C + self.kv_write_s * T
        if self.windows and D > 0:
            mean_c = C / D
            for w, cd in zip(self.windows, self.dec_sliding_s):
                attn += cd * (D * min(mean_c, w))
        comm = self._comm(T) if T > 0 else 0.0
        gpu = gemm + attn + moe + comm + (self.gpu_fixed_s + self.gpu_req_s * R)
        if self.cpu_overlap:
            cpu = self.base_s + self.per_token_s * T + self.per_req_s * R
            return gpu if gpu > cpu else cpu
        return gpu + self.base_s + self.per_token_s * T + self.per_req_s * R

    def decode_step(self, n: int) -> Callable[[int], float]:
        """``C -> time(0, 0, n, C, n, 0)``: the seconds of a decode-only step of ``n`` requests with
        decode context ``C``, to the last bit, with the terms that do not depend on ``C`` worked out
        once (the engine calls it for each step of a lazy window).  # s
        """
        if self.windows or n <= 0:
            return lambda C: self.time(0, 0, n, C, n, 0)
        gemm, moe = self._gemm_moe(n, n)
        dec, kv_write = self.dec_attn_s, self.kv_write_s * n
        comm = self._comm(n)
        fixed = self.gpu_fixed_s + self.gpu_req_s * n
        base, per_token, per_req = self.base_s, self.per_token_s * n, self.per_req_s * n
        if self.cpu_overlap:
            cpu = base + per_token + per_req

            def hidden(C: int) -> float:  # time()'s sums, in its order, then the longer of GPU and CPU
                gpu = gemm + (dec * C + kv_write) + moe + comm + fixed
                return gpu if gpu > cpu else cpu
            return hidden

        def step(C: int) -> float:  # the sums time() makes, in its order (0.0 + x == x)
            return gemm + (dec * C + kv_write) + moe + comm + fixed + base + per_token + per_req
        return step

    def decode_times(self, k: int, n: int, c0: float, r: int | None = None) -> np.ndarray:
        """Seconds of each of ``k`` decode-only steps, shape ``(k,)``.  # s

        ``n`` requests decode one token a step; the decode context is ``c0``
        in the first step and grows by ``n`` a step; ``r`` scheduled requests
        (default ``n``). Element ``j`` equals ``time(0, 0, n, c0 + j n, r)``.
        """
        r = n if r is None else r
        if n <= 0 and r <= 0:
            return np.zeros(k)
        C = c0 + n * np.arange(k, dtype=np.float64)
        T = float(n)
        gemm, moe = self._gemm_moe(T, r)
        attn = self.dec_attn_s * C + self.kv_write_s * T
        if self.windows and n > 0:
            mean_c = C / n
            for w, cd in zip(self.windows, self.dec_sliding_s):
                attn = attn + cd * (n * np.minimum(mean_c, w))
        comm = self._comm(T) if T > 0 else 0.0
        # added in the order time() adds them, so that element j equals it to the last bit
        gpu = gemm + attn + moe + comm + (self.gpu_fixed_s + self.gpu_req_s * r)
        if self.cpu_overlap:
            return np.maximum(gpu, self.base_s + self.per_token_s * T + self.per_req_s * r)
        return gpu + self.base_s + self.per_token_s * T + self.per_req_s * r

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepCostTerms:
        """Build from a JSON object of the fields above; unknown keys raise :class:`CostModelError`."""
        _known_fields(cls, data, "cost_model", "cost_model.", "unknown coefficient")
        kw = {}
        for k, v in data.items():
            if k in _TUPLES:
                if not isinstance(v, (list, tuple)):
                    raise CostModelError("must be a list", field=f"cost_model.{k}")
                v = tuple(v)
                items = v
            else:
                items = (v,)
            for x in items:
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                    raise CostModelError(f"must be finite numbers >= 0, got {x!r}", field=f"cost_model.{k}")
            kw[k] = v
        if not 0.0 <= kw.get("expert_keep", 1.0) <= 1.0:
            raise CostModelError("must be a fraction in [0, 1]", field="cost_model.expert_keep")
        if kw.get("cpu_overlap", 0.0) not in (0, 1):
            raise CostModelError("must be 0 or 1", field="cost_model.cpu_overlap")
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in _TUPLES:
            d[k] = list(d[k])
        for name in ("gpu_req_s", "expert_pad_s"):  # a row without them writes as rows did before the fields
            if not d[name]:
                del d[name]
        return d


def _arr(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim > 1:
        raise CostModelError("must be a scalar or a 1-D array (one entry per configuration)", field=name)
    return a


def _sum_linear(v0: np.ndarray, slope: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Sum of ``v0 + slope * j`` for ``j = 0 .. n-1``."""
    return n * v0 + slope * n * (n - 1) / 2.0


_SCALARS = tuple(f.name for f in fields(StepCostTerms) if f.name not in _TUPLES)


class BatchStepTime:
    """Step times of ``B`` configurations evaluated together.

    Build with :meth:`from_models` (or :meth:`from_terms`); every argument of
    :meth:`step_time` is broadcast to shape ``(B,)``.
    """

    def __init__(self, terms: Sequence[StepCostTerms]):
        if not terms:
            raise CostModelError("at least one configuration is needed", field="models")
        self.terms = tuple(terms)
        self.size = len(self.terms)
        for name in _SCALARS:
            setattr(self, "_" + name, np.array([getattr(t, name) for t in self.terms], dtype=np.float64))
        w = max(len(t.windows) for t in self.terms)
        # pad with an infinite window (never capped) and zero coefficients
        self._windows = np.full((self.size, w), np.inf)
        self._attn_sl = np.zeros((self.size, w))
        self._kv_sl = np.zeros((self.size, w))
        self._dec_sl = np.zeros((self.size, w))
        for i, t in enumerate(self.terms):
            n = len(t.windows)
            self._windows[i, :n] = t.windows
            self._attn_sl[i, :n] = t.attn_sliding_s
            self._kv_sl[i, :n] = t.kv_read_sliding_s
            self._dec_sl[i, :n] = t.dec_sliding_s

    @classmethod
    def from_models(cls, models: Sequence[Any]) -> BatchStepTime:
        """Stack single-configuration models (anything with a ``terms`` attribute)."""
        return cls([m.terms for m in models])

    @classmethod
    def from_terms(cls, terms: Sequence[StepCostTerms]) -> BatchStepTime:
        return cls(terms)

    def components(self, prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                   num_reqs, prefill_kv_tokens=None) -> dict[str, np.ndarray]:
        """The operator groups of the step time, each shape ``(B,)``.  # s

        Returns ``{"gemm", "attention", "moe", "comm", "fixed", "overhead", "total"}``
        (``fixed`` = the GPU's per-step kernel latencies, ``overhead`` = the CPU part; with
        ``cpu_overlap`` the total is the longer of the GPU groups' sum and it). See the module docstring.
        """
        B = self.size
        P = np.broadcast_to(_arr(prefill_tokens, "prefill_tokens"), (B,))
        A = np.broadcast_to(_arr(prefill_attention_tokens, "prefill_attention_tokens"), (B,))
        D = np.broadcast_to(_arr(decode_tokens, "decode_tokens"), (B,))
        C = np.broadcast_to(_arr(decode_context_tokens, "decode_context_tokens"), (B,))
        R = np.broadcast_to(_arr(num_reqs, "num_reqs"), (B,))
        PK = P if prefill_kv_tokens is None else np.broadcast_to(_arr(prefill_kv_tokens, "prefill_kv_tokens"), (B,))
        T = P + D
        busy = (T > 0) | (R > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_a = np.where(P > 0, A / np.where(P > 0, P, 1.0), 0.0)
            mean_c = np.where(D > 0, C / np.where(D > 0, D, 1.0), 0.0)
        win = self._windows  # (B, W)
        gemm = np.maximum(self._tok_s * T + self._gemm_fixed_s + self._req_s * R, self._weights_s)
        flops = self._attn_full_s * A + np.sum(self._attn_sl * (P[:, None] * np.minimum(mean_a[:, None], win)), axis=1)
        kv = self._kv_read_full_s * PK + np.sum(self._kv_sl * np.minimum(PK[:, None], P[:, None] + win), axis=1)
        attn = np.where(P > 0, np.maximum(flops, kv), 0.0) + self._dec_attn_s * C + self._kv_write_s * T
        attn = attn + np.sum(self._dec_sl * (D[:, None] * np.minimum(mean_c[:, None], win)), axis=1)
        touched = 1.0 - np.power(self._expert_keep, T)
        moe = np.where(self._experts_s > 0, np.maximum(self._experts_s * touched, self._expert_tok_s * T
                                                       + self._expert_fixed_s + self._expert_pad_s * touched), 0.0)
        comm = self._comm_fixed_s + self._comm_tok_s * T
        large = self._comm_large_fixed_s + self._comm_large_tok_s * T
        has_large = (self._comm_large_tok_s > 0) | (self._comm_large_fixed_s > 0)
        comm = np.where(T > 0, np.where(has_large, np.minimum(comm, large), comm), 0.0)
        overhead = self._base_s + self._per_token_s * T + self._per_req_s * R
        fixed = self._gpu_fixed_s + self._gpu_req_s * R
        gemm, attn, moe, comm, fixed, overhead = (np.where(busy, x, 0.0)
                                                  for x in (gemm, attn, moe, comm, fixed, overhead))
        gpu = gemm + attn + moe + comm + fixed
        total = np.where(self._cpu_overlap > 0, np.maximum(gpu, overhead), gpu + overhead)
        return {"gemm": gemm, "attention": attn, "moe": moe, "comm": comm, "fixed": fixed, "overhead": overhead,
                "total": total}

    def step_time(self, prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                  num_reqs, prefill_kv_tokens=None) -> np.ndarray:
        """Seconds one step takes in each configuration, shape ``(B,)``.  # s

        A configuration with nothing scheduled (no tokens, no requests) takes 0.
        """
        return self.components(prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                               num_reqs, prefill_kv_tokens)["total"]

    def decode_jump_time(self, k, decode_tokens, decode_context_tokens, num_reqs=None) -> np.ndarray:
        """Total seconds of ``k`` decode-only steps, in closed form, shape ``(B,)``.  # s

        ``k`` steps (0 allowed) of ``decode_tokens`` running requests, each
        decoding one token a step; ``decode_context_tokens`` is the context
        sum of the first step and grows by ``decode_tokens`` a step;
        ``num_reqs`` defaults to ``decode_tokens``. Equals
        ``sum(step_time(0, 0, n, C0 + i * n, r) for i in range(k))`` up to
        rounding: only the decode attention depends on ``i``, linearly between
        the steps where a sliding window starts to cap the context.
        """
        B = self.size
        K = np.broadcast_to(_arr(k, "k"), (B,)).astype(np.float64)
        if np.any(K < 0):
            raise CostModelError("must be >= 0 steps", field="k")
        n = np.broadcast_to(_arr(decode_tokens, "decode_tokens"), (B,))
        c0 = np.broadcast_to(_arr(decode_context_tokens, "decode_context_tokens"), (B,))
        r = n if num_reqs is None else np.broadcast_to(_arr(num_reqs, "num_reqs"), (B,))
        with np.errstate(divide="ignore", invalid="ignore"):
            mean0 = np.where(n > 0, c0 / np.where(n > 0, n, 1.0), 0.0)
        kinks = np.clip(np.ceil(self._windows - mean0[:, None]), 0, K[:, None])  # (B, W)
        kinks = np.where(np.isfinite(kinks), kinks, K[:, None])
        bounds = np.concatenate([np.zeros((B, 1)), np.sort(kinks, axis=1), K[:, None]], axis=1)
        zero = np.zeros(B)
        total = np.zeros(B)
        for s in range(bounds.shape[1] - 1):
            start, end = bounds[:, s], bounds[:, s + 1]
            length = np.maximum(end - start, 0.0)
            at0 = self.step_time(zero, zero, n, c0 + start * n, r)
            at1 = self.step_time(zero, zero, n, c0 + (start + 1) * n, r)
            seg = _sum_linear(at0, at1 - at0, length)
            if self._cpu_overlap.any():
                seg = np.where(self._cpu_overlap > 0, self._hidden_cpu_segment(n, c0 + start * n, r, length), seg)
            total = total + np.where(length > 0, seg, 0.0)
        return total

    def _hidden_cpu_segment(self, n, c_start, r, length) -> np.ndarray:
        """Seconds of ``length`` decode steps whose GPU time grows linearly (decode context ``c_start`` in
        the first, ``+ n`` a step) and whose CPU time is constant, each lasting the longer of the two
        (``cpu_overlap``), shape ``(B,)``: the first ``j`` steps are CPU-bound, the rest GPU-bound.  # s
        """
        zero = np.zeros(self.size)
        p0 = self.components(zero, zero, n, c_start, r)
        p1 = self.components(zero, zero, n, c_start + n, r)
        g0 = p0["gemm"] + p0["attention"] + p0["moe"] + p0["comm"] + p0["fixed"]
        slope = p1["gemm"] + p1["attention"] + p1["moe"] + p1["comm"] + p1["fixed"] - g0
        cpu = p0["overhead"]
        with np.errstate(divide="ignore", invalid="ignore"):
            first_gpu = np.where(slope > 0, np.ceil((cpu - g0) / slope), np.where(g0 >= cpu, 0.0, length))
        j = np.clip(first_gpu, 0.0, length)  # steps before the GPU time reaches the CPU time
        return j * cpu + _sum_linear(g0 + j * slope, slope, length - j)


def overlapped(terms: StepCostTerms | None, async_scheduling: bool) -> StepCostTerms | None:
    """The row the engine times a run's steps with: under vLLM's async scheduling the engine core
    schedules and prepares step k+1 while the GPU runs step k (``EngineCore.step_with_batch_queue``),
    so the step's CPU time overlaps (``cpu_overlap = 1``); a synchronous engine pays it on top."""
    if terms is None or not async_scheduling or terms.cpu_overlap:
        return terms
    return replace(terms, cpu_overlap=1.0)


__all__ = ["CostModelError", "StepCostTerms", "BatchStepTime", "overlapped"]
