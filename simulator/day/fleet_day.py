"""A fleet over time: replicas started and stopped by an autoscaling policy while a workload arrives.

>>> res = simulate_day(workload, config, HpaPolicy(metric="running", target=48, max_replicas=8),
...                    cold_start_s=135.0)                                                      # doctest: +SKIP
>>> res.samples[-1].ready, [p.billed_s(res.end_s) for p in res.pods]                           # doctest: +SKIP

The rules, in the order a sync applies them (every ``policy.sync_s`` seconds, from time 0):

1. Every replica still working is brought to the sync's time; a replica whose cold start has ended is ready.
2. The policy sees an :class:`~simulator.autoscale.Observation`: ready and starting replicas, and the fleet
   metrics averaged over the ready replicas: ``waiting`` (requests waiting on them plus those queued at the
   router), ``running``, ``kv_usage`` (used / usable KV blocks), and ``ttft_p90_s`` / ``tpot_p90_s`` over the
   requests whose first token (TTFT) or last token (TPOT) came in the last :data:`METRIC_WINDOW_S` seconds.
3. It answers the replica count it wants (ready + starting). More: new replicas are asked for now (billed from
   now) and are ready ``cold_start_s`` later. Fewer: replicas still starting go first (newest first, billed until
   now), then ready ones with the fewest requests (ties: the newest); a stopped replica takes no new request and
   finishes what it holds (running and waiting: vLLM's graceful shutdown), billed until its last request ends.

Between syncs each arrival goes to a ready replica (``least-loaded``: fewest waiting + running, then the lowest
KV usage, ties in round-robin order; or ``round-robin`` over the ready replicas); with none ready it queues at
the router and is sent when the next replica becomes ready, at that time. A replica is a full
:class:`simulator.engine.FastEngine` with its own, empty, KV cache. A policy that never changes the fleet
gives the cluster's own answer: ``simulate_day`` with ``FixedPolicy(N)`` equals
:func:`simulator.cluster.simulate_cluster` with N instances and the same routing, request for request.

The run ends when every request has finished (or was dropped as unservable); replicas still alive are billed
until then (:attr:`DayResult.end_s`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.autoscale import HpaPolicy, Observation, Policy
from simulator.base import ConfigError
from simulator.engine import DROPPED, EngineConfig, FastEngine, WorkloadPrep
from simulator.workload import Workload

#: Most replicas alive (starting, ready or draining) at once.
MAX_PODS = 64
#: Window of the latency metrics a policy may scale on, seconds.
METRIC_WINDOW_S = 60.0
#: How replicas share arrivals.
ROUTINGS = ("least-loaded", "round-robin")
#: Bytes of engine state per request per live replica (measured: 113 MB for 200,000 requests, plus a margin).
ENGINE_BYTES_PER_REQUEST = 600
#: Most memory the live replicas' engines may take together.
MAX_ENGINE_BYTES = 6 * 1024 ** 3
STATUS_NAMES = np.array(["waiting", "running", "waiting", "finished", "dropped_unservable"])


@dataclass
class PodRecord:
    """One replica's life, seconds: asked for, ready, asked to stop, and gone (billing ends)."""

    index: int
    asked_s: float
    ready_s: float
    stop_s: float | None = None
    gone_s: float | None = None

    def billed_s(self, end_s: float) -> float:
        return (end_s if self.gone_s is None else self.gone_s) - self.asked_s

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FleetSample:
    """The fleet at one sync (after the policy's decision took effect)."""

    time_s: float
    desired: int
    ready: int
    starting: int
    draining: int
    router_queue: int
    waiting: float  # per ready replica, router queue included
    running: float  # per ready replica
    kv_usage: float  # mean over ready replicas


