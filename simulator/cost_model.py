"""Step-time cost models: how long one engine step takes, in seconds.

The engine calls a cost model once per step for every configuration of a
batch, with what that step scheduled, summed over the scheduled requests (all
arguments are arrays of shape ``(B,)``, one entry per configuration):

``prefill_tokens``
    Prompt tokens computed this step (all prefill chunks).  # tokens
``prefill_attention_tokens``
    Sum over those tokens of the context each attends to (itself included).
    A chunk of ``c`` tokens starting after ``s`` computed tokens contributes
    ``c * s + c * (c + 1) / 2``.  # tokens
``decode_tokens``
    Requests decoding one token this step.  # tokens
``decode_context_tokens``
    Sum over decoding requests of the context the new token attends to
    (``num_computed_tokens + 1``).  # tokens
``num_reqs``
    Scheduled requests (prefill and decode).  # requests
``prefill_kv_tokens`` (optional)
    Sum over prefilling requests of ``s + c``, the KV they read; ``None`` =
    ``prefill_tokens`` (fresh prompts).  # tokens

Two models:

* :class:`RooflineStepTime` from a :class:`~simulator.specs.ModelSpec`, a
  :class:`~simulator.specs.GpuSpec` and a TP degree::

      step = max(compute, memory) + tp_comm + overhead

  ``compute`` is every scheduled token's FLOPs (``2 x`` non-embedding active
  parameters, attention FLOPs growing with context, the LM head once per
  request) over ``dense TFLOPS x mfu``; ``memory`` is the weights read once
  plus the KV of every scheduled token's context read plus the new KV written,
  over ``HBM bandwidth x bandwidth_efficiency``; ``tp_comm`` is ``2`` ring
  all-reduces per layer of ``hidden_size`` activations per token over the
  interconnect, not overlapped; ``overhead`` is a fixed CPU/launch cost per
  step. Coefficients live in :class:`RooflineCoefficients`.
* :class:`LinearStepTime`: ``base_s + per_token_s x tokens + per_req_s x
  requests``, the oracle's :class:`simulator.config.StepTimeModel`.

Both reduce to the same per-configuration coefficient row
(:class:`StepCostTerms`), so configurations with different GPUs, TP degrees,
coefficients or model kinds run in one :class:`BatchStepTime`. A stretch of
``k`` decode-only steps, where every running request's context grows by one a
step, is summed in closed form by :meth:`BatchStepTime.decode_jump_time`
(compute and memory are linear in the step index between sliding-window
kinks, and the sum of the max of two linear functions has a closed form).

See ``docs/cost-model.md`` for the defaults, their sources and the sanity
table against published figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simulator.config import StepTimeModel, unknown_field
from simulator.sizing import (
    check_parallelism,
    compute_dtype,
    estimate_num_parameters,
    kv_bytes_per_token,
    resolve_kv_dtype,
    weights_bytes_per_gpu,
)
from simulator.specs import (
    DTYPE_BYTES,
    LAYER_FULL,
    LAYER_SLIDING,
    DeploymentSpec,
    GpuSpec,
    ModelSpec,
)

TERA = 1e12
GIGA = 1e9


class CostModelError(ValueError):
    """A cost model that cannot be built; the message names the field."""


def _known_fields(cls, data: Any, name: str, prefix: str, what: str) -> None:
    """Refuse a non-object or a key that is not a field of dataclass ``cls`` (the message names it)."""
    if not isinstance(data, dict):
        raise CostModelError(f"{name}: must be an object")
    bad = unknown_field(cls, data)
    if bad:
        raise CostModelError(f"{prefix}{bad[0]}: {what} (known: {bad[1]})")


# ---------------------------------------------------------------------------
# coefficients
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RooflineCoefficients:
    """Efficiencies and overheads of the roofline model (every one overridable).

    Parameters
    ----------
    mfu : float
        Fraction of the GPU's dense tensor FLOPS that matmuls and attention
        reach, in (0, 1]. Default 0.70: BLIS's roofline default for H100 is
        0.65 (``mfuPrefill``); seed 000's "a 2,048-token prefill takes ~43 ms"
        for Llama 3.1 8B on H100 implies 0.70 under our FLOP count.
    bandwidth_efficiency : float
        Fraction of peak HBM bandwidth reached by weight and KV reads, in
        (0, 1]. Default 0.72: BLIS ``BwEffConstant`` for H100.
    interconnect_efficiency : float
        Fraction of the per-direction GPU-to-GPU bandwidth a ring all-reduce
        reaches, in (0, 1]. Default 0.75 (an assumption, no measurement).
    allreduce_latency_s : float
        Fixed latency of one all-reduce.  # s
        Default 20 us: BLIS ``allReduceLatency``.
    allreduces_per_layer : int
        Tensor-parallel all-reduces per decoder layer (after attention and
        after the MLP, Megatron-style). Default 2.
    step_overhead_s : float
        Fixed cost of one engine step (scheduling, input preparation,
        sampling, kernel launch gaps).  # s
        Default 0.5 ms: BLIS ``TOverheadMicros`` 500 in its GPU template.
    per_request_overhead_s : float
        Extra per scheduled request per step.  # s   Default 0.
    activation_bytes : float, optional
        Bytes per activation element all-reduced; ``None`` = the compute
        dtype's size (2 for bf16).  # bytes
    """

    mfu: float = 0.70
    bandwidth_efficiency: float = 0.72
    interconnect_efficiency: float = 0.75
    allreduce_latency_s: float = 20e-6
    allreduces_per_layer: int = 2
    step_overhead_s: float = 0.5e-3
    per_request_overhead_s: float = 0.0
    activation_bytes: float | None = None

    def __post_init__(self) -> None:
        for name in ("mfu", "bandwidth_efficiency", "interconnect_efficiency"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 < v <= 1.0):
                raise CostModelError(f"{name}: must be a fraction in (0, 1], got {v!r}")
            object.__setattr__(self, name, float(v))
        for name in ("allreduce_latency_s", "step_overhead_s", "per_request_overhead_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise CostModelError(f"{name}: must be a finite number of seconds >= 0, got {v!r}")
            object.__setattr__(self, name, float(v))
        a = self.allreduces_per_layer
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise CostModelError(f"allreduces_per_layer: must be a whole number >= 0, got {a!r}")
        b = self.activation_bytes
        if b is not None:
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or b <= 0:
                raise CostModelError(f"activation_bytes: must be a number of bytes > 0, got {b!r}")
            object.__setattr__(self, "activation_bytes", float(b))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RooflineCoefficients:
        """Build from a JSON object; unknown keys raise :class:`CostModelError`."""
        _known_fields(cls, data, "coefficients", "", "unknown roofline coefficient")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------
# the common per-configuration row
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StepCostTerms:
    """One configuration's step time as coefficients of the scheduled sums.

    ``compute = tok_s * T + req_s * R + attn_full_s * A_full + sum_w attn_sliding_s[w] * A_w``

    ``memory = weights_s + experts_s * touched(T) + kv_read_full_s * K_full
    + sum_w kv_read_sliding_s[w] * K_w + kv_write_s * T``

    ``comm = comm_fixed_s + comm_tok_s * T`` (only when T > 0)

    ``overhead = base_s + per_token_s * T + per_req_s * R``

    ``step = max(compute, memory) + comm + overhead`` when anything is
    scheduled, else 0. ``T`` = prefill + decode tokens, ``R`` = requests,
    ``A`` = attention context sums (capped at the window for sliding layers),
    ``K`` = KV tokens read, ``touched(T) = 1 - expert_keep ** T`` = expected
    fraction of MoE experts some token routes to.

    All ``*_s`` fields are seconds per unit (per token, per request, per
    context token, per step); ``windows`` are tokens.
    """

    tok_s: float = 0.0  # s per scheduled token (non-embedding body matmuls)
    req_s: float = 0.0  # s per scheduled request (LM head)
    attn_full_s: float = 0.0  # s per (query token x context token), full layers
    attn_sliding_s: tuple[float, ...] = ()  # same, one per distinct window
    windows: tuple[int, ...] = ()  # tokens, ascending
    weights_s: float = 0.0  # s per step (dense weights)
    experts_s: float = 0.0  # s per step if every expert is read
    expert_keep: float = 1.0  # 1 - experts_per_token / num_experts
    kv_read_full_s: float = 0.0  # s per KV token read, full layers
    kv_read_sliding_s: tuple[float, ...] = ()  # s per KV token read, per window
    kv_write_s: float = 0.0  # s per new token's KV written
    comm_fixed_s: float = 0.0  # s per step (all-reduce latencies)
    comm_tok_s: float = 0.0  # s per scheduled token (all-reduce bytes)
    base_s: float = 0.0  # s per step
    per_token_s: float = 0.0  # s per scheduled token
    per_req_s: float = 0.0  # s per scheduled request

    def __post_init__(self) -> None:
        if not (len(self.windows) == len(self.attn_sliding_s) == len(self.kv_read_sliding_s)):
            raise CostModelError("windows: one attention and one KV coefficient per window")
        if list(self.windows) != sorted(self.windows):
            raise CostModelError("windows: must be ascending")

    # -- scalar evaluation (the engine's per-step clock) ---------------------

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
        compute = self.tok_s * T + self.req_s * R + self.attn_full_s * (A + C)
        memory = self.weights_s + self.kv_read_full_s * (PK + C) + self.kv_write_s * T
        if self.windows:
            mean_a = A / P if P > 0 else 0.0
            mean_c = C / D if D > 0 else 0.0
            for w, ca, ck in zip(self.windows, self.attn_sliding_s, self.kv_read_sliding_s):
                dc = D * min(mean_c, w)
                compute += ca * (P * min(mean_a, w) + dc)
                memory += ck * (min(PK, P + w) + dc)
        if self.experts_s:
            memory += self.experts_s * (1.0 - self.expert_keep ** T)
        comm = self.comm_fixed_s + self.comm_tok_s * T if T > 0 else 0.0
        return max(compute, memory) + comm + self.base_s + self.per_token_s * T + self.per_req_s * R

    def decode_step(self, n: int) -> Callable[[int], float]:
        """``C -> time(0, 0, n, C, n, 0)``: the seconds of a decode-only step of ``n`` requests with
        decode context ``C``, to the last bit, with the terms that do not depend on ``C`` worked out
        once (the engine calls it for each step of a lazy window).  # s
        """
        if self.windows or self.experts_s or n <= 0:
            return lambda C: self.time(0, 0, n, C, n, 0)
        c0 = self.tok_s * n + self.req_s * n  # the products and sums time() makes, in its order
        attn, weights, kv_read, kv_write = self.attn_full_s, self.weights_s, self.kv_read_full_s, self.kv_write_s * n
        comm = self.comm_fixed_s + self.comm_tok_s * n
        base, per_token, per_req = self.base_s, self.per_token_s * n, self.per_req_s * n

        def step(C: int) -> float:
            compute = c0 + attn * C
            memory = weights + kv_read * C + kv_write
            return (memory if memory > compute else compute) + comm + base + per_token + per_req
        return step

    def decode_times(self, k: int, n: int, c0: float, r: int | None = None) -> np.ndarray:
        """Seconds of each of ``k`` decode-only steps, shape ``(k,)``.  # s

        ``n`` requests decode one token a step; the decode context is ``c0``
        in the first step and grows by ``n`` a step; ``r`` scheduled requests
        (default ``n``). Element ``j`` equals ``time(0, 0, n, c0 + j n, r)``.
        """
        r = n if r is None else r
        j = np.arange(k, dtype=np.float64)
        C = c0 + n * j
        T = float(n)
        if n <= 0 and r <= 0:
            return np.zeros(k)
        compute = self.tok_s * T + self.req_s * r + self.attn_full_s * C
        memory = self.weights_s + self.kv_read_full_s * C + self.kv_write_s * T
        if self.windows:
            mean_c = C / n if n > 0 else np.zeros(k)
            for w, ca, ck in zip(self.windows, self.attn_sliding_s, self.kv_read_sliding_s):
                dc = n * np.minimum(mean_c, w)
                compute = compute + ca * dc
                memory = memory + ck * dc
        if self.experts_s:
            memory = memory + self.experts_s * (1.0 - self.expert_keep ** T)
        comm = self.comm_fixed_s + self.comm_tok_s * T if T > 0 else 0.0
        # added in the order time() adds them, so that element j equals it to the last bit
        return np.maximum(compute, memory) + comm + self.base_s + self.per_token_s * T + self.per_req_s * r

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepCostTerms:
        """Build from a JSON object of the fields above; unknown keys raise :class:`CostModelError`."""
        _known_fields(cls, data, "cost_model", "cost_model.", "unknown coefficient")
        kw = {}
        for k, v in data.items():
            if k in ("attn_sliding_s", "windows", "kv_read_sliding_s"):
                if not isinstance(v, (list, tuple)):
                    raise CostModelError(f"cost_model.{k}: must be a list")
                v = tuple(v)
                items = v
            else:
                items = (v,)
            for x in items:
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                    raise CostModelError(f"cost_model.{k}: must be finite numbers >= 0, got {x!r}")
            kw[k] = v
        if not 0.0 <= kw.get("expert_keep", 1.0) <= 1.0:
            raise CostModelError("cost_model.expert_keep: must be a fraction in [0, 1]")
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("attn_sliding_s", "windows", "kv_read_sliding_s"):
            d[k] = list(d[k])
        return d


def _arr(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim > 1:
        raise CostModelError(f"{name}: must be a scalar or a 1-D array (one entry per configuration)")
    return a


def _sum_linear(v0: np.ndarray, slope: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Sum of ``v0 + slope * j`` for ``j = 0 .. n-1``."""
    return n * v0 + slope * n * (n - 1) / 2.0


