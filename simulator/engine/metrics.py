"""Latency and throughput metrics from per-request times.

Input is what the engine records per request (arrays of shape ``(R,)``,
seconds on the simulation clock, NaN where a request never got there):
``arrival_time``, ``first_scheduled_time`` (optional), ``first_token_time``,
``finish_time``, ``num_output_tokens``, ``num_prompt_tokens`` (optional), and
optionally every inter-token latency as a ragged array in CSR form
(``itl_values`` of shape ``(N,)`` and ``itl_offsets`` of shape ``(R + 1,)``:
request ``i``'s gaps are ``itl_values[itl_offsets[i]:itl_offsets[i + 1]]``).

Definitions (vLLM's ``benchmark_serving`` names):

* TTFT = first_token - arrival; E2E = finish - arrival;
  queueing = first_scheduled - arrival.
* TPOT (a request's mean ITL) = (finish - first_token) / (output_tokens - 1),
  for requests with at least 2 output tokens.
* ITL distribution: every gap between consecutive output tokens of completed
  requests; without ``itl_values`` each request contributes its TPOT
  ``output_tokens - 1`` times (exact mean, approximate percentiles).
* Throughput over ``duration_s`` (default: first arrival to last finish of a
  completed request): output tokens/s, total (prompt + output) tokens/s,
  requests/s.
* Goodput: completed requests with TTFT <= ``slo_ttft_s`` and TPOT <=
  ``slo_itl_s`` (a missing threshold is not checked), per second, and their
  output tokens per second.

A request without a finite ``finish_time`` (or first token) is unfinished: it
is left out of every statistic and counted in ``num_unfinished``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


class MetricsError(ValueError):
    """Inputs that cannot be summarised; the message names the field."""


@dataclass(frozen=True)
class Percentiles:
    """Mean and percentiles of one latency over the requests (or tokens) it covers.  # s

    NaN everywhere when ``count`` is 0.
    """

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: np.ndarray, weights: np.ndarray | None = None) -> Percentiles:
        """Summarise the finite entries of ``values`` (``weights``: integer repeat counts)."""
        v = np.asarray(values, dtype=np.float64)
        ok = np.isfinite(v)
        if weights is not None:
            w = np.asarray(weights, dtype=np.int64)
            ok &= w > 0
            v = np.repeat(v[ok], w[ok])
        else:
            v = v[ok]
        if v.size == 0:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan, nan)
        p50, p90, p99 = np.percentile(v, [50, 90, 99])
        return cls(int(v.size), float(v.mean()), float(p50), float(p90), float(p99), float(v.max()))

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(x, float) and math.isnan(x) else x) for k, x in asdict(self).items()}


@dataclass(frozen=True)
class RequestLatencies:
    """Per-request latencies, shape ``(R,)``, NaN where undefined.  # s"""

    completed: np.ndarray  # bool
    ttft: np.ndarray
    tpot: np.ndarray
    e2e: np.ndarray
    queueing: np.ndarray