@dataclass(frozen=True, eq=False)
class DayResult:
    """A day's run: per-request columns, every replica's life, and the fleet at every sync.

    ``requests`` holds ``arrival``, ``prompt_len``, ``max_tokens``, ``first_token_time_s``, ``finish_time_s``,
    ``num_output_tokens``, ``num_preemptions``, ``pod`` (-1: dropped before any replica took it) and
    ``status``, shape (n,).
    """

    requests: dict[str, Any]
    pods: tuple[PodRecord, ...]
    samples: tuple[FleetSample, ...]
    policy: dict[str, Any]
    routing: str
    cold_start_s: float
    sync_s: float
    end_s: float
    started: int  # replicas asked for during the run (those ready at its start included)

    def replicas_over_time(self) -> dict[str, np.ndarray]:
        """The samples as columns (``time_s``, ``ready``, ...), shape (syncs,)."""
        names = FleetSample.__dataclass_fields__
        return {k: np.array([getattr(s, k) for s in self.samples]) for k in names}

    def billed_replica_s(self) -> float:
        return float(sum(p.billed_s(self.end_s) for p in self.pods))


def check_day_input(workload: Workload, config: EngineConfig, policy: Policy, cold_start_s: float, routing: str) -> None:
    if not isinstance(workload, Workload) or workload.arrival_unit != "s":
        raise ConfigError("a day needs arrivals in seconds", field="workload")
    if not isinstance(config, EngineConfig):
        raise ConfigError("must be an EngineConfig", field="config")
    if not isinstance(policy, Policy):
        raise ConfigError("must be an autoscaling policy (simulator.autoscale)", field="policy")
    if isinstance(cold_start_s, bool) or not isinstance(cold_start_s, (int, float)) \
            or not math.isfinite(cold_start_s) or not 0 <= cold_start_s <= 86_400:
        raise ConfigError(f"must be 0 to 86,400 seconds, got {cold_start_s!r}", field="cold_start_s")
    if routing not in ROUTINGS:
        raise ConfigError(f"must be one of {', '.join(ROUTINGS)}, got {routing!r}", field="routing")
    most = min(MAX_PODS, getattr(policy, "max_replicas", None) or MAX_PODS)
    need = most * workload.n * ENGINE_BYTES_PER_REQUEST
    if need > MAX_ENGINE_BYTES:
        raise ConfigError(
            f"{workload.n:,} requests on up to {most} live replicas need about {need / 1024 ** 3:.1f} GiB "
            f"of engine state, more than the {MAX_ENGINE_BYTES // 1024 ** 3} GiB limit; simulate fewer requests "
            f"(a shorter window or a sample of the trace) or cap max_replicas", field="workload")


