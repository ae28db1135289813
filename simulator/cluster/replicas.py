"""N identical engine instances (data-parallel replicas) behind a router.

>>> from simulator.cluster.replicas import simulate_cluster
>>> res = simulate_cluster(workload, config, 4, routing="weighted:prefix-affinity:3,queue-depth:1")  # doctest: +SKIP
>>> res.totals["prefix_cache_hit_rate"], res.load.request_share                                     # doctest: +SKIP

Each instance is a full :class:`simulator.engine.core.FastEngine` with its own KV
cache and scheduler, run in external mode: it receives only the requests the
router sends it. Arrivals are processed in time order (the workload's stable
arrival order); before each decision the instances the policy reads are
advanced to the arrival time, the router scores them
(:mod:`simulator.cluster.routing`) and the request is submitted to the chosen one.
The instances and the state the router reads of them lie along an instance
axis (:class:`simulator.cluster.fleet.Fleet`: arrays of shape (N,), the caches one
N x keys matrix); each instance's schedule steps are its own kernel calls. A
:class:`Deployment` is the same simulation as an item of
:func:`simulator.batch.runner.simulate`'s batch. With a prefix view delayed by
``router_delay_s``, the router also samples the instances' caches that long
before each arrival (see ``docs/cluster.md``).

Results: one :class:`InstanceResult` per instance (a :class:`SimResult` over
the requests it was given only) and cluster totals in which additive counters
are summed, the prefix hit rate is token-weighted (cluster hits / cluster
queried tokens, so idle instances do not dilute it) and the latency summary
covers every request. :class:`LoadBalance` reports each instance's share of
requests and of prompt + output tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.cluster.fleet import Fleet
from simulator.cluster.routing import MAX_INSTANCES, ClusterError, Router, RoutingPolicy, parse_routing
from simulator.engine import EngineConfig, LatencySummary, SimResult, TokenGaps, WorkloadPrep, assemble_result
from simulator.engine.steady_state import queue_growth
from simulator.workload import Workload

#: Totals that add up over instances.
SUMMED_TOTALS = (
    "finished", "preemptions", "prefix_cache_queries", "prefix_cache_hits", "prefix_cache_requests",
    "preempted_prefix_cache_queries", "preempted_prefix_cache_hits", "preempted_prefix_cache_requests",
    "num_steps", "num_schedule_calls", "total_scheduled_tokens", "total_prefill_tokens",
    "total_decode_tokens", "dropped_unservable", "recomputed_tokens", "requests_cut_short",
    "unfinished", "requests_preempted_at_least_once", "prefix_cache_evictions",
)
#: Percentiles :func:`smallest_replicas` may judge SLOs at.
SLO_PERCENTILES = ("p50", "p90", "p99")

_STATUS_DONE = ("finished", "dropped_unservable")


def _check_int(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ClusterError(f"must be a whole number, got {v!r}", field=name)
    if not lo <= int(v) <= hi:
        raise ClusterError(f"must be between {lo} and {hi}, got {v}", field=name)
    return int(v)


def _check_seconds(name: str, v: Any, *, allow_none: bool = False, positive: bool = False) -> float | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        raise ClusterError(f"must be a finite number of seconds, got {v!r}", field=name)
    if v < 0 or (positive and v == 0):
        raise ClusterError(f"must be {'> 0' if positive else '>= 0'} seconds, got {v!r}", field=name)
    return float(v)


#: Most memory the instances' prefix-cache tables may take together (N x content keys x 8 bytes).
MAX_CACHE_TABLE_BYTES = 4 * 1024 ** 3


def _check_cache_tables(config: EngineConfig, num_instances: int, prep: WorkloadPrep) -> None:
    """Refuse a cluster whose N hash tables (one entry per content key each) would not fit in memory."""
    if not config.enable_prefix_caching:
        return
    nkeys = prep.keys(1 if config.prefix_cache == "radix" else config.block_size).num_keys
    need = num_instances * nkeys * 8
    if need > MAX_CACHE_TABLE_BYTES:
        raise ClusterError(
            f"{num_instances} instances x {nkeys:,} content keys of this workload need "
            f"{need / 1024 ** 3:.1f} GiB of prefix-cache tables, more than the {MAX_CACHE_TABLE_BYTES // 1024 ** 3} GiB "
            "limit; use fewer instances or fewer (or shorter) requests", field="num_instances")


def _check_delay_unit(delay: float, workload: Workload) -> None:
    if delay > 0 and workload.arrival_unit != "s":
        raise ClusterError("needs arrivals in seconds (this workload's arrivals are engine steps)", field="router_delay_s")


@dataclass(frozen=True)
class LoadBalance:
    """How evenly the router spread the work.

    Attributes
    ----------
    requests : ndarray of int64, shape (N,)
        Requests routed to each instance (dropped ones included).
    tokens : ndarray of int64, shape (N,)
        Prompt + output tokens of those requests.  # tokens
    request_share, token_share : ndarray of float64, shape (N,)
        Fractions of the cluster's requests and tokens (sum to 1).
    request_imbalance, token_imbalance : float
        max / mean over all N instances (idle ones included): 1.0 is perfect
        balance, N means one instance took everything.
    """

    requests: np.ndarray
    tokens: np.ndarray
    request_share: np.ndarray
    token_share: np.ndarray
    request_imbalance: float
    token_imbalance: float

    @classmethod
    def of(cls, assign: np.ndarray, tokens: np.ndarray, num_instances: int) -> LoadBalance:
        req = np.bincount(assign, minlength=num_instances).astype(np.int64)
        tok = np.bincount(assign, weights=tokens, minlength=num_instances).astype(np.int64)

        def share(x: np.ndarray) -> tuple[np.ndarray, float]:
            s = x.sum()
            if s == 0:
                return np.zeros(num_instances), 1.0
            return x / s, float(x.max() / x.mean())

        rs, ri = share(req)
        ts, ti = share(tok)
        return cls(req, tok, rs, ts, ri, ti)

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests.tolist(), "tokens": self.tokens.tolist(),
                "request_share": self.request_share.tolist(), "token_share": self.token_share.tolist(),
                "request_imbalance": self.request_imbalance, "token_imbalance": self.token_imbalance}


@dataclass(frozen=True, eq=False)
class InstanceResult:
    """One instance's outcome over the requests routed to it.

    Attributes
    ----------
    index : int
    request_index : ndarray of int64, shape (m,)
        Workload indices of its requests (ascending).
    result : SimResult
        Totals of its own run (``unfinished`` counts its requests only, so a
        request routed elsewhere is never its unfinished) and per-request
        columns for its ``m`` requests.
    latency : LatencySummary or None
        Its requests' latency (arrivals in seconds only).
    """

    index: int
    request_index: np.ndarray
    result: SimResult
    latency: LatencySummary | None

    @property
    def totals(self) -> dict[str, Any]:
        return self.result.totals

    def to_dict(self, *, requests: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "totals": dict(self.result.totals),
                             "latency": None if self.latency is None else self.latency.to_dict()}
        if requests:
            d["request_index"] = self.request_index.tolist()
        return d


@dataclass(frozen=True, eq=False)
class ClusterResult:
    """A cluster simulation's outcome.

    Attributes
    ----------
    num_instances : int
    routing : str
        Canonical policy string.
    router_delay_s : float  # s
    instances : tuple of InstanceResult, length N
    totals : dict
        Summed counters (:data:`SUMMED_TOTALS`), ``prefix_cache_hit_rate``
        (cluster hits / cluster queried tokens), ``peak_kv_usage`` (max over
        instances), ``mean_kv_usage`` (mean over instances, idle ones count
        as 0), ``duration_s`` (max over instances, seconds workloads),
        ``num_instances``.
    requests : dict of str to ndarray, shape (n,)
        Every request's columns (as :class:`SimResult.requests`), taken from
        the instance it was routed to, plus ``instance``.
    latency : LatencySummary or None
        All requests (arrivals in seconds only; SLO goodput when given).
    load : LoadBalance
    arrival_unit : {"step", "s"}
    """

    num_instances: int
    routing: str
    router_delay_s: float
    instances: tuple[InstanceResult, ...]
    totals: dict[str, Any]
    requests: dict[str, Any]
    latency: LatencySummary | None
    load: LoadBalance
    arrival_unit: str = "s"

    @property
    def assignment(self) -> np.ndarray:
        """Instance of each request, shape (n,)."""
        return self.requests["instance"]

    def to_dict(self, *, requests: bool = False) -> dict[str, Any]:
        """JSON-ready dict: settings, totals, latency, load, instances (per-request columns with ``requests``)."""
        d: dict[str, Any] = {
            "num_instances": self.num_instances, "routing": self.routing, "router_delay_s": self.router_delay_s,
            "totals": dict(self.totals), "latency": None if self.latency is None else self.latency.to_dict(),
            "load": self.load.to_dict(), "instances": [i.to_dict(requests=requests) for i in self.instances],
        }
        if requests:
            d["requests"] = {k: (list(v) if isinstance(v, tuple) else v.tolist()) for k, v in self.requests.items()}
        return d


@dataclass(frozen=True)
class Deployment:
    """``num_instances`` replicas of ``config`` behind a router: an item of a simulation batch.

    :func:`simulator.batch.runner.simulate` takes these beside plain
    :class:`EngineConfig` items, so one batch (and its worker processes) can
    vary the instance count and the routing policy; each gives a
    :class:`ClusterResult` equal to :func:`simulate_cluster` with the same
    arguments. Validated on construction (:class:`ClusterError` naming the
    field); ``routing`` is kept in its canonical string form. ``slo_ttft_s`` and
    ``slo_itl_s`` are the goodput thresholds of its latency summaries.
    """

    config: EngineConfig
    num_instances: int = 1
    routing: str = "round-robin"
    router_delay_s: float = 0.0
    seed: int = 0
    slo_ttft_s: float | None = None
    slo_itl_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.config, EngineConfig):
            raise ClusterError("must be an EngineConfig", field="config")
        object.__setattr__(self, "num_instances", _check_int("num_instances", self.num_instances, 1, MAX_INSTANCES))
        object.__setattr__(self, "routing", str(parse_routing(self.routing)))
        object.__setattr__(self, "router_delay_s", _check_seconds("router_delay_s", self.router_delay_s))
        object.__setattr__(self, "seed", _check_int("seed", self.seed, 0, 2**63 - 1))
        for name in ("slo_ttft_s", "slo_itl_s"):
            object.__setattr__(self, name, _check_seconds(name, getattr(self, name), allow_none=True, positive=True))

    def check(self, workload: Workload, prep: WorkloadPrep) -> None:
        """Raise :class:`ClusterError` if this deployment cannot run ``workload`` (a router delay needs
        arrivals in seconds; the instances' prefix-cache tables must fit the memory limit)."""
        _check_delay_unit(self.router_delay_s, workload)
        _check_cache_tables(self.config, self.num_instances, prep)

    def run(self, workload: Workload, *, prep: WorkloadPrep | None = None, record_steps: bool = False,
            max_step_points: int | None = None, progress: Callable[[float], None] | None = None) -> ClusterResult:
        """Simulate ``workload`` on this deployment (:func:`simulate_cluster`)."""
        return simulate_cluster(workload, self.config, self.num_instances, routing=self.routing,
                                router_delay_s=self.router_delay_s, seed=self.seed, slo_ttft_s=self.slo_ttft_s,
                                slo_itl_s=self.slo_itl_s, record_steps=record_steps,
                                max_step_points=max_step_points, progress=progress, prep=prep)


def _slice_result(res: SimResult, idx: np.ndarray) -> SimResult:
    """``res`` restricted to requests ``idx``: columns sliced, ``unfinished`` recounted over them."""
    req = {}
    for k, v in res.requests.items():
        req[k] = tuple(v[i] for i in idx.tolist()) if isinstance(v, tuple) else v[idx]
    t = dict(res.totals)
    t["unfinished"] = int(sum(1 for s in req["status"] if s not in _STATUS_DONE))
    return SimResult(totals=t, requests=req, steps=res.steps, arrival_unit=res.arrival_unit,
                     token_gaps=res.token_gaps)


def simulate_cluster(
    workload: Workload,
    config: EngineConfig,
    num_instances: int,
    *,
    routing: str | RoutingPolicy = "round-robin",
    router_delay_s: float = 0.0,
    seed: int = 0,
    slo_ttft_s: float | None = None,
    slo_itl_s: float | None = None,
    record_steps: bool = False,
    max_step_points: int | None = None,
    progress: Callable[[float], None] | None = None,
    prep: WorkloadPrep | None = None,
) -> ClusterResult:
    """Simulate ``workload`` on ``num_instances`` copies of ``config`` behind a router.

    Parameters
    ----------
    workload : Workload
    config : EngineConfig
        Every instance's configuration (its own ``num_gpu_blocks`` of KV cache).
    num_instances : int
        1 to :data:`simulator.cluster.routing.MAX_INSTANCES` (256).
    routing : str or RoutingPolicy
        ``round-robin``, ``least-loaded``, ``prefix-affinity``, ``random`` or
        ``weighted:SCORER:W,...`` (see :mod:`simulator.cluster.routing`).
    router_delay_s : float
        Age of the router's prefix-cache view, seconds (>= 0; > 0 needs
        arrivals in seconds). Load signals are always current.  # s
    seed : int
        Seed of the ``random`` policy (other policies are deterministic).
    slo_ttft_s, slo_itl_s : float, optional
        Goodput thresholds passed to the latency summaries.  # s
    record_steps : bool
        Keep each instance's step series (``instances[i].result.steps``).
    max_step_points : int, optional
        Downsample each step series to at most this many points.
    progress : callable, optional
        Called with the fraction of requests routed, in [0, 1].
    prep : WorkloadPrep, optional
        The workload's precomputation, when the caller already has it.

    Returns
    -------
    ClusterResult

    Raises
    ------
    ClusterError
        A bad argument (the message names it).
    """
    if not isinstance(workload, Workload):
        raise ClusterError("must be a simulator.workload.requests.Workload", field="workload")
    d = Deployment(config, num_instances, routing, router_delay_s, seed, slo_ttft_s, slo_itl_s)  # validates
    if max_step_points is not None and (not isinstance(max_step_points, int) or max_step_points < 2):
        raise ClusterError("must be at least 2", field="max_step_points")
    wl = workload
    n = wl.n
    prep = prep or WorkloadPrep(wl)
    d.check(wl, prep)
    N, policy, delay, seed = d.num_instances, parse_routing(d.routing), d.router_delay_s, d.seed
    slo_ttft_s, slo_itl_s = d.slo_ttft_s, d.slo_itl_s
    fleet = Fleet(wl, config, N, prep=prep, record_steps=record_steps)
    fleet.start()
    router = Router(policy, fleet, prompt_len=wl.prompt_len, seed=seed)
    order = prep.order.tolist()
    arr = prep.arrival_sorted.tolist()
    stateful = policy.stateful and N > 1
    affinity = "prefix-affinity" in policy.uses and N > 1
    delayed = affinity and delay > 0
    assign = np.full(n, -1, np.int64)

    # Observations of the delayed prefix view happen at arrival - delay, in
    # the same time order (ties: observe first); those before 0 see empty caches.
    j = 0  # next observation (arrival position)
    if delayed:
        while j < n and arr[j] - delay < 0:
            j += 1
    step = max(1, n // 100)
    for p in range(n):
        t = arr[p]
        if delayed:
            while j < n and arr[j] - delay <= t:
                fleet.advance(arr[j] - delay)
                router.observe(order[j])
                j += 1
        q = order[p]
        if stateful:
            fleet.advance(t)
            if affinity and not delayed:
                router.observe(q)
        i = router.choose(q)
        fleet.submit(i, q, t)
        assign[q] = i
        if progress is not None and (p % step == 0 or p == n - 1):
            progress((p + 1) / n)
    fleet.finish()
    return _assemble(wl, fleet.engines, assign, policy, delay, slo_ttft_s, slo_itl_s, record_steps, max_step_points)


def _assemble(wl: Workload, engines: list, assign: np.ndarray, policy: RoutingPolicy, delay: float,
              slo_ttft_s: float | None, slo_itl_s: float | None, record_steps: bool,
              max_step_points: int | None) -> ClusterResult:
    N = len(engines)
    n = wl.n
    full = [assemble_result(e, record_steps, max_step_points) for e in engines]  # serving time included
    instances = []
    merged: dict[str, Any] = {}
    for k, v in full[0].requests.items():
        merged[k] = list(v) if isinstance(v, tuple) else np.array(v, copy=True)
    for i, res in enumerate(full):
        idx = np.flatnonzero(assign == i)
        for k, v in res.requests.items():
            if isinstance(v, tuple):
                col = merged[k]
                for r in idx.tolist():
                    col[r] = v[r]
            else:
                merged[k][idx] = v[idx]
        sliced = _slice_result(res, idx)
        instances.append(InstanceResult(i, idx, sliced, sliced.latency(slo_ttft_s, slo_itl_s)))
    for k, v in list(merged.items()):
        if isinstance(v, list):
            merged[k] = tuple(v)
    merged["instance"] = assign.copy()

    totals: dict[str, Any] = {"num_instances": N, "num_requests": n}
    for k in SUMMED_TOTALS:
        totals[k] = int(sum(inst.totals.get(k, 0) for inst in instances))
    q_ = totals["prefix_cache_queries"]
    totals["prefix_cache_hit_rate"] = totals["prefix_cache_hits"] / q_ if q_ else 0.0
    totals["peak_kv_usage"] = max(float(inst.totals["peak_kv_usage"]) for inst in instances)
    totals["mean_kv_usage"] = float(np.mean([inst.totals["mean_kv_usage"] for inst in instances]))
    totals["peak_running"] = max(int(inst.totals["peak_running"]) for inst in instances)
    if wl.arrival_unit == "s":
        totals["duration_s"] = max(float(inst.totals["duration_s"]) for inst in instances)
    load = LoadBalance.of(assign, wl.prompt_len + wl.output_len, N)
    return ClusterResult(
        num_instances=N, routing=str(policy), router_delay_s=delay, instances=tuple(instances), totals=totals,
        requests=merged, latency=SimResult(totals=totals, requests=merged, steps=None, arrival_unit=wl.arrival_unit,
                                           token_gaps=TokenGaps.concat(r.token_gaps for r in full),
                                           ).latency(slo_ttft_s, slo_itl_s),
        load=load,
        arrival_unit=wl.arrival_unit)


# --------------------------------------------------------------------------- replicas for a rate


@dataclass(frozen=True)
class ReplicaTrial:
    """One instance count tried by :func:`smallest_replicas`.

    ``ttft_s`` and ``itl_s`` are the chosen percentile over all requests
    (ITL over every token gap; None when no request completed); ``meets`` needs
    every request finished (none dropped or unfinished) and both figures within
    their SLO. ``tpot_s``: the same percentile of each request's mean gap (vLLM
    bench's TPOT), shown beside ITL, not judged.
    """

    num_instances: int
    ttft_s: float | None  # s
    itl_s: float | None  # s
    finished: int
    dropped: int
    unfinished: int
    prefix_cache_hit_rate: float
    request_imbalance: float
    meets: bool
    tpot_s: float | None = None  # s
    queue_growth_per_s: float | None = None  # requests/s: set when the queue was still growing (overloaded)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReplicaSearch:
    """The answer of :func:`smallest_replicas`.

    Attributes
    ----------
    num_instances : int or None
        Smallest N meeting the SLOs, or None when even ``max_instances`` does not.
    percentile : str
        ``p90`` (default) or ``p99``, ``p50``: the percentile of TTFT and of ITL
        compared with the SLOs.
    trials : tuple of ReplicaTrial
        Every N simulated, ascending.
    reason : str
    """

    num_instances: int | None
    percentile: str
    slo_ttft_s: float | None
    slo_itl_s: float | None
    routing: str
    max_instances: int
    trials: tuple[ReplicaTrial, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("num_instances", "percentile", "slo_ttft_s", "slo_itl_s", "routing",
                                           "max_instances", "reason")}
        d["trials"] = [t.to_dict() for t in self.trials]
        return d


def _pct(p: Any, name: str) -> float | None:
    v = getattr(p, name)
    return None if v != v else float(v)


def smallest_replicas(
    workload: Workload,
    config: EngineConfig,
    *,
    slo_ttft_s: float | None,
    slo_itl_s: float | None,
    routing: str | RoutingPolicy = "round-robin",
    router_delay_s: float = 0.0,
    max_instances: int = 64,
    percentile: str = "p90",
    seed: int = 0,
    simulate: Callable[[int], ClusterResult] | None = None,
) -> ReplicaSearch:
    """The smallest number of instances whose TTFT and ITL percentiles meet the SLOs at this workload's rate.

    An instance count meets the SLOs when every request finishes (none
    dropped as unservable, none left unfinished) and the ``percentile`` of
    TTFT over all requests is <= ``slo_ttft_s`` and that of the inter-token
    latency (every token gap, ``LatencySummary.itl``) is <= ``slo_itl_s``.

    Search: 1, 2, 4, 8 ... up to ``max_instances`` until one meets the SLOs,
    then bisection between the last failing and the first meeting count. This
    assumes that adding instances never hurts; the answer N is always checked
    against N - 1 (simulated and failing, unless N is 1), but counts between
    other tried points are not simulated. Every count simulated is in
    ``trials``.

    Parameters
    ----------
    workload : Workload
        Arrivals in seconds (the rate is the workload's).
    config : EngineConfig
        One instance (its cost model sets the step times).
    slo_ttft_s, slo_itl_s : float or None
        At least one is required.  # s
    routing, router_delay_s, seed
        As :func:`simulate_cluster`.
    max_instances : int
        Largest N tried (1 to 256).
    percentile : {"p90", "p99", "p50"}
    simulate : callable, optional
        ``N -> ClusterResult`` of ``N`` replicas in place of :func:`simulate_cluster` of ``config`` (e.g. ``N`` DP
        groups: :func:`simulator.cluster.data_parallel.simulate_dp` with ``replicas=N``).

    Raises
    ------
    ClusterError
        A bad argument, or a workload with arrivals in steps.
    """
    if not isinstance(workload, Workload):
        raise ClusterError("must be a simulator.workload.requests.Workload", field="workload")
    if workload.arrival_unit != "s":
        raise ClusterError("smallest_replicas needs arrivals in seconds (latency SLOs are in seconds)", field="workload")
    slo_ttft_s = _check_seconds("slo_ttft_s", slo_ttft_s, allow_none=True, positive=True)
    slo_itl_s = _check_seconds("slo_itl_s", slo_itl_s, allow_none=True, positive=True)
    if slo_ttft_s is None and slo_itl_s is None:
        raise ClusterError("give a TTFT or an ITL SLO (or both)", field="slo_ttft_s")
    if percentile not in SLO_PERCENTILES:
        raise ClusterError(f"must be one of {', '.join(SLO_PERCENTILES)}, got {percentile!r}", field="percentile")
    max_n = _check_int("max_instances", max_instances, 1, MAX_INSTANCES)
    policy = parse_routing(routing)
    tried: dict[int, ReplicaTrial] = {}

    def meets(N: int) -> bool:
        if N not in tried:
            tried[N] = _replica_trial(workload, config, N, policy, router_delay_s, seed, slo_ttft_s, slo_itl_s,
                                      percentile, simulate)
        return tried[N].meets

    hi = smallest_meeting(meets, max_n)
    trials = tuple(tried[k] for k in sorted(tried))
    slo_txt = " and ".join(s for s in (
        None if slo_ttft_s is None else f"{percentile} TTFT <= {slo_ttft_s:g} s",
        None if slo_itl_s is None else f"{percentile} ITL <= {slo_itl_s:g} s") if s)
    if hi is None:
        last = tried[max_n]
        why = ("requests are dropped as unservable (a prompt does not fit one instance's KV cache)"
               if last.dropped else f"{max_n} instances do not meet {slo_txt}")
        reason = f"no instance count up to {max_n} meets the SLOs: {why}"
    else:
        reason = f"{hi} instance{'s meet' if hi > 1 else ' meets'} {slo_txt}" + (
            f"; {hi - 1} do not" if hi > 1 else "")
    return ReplicaSearch(hi, percentile, slo_ttft_s, slo_itl_s, str(policy), max_n, trials, reason)


def _replica_trial(workload: Workload, config: EngineConfig, N: int, policy: RoutingPolicy, router_delay_s: float,
                   seed: int, slo_ttft_s: float | None, slo_itl_s: float | None, percentile: str,
                   simulate: Callable[[int], ClusterResult] | None = None) -> ReplicaTrial:
    """Simulate ``N`` instances and say whether they meet the SLOs (see :func:`smallest_replicas`)."""
    r = simulate(N) if simulate is not None else simulate_cluster(
        workload, config, N, routing=policy, router_delay_s=router_delay_s, seed=seed, slo_ttft_s=slo_ttft_s,
        slo_itl_s=slo_itl_s)
    lat = r.latency
    ttft = _pct(lat.ttft, percentile)
    itl = _pct(lat.itl, percentile)
    t = r.totals
    ok = t["unfinished"] == 0 and t["dropped_unservable"] == 0 and t["finished"] == workload.n
    if slo_ttft_s is not None:
        ok = ok and ttft is not None and ttft <= slo_ttft_s
    if slo_itl_s is not None:
        # a workload of one-token answers has no token gap: it meets any ITL SLO
        ok = ok and (itl is None or itl <= slo_itl_s)
    growth = queue_growth(r.requests["arrival"], r.requests["first_token_time_s"])
    grows = growth is not None and growth.growing
    return ReplicaTrial(N, ttft, itl, int(t["finished"]), int(t["dropped_unservable"]), int(t["unfinished"]),
                        float(t["prefix_cache_hit_rate"]), float(r.load.request_imbalance), bool(ok and not grows),
                        _pct(lat.tpot, percentile), growth.rate_per_s if grows else None)


def smallest_meeting(meets: Callable[[int], bool], max_n: int) -> int | None:
    """The smallest count in 1..max_n that ``meets``, assuming more never hurts: 1, 2, 4 ... until one meets,
    then bisection between the last failing and the first meeting count; None if ``max_n`` fails."""
    lo, hi = 0, None  # lo: largest count known to fail (0 = none), hi: smallest known to meet
    N = 1
    while True:
        if meets(N):
            hi = N
            break
        lo = N
        if N >= max_n:
            break
        N = min(2 * N, max_n)
    if hi is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if meets(mid):
                hi = mid
            else:
                lo = mid
    return hi


__all__ = ["ClusterError", "ClusterResult", "Deployment", "InstanceResult", "LoadBalance", "ReplicaSearch", "ReplicaTrial",
           "SLO_PERCENTILES", "simulate_cluster", "smallest_meeting", "smallest_replicas"]
