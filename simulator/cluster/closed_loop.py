"""Closed-loop load: clients that send their next request when the last one's answer has arrived.

>>> res = simulate_closed_loop(workload, config, ClosedLoop(clients=16, think_s=2.0))  # doctest: +SKIP
>>> res.throughput_rps, res.littles_law_rps  # doctest: +SKIP

An open-loop workload fixes every arrival in advance. Chat users, agents and benchmark tools
(``vllm bench serve --max-concurrency N``, GuideLLM's concurrent profile, aiperf's ``--concurrency``) do not:
each of ``clients`` clients holds one request in flight, and sends the next one when the answer's last token
has arrived plus a think time. Arrivals then depend on the simulated latency:

* **Clients.** ``clients`` slots. A request takes a free slot; when it finishes at ``f`` its slot is free
  again at ``f + think`` (``think_s`` fixed, or drawn: ``exponential:MEAN`` or ``uniform:LO,HI`` seconds).
* **Sessions.** A request whose ``parent`` is set (a conversation's or an agent loop's next turn, its prompt
  extending the parent's context) is sent on its parent's slot at the parent's finish plus the think time,
  not at a time written in the workload; it keeps the client, so a session holds one slot from its first
  turn to its last.
* **Independent requests** (no parent) go in workload order to the first free slot: at time 0 with
  ``paced=False`` (as fast as the clients allow: ``--max-concurrency`` with an infinite request rate), or
  not before their own arrival time with ``paced=True`` (``--request-rate R --max-concurrency N``: a Poisson
  schedule gated by the clients).

The engines are :class:`simulator.cluster.fleet.Fleet` instances behind the router of
:mod:`simulator.cluster.routing`, stepped one schedule call at a time while a client's next send is due, so a
request is sent at the first step boundary at or after its due time (a finish is known at the end of the
step that produced the last token, as a streamed answer is). The result is the cluster's
(:class:`~simulator.cluster.replicas.ClusterResult`; each request's ``arrival`` is when it was sent) with the
closed loop's own figures: throughput, the mean response time ``R`` (arrival to last token) and the mean
think time ``Z``, whose Little's-law throughput ``N / (R + Z)`` the run meets when its clients stay busy.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simulator.cluster.fleet import Fleet
from simulator.cluster.replicas import ClusterResult, Deployment, _assemble
from simulator.cluster.routing import ClusterError, Router, parse_routing
from simulator.engine import DROPPED, EngineConfig, WorkloadPrep
from simulator.engine.serving import async_lag, has_serving, serving_offsets
from simulator.workload import Workload

#: Most clients one closed loop may hold.
MAX_CLIENTS = 100_000
#: Longest think time, seconds.  # s
MAX_THINK_S = 86_400.0


@dataclass(frozen=True)
class ClosedLoop:
    """``clients`` concurrent clients, each thinking ``think_s`` between an answer and its next request.

    ``think_s``: seconds (a number), or ``"exponential:MEAN"`` / ``"uniform:LO,HI"`` drawn per request with
    ``seed``. ``paced``: independent requests wait for their own arrival time too (see the module docstring).
    """

    clients: int
    think_s: float | str = 0.0
    paced: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        c = self.clients
        if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_CLIENTS:
            raise ClusterError(f"must be a whole number from 1 to {MAX_CLIENTS:,}, got {c!r}", field="closed_loop.clients")
        self.think_sampler(1)  # validates think_s
        if not isinstance(self.paced, bool):
            raise ClusterError(f"must be true or false, got {self.paced!r}", field="closed_loop.paced")
        s = self.seed
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**63:
            raise ClusterError(f"must be a whole number >= 0, got {s!r}", field="closed_loop.seed")

    def think_sampler(self, n: int) -> np.ndarray:
        """``n`` think times, seconds, shape (n,)."""
        t = self.think_s
        where = "closed_loop.think_s"
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            if not (math.isfinite(t) and 0 <= t <= MAX_THINK_S):
                raise ClusterError(f"must be from 0 to {MAX_THINK_S:,.0f} seconds, got {t!r}", field=where)
            return np.full(n, float(t))
        if not isinstance(t, str):
            raise ClusterError(f"must be seconds, exponential:MEAN or uniform:LO,HI, got {t!r}", field=where)
        kind, _, rest = t.partition(":")
        try:
            nums = [float(x) for x in rest.split(",")] if rest else []
        except ValueError:
            raise ClusterError(f"{t!r}: the parameters must be numbers", field=where) from None
        ok = all(math.isfinite(x) and 0 <= x <= MAX_THINK_S for x in nums)
        rng = np.random.default_rng(self.seed)
        if kind == "exponential" and len(nums) == 1 and ok:
            return rng.exponential(nums[0], n) if nums[0] > 0 else np.zeros(n)
        if kind == "uniform" and len(nums) == 2 and ok and nums[0] <= nums[1]:
            return rng.uniform(nums[0], nums[1], n)
        raise ClusterError(f"{t!r} must be seconds, exponential:MEAN or uniform:LO,HI "
                           f"(0 to {MAX_THINK_S:,.0f} s, LO <= HI)", field=where)

    def to_dict(self) -> dict[str, Any]:
        return {"clients": self.clients, "think_s": self.think_s, "paced": self.paced, "seed": self.seed}


@dataclass(frozen=True)
class ClosedLoopResult:
    """The cluster's result with the closed loop's figures.  # s, requests/s"""

    cluster: ClusterResult
    load: ClosedLoop
    throughput_rps: float  # requests/s: finished requests over the span from the first send to the last finish
    mean_response_s: float  # s: R, arrival (send) to last token, over finished requests
    mean_think_s: float  # s: Z, the think times the finished requests' clients took after them
    littles_law_rps: float  # requests/s: N / (R + Z)
    peak_in_flight: int

    def to_dict(self, *, requests: bool = False) -> dict[str, Any]:
        return {**self.cluster.to_dict(requests=requests), "closed_loop": {
            **self.load.to_dict(), "throughput_rps": self.throughput_rps, "mean_response_s": self.mean_response_s,
            "mean_think_s": self.mean_think_s, "littles_law_rps": self.littles_law_rps,
            "peak_in_flight": self.peak_in_flight}}


