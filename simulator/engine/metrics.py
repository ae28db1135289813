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
  for requests with at least 2 output tokens, excluding the first token;
  percentiles over the requests.
* ITL: every gap between consecutive output tokens of completed requests,
  percentiles over all the gaps (vLLM bench's ``itl``). Given as
  ``token_gaps`` (:class:`TokenGaps`: distinct gap values with repeat counts,
  what the engine writes, one entry per engine step instead of one per
  token) and/or ``itl_values`` (CSR). A completed request whose gaps are not
  known (``gaps_known`` False, or neither given) counts its TPOT
  ``output_tokens - 1`` times and is counted in ``itl_requests_approximate``.
  Percentiles of the repeated values are computed exactly as
  ``np.percentile`` of the expanded array would (linear interpolation)
  without expanding it.
* Throughput over ``duration_s`` (default: first arrival to last finish of a
  completed request): output tokens/s, total (prompt + output) tokens/s,
  requests/s.
* Goodput (vLLM bench's ``--goodput``): completed requests with TTFT <=
  ``slo_ttft_s`` and TPOT <= ``slo_tpot_s`` (a missing threshold is not
  checked), per second, and their output tokens per second.
* Any percentile: :meth:`LatencySummary.percentile` (``ttft``, ``tpot``,
  ``itl``, ``e2e``, ``queueing`` at any ``0 < q < 100``).

A request without a finite ``finish_time`` (or first token) is unfinished: it
is left out of every statistic and counted in ``num_unfinished``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from simulator.base.errors import FieldError


class MetricsError(FieldError):
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
        v, w = _finite_weighted(values, weights)
        total = int(w.sum())
        if total == 0:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan, nan)
        p50, p90, p99 = weighted_percentiles(v, w, [50, 90, 99])
        mean = float(v.mean()) if weights is None else float((v * w).sum() / total)
        return cls(total, mean, float(p50), float(p90), float(p99), float(v.max()))

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(x, float) and math.isnan(x) else x) for k, x in asdict(self).items()}


def _finite_weighted(values, weights) -> tuple[np.ndarray, np.ndarray]:
    """The finite entries of ``values`` with positive ``weights`` (all 1 when None)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    w = np.ones(v.shape, np.int64) if weights is None else np.asarray(weights, dtype=np.int64).ravel()
    ok = np.isfinite(v) & (w > 0)
    return v[ok], w[ok]


def weighted_percentiles(values: np.ndarray, counts: np.ndarray, qs) -> np.ndarray:
    """``np.percentile(np.repeat(values, counts), qs)`` (linear method) without making the repeated array.

    ``counts`` are positive whole numbers; ``qs`` in [0, 100]. The two order
    statistics around each rank ``(N - 1) q / 100`` are found in the sorted
    distinct values by their cumulative counts and interpolated with numpy's
    own formula, so the result equals the expanded computation.
    """
    v = np.asarray(values, np.float64)
    c = np.asarray(counts, np.int64)
    q = np.asarray(qs, np.float64)
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(c[order])
    n = int(cum[-1])
    h = (n - 1) * (q / 100.0)
    lo = np.floor(h)
    frac = h - lo
    a = v[np.searchsorted(cum, lo.astype(np.int64), side="right")]
    b = v[np.searchsorted(cum, np.minimum(lo + 1, n - 1).astype(np.int64), side="right")]
    diff = b - a
    # numpy's _lerp: a + diff * t, from the upper end when t >= 0.5
    return np.where(frac >= 0.5, b - diff * (1 - frac), a + diff * frac)


@dataclass(frozen=True, eq=False)
class TokenGaps:
    """Inter-token gaps of a run as distinct values and how many tokens had each.  # s

    ``values`` (s) and ``counts`` have one entry per engine step (a step of
    length ``dt`` in which ``k`` requests received a token that was not their
    first: ``k`` gaps of ``dt``), so a million-request run keeps its steps,
    not its tokens. The engine writes it for the requests whose every gap it
    knows exactly; the rest are marked in the ``itl_gaps_known`` request column.
    """

    values: np.ndarray
    counts: np.ndarray

    @classmethod
    def concat(cls, parts) -> TokenGaps | None:
        """The gaps of several runs together (None when none has any)."""
        parts = [p for p in parts if p is not None]
        if not parts:
            return None
        return cls(np.concatenate([p.values for p in parts]), np.concatenate([p.counts for p in parts]))


def engine_token_gaps(step_ends: np.ndarray, first_token_step: np.ndarray, finish_step: np.ndarray,
                      num_output_tokens: np.ndarray, num_preemptions: np.ndarray, first_token_t: np.ndarray,
                      finish_t: np.ndarray, per_token_s: float = 0.0) -> tuple[TokenGaps, np.ndarray]:
    """The exact token gaps of one engine's run, and which requests they cover, shape ``(R,)``.

    ``step_ends[s]``: the clock at the end of engine step ``s`` (s). A request
    covered received one token in every step from its first token's to its
    last's (``finish - first = output_tokens - 1``), was never preempted and
    its times agree with the step ends; its gaps are then the steps' lengths
    ``step_ends[s] - step_ends[s - 1]`` for ``first < s <= finish``, each plus
    ``per_token_s`` (the serving time every streamed token pays). Others
    (preempted, a decode skipped by the token budget, several tokens a step
    under speculative decoding) are not covered.
    """
    T = np.asarray(step_ends, np.float64)
    S = T.shape[0]
    f0 = np.asarray(first_token_step, np.int64)
    f1 = np.asarray(finish_step, np.int64)
    out = np.asarray(num_output_tokens, np.int64)
    ok = (f0 >= 0) & (f1 >= f0) & (f1 < S) & (f1 - f0 == out - 1) & (np.asarray(num_preemptions) == 0)
    if S and ok.any():
        idx0, idx1 = np.where(ok, f0, 0), np.where(ok, f1, 0)
        span = T[idx1] - T[idx0]
        own = np.asarray(finish_t, np.float64) - np.asarray(first_token_t, np.float64)
        ok &= np.isclose(span, own, rtol=1e-9, atol=1e-12)
    if not S or not ok.any():
        return TokenGaps(np.zeros(0), np.zeros(0, np.int64)), ok
    d = np.zeros(S + 1, np.int64)
    np.add.at(d, f0[ok] + 1, 1)
    np.add.at(d, f1[ok] + 1, -1)
    cnt = np.cumsum(d[:S])
    dt = np.diff(T, prepend=T[0]) + per_token_s
    has = cnt > 0
    return TokenGaps(dt[has], cnt[has]), ok


@dataclass(frozen=True)
class RequestLatencies:
    """Per-request latencies, shape ``(R,)``, NaN where undefined.  # s"""

    completed: np.ndarray  # bool
    ttft: np.ndarray
    tpot: np.ndarray
    e2e: np.ndarray
    queueing: np.ndarray


