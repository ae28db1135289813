"""Autoscaling policies: how many replicas a fleet asks for, decided the way real autoscalers decide.

Every policy answers :meth:`decide` at each of its syncs with the replica count it wants (ready and starting
together), from an :class:`Observation` of the fleet. Four kinds:

* :class:`FixedPolicy`: always the same count (today's cluster; the peak-provisioned baseline).
* :class:`ScheduledPolicy`: a count per hour of the day (a cron-driven scaler), optionally applied ``lead_s``
  early so replicas are ready when the hour starts.
* :class:`HpaPolicy`: the Kubernetes HorizontalPodAutoscaler's algorithm (autoscaling/v2, as llm-d's variant
  autoscaler and KServe drive it) on one fleet metric against a target, with its tolerance, not-ready pods,
  stabilization windows and rate-limiting policies (below), plus a cooldown.
* :class:`OraclePolicy`: knows the future rate: at every sync it asks for what the peak rate of the next
  cold start plus sync needs at a known capacity per replica: the lower bound of what a policy that must
  start replicas ahead of need can cost.

The HPA algorithm (kubernetes.io, "Horizontal Pod Autoscaling", algorithm details and configurable scaling
behavior), with the metric averaged over the ready replicas:

1. ``ratio = metric / target``; within ``1 +- tolerance`` (0.1) nothing changes.
2. Replicas still starting have no metric: for a scale-up they count as idle (0), for a scale-down as at
   the target; the ratio is computed again over ready + starting, and if it is now within the tolerance or
   points the other way, nothing changes. Otherwise ``desired = ceil(ratio x (ready + starting))``.
3. Stabilization: a scale-down takes the largest recommendation of the last ``scale_down_window_s`` (300 s
   by default), a scale-up the smallest of the last ``scale_up_window_s`` (0 s).
4. Rate limits per ``period_s`` (15 s): up by at most ``max(+scale_up_percent %, +scale_up_pods)`` of the
   count at the period's start (100 %, 4 pods), down by at most ``scale_down_percent`` % (100 %).
5. ``min_replicas`` to ``max_replicas``; and no change within ``cooldown_s`` of the last one (0 s: off).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from simulator.base import ConfigError, unknown_message

#: The fleet metrics a reactive policy may target, with their units (averaged over ready replicas).
METRICS = {
    "waiting": "requests waiting per replica",
    "running": "requests running per replica",
    "kv_usage": "fraction of KV blocks in use",
    "ttft_p90_s": "TTFT p90 over the last window, s",
    "tpot_p90_s": "TPOT p90 over the last window, s",
}
#: Most replicas a policy may ask for.
MAX_REPLICAS = 1024


@dataclass(frozen=True)
class Observation:
    """What a policy sees at a sync: time (s), replicas ready and starting, and the fleet metrics."""

    time_s: float
    ready: int
    starting: int
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def current(self) -> int:
        return self.ready + self.starting


def _number(name: str, v: Any, lo: float, hi: float, *, whole: bool = False, lo_open: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo or v > hi \
            or (lo_open and v == lo) or (whole and v != int(v)):
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"must be {kind} {'>' if lo_open else '>='} {lo:g} and <= {hi:g}, got {v!r}", field=name)
    return int(v) if whole else float(v)


class Policy:
    """The interface: :meth:`decide` at each sync (every :attr:`sync_s` seconds)."""

    sync_s: float = 15.0
    kind = "policy"

    def start(self) -> int:
        """Replicas at time 0 (already serving when the day starts)."""
        raise NotImplementedError

    def decide(self, obs: Observation) -> int:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True)
class FixedPolicy(Policy):
    replicas: int = 1
    kind = "fixed"

    def __post_init__(self) -> None:
        _number("policy.replicas", self.replicas, 1, MAX_REPLICAS, whole=True)

    def start(self) -> int:
        return self.replicas

    def decide(self, obs: Observation) -> int:
        return self.replicas


@dataclass(frozen=True)
class ScheduledPolicy(Policy):
    """``replicas[h]`` for hour ``h`` of the run (the list repeats), asked for ``lead_s`` before the hour."""

    replicas: tuple[int, ...] = (1,)
    period_s: float = 3600.0
    lead_s: float = 0.0
    kind = "scheduled"

    def __post_init__(self) -> None:
        if not isinstance(self.replicas, (list, tuple)) or not 1 <= len(self.replicas) <= 10_000:
            raise ConfigError("give 1 to 10,000 replica counts, one per period", field="policy.replicas")
        object.__setattr__(self, "replicas", tuple(
            _number(f"policy.replicas[{i}]", r, 0, MAX_REPLICAS, whole=True) for i, r in enumerate(self.replicas)))
        if not any(self.replicas):
            raise ConfigError("at least one period needs a replica", field="policy.replicas")
        _number("policy.period_s", self.period_s, 1, 1e7)
        _number("policy.lead_s", self.lead_s, 0, self.period_s)

    def at(self, t: float) -> int:
        return self.replicas[int((t + self.lead_s) // self.period_s) % len(self.replicas)]

    def start(self) -> int:
        return max(1, self.at(0.0))

    def decide(self, obs: Observation) -> int:
        return self.at(obs.time_s)


@dataclass
class _Event:
    time_s: float
    before: int
    after: int


@dataclass(frozen=True)
class HpaPolicy(Policy):
    """The Kubernetes HPA on one of :data:`METRICS` (see the module docstring for the algorithm)."""

    metric: str = "running"
    target: float = 32.0
    min_replicas: int = 1
    max_replicas: int = 8
    tolerance: float = 0.1
    sync_s: float = 15.0
    scale_up_window_s: float = 0.0
    scale_down_window_s: float = 300.0
    scale_up_percent: float = 100.0
    scale_up_pods: int = 4
    scale_down_percent: float = 100.0
    period_s: float = 15.0
    cooldown_s: float = 0.0
    kind = "hpa"

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ConfigError(f"{self.metric!r} is not a fleet metric (known: {', '.join(METRICS)})", field="policy.metric")
        _number("policy.target", self.target, 0, 1e9, lo_open=True)
        lo = _number("policy.min_replicas", self.min_replicas, 1, MAX_REPLICAS, whole=True)
        hi = _number("policy.max_replicas", self.max_replicas, 1, MAX_REPLICAS, whole=True)
        if hi < lo:
            raise ConfigError(f"{hi} is below min_replicas {lo}: the policy could never "
                              f"satisfy both", field="policy.max_replicas")
        _number("policy.tolerance", self.tolerance, 0, 1)
        _number("policy.sync_s", self.sync_s, 1, 3600)
        for name in ("scale_up_window_s", "scale_down_window_s", "cooldown_s"):
            _number(f"policy.{name}", getattr(self, name), 0, 86_400)
        if self.scale_down_window_s == 0 and self.cooldown_s == 0 and self.tolerance == 0:
            raise ConfigError("with no stabilization window, no cooldown and no "
                              "tolerance the fleet would change at every sync; give one of them", field="policy.scale_down_window_s")
        _number("policy.scale_up_percent", self.scale_up_percent, 0, 10_000)
        _number("policy.scale_up_pods", self.scale_up_pods, 0, MAX_REPLICAS, whole=True)
        if self.scale_up_percent == 0 and self.scale_up_pods == 0 and hi > lo:
            raise ConfigError("with scale_up_percent 0 too the policy can never scale up", field="policy.scale_up_pods")
        _number("policy.scale_down_percent", self.scale_down_percent, 0, 100)
        _number("policy.period_s", self.period_s, 1, 3600)

    def start(self) -> int:
        return self.min_replicas

    def new_state(self) -> HpaState:
        return HpaState(self)

    def decide(self, obs: Observation) -> int:  # a stateless call: use new_state() for a run
        return HpaState(self).decide(obs)


class HpaState:
    """One run of an :class:`HpaPolicy`: its recommendations and scale events so far."""

    def __init__(self, policy: HpaPolicy) -> None:
        self.p = policy
        self.recommendations: deque[tuple[float, int]] = deque()
        self.events: deque[_Event] = deque()

    def raw(self, obs: Observation) -> int:
        """Steps 1-2: the recommendation from the metric (the current count where nothing should change)."""
        p, ready, starting = self.p, obs.ready, obs.starting
        value = obs.metrics.get(p.metric)
        if value is None or not math.isfinite(value) or ready == 0:
            return obs.current  # no metric: no change (HPA skips the metric)
        ratio = value / p.target
        if abs(ratio - 1.0) <= p.tolerance:
            return obs.current
        if starting:
            assumed = 0.0 if ratio > 1.0 else p.target  # starting pods: idle for a scale-up, at target for down
            again = (value * ready + assumed * starting) / ((ready + starting) * p.target)
            if abs(again - 1.0) <= p.tolerance or (again > 1.0) != (ratio > 1.0):
                return obs.current
            ratio = again
        return max(1, math.ceil(ratio * (ready + starting) - 1e-9))

    def decide(self, obs: Observation) -> int:
        p, now, current = self.p, obs.time_s, obs.current
        self.recommendations.append((now, self.raw(obs)))
        horizon = max(p.scale_up_window_s, p.scale_down_window_s)
        while self.recommendations and self.recommendations[0][0] < now - horizon:
            self.recommendations.popleft()
        recent_up = [r for t, r in self.recommendations if t >= now - p.scale_up_window_s]
        recent_down = [r for t, r in self.recommendations if t >= now - p.scale_down_window_s]
        desired = self.recommendations[-1][1]
        if desired > current:
            desired = max(current, min(recent_up))
        elif desired < current:
            desired = min(current, max(recent_down))
        desired = self._rate_limited(now, current, desired)
        desired = min(max(desired, p.min_replicas), p.max_replicas)
        if desired != current and self.events and now - self.events[-1].time_s < p.cooldown_s:
            desired = current
        if desired != current:
            self.events.append(_Event(now, current, desired))
        return desired

    def _rate_limited(self, now: float, current: int, desired: int) -> int:
        p = self.p
        while self.events and self.events[0].time_s <= now - max(p.period_s, p.cooldown_s):
            self.events.popleft()
        changed = sum(e.after - e.before for e in self.events if e.time_s > now - p.period_s)
        base = current - changed  # the count at the period's start
        if desired > current:
            limit = max(math.floor(base * (1 + p.scale_up_percent / 100.0)), base + p.scale_up_pods)
            return max(current, min(desired, limit))
        if desired < current:
            limit = math.ceil(base * (1 - p.scale_down_percent / 100.0))
            return min(current, max(desired, limit))
        return desired


@dataclass(frozen=True)
class OraclePolicy(Policy):
    """Knows the rate ahead: asks for ``ceil(peak rate over the next lead_s / capacity_per_replica)``.

    ``rates`` are requests per second for consecutive ``period_s`` windows (the workload's own, counted by
    :func:`rate_curve`); ``capacity_per_replica`` the requests per second one replica serves within the SLO
    (from a steady-rate replicas search); ``lead_s`` the cold start plus a sync.
    """

    rates: tuple[float, ...] = (1.0,)
    period_s: float = 60.0
    capacity_per_replica: float = 1.0
    lead_s: float = 150.0
    min_replicas: int = 1
    max_replicas: int = MAX_REPLICAS
    sync_s: float = 15.0
    kind = "oracle"

    def __post_init__(self) -> None:
        if not isinstance(self.rates, (list, tuple)) or not self.rates:
            raise ConfigError("give the rate of each period, requests/s", field="policy.rates")
        object.__setattr__(self, "rates", tuple(_number(f"policy.rates[{i}]", r, 0, 1e9)
                                                for i, r in enumerate(self.rates)))
        _number("policy.period_s", self.period_s, 1, 1e7)
        _number("policy.capacity_per_replica", self.capacity_per_replica, 0, 1e9, lo_open=True)
        _number("policy.lead_s", self.lead_s, 0, 86_400)
        _number("policy.sync_s", self.sync_s, 1, 3600)
        lo = _number("policy.min_replicas", self.min_replicas, 1, MAX_REPLICAS, whole=True)
        if _number("policy.max_replicas", self.max_replicas, 1, MAX_REPLICAS, whole=True) < lo:
            raise ConfigError("below min_replicas", field="policy.max_replicas")

    def need(self, t0: float, t1: float) -> int:
        first, last = int(t0 // self.period_s), int(t1 // self.period_s)
        peak = max((self.rates[i] for i in range(first, last + 1) if 0 <= i < len(self.rates)), default=0.0)
        return min(self.max_replicas, max(self.min_replicas, math.ceil(peak / self.capacity_per_replica - 1e-9)))

    def start(self) -> int:
        return self.need(0.0, self.lead_s)

    def decide(self, obs: Observation) -> int:
        return self.need(obs.time_s, obs.time_s + self.lead_s + self.sync_s)


POLICIES = {"fixed": FixedPolicy, "scheduled": ScheduledPolicy, "hpa": HpaPolicy, "oracle": OraclePolicy}


def policy_from_dict(data: Any) -> Policy:
    """``{"kind": "hpa", "metric": "running", "target": 32, ...}`` as a policy; every error names the field."""
    if not isinstance(data, dict) or data.get("kind") not in POLICIES:
        raise ConfigError(f"must be one of {', '.join(POLICIES)}", field="policy.kind")
    cls = POLICIES[data["kind"]]
    known = {f.name for f in fields(cls)}
    extra = sorted(set(data) - known - {"kind"})
    if extra:
        raise ConfigError(unknown_message(extra[0], sorted(known), what=f"field of a {data['kind']} policy"),
                          field=f"policy.{extra[0]}")
    kw = {k: v for k, v in data.items() if k != "kind"}
    for key in ("replicas", "rates"):
        if isinstance(kw.get(key), list):
            kw[key] = tuple(kw[key])
    return cls(**kw)


def rate_curve(arrival_s, period_s: float) -> tuple[float, ...]:
    """Requests per second in consecutive windows of ``period_s`` seconds of a workload's arrivals."""
    a = np.asarray(arrival_s, np.float64)
    if a.size == 0:
        return (0.0,)
    counts = np.bincount((a // period_s).astype(np.int64))
    return tuple((counts / period_s).tolist())