def _sum_max_linear(g0, gb, h0, hb, n) -> np.ndarray:
    """Exact ``sum_{j=0}^{n-1} max(g0 + gb j, h0 + hb j)``, vectorized."""
    d0, db = g0 - h0, gb - hb
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(db != 0, -d0 / np.where(db != 0, db, 1.0), 0.0)
    # db > 0: g wins for j >= ceil(root); db < 0: g wins for j <= floor(root)
    split_up = np.clip(np.ceil(root), 0, n)  # first j where g >= h (db > 0)
    split_dn = np.clip(np.floor(root) + 1, 0, n)  # first j where h > g (db < 0)
    total_g = _sum_linear(g0, gb, n)
    total_h = _sum_linear(h0, hb, n)
    # db > 0: h on [0, s), g on [s, n)
    s = split_up
    up = _sum_linear(h0, hb, s) + (total_g - _sum_linear(g0, gb, s))
    # db < 0: g on [0, s), h on [s, n)
    s2 = split_dn
    dn = _sum_linear(g0, gb, s2) + (total_h - _sum_linear(h0, hb, s2))
    flat = np.where(d0 >= 0, total_g, total_h)
    return np.where(db > 0, up, np.where(db < 0, dn, flat))


class BatchStepTime:
    """Step times of ``B`` configurations evaluated together.

    Build with :meth:`from_models` (or :meth:`from_terms`); every argument of
    :meth:`step_time` is broadcast to shape ``(B,)``.
    """

    _SCALARS = ("tok_s", "req_s", "attn_full_s", "weights_s", "experts_s", "expert_keep", "kv_read_full_s",
                "kv_write_s", "comm_fixed_s", "comm_tok_s", "base_s", "per_token_s", "per_req_s")

    def __init__(self, terms: Sequence[StepCostTerms]):
        if not terms:
            raise CostModelError("models: at least one configuration is needed")
        self.terms = tuple(terms)
        self.size = len(self.terms)
        for name in self._SCALARS:
            setattr(self, "_" + name, np.array([getattr(t, name) for t in self.terms], dtype=np.float64))
        w = max(len(t.windows) for t in self.terms)
        # pad with an infinite window (never capped) and zero coefficients
        self._windows = np.full((self.size, w), np.inf)
        self._attn_sl = np.zeros((self.size, w))
        self._kv_sl = np.zeros((self.size, w))
        for i, t in enumerate(self.terms):
            n = len(t.windows)
            self._windows[i, :n] = t.windows
            self._attn_sl[i, :n] = t.attn_sliding_s
            self._kv_sl[i, :n] = t.kv_read_sliding_s

    @classmethod
    def from_models(cls, models: Sequence[Any]) -> BatchStepTime:
        """Stack single-configuration models (anything with a ``terms`` attribute)."""
        return cls([m.terms for m in models])

    @classmethod
    def from_terms(cls, terms: Sequence[StepCostTerms]) -> BatchStepTime:
        return cls(terms)

    # -- evaluation ---------------------------------------------------------

    def components(self, prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                   num_reqs, prefill_kv_tokens=None) -> dict[str, np.ndarray]:
        """The four parts of the step time, each shape ``(B,)``.  # s

        Returns ``{"compute", "memory", "comm", "overhead", "total"}``.
        See the module docstring for the arguments.
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
        # sliding layers: each token attends to at most `window` tokens (mean-context approximation)
        a_sl = P[:, None] * np.minimum(mean_a[:, None], win) + D[:, None] * np.minimum(mean_c[:, None], win)
        k_sl = np.minimum(PK[:, None], P[:, None] + win) + D[:, None] * np.minimum(mean_c[:, None], win)
        compute = (self._tok_s * T + self._req_s * R + self._attn_full_s * (A + C)
                   + np.sum(self._attn_sl * a_sl, axis=1))
        touched = 1.0 - np.power(self._expert_keep, T)
        memory = (self._weights_s + self._experts_s * touched + self._kv_read_full_s * (PK + C)
                  + np.sum(self._kv_sl * k_sl, axis=1) + self._kv_write_s * T)
        comm = np.where(T > 0, self._comm_fixed_s + self._comm_tok_s * T, 0.0)
        overhead = self._base_s + self._per_token_s * T + self._per_req_s * R
        compute, memory, comm, overhead = (np.where(busy, x, 0.0) for x in (compute, memory, comm, overhead))
        total = np.maximum(compute, memory) + comm + overhead
        return {"compute": compute, "memory": memory, "comm": comm, "overhead": overhead, "total": total}

    def step_time(self, prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                  num_reqs, prefill_kv_tokens=None) -> np.ndarray:
        """Seconds one step takes in each configuration, shape ``(B,)``.  # s

        A configuration with nothing scheduled (no tokens, no requests) takes 0.
        """
        return self.components(prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                               num_reqs, prefill_kv_tokens)["total"]

    def decode_jump_time(self, k, decode_tokens, decode_context_tokens, num_reqs=None) -> np.ndarray:
        """Total seconds of ``k`` decode-only steps, in closed form, shape ``(B,)``.  # s

        Parameters
        ----------
        k : array_like of int, shape (B,)
            Steps in the jump (0 allowed).  # steps
        decode_tokens : array_like, shape (B,)
            Running requests, each decoding one token a step (constant over
            the jump).  # tokens
        decode_context_tokens : array_like, shape (B,)
            ``decode_context_tokens`` of the *first* step of the jump; it grows
            by ``decode_tokens`` every step.  # tokens
        num_reqs : array_like, optional
            Scheduled requests per step; default ``decode_tokens``.

        Equals ``sum(step_time(0, 0, n, C0 + i * n, r) for i in range(k))``
        exactly (up to rounding): between the steps where a sliding window
        starts to cap the context, compute and memory are linear in ``i``,
        and the sum of the max of two linear sequences splits at their
        crossing.
        """
        B = self.size
        K = np.broadcast_to(_arr(k, "k"), (B,)).astype(np.float64)
        if np.any(K < 0):
            raise CostModelError("k: must be >= 0 steps")
        n = np.broadcast_to(_arr(decode_tokens, "decode_tokens"), (B,))
        c0 = np.broadcast_to(_arr(decode_context_tokens, "decode_context_tokens"), (B,))
        r = n if num_reqs is None else np.broadcast_to(_arr(num_reqs, "num_reqs"), (B,))
        with np.errstate(divide="ignore", invalid="ignore"):
            mean0 = np.where(n > 0, c0 / np.where(n > 0, n, 1.0), 0.0)
        # kinks: first step where mean context >= window (per window; +inf pads never kink)
        kinks = np.clip(np.ceil(self._windows - mean0[:, None]), 0, K[:, None])  # (B, W)
        kinks = np.where(np.isfinite(kinks), kinks, K[:, None])
        bounds = np.concatenate([np.zeros((B, 1)), np.sort(kinks, axis=1), K[:, None]], axis=1)
        zero = np.zeros(B)
        total = np.zeros(B)
        for s in range(bounds.shape[1] - 1):
            start, end = bounds[:, s], bounds[:, s + 1]
            length = np.maximum(end - start, 0.0)
            at0 = self.components(zero, zero, n, c0 + start * n, r)
            at1 = self.components(zero, zero, n, c0 + (start + 1) * n, r)
            g0, gb = at0["compute"], at1["compute"] - at0["compute"]
            h0, hb = at0["memory"], at1["memory"] - at0["memory"]
            const = at0["comm"] + at0["overhead"]
            seg = _sum_max_linear(g0, gb, h0, hb, length) + const * length
            total = total + np.where(length > 0, seg, 0.0)
        return total


# ---------------------------------------------------------------------------
# single-configuration models
# ---------------------------------------------------------------------------


class _Single:
    """Shared evaluation of a one-configuration model (arrays broadcast over calls)."""

    terms: StepCostTerms

    def _batch(self) -> BatchStepTime:
        b = self.__dict__.get("_batch_cache")
        if b is None:
            b = BatchStepTime([self.terms])
            object.__setattr__(self, "_batch_cache", b)
        return b

    def step_time(self, prefill_tokens, prefill_attention_tokens, decode_tokens, decode_context_tokens,
                  num_reqs, prefill_kv_tokens=None) -> np.ndarray:
        """Seconds per step; arguments may be arrays of any 1-D shape (many steps of one configuration).  # s"""
        args = [np.atleast_1d(_arr(x, "arg")) for x in (prefill_tokens, prefill_attention_tokens, decode_tokens,
                                                          decode_context_tokens, num_reqs)]
        if prefill_kv_tokens is not None:
            args.append(np.atleast_1d(_arr(prefill_kv_tokens, "prefill_kv_tokens")))
        shape = np.broadcast_shapes(*(a.shape for a in args))
        batch = BatchStepTime([self.terms] * int(np.prod(shape)))
        out = batch.step_time(*(np.broadcast_to(a, shape) for a in args[:5]),
                              prefill_kv_tokens=None if prefill_kv_tokens is None else np.broadcast_to(args[5], shape))
        return out.reshape(shape)

    def components(self, *args, **kwargs) -> dict[str, float]:
        """The compute / memory / comm / overhead split of one step, as floats.  # s"""
        return {k: float(v[0]) for k, v in self._batch().components(*args, **kwargs).items()}

    def decode_jump_time(self, k, decode_tokens, decode_context_tokens, num_reqs=None) -> float:
        """Total seconds of ``k`` decode-only steps (see :meth:`BatchStepTime.decode_jump_time`).  # s"""
        return float(self._batch().decode_jump_time(k, decode_tokens, decode_context_tokens, num_reqs)[0])


