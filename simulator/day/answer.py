"""What a day's run costs and how often it met the SLO: GPU-hours, cost against a fleet fixed at the peak, and
SLO attainment per hour.

>>> a = answer_day(result, gpus_per_replica=4, price_per_gpu_hour=3.5, slo_ttft_s=2.0, slo_tpot_s=0.05)  # doctest: +SKIP
>>> a.cost, a.fixed_peak_cost, a.attainment, a.worst_hours(3)                                          # doctest: +SKIP

*Attainment* is the share of requests that met every target given: TTFT (arrival to first token) at most
``slo_ttft_s`` and TPOT (mean gap after the first token, vLLM bench's definition) at most ``slo_tpot_s``; a
request that never finished, or was dropped as unservable, missed. Hours are counted by arrival, from the
first sync's hour (hour 0 starts at time 0). *GPU-hours* are every replica's billed seconds (asked for to gone,
:class:`~simulator.day.fleet_day.PodRecord`) times ``gpus_per_replica`` / 3600; the *fixed peak* is the most
replicas the policy ever had asked for (ready + starting), kept for the whole run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.base import ConfigError
from simulator.day.fleet_day import DayResult
from simulator.engine import request_latencies

HOUR_S = 3600.0


@dataclass(frozen=True)
class HourFigures:
    """One hour of the day (by arrival)."""

    hour: int
    requests: int
    attainment: float | None  # share, None when no request arrived
    ttft_p90_s: float | None
    tpot_p90_s: float | None
    mean_replicas: float  # ready replicas, mean over the hour's syncs
    gpu_hours: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _pct(x: np.ndarray, q: float) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else None


def _overlap_s(pods, end_s: float, lo: float, hi: float) -> float:
    return sum(max(0.0, min(hi, p.gone_s if p.gone_s is not None else end_s) - max(lo, p.asked_s)) for p in pods)


@dataclass(frozen=True, eq=False)
class DayAnswer:
    """The figures of one day's run (module docstring for the definitions)."""

    gpu_hours: float
    cost: float
    peak_replicas: int
    fixed_peak_gpu_hours: float
    fixed_peak_cost: float
    attainment: float
    requests: int
    unfinished: int
    replicas_started: int
    hours: tuple[HourFigures, ...]
    slo_ttft_s: float | None
    slo_tpot_s: float | None

    @property
    def saving(self) -> float:
        """Share of the fixed-peak cost the policy saved (negative: it cost more)."""
        return 1.0 - self.gpu_hours / self.fixed_peak_gpu_hours if self.fixed_peak_gpu_hours else 0.0

    def worst_hours(self, k: int = 3) -> list[HourFigures]:
        """The ``k`` hours with the lowest attainment (ties: the earlier hour)."""
        scored = [h for h in self.hours if h.attainment is not None]
        return sorted(scored, key=lambda h: (h.attainment, h.hour))[:k]

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "hours"}
        d["saving"] = self.saving
        d["hours"] = [h.to_dict() for h in self.hours]
        d["worst_hours"] = [h.hour for h in self.worst_hours()]
        return d


def _positive(name: str, v: Any, *, optional: bool = False) -> float | None:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"must be a number > 0, got {v!r}", field=name)
    return float(v)


def answer_day(result: DayResult, *, gpus_per_replica: int = 1, price_per_gpu_hour: float = 1.0,
               slo_ttft_s: float | None = None, slo_tpot_s: float | None = None) -> DayAnswer:
    """GPU-hours, cost and SLO attainment of ``result`` (module docstring)."""
    gpus = _positive("gpus_per_replica", gpus_per_replica)
    price = _positive("price_per_gpu_hour", price_per_gpu_hour)
    slo_ttft_s = _positive("slo_ttft_s", slo_ttft_s, optional=True)
    slo_tpot_s = _positive("slo_tpot_s", slo_tpot_s, optional=True)
    req = result.requests
    lat = request_latencies(arrival_time=req["arrival"], first_token_time=req["first_token_time_s"],
                            finish_time=req["finish_time_s"], num_output_tokens=req["num_output_tokens"])
    ok = lat.completed.copy()
    if slo_ttft_s is not None:
        ok &= lat.ttft <= slo_ttft_s
    if slo_tpot_s is not None:
        ok &= ~(lat.tpot > slo_tpot_s)  # one-token answers have no TPOT: they meet it
    n = ok.size
    cols = result.replicas_over_time()
    peak = max(1, int((cols["ready"] + cols["starting"]).max()) if result.samples else len(result.pods))
    gpu_h = result.billed_replica_s() * gpus / HOUR_S
    fixed_h = peak * result.end_s * gpus / HOUR_S
    hours = _hours(result, lat, ok, gpus)
    return DayAnswer(gpu_hours=gpu_h, cost=gpu_h * price, peak_replicas=peak, fixed_peak_gpu_hours=fixed_h,
                     fixed_peak_cost=fixed_h * price, attainment=float(ok.mean()) if n else 1.0, requests=n,
                     unfinished=int((~lat.completed).sum()), replicas_started=result.started, hours=tuple(hours),
                     slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s)


def _hours(result: DayResult, lat, ok: np.ndarray, gpus: float) -> list[HourFigures]:
    arrival = np.asarray(result.requests["arrival"], np.float64)
    hour = (arrival // HOUR_S).astype(np.int64)
    count = int(max(hour.max(initial=0) + 1, math.ceil(result.end_s / HOUR_S)))
    cols = result.replicas_over_time()
    t, ready = cols["time_s"], cols["ready"]
    out = []
    for h in range(count):
        sel = hour == h
        in_h = (t > h * HOUR_S) & (t <= (h + 1) * HOUR_S)
        out.append(HourFigures(
            hour=h, requests=int(sel.sum()), attainment=float(ok[sel].mean()) if sel.any() else None,
            ttft_p90_s=_pct(lat.ttft[sel], 90), tpot_p90_s=_pct(lat.tpot[sel], 90),
            mean_replicas=float(ready[in_h].mean()) if in_h.any() else 0.0,
            gpu_hours=_overlap_s(result.pods, result.end_s, h * HOUR_S, (h + 1) * HOUR_S) * gpus / HOUR_S))
    return out


__all__ = ["HOUR_S", "DayAnswer", "HourFigures", "answer_day"]