class _Loop:
    """The clients' state while the fleet runs: free slots, sessions' next turns, requests in flight."""

    def __init__(self, wl: Workload, load: ClosedLoop) -> None:
        n = wl.n
        self.arrival = wl.arrival  # written: each request's send time
        self.think = load.think_sampler(n)
        par = wl.parent if wl.parent is not None else np.full(n, -1, np.int64)
        self.children: dict[int, list[int]] = {}
        for r in np.flatnonzero(par >= 0).tolist():
            self.children.setdefault(int(par[r]), []).append(r)
        roots = np.flatnonzero(par < 0)
        due = wl.arrival[roots] if load.paced else np.zeros(roots.size)
        self.roots = roots[np.lexsort((roots, due))].tolist()  # by due time, then workload order
        self.root_due = (wl.arrival.copy() if load.paced else np.zeros(n))
        self.next_root = 0
        self.free = [0.0] * load.clients  # heap: the times slots are free
        self.turns: list[tuple[float, int]] = []  # heap: (due, request) of sessions' next turns (own slot)
        self.in_flight = 0
        self.peak = 0

    def next_send(self) -> tuple[float, int, bool] | None:
        """``(due time, request, takes a free slot)`` of the next request to send, or None."""
        best = None
        if self.turns:
            t, q = self.turns[0]
            best = (t, q, False)
        if self.free and self.next_root < len(self.roots):
            q = self.roots[self.next_root]
            t = max(self.free[0], float(self.root_due[q]))
            if best is None or t < best[0]:
                best = (t, q, True)
        return best

    def sent(self, t: float, q: int, takes_slot: bool) -> None:
        if takes_slot:
            heapq.heappop(self.free)
            self.next_root += 1
        else:
            heapq.heappop(self.turns)
        self.arrival[q] = t
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def finished(self, q: int, f: float) -> None:
        """``q``'s last token at ``f``: its first next turn keeps the slot, other turns queue for one."""
        self.in_flight -= 1
        due = f + float(self.think[q])
        kids = self.children.get(q, [])
        if kids:
            heapq.heappush(self.turns, (due, kids[0]))
            for k in kids[1:]:  # an agent's fork: more turns than the slot it had
                self.roots.insert(self.next_root, k)
                self.root_due[k] = due
        else:
            heapq.heappush(self.free, due)

    @property
    def done_sending(self) -> bool:
        return not self.turns and self.next_root >= len(self.roots)