@dataclass(frozen=True)
class LinearStepTime(_Single):
    """``base_s + per_token_s x (prefill + decode tokens) + per_req_s x requests``.

    Wraps :class:`simulator.config.StepTimeModel` (the oracle's model, and the
    way a user enters coefficients fitted on their own measurements).
    """

    linear: StepTimeModel

    def __post_init__(self) -> None:
        lin = self.linear
        if isinstance(lin, dict):
            lin = StepTimeModel(**lin)
            object.__setattr__(self, "linear", lin)
        if not isinstance(lin, StepTimeModel):
            raise CostModelError("linear: must be a StepTimeModel or an object with base_s, per_token_s, per_req_s")

    @property
    def terms(self) -> StepCostTerms:
        return StepCostTerms(base_s=self.linear.base_s, per_token_s=self.linear.per_token_s,
                             per_req_s=self.linear.per_req_s)


def _flops_dtype(model: ModelSpec, gpu: GpuSpec, dtype: str) -> tuple[str, float]:
    """Which dense TFLOPS the matmuls run at, and that figure.  # TFLOPS

    fp8 / int8 (W8A8) checkpoints use the fp8 figure, nvfp4 / fp4 the fp4
    figure, falling back to the next wider type the GPU lists; weight-only
    int4 (AWQ / GPTQ / mxfp4) computes in the activation dtype (bf16).
    """
    q = model.quantization
    order = ["bf16"]
    if q in ("fp8", "int8"):
        order = ["fp8", "bf16"]
    elif q in ("nvfp4", "fp4"):
        order = ["fp4", "fp8", "bf16"]
    elif q is None and dtype in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        order = ["fp8", "bf16"]
    for name in order:
        v = getattr(gpu, f"{name}_tflops")
        if v:
            return name, float(v)
    raise CostModelError(f"gpu.bf16_tflops: {gpu.name} has no dense TFLOPS figure; the roofline needs one")