#: Latencies :meth:`LatencySummary.percentile` reads, vLLM bench's names.
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e", "queueing")


@dataclass(frozen=True)
class LatencySummary:
    """Totals and percentiles of one simulation's requests (see the module docstring).

    ``samples`` (not in :meth:`to_dict`) keeps what :meth:`percentile` needs
    for any other percentile: per-request arrays, and the ITL gaps as values
    with counts.
    """

    num_requests: int
    num_completed: int
    num_unfinished: int
    duration_s: float  # s
    ttft: Percentiles  # s
    tpot: Percentiles  # s, per-request mean inter-token gap (first token excluded), over requests
    itl: Percentiles  # s, every inter-token gap, over all gaps
    e2e: Percentiles  # s
    queueing: Percentiles  # s
    output_tokens: int  # tokens
    total_tokens: int  # tokens
    request_throughput: float  # requests/s
    output_tokens_per_s: float  # tokens/s
    total_tokens_per_s: float  # tokens/s
    slo_ttft_s: float | None  # s
    slo_tpot_s: float | None  # s
    num_meeting_slo: int
    goodput_requests_per_s: float  # requests/s
    goodput_tokens_per_s: float  # output tokens/s
    itl_requests_approximate: int = 0  # completed requests whose gaps count as their TPOT
    samples: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def percentile(self, metric: str, q: float) -> float:
        """``metric`` (one of :data:`LATENCY_METRICS`) at percentile ``q`` in (0, 100), NaN without data.  # s"""
        if metric not in LATENCY_METRICS:
            raise MetricsError(f"must be one of {', '.join(LATENCY_METRICS)}, got {metric!r}", field="metric")
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q < 100:
            raise MetricsError(f"must be a number strictly between 0 and 100, got {q!r}", field="percentile")
        if self.samples is None:
            raise MetricsError("this summary keeps no samples (made by from_dict?)", field="percentile")
        v, w = self.samples[metric]
        if not w.size:
            return float("nan")
        return float(weighted_percentiles(v, w, [q])[0])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes ``None``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "samples":
                continue
            v = getattr(self, f.name)
            if isinstance(v, Percentiles):
                out[f.name] = v.to_dict()
            elif isinstance(v, float) and math.isnan(v):
                out[f.name] = None
            else:
                out[f.name] = v
        return out