class _DayRun:
    """The state of one day's run (see the module docstring for the rules)."""

    def __init__(self, wl: Workload, config: EngineConfig, policy: Policy, cold_start_s: float,
                 routing: str, prep: WorkloadPrep) -> None:
        self.wl, self.config, self.prep = wl, config, prep
        self.policy, self.cold, self.routing = policy, float(cold_start_s), routing
        self.decider = policy.new_state() if isinstance(policy, HpaPolicy) else policy
        self.wants_latency = getattr(policy, "metric", None) in ("ttft_p90_s", "tpot_p90_s")
        n = wl.n
        self.pods: list[PodRecord] = []
        self.engines: dict[int, FastEngine] = {}  # live replicas' engines by pod index
        self.held: dict[int, list[int]] = {}  # requests each live replica was given
        self.queue: deque[int] = deque()  # requests waiting at the router
        self.k = 0  # requests routed so far (round-robin order)
        self.samples: list[FleetSample] = []
        self.cols = {"first_token_time_s": np.full(n, np.nan), "finish_time_s": np.full(n, np.nan),
                     "num_output_tokens": np.zeros(n, np.int64), "num_preemptions": np.zeros(n, np.int64),
                     "status": np.zeros(n, np.int64), "pod": np.full(n, -1, np.int64)}
        self.recent: deque[tuple[float, float, float]] = deque()  # (time, ttft, tpot) of latency events
        self.open_first: dict[int, list[int]] = {}
        self.open_finish: dict[int, list[int]] = {}

    # ------------------------------------------------------------------ replicas
    def _start_pod(self, t: float, ready_s: float) -> None:
        i = len(self.pods)
        self.pods.append(PodRecord(i, t, ready_s))
        e = FastEngine(self.wl, self.config, prep=self.prep)
        e.start(external=True)
        self.engines[i] = e
        self.held[i] = []
        self.open_first[i], self.open_finish[i] = [], []

    def ready(self, t: float) -> list[int]:
        return [i for i in self.engines if self.pods[i].stop_s is None and self.pods[i].ready_s <= t]

    def starting(self, t: float) -> list[int]:
        return [i for i in self.engines if self.pods[i].stop_s is None and self.pods[i].ready_s > t]

    def _retire(self, i: int, t: float, *, drain: bool) -> None:
        """Stop replica ``i`` at ``t``: a ready one finishes what it holds first; its columns are kept."""
        pod, e = self.pods[i], self.engines.pop(i)
        pod.stop_s = t
        if drain:
            e.advance(None)
        e.close()
        pod.gone_s = max(t, e.now) if drain else t
        self._keep_columns(i, e)
        if self.wants_latency:
            self._latency_events(i, e)
        del self.held[i], self.open_first[i], self.open_finish[i]

    def _keep_columns(self, i: int, e: FastEngine) -> None:
        idx = np.array(self.held[i], np.int64)
        c = self.cols
        c["first_token_time_s"][idx] = e.requests.first_token_t[idx]
        c["finish_time_s"][idx] = e.requests.finish_t[idx]
        c["num_output_tokens"][idx] = e.requests.tok[idx] - self.wl.prompt_len[idx]
        c["num_preemptions"][idx] = e.requests.npre[idx]
        c["status"][idx] = e.requests.status[idx]
        c["pod"][idx] = i

    # ------------------------------------------------------------------ routing
    def route(self, q: int, t: float) -> None:
        ready = self.ready(t)
        if not ready:
            self.queue.append(q)
            return
        if self.routing == "round-robin" or len(ready) == 1:
            i = ready[self.k % len(ready)]
        else:
            i = self._least_loaded(ready, t)
        self.k += 1
        e = self.engines[i]
        if e.now < t:
            e.advance(t)
        e.submit(q)
        self.held[i].append(q)
        if self.wants_latency:
            self.open_first[i].append(q)
            self.open_finish[i].append(q)

    def _least_loaded(self, ready: list[int], t: float) -> int:
        """Fewest waiting + running, then the lowest KV usage; ties in round-robin order from ``k``.

        (Plain Python over the few ready replicas, the same floats as an array's; measured against the numpy form on
        1.5 h at 40/s: 21.66 against 21.9 s of CPU, within the machine's noise, so no faster: it is kept as the
        plainer of the two.)"""
        loads, uses = [], []
        for i in ready:
            e = self.engines[i]
            if e.busy and e.now < t:
                e.advance(t)
            loads.append(len(e.requests.waiting) + e.num_running)
            uses.append(1.0 - e.pool.num_free() / e.pool.usable)
        least = min(loads)
        bound = min(u for load, u in zip(loads, uses) if load == least) + 1e-12
        m = len(ready)
        s = self.k % m
        for j in range(s, s + m):
            j %= m
            if loads[j] == least and uses[j] <= bound:
                return ready[j]
        raise AssertionError("unreachable: the least loaded replica is a candidate")

    def flush_queue(self, t: float) -> None:
        """The router's queue goes, at the time the first replica became ready, once one is ready by ``t``."""
        if not self.queue:
            return
        ready = self.ready(t)
        if not ready:
            return
        at = max(0.0, min(self.pods[i].ready_s for i in ready))
        while self.queue:
            self.route(self.queue.popleft(), at)

    # ------------------------------------------------------------------ syncs
    def observe(self, t: float) -> Observation:
        for e in self.engines.values():
            if e.busy and e.now < t:
                e.advance(t)
        ready, starting = self.ready(t), self.starting(t)
        metrics: dict[str, float] = {}
        if ready:
            es = [self.engines[i] for i in ready]
            metrics["waiting"] = (sum(len(e.requests.waiting) for e in es) + len(self.queue)) / len(es)
            metrics["running"] = sum(e.num_running for e in es) / len(es)
            metrics["kv_usage"] = float(np.mean([1.0 - e.pool.num_free() / e.pool.usable for e in es]))
            if self.wants_latency:
                metrics.update(self._window_latency(t))
        return Observation(t, len(ready), len(starting), metrics)

    def _latency_events(self, i: int, e: FastEngine) -> None:
        arr = self.wl.arrival
        still = []
        for q in self.open_first[i]:
            ft = e.requests.first_token_t[q]
            if math.isfinite(ft):
                self.recent.append((float(ft), float(ft - arr[q]), math.nan))
            else:
                still.append(q)
        self.open_first[i] = still
        still = []
        for q in self.open_finish[i]:
            fin, ft, out = e.requests.finish_t[q], e.requests.first_token_t[q], int(e.requests.tok[q] - self.wl.prompt_len[q])
            if math.isfinite(fin):
                if out >= 2:
                    self.recent.append((float(fin), math.nan, float((fin - ft) / (out - 1))))
            elif e.requests.status[q] != DROPPED:
                still.append(q)
        self.open_finish[i] = still

    def _window_latency(self, t: float) -> dict[str, float]:
        for i, e in self.engines.items():
            self._latency_events(i, e)
        while self.recent and self.recent[0][0] < t - METRIC_WINDOW_S:
            self.recent.popleft()
        out = {}
        for name, col in (("ttft_p90_s", 1), ("tpot_p90_s", 2)):
            vals = np.array([r[col] for r in self.recent if r[0] <= t and math.isfinite(r[col])])
            if vals.size:
                out[name] = float(np.percentile(vals, 90))
        return out

    def scale(self, t: float, desired: int) -> None:
        starting, ready = self.starting(t), self.ready(t)
        current = len(starting) + len(ready)
        desired = min(int(desired), MAX_PODS)
        if desired > current:
            if len(self.engines) + desired - current > MAX_PODS:
                raise ConfigError(f"more than {MAX_PODS} replicas alive at once (draining ones count)", field="policy")
            for _ in range(desired - current):
                self._start_pod(t, t + self.cold)
            return
        drop = current - desired
        for i in sorted(starting, reverse=True)[:drop]:
            self._retire(i, t, drain=False)
        drop -= min(drop, len(starting))
        if drop:
            load = {i: len(self.engines[i].requests.waiting) + self.engines[i].num_running for i in ready}
            for i in sorted(ready, key=lambda i: (load[i], -i))[:drop]:
                self._retire(i, t, drain=True)

    def sample(self, t: float, obs: Observation, desired: int) -> None:
        m = obs.metrics
        draining = sum(1 for p in self.pods if p.stop_s is not None and p.stop_s <= t < (p.gone_s or math.inf))
        self.samples.append(FleetSample(t, desired, len(self.ready(t)), len(self.starting(t)), draining,
                                        len(self.queue), m.get("waiting", math.nan), m.get("running", math.nan),
                                        m.get("kv_usage", math.nan)))