@dataclass(frozen=True)
class LatencySummary:
    """Totals and percentiles of one simulation's requests (see the module docstring)."""

    num_requests: int
    num_completed: int
    num_unfinished: int
    duration_s: float  # s
    ttft: Percentiles  # s
    tpot: Percentiles  # s, per-request mean ITL
    itl: Percentiles  # s, over all token gaps
    e2e: Percentiles  # s
    queueing: Percentiles  # s
    output_tokens: int  # tokens
    total_tokens: int  # tokens
    request_throughput: float  # requests/s
    output_tokens_per_s: float  # tokens/s
    total_tokens_per_s: float  # tokens/s
    slo_ttft_s: float | None  # s
    slo_itl_s: float | None  # s
    num_meeting_slo: int
    goodput_requests_per_s: float  # requests/s
    goodput_tokens_per_s: float  # output tokens/s

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes ``None``)."""
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            if isinstance(getattr(self, k), Percentiles):
                out[k] = getattr(self, k).to_dict()
            elif isinstance(v, float) and math.isnan(v):
                out[k] = None
            else:
                out[k] = v
        return out


def _vec(x: Any, name: str, n: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise MetricsError(f"{name}: must be a 1-D array (one entry per request)")
    if n is not None and a.shape[0] != n:
        raise MetricsError(f"{name}: has {a.shape[0]} entries, expected {n}")
    return a


def request_latencies(*, arrival_time, first_token_time, finish_time, num_output_tokens,
                      first_scheduled_time=None) -> RequestLatencies:
    """Per-request TTFT, TPOT, E2E and queueing delay, shape ``(R,)``.  # s"""
    arr = _vec(arrival_time, "arrival_time")
    n = arr.shape[0]
    ft = _vec(first_token_time, "first_token_time", n)
    fin = _vec(finish_time, "finish_time", n)
    out = _vec(num_output_tokens, "num_output_tokens", n)
    if np.any(out[np.isfinite(out)] < 0):
        raise MetricsError("num_output_tokens: must be >= 0")
    completed = np.isfinite(arr) & np.isfinite(ft) & np.isfinite(fin)
    nan = np.full(n, np.nan)
    ttft = np.where(completed, ft - arr, nan)
    e2e = np.where(completed, fin - arr, nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(completed & (out >= 2), (fin - ft) / (out - 1), nan)
    if first_scheduled_time is None:
        queueing = nan.copy()
    else:
        fs = _vec(first_scheduled_time, "first_scheduled_time", n)
        queueing = np.where(completed, fs - arr, nan)
    if np.any(ttft[completed] < 0) or np.any(e2e[completed] < ttft[completed]):
        raise MetricsError("first_token_time: must lie between arrival_time and finish_time")
    return RequestLatencies(completed=completed, ttft=ttft, tpot=tpot, e2e=e2e, queueing=queueing)


def summarize_latency(*, arrival_time, first_token_time, finish_time, num_output_tokens,
                      num_prompt_tokens=None, first_scheduled_time=None, itl_values=None, itl_offsets=None,
                      slo_ttft_s: float | None = None, slo_itl_s: float | None = None,
                      duration_s: float | None = None) -> LatencySummary:
    """Summarise one simulation's requests.

    Parameters
    ----------
    arrival_time, first_token_time, finish_time : array_like, shape (R,)
        Seconds; NaN = never reached (unfinished).  # s
    num_output_tokens : array_like of int, shape (R,)  # tokens
    num_prompt_tokens : array_like of int, shape (R,), optional
        For total tokens/s (output only when absent).  # tokens
    first_scheduled_time : array_like, shape (R,), optional
        For queueing delay.  # s
    itl_values, itl_offsets : array_like, optional
        Every inter-token gap, CSR form (see the module docstring).  # s
    slo_ttft_s, slo_itl_s : float, optional
        Goodput thresholds on TTFT and on TPOT (per-request mean ITL).  # s
    duration_s : float, optional
        Throughput window; default first arrival to last completed finish.  # s

    Returns
    -------
    LatencySummary
    """
    lat = request_latencies(arrival_time=arrival_time, first_token_time=first_token_time, finish_time=finish_time,
                            num_output_tokens=num_output_tokens, first_scheduled_time=first_scheduled_time)
    arr = _vec(arrival_time, "arrival_time")
    n = arr.shape[0]
    fin = _vec(finish_time, "finish_time", n)
    out = np.nan_to_num(_vec(num_output_tokens, "num_output_tokens", n)).astype(np.int64)
    prompt = (np.zeros(n, dtype=np.int64) if num_prompt_tokens is None
              else np.nan_to_num(_vec(num_prompt_tokens, "num_prompt_tokens", n)).astype(np.int64))
    done = lat.completed
    for name, v in (("slo_ttft_s", slo_ttft_s), ("slo_itl_s", slo_itl_s), ("duration_s", duration_s)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0
                              or not math.isfinite(v)):
            raise MetricsError(f"{name}: must be a positive number of seconds, got {v!r}")

    # ITL distribution
    if itl_values is not None or itl_offsets is not None:
        if itl_values is None or itl_offsets is None:
            raise MetricsError("itl_offsets: itl_values and itl_offsets go together")
        vals = np.asarray(itl_values, dtype=np.float64).ravel()
        offs = np.asarray(itl_offsets, dtype=np.int64).ravel()
        if offs.shape[0] != n + 1 or offs[0] != 0 or offs[-1] != vals.shape[0] or np.any(np.diff(offs) < 0):
            raise MetricsError(f"itl_offsets: must be {n + 1} non-decreasing offsets from 0 to len(itl_values)")
        owner = np.repeat(np.arange(n), np.diff(offs))
        itl = Percentiles.of(vals[done[owner]])
    else:
        itl = Percentiles.of(lat.tpot, weights=np.where(done, np.maximum(out - 1, 0), 0))

    num_done = int(done.sum())
    if duration_s is None:
        if num_done:
            start = float(np.nanmin(arr))
            duration_s = float(np.max(fin[done])) - start
        else:
            duration_s = float("nan")
    dur = duration_s if duration_s and duration_s > 0 else float("nan")
    out_tok = int(out[done].sum())
    tot_tok = int((out[done] + prompt[done]).sum())

    good = done.copy()
    if slo_ttft_s is not None:
        good &= lat.ttft <= slo_ttft_s
    if slo_itl_s is not None:
        # a one-token answer has no inter-token gap: it meets any ITL threshold
        good &= ~(lat.tpot > slo_itl_s)
    num_good = int(good.sum())

    def rate(x: float) -> float:
        return x / dur if math.isfinite(dur) else float("nan")

    return LatencySummary(
        num_requests=n, num_completed=num_done, num_unfinished=n - num_done, duration_s=float(duration_s),
        ttft=Percentiles.of(lat.ttft), tpot=Percentiles.of(lat.tpot), itl=itl, e2e=Percentiles.of(lat.e2e),
        queueing=Percentiles.of(lat.queueing), output_tokens=out_tok, total_tokens=tot_tok,
        request_throughput=rate(num_done), output_tokens_per_s=rate(out_tok), total_tokens_per_s=rate(tot_tok),
        slo_ttft_s=None if slo_ttft_s is None else float(slo_ttft_s),
        slo_itl_s=None if slo_itl_s is None else float(slo_itl_s), num_meeting_slo=num_good,
        goodput_requests_per_s=rate(num_good), goodput_tokens_per_s=rate(int(out[good].sum())),
    )


__all__ = ["MetricsError", "Percentiles", "RequestLatencies", "LatencySummary", "request_latencies",
           "summarize_latency"]