def _vec(x: Any, name: str, n: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise MetricsError("must be a 1-D array (one entry per request)", field=name)
    if n is not None and a.shape[0] != n:
        raise MetricsError(f"has {a.shape[0]} entries, expected {n}", field=name)
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
        raise MetricsError("must be >= 0", field="num_output_tokens")
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
        raise MetricsError("must lie between arrival_time and finish_time", field="first_token_time")
    return RequestLatencies(completed=completed, ttft=ttft, tpot=tpot, e2e=e2e, queueing=queueing)


def summarize_latency(*, arrival_time, first_token_time, finish_time, num_output_tokens,
                      num_prompt_tokens=None, first_scheduled_time=None, itl_values=None, itl_offsets=None,
                      token_gaps: TokenGaps | None = None, gaps_known=None,
                      slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
                      duration_s: float | None = None, slo_itl_s: float | None = None) -> LatencySummary:
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
    token_gaps : TokenGaps, optional
        Gaps as values with counts, of the requests ``gaps_known`` marks.  # s
    gaps_known : array_like of bool, shape (R,), optional
        Requests whose gaps ``token_gaps`` holds (default: all when
        ``token_gaps`` is given, none otherwise).
    slo_ttft_s, slo_tpot_s : float, optional
        Goodput thresholds on TTFT and on TPOT (per-request mean ITL), as
        vLLM bench's ``--goodput ttft:... tpot:...``.  # s
    slo_itl_s : float, optional
        The old name of ``slo_tpot_s`` (goodput was always judged on TPOT;
        vLLM's goodput has no per-gap criterion).  # s
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
    if slo_tpot_s is None:
        slo_tpot_s = slo_itl_s
    for name, v in (("slo_ttft_s", slo_ttft_s), ("slo_tpot_s", slo_tpot_s), ("duration_s", duration_s)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0
                              or not math.isfinite(v)):
            raise MetricsError(f"must be a positive number of seconds, got {v!r}", field=name)

    itl_v, itl_w, approx = _itl_sample(lat, out, n, itl_values, itl_offsets, token_gaps, gaps_known)
    itl = Percentiles.of(itl_v, weights=itl_w)

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
    if slo_tpot_s is not None:
        # a one-token answer has no inter-token gap: it meets any TPOT threshold
        good &= ~(lat.tpot > slo_tpot_s)
    num_good = int(good.sum())

    def rate(x: float) -> float:
        return x / dur if math.isfinite(dur) else float("nan")

    return LatencySummary(
        num_requests=n, num_completed=num_done, num_unfinished=n - num_done, duration_s=float(duration_s),
        ttft=Percentiles.of(lat.ttft), tpot=Percentiles.of(lat.tpot), itl=itl, e2e=Percentiles.of(lat.e2e),
        queueing=Percentiles.of(lat.queueing), output_tokens=out_tok, total_tokens=tot_tok,
        request_throughput=rate(num_done), output_tokens_per_s=rate(out_tok), total_tokens_per_s=rate(tot_tok),
        slo_ttft_s=None if slo_ttft_s is None else float(slo_ttft_s),
        slo_tpot_s=None if slo_tpot_s is None else float(slo_tpot_s), num_meeting_slo=num_good,
        goodput_requests_per_s=rate(num_good), goodput_tokens_per_s=rate(int(out[good].sum())),
        itl_requests_approximate=approx,
        samples={"ttft": _finite_weighted(lat.ttft, None), "tpot": _finite_weighted(lat.tpot, None),
                 "itl": _finite_weighted(itl_v, itl_w), "e2e": _finite_weighted(lat.e2e, None),
                 "queueing": _finite_weighted(lat.queueing, None)},
    )


def _itl_sample(lat: RequestLatencies, out: np.ndarray, n: int, itl_values, itl_offsets, token_gaps, gaps_known):
    """Every gap of the completed requests as ``(values, counts)``, and how many requests count their TPOT."""
    done = lat.completed
    known = np.zeros(n, bool)
    parts_v, parts_w = [], []
    if itl_values is not None or itl_offsets is not None:
        if itl_values is None or itl_offsets is None:
            raise MetricsError("itl_values and itl_offsets go together", field="itl_offsets")
        vals = np.asarray(itl_values, dtype=np.float64).ravel()
        offs = np.asarray(itl_offsets, dtype=np.int64).ravel()
        if offs.shape[0] != n + 1 or offs[0] != 0 or offs[-1] != vals.shape[0] or np.any(np.diff(offs) < 0):
            raise MetricsError(f"must be {n + 1} non-decreasing offsets from 0 to len(itl_values)", field="itl_offsets")
        owner = np.repeat(np.arange(n), np.diff(offs))
        parts_v.append(vals[done[owner]])
        parts_w.append(np.ones(int(done[owner].sum()), np.int64))
        known |= True
    elif token_gaps is not None:
        known = np.ones(n, bool) if gaps_known is None else np.asarray(gaps_known, bool).ravel()
        if known.shape[0] != n:
            raise MetricsError(f"has {known.shape[0]} entries, expected {n}", field="gaps_known")
        parts_v.append(np.asarray(token_gaps.values, np.float64))
        parts_w.append(np.asarray(token_gaps.counts, np.int64))
    rest = done & ~known & (out >= 2)
    parts_v.append(lat.tpot[rest])
    parts_w.append(out[rest] - 1)
    return np.concatenate(parts_v), np.concatenate(parts_w), int(rest.sum())


__all__ = ["LATENCY_METRICS", "MetricsError", "Percentiles", "RequestLatencies", "LatencySummary", "TokenGaps",
           "engine_token_gaps", "request_latencies", "summarize_latency", "weighted_percentiles"]