@dataclass(frozen=True)
class RooflineStepTime(_Single):
    """Roofline step time of ``model`` on ``tp`` GPUs of ``gpu``.

    ``step = max(compute, memory) + tp_comm + overhead`` (see the module
    docstring and ``docs/cost-model.md``). Build with
    :meth:`from_specs`; the derived per-GPU figures are kept as attributes so
    the docs and a user can see them.

    Attributes
    ----------
    body_flops_per_token : float
        ``2 x`` active parameters without embedding and LM head.  # FLOP
    lm_head_flops_per_request : float  # FLOP
    attn_flops_per_context_token : float
        ``4 x heads x head_dim`` summed over full-attention layers, per query
        token per context token (QK^T and AV).  # FLOP
    weights_bytes, experts_bytes : float
        Per GPU, read once per step (experts: when all are touched).  # bytes
    kv_bytes_per_token_full : float
        Per GPU, full-attention layers.  # bytes
    peak_flops, hbm_bytes_per_s, link_bytes_per_s : float
        Per GPU.  # FLOP/s, bytes/s
    """

    model: ModelSpec
    gpu: GpuSpec
    tp: int
    coefficients: RooflineCoefficients
    terms: StepCostTerms
    body_flops_per_token: float
    lm_head_flops_per_request: float
    attn_flops_per_context_token: float
    weights_bytes: float
    experts_bytes: float
    kv_bytes_per_token_full: float
    flops_dtype: str
    peak_flops: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float

    @classmethod
    def from_specs(cls, model: ModelSpec, gpu: GpuSpec, tp: int = 1,
                   coefficients: RooflineCoefficients | dict | None = None,
                   deployment: DeploymentSpec | None = None) -> RooflineStepTime:
        """Derive the roofline terms.

        Parameters
        ----------
        model, gpu : ModelSpec, GpuSpec
        tp : int
            Tensor-parallel degree (ignored when ``deployment`` is given).
        coefficients : RooflineCoefficients or dict, optional
            Defaults: :class:`RooflineCoefficients()`.
        deployment : DeploymentSpec, optional
            For ``dtype`` / ``kv_cache_dtype``; default bf16-style ``auto``.
        """
        if not isinstance(model, ModelSpec):
            raise CostModelError("model: a ModelSpec is required for the roofline model")
        if not isinstance(gpu, GpuSpec):
            raise CostModelError("gpu: a GpuSpec is required for the roofline model")
        if coefficients is None:
            coefficients = RooflineCoefficients()
        elif isinstance(coefficients, dict):
            coefficients = RooflineCoefficients.from_dict(coefficients)
        if not isinstance(coefficients, RooflineCoefficients):
            raise CostModelError("coefficients: must be RooflineCoefficients or a dict of them")
        if deployment is None:
            if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
                raise CostModelError(f"tp: must be a whole number >= 1, got {tp!r}")
            deployment = DeploymentSpec(tensor_parallel_size=tp)
        tp = deployment.tensor_parallel_size
        if deployment.pipeline_parallel_size != 1:
            raise CostModelError("pipeline_parallel_size: the roofline models tensor parallelism only")
        check_parallelism(model, tp)
        if not gpu.bandwidth_tbps:
            raise CostModelError(f"gpu.bandwidth_tbps: {gpu.name} has no HBM bandwidth; the roofline needs one")
        if tp > 1 and not gpu.interconnect_gbps:
            raise CostModelError(f"gpu.interconnect_gbps: {gpu.name} has no GPU-to-GPU bandwidth; needed for tp > 1")
        co = coefficients
        cdt = compute_dtype(model, deployment)
        kvdt = resolve_kv_dtype(model, deployment)
        flops_dtype, tflops = _flops_dtype(model, gpu, deployment.dtype if deployment.dtype != "auto" else cdt)
        peak = tflops * TERA  # FLOP/s per GPU
        hbm = gpu.bandwidth_tbps * TERA  # bytes/s per GPU
        # interconnect_gbps is the total (both directions) per GPU, as data sheets quote NVLink
        link = (gpu.interconnect_gbps or 0.0) / 2.0 * GIGA  # bytes/s per direction

        H, V = model.hidden_size, model.vocab_size
        _, active = estimate_num_parameters(model)
        if model.num_active_parameters:
            active = model.num_active_parameters
        embed = V * H
        lm_head = embed  # tied or not, the head is a vocab x hidden matmul
        in_embed = 0 if model.tie_word_embeddings else embed
        body = max(active - in_embed - lm_head, 0)
        body_flops = 2.0 * body  # FLOP per token
        head_flops = 2.0 * lm_head  # FLOP per sampled request

        full_attn = 0.0
        sliding: dict[int, list[float]] = {}
        kv_full = kv_bytes_per_token(model, kvdt, tp, [lay for lay in model.layer_specs if lay.kind == LAYER_FULL],
                                     per_gpu=True)
        for lay in model.layer_specs:
            if lay.kind == LAYER_FULL or lay.kind == LAYER_SLIDING:
                hd = lay.head_dim or model.head_dim
                if model.attention == "MLA":
                    hd = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0) or hd
                f = 4.0 * model.num_attention_heads * hd  # FLOP per query x context token (QK^T + AV)
                if lay.kind == LAYER_FULL:
                    full_attn += f
                else:
                    kvb = kv_bytes_per_token(model, kvdt, tp, [lay], per_gpu=True)
                    acc = sliding.setdefault(int(lay.window), [0.0, 0.0])
                    acc[0] += f
                    acc[1] += kvb
        windows = tuple(sorted(sliding))

        cb = DTYPE_BYTES[cdt]
        total_w = weights_bytes_per_gpu(model, deployment)
        w_read = total_w - (in_embed * cb / tp)  # the input embedding is a gather, not read whole
        experts_bytes = 0.0
        keep = 1.0
        if model.is_moe:
            total_params, _ = estimate_num_parameters(model)
            ie = model.moe_intermediate_size or model.intermediate_size
            mats = 3 if model.gated_mlp else 2
            n_moe = model.num_layers - model.num_dense_layers
            expert_params = n_moe * model.num_experts * mats * H * ie
            frac = min(expert_params / max(total_params, 1), 1.0)
            experts_bytes = total_w * frac
            w_read -= experts_bytes
            keep = 1.0 - model.num_experts_per_tok / model.num_experts

        eff_flops = peak * co.mfu  # FLOP/s
        eff_hbm = hbm * co.bandwidth_efficiency  # bytes/s
        tok_s = body_flops / tp / eff_flops
        req_s = head_flops / tp / eff_flops
        attn_full_s = full_attn / tp / eff_flops
        attn_sl = tuple(sliding[w][0] / tp / eff_flops for w in windows)
        kv_sl = tuple(sliding[w][1] / eff_hbm for w in windows)
        kv_all = kv_full + sum(sliding[w][1] for w in windows)
        if tp > 1:
            n_ar = co.allreduces_per_layer * model.num_layers
            act = co.activation_bytes or cb
            ring = 2.0 * (tp - 1) / tp
            comm_fixed = n_ar * co.allreduce_latency_s
            comm_tok = n_ar * ring * H * act / (link * co.interconnect_efficiency)
        else:
            comm_fixed = comm_tok = 0.0
        terms = StepCostTerms(
            tok_s=tok_s, req_s=req_s, attn_full_s=attn_full_s, attn_sliding_s=attn_sl, windows=windows,
            weights_s=max(w_read, 0.0) / eff_hbm, experts_s=experts_bytes / eff_hbm, expert_keep=keep,
            kv_read_full_s=kv_full / eff_hbm, kv_read_sliding_s=kv_sl, kv_write_s=kv_all / eff_hbm,
            comm_fixed_s=comm_fixed, comm_tok_s=comm_tok, base_s=co.step_overhead_s,
            per_req_s=co.per_request_overhead_s,
        )
        return cls(model=model, gpu=gpu, tp=tp, coefficients=co, terms=terms,
                   body_flops_per_token=body_flops, lm_head_flops_per_request=head_flops,
                   attn_flops_per_context_token=full_attn, weights_bytes=max(w_read, 0.0),
                   experts_bytes=experts_bytes, kv_bytes_per_token_full=kv_full, flops_dtype=flops_dtype,
                   peak_flops=peak, hbm_bytes_per_s=hbm, link_bytes_per_s=link)

    def prefill_time(self, tokens: int, start: int = 0) -> float:
        """Seconds of one step that prefills ``tokens`` prompt tokens of one request after ``start`` cached ones.  # s"""
        attn = tokens * start + tokens * (tokens + 1) / 2.0
        return float(self.step_time(tokens, attn, 0, 0, 1, prefill_kv_tokens=start + tokens)[0])

    def decode_step_time(self, batch: int, context: int) -> float:
        """Seconds of one decode step of ``batch`` requests each attending to ``context`` tokens.  # s"""
        return float(self.step_time(0, 0, batch, batch * context, batch)[0])