def simulate_day(workload: Workload, config: EngineConfig, policy: Policy, *, cold_start_s: float = 135.0,
                 routing: str = "least-loaded", prep: WorkloadPrep | None = None,
                 progress: Callable[[float], None] | None = None) -> DayResult:
    """Replay ``workload`` against a fleet of ``config`` replicas that ``policy`` scales (module docstring).

    ``cold_start_s``: seconds from asking for a replica to its first request
    (:meth:`simulator.autoscale.ColdStart.seconds`). Raises :class:`ConfigError` naming the field.
    """
    check_day_input(workload, config, policy, cold_start_s, routing)
    run = run_fleet(workload, config, policy, cold_start_s, routing, prep=prep, progress=progress)
    return result_of(run, workload)


def run_fleet(workload: Workload, config: EngineConfig, policy: Policy, cold_start_s: float, routing: str, *,
              prep: WorkloadPrep | None = None, progress: Callable[[float], None] | None = None,
              start_s: float = 0.0, start_pods: list[float] | None = None,
              script: dict[float, int] | None = None,
              synced: Callable[[_DayRun, float], None] | None = None) -> _DayRun:
    """The run itself, from ``start_s`` (a multiple of the policy's sync) with replicas ready at ``start_pods``
    (default: ``policy.start()`` replicas ready at once); at the syncs in ``script`` the fleet takes the
    recorded count instead of the policy's (which still observes). ``synced(run, t)`` is called after each
    sync (its decision taken and sampled). Every replica is drained at the end."""
    prep = prep or WorkloadPrep(workload)
    run = _DayRun(workload, config, policy, cold_start_s, routing, prep)
    for ready_s in ([start_s] * policy.start() if start_pods is None else start_pods):
        run._start_pod(start_s, ready_s)
    order, arr = prep.order.tolist(), prep.arrival_sorted.tolist()
    n, p, sync = workload.n, 0, float(policy.sync_s)
    first = round(start_s / sync) + 1
    last_sync = math.ceil((arr[-1] if arr else 0.0) / sync) + 2 * math.ceil(86_400 / sync)
    step = max(1, n // 100)
    for s in range(first, last_sync + 1):
        t_sync = s * sync
        while p < n and arr[p] < t_sync:
            run.flush_queue(arr[p])
            run.route(order[p], arr[p])
            p += 1
            if progress is not None and p % step == 0:
                progress(p / n)
        run.flush_queue(t_sync)
        obs = run.observe(t_sync)
        desired = run.decider.decide(obs)
        if script is not None and t_sync in script:
            desired = script[t_sync]
        run.scale(t_sync, desired)
        run.flush_queue(t_sync)
        run.sample(t_sync, obs, desired)
        if synced is not None:
            synced(run, t_sync)
        if p >= n and not run.queue:
            break
    else:
        raise ConfigError("the fleet never took every request (no replica asked for in two days after "
                          "the last arrival)", field="policy")
    for i in list(run.engines):
        run._retire(i, math.inf, drain=True)
    return run


def result_of(run: _DayRun, wl: Workload) -> DayResult:
    c = run.cols
    fin = c["finish_time_s"]
    end_s = float(max(np.nanmax(fin) if np.isfinite(fin).any() else 0.0, float(wl.arrival.max(initial=0.0))))
    for pod in run.pods:
        if pod.gone_s is not None and not math.isfinite(pod.gone_s):
            pod.gone_s = None  # alive to the end: billed until end_s
        if pod.stop_s is not None and not math.isfinite(pod.stop_s):
            pod.stop_s = None
    requests = {"arrival": wl.arrival, "prompt_len": wl.prompt_len, "max_tokens": wl.output_len,
                **{k: v for k, v in c.items() if k != "status"}, "status": tuple(STATUS_NAMES[c["status"]].tolist())}
    return DayResult(requests=requests, pods=tuple(run.pods), samples=tuple(run.samples),
                     policy=run.policy.to_dict(), routing=run.routing, cold_start_s=run.cold,
                     sync_s=float(run.policy.sync_s), end_s=end_s, started=len(run.pods))


__all__ = ["ENGINE_BYTES_PER_REQUEST", "MAX_ENGINE_BYTES", "MAX_PODS", "METRIC_WINDOW_S", "ROUTINGS", "DayResult",
           "FleetSample", "PodRecord", "simulate_day"]