def delivered(engine, q: int, finish: float) -> float:
    """When request ``q``'s last token reaches its client: the engine's finish plus the serving time the
    result adds (:func:`simulator.engine.serving.apply_serving`: parsing, detokenizing and streaming, and the
    async-scheduling lag), so a next request never leaves before the answer it follows is complete."""
    terms = getattr(engine.cfg, "cost_model", None)
    if not has_serving(terms, engine.async_mode):
        return finish
    prompt = engine.wl.prompt_len[q:q + 1]
    out = engine.requests.tok[q:q + 1] - prompt
    _, add = serving_offsets(terms, prompt, out)
    lag_steps = getattr(terms, "serve_async_lag_steps", 0.0) if engine.async_mode else 0.0
    if lag_steps:
        add = add + async_lag(lag_steps, engine.requests.first_token_t[q:q + 1], np.array([finish]), out)
    return finish + float(add[0])


class _Run:
    """The fleet stepped one schedule call at a time while the clients' next send is due."""

    def __init__(self, fleet: Fleet, router: Router, policy, loop: _Loop, progress) -> None:
        self.fleet, self.router, self.loop, self.progress = fleet, router, loop, progress
        N = len(fleet)
        self.N = N
        self.stateful = policy.stateful and N > 1
        self.affinity = "prefix-affinity" in policy.uses and N > 1
        self.engines = fleet.engines
        self.assign = np.full(loop.arrival.size, -1, np.int64)
        self.held: list[list[int]] = [[] for _ in range(N)]  # each instance's requests in flight
        self.seen = [0] * N  # each instance's finished + dropped count when last settled
        self.now = [e.now for e in self.engines]  # plain lists: the loop reads them every step
        self.busy = [e.busy for e in self.engines]
        self.stale: set[int] = set()  # instances stepped since the fleet's arrays were brought up to date
        self.done = 0
        self.every = max(1, loop.arrival.size // 100)

    def settle(self, i: int) -> None:
        """Hand the finished (or dropped) requests of instance ``i`` back to their clients."""
        e = self.engines[i]
        count = e.t["finished"] + e.t["dropped_unservable"]
        if count == self.seen[i]:
            return
        self.seen[i] = count
        still = []
        for q in self.held[i]:
            f = float(e.requests.finish_t[q])
            if f == f or e.requests.status[q] == DROPPED:  # finished (its last token's time), or dropped on arrival
                self.loop.finished(q, delivered(e, q, f) if f == f else float(self.loop.arrival[q]))
                self.done += 1
                n = self.loop.arrival.size
                if self.progress is not None and (self.done % self.every == 0 or self.done == n):
                    self.progress(self.done / n)
            else:
                still.append(q)
        self.held[i] = still

    def refresh(self, i: int) -> None:
        self.now[i], self.busy[i] = self.engines[i].now, self.engines[i].busy

    def step_before(self, due: float) -> bool:
        """Run one schedule call of the earliest busy instance if it comes before ``due``; False when none does."""
        now, busy = self.now, self.busy
        first = min(((now[k], k) for k in range(self.N) if busy[k]), default=None)
        if first is None or first[0] >= due:
            return False
        i = first[1]
        self.engines[i].advance(math.nextafter(first[0], math.inf))  # one schedule call
        self.refresh(i)
        self.stale.add(i)
        self.settle(i)
        return True

    def send(self, t: float, q: int, takes_slot: bool) -> None:
        fleet = self.fleet
        for k in self.stale:
            fleet._sync(k)
        self.stale.clear()
        if self.stateful:
            fleet.advance(t)
            for k in range(self.N):
                self.refresh(k)
                self.settle(k)
            if self.affinity:
                self.router.observe(q)
        self.loop.sent(t, q, takes_slot)
        i = self.router.choose(q)
        fleet.submit(i, q, t)
        self.refresh(i)
        self.assign[q] = i
        self.held[i].append(q)
        self.settle(i)  # dropped on arrival as unservable: its client goes on

    def drive(self) -> None:
        while True:
            nxt = self.loop.next_send()
            if self.step_before(math.inf if nxt is None else nxt[0]):
                continue
            if nxt is None:
                return
            self.send(*nxt)


def simulate_closed_loop(
    workload: Workload,
    config: EngineConfig,
    load: ClosedLoop,
    *,
    num_instances: int = 1,
    routing: str = "round-robin",
    seed: int = 0,
    prep: WorkloadPrep | None = None,
    progress: Callable[[float], None] | None = None,
) -> ClosedLoopResult:
    """Simulate ``workload``'s requests sent by ``load``'s clients to ``num_instances`` engines behind the router.

    The workload's arrival times are ignored (``paced=False``) or are the earliest an independent request is
    sent (``paced=True``); arrivals must be in seconds. Raises :class:`ClusterError` naming the field.
    """
    if not isinstance(workload, Workload):
        raise ClusterError("must be a simulator.workload.requests.Workload", field="workload")
    if not isinstance(load, ClosedLoop):
        raise ClusterError("must be a ClosedLoop", field="closed_loop")
    if workload.arrival_unit != "s":
        raise ClusterError("a closed loop needs arrivals in seconds (think times are seconds)", field="workload")
    d = Deployment(config, num_instances, routing, 0.0, seed)  # validates the count and the policy
    wl = replace(workload, arrival=np.asarray(workload.arrival, np.float64).copy())
    wl.arrival.setflags(write=True)  # this run's own copy: each request's send time is written in as it is sent
    prep = prep or WorkloadPrep(wl)
    d.check(wl, prep)
    policy = parse_routing(d.routing)
    fleet = Fleet(wl, config, d.num_instances, prep=prep)
    fleet.start()
    run = _Run(fleet, Router(policy, fleet, prompt_len=wl.prompt_len, seed=seed), policy, _Loop(wl, load), progress)
    run.drive()
    loop, assign = run.loop, run.assign
    fleet.finish()
    wl.arrival.setflags(write=False)
    res = _assemble(wl, fleet.engines, assign, policy, 0.0, None, None, False, None)
    return _closed_loop_result(res, load, loop)


def _closed_loop_result(res: ClusterResult, load: ClosedLoop, loop: _Loop) -> ClosedLoopResult:
    req = res.requests
    fin = np.isfinite(np.asarray(req["finish_time_s"], np.float64))
    arrival = np.asarray(req["arrival"], np.float64)
    finish = np.asarray(req["finish_time_s"], np.float64)
    if not fin.any():
        return ClosedLoopResult(res, load, 0.0, math.nan, math.nan, math.nan, loop.peak)
    span = float(finish[fin].max() - arrival[fin].min())
    r = float((finish[fin] - arrival[fin]).mean())
    z = float(loop.think[fin].mean())
    thr = float(fin.sum() / span) if span > 0 else math.inf
    return ClosedLoopResult(res, load, thr, r, z, load.clients / (r + z) if r + z > 0 else math.inf, loop.peak)


__all__ = ["MAX_CLIENTS", "ClosedLoop", "ClosedLoopResult", "simulate_closed_loop"]