STEP_TIME_KINDS = ("roofline", "linear")


def build_step_time_model(kind: str, *, model: ModelSpec | None = None, gpu: GpuSpec | None = None, tp: int = 1,
                          coefficients: RooflineCoefficients | dict | None = None,
                          linear: StepTimeModel | dict | None = None,
                          deployment: DeploymentSpec | None = None) -> RooflineStepTime | LinearStepTime:
    """A single-configuration step-time model.

    Parameters
    ----------
    kind : {"roofline", "linear"}
    model, gpu, tp, coefficients, deployment
        For ``roofline`` (see :meth:`RooflineStepTime.from_specs`).
    linear : StepTimeModel or dict
        For ``linear``; default ``StepTimeModel()`` (the oracle's default).

    Stack several with :meth:`BatchStepTime.from_models` to evaluate a batch.
    """
    if kind == "roofline":
        return RooflineStepTime.from_specs(model, gpu, tp, coefficients, deployment)
    if kind == "linear":
        return LinearStepTime(StepTimeModel() if linear is None else linear)
    raise CostModelError(f"kind: must be one of {', '.join(STEP_TIME_KINDS)}, got {kind!r}")


__all__ = [
    "CostModelError",
    "RooflineCoefficients",
    "StepCostTerms",
    "BatchStepTime",
    "LinearStepTime",
    "RooflineStepTime",
    "STEP_TIME_KINDS",
    "build_step_time_model",
]
