"""A run's latency and load per window of time, for traffic that changes over the run (stages, a day).

:func:`time_windows` cuts a run with arrivals in seconds into windows of ``window_s`` seconds: the requests
that *arrived* in a window give its latency percentiles (TTFT, TPOT = (E2E - TTFT) / (output - 1), E2E), the
requests that *finished* in it its output throughput, and, when the run recorded its step series
(``simulate(..., record_steps=True)``), the steps that *ran* in it its queue: waiting and running requests and
KV usage, each a mean weighted by step time, and the most waiting.

>>> rows = time_windows(result, 60.0)   # doctest: +SKIP
>>> rows[3]["ttft_p90_ms"], rows[3]["waiting_max"]   # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulator.base.errors import FieldError

#: Most windows one run is cut into (a day in 1-minute windows is 1,440).
MAX_WINDOWS = 100_000


def time_windows(result: Any, window_s: float) -> list[dict[str, Any]]:
    """One dict per window from 0 s to the run's last finish (or arrival).

    Keys: ``start_s``, ``end_s``, ``arrived``, ``finished``, ``unfinished`` (arrived in the window, never
    finished), ``ttft_p50_ms``, ``ttft_p90_ms``, ``tpot_p90_ms``, ``e2e_p90_ms`` (None where no request of
    the window finished), ``output_tokens_per_s``; with a step series also ``waiting_mean``,
    ``waiting_max``, ``running_mean``, ``kv_usage_mean``.

    Raises
    ------
    ValueError
        Arrivals not in seconds, or ``window_s`` not a positive number giving at most :data:`MAX_WINDOWS`.
    """
    if getattr(result, "arrival_unit", "step") != "s":
        raise FieldError("the workload's arrivals must be in seconds", field="windows")
    req = result.requests
    arrival = np.asarray(req["arrival"], np.float64)
    first = np.asarray(req["first_token_time_s"], np.float64)
    finish = np.asarray(req["finish_time_s"], np.float64)
    out_tokens = np.asarray(req["num_output_tokens"], np.float64)
    end = float(np.nanmax(np.concatenate((finish, arrival)))) if arrival.size else 0.0
    if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not math.isfinite(window_s) \
            or window_s <= 0 or end / window_s > MAX_WINDOWS:
        raise FieldError(f"window_s must be a number of seconds > 0 giving at most {MAX_WINDOWS:,} "
                         f"windows over the run's {end:,.0f} s, got {window_s!r}", field="windows")
    count = max(1, math.ceil(end / window_s)) if end > 0 else 1
    edges = np.arange(count + 1) * float(window_s)
    rows = _latency_rows(edges, arrival, first, finish, out_tokens)
    steps = getattr(result, "steps", None)
    if steps and "time_s" in steps:
        _add_queue(rows, edges, steps)
    return rows


def _percentile_ms(values: np.ndarray, q: float) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q) * 1000.0) if values.size else None


def _latency_rows(edges: np.ndarray, arrival: np.ndarray, first: np.ndarray, finish: np.ndarray,
                  out_tokens: np.ndarray) -> list[dict[str, Any]]:
    count = edges.size - 1
    by_arrival = np.clip(np.searchsorted(edges, arrival, side="right") - 1, 0, count - 1)
    done = np.isfinite(finish)
    by_finish = np.clip(np.searchsorted(edges, np.where(done, finish, 0.0), side="right") - 1, 0, count - 1)
    ttft = first - arrival
    e2e = finish - arrival
    many = out_tokens > 1
    tpot = np.where(many, (finish - first) / np.maximum(out_tokens - 1, 1), np.nan)
    width = edges[1] - edges[0]
    tokens = np.bincount(by_finish[done], weights=out_tokens[done], minlength=count)
    rows = []
    for w in range(count):
        mine = by_arrival == w
        rows.append({
            "start_s": float(edges[w]), "end_s": float(edges[w + 1]), "arrived": int(mine.sum()),
            "finished": int((done & (by_finish == w)).sum()), "unfinished": int((mine & ~done).sum()),
            "ttft_p50_ms": _percentile_ms(ttft[mine], 50), "ttft_p90_ms": _percentile_ms(ttft[mine], 90),
            "tpot_p90_ms": _percentile_ms(tpot[mine], 90), "e2e_p90_ms": _percentile_ms(e2e[mine], 90),
            "output_tokens_per_s": float(tokens[w] / width),
        })
    return rows


def _add_queue(rows: list[dict[str, Any]], edges: np.ndarray, steps: dict[str, np.ndarray]) -> None:
    """Step-time-weighted means of waiting, running and KV usage, and the most waiting, per window."""
    t = np.asarray(steps["time_s"], np.float64)
    if t.size == 0:
        return
    dt = np.diff(np.concatenate(([0.0], t)))  # each step's length: from the previous step's end
    count = edges.size - 1
    at = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, count - 1)
    weight = np.bincount(at, weights=dt, minlength=count)
    waiting = np.asarray(steps["num_waiting"], np.float64)
    most = np.zeros(count)
    np.maximum.at(most, at, waiting)
    series = {"waiting_mean": waiting, "running_mean": np.asarray(steps["num_running"], np.float64),
              "kv_usage_mean": np.asarray(steps["kv_usage"], np.float64)}
    means = {k: np.bincount(at, weights=v * dt, minlength=count) for k, v in series.items()}
    for w, row in enumerate(rows):
        busy = weight[w] > 0
        for key, total in means.items():
            row[key] = float(total[w] / weight[w]) if busy else 0.0
        row["waiting_max"] = int(most[w])
