"""A long day in chunks: each chunk of ``chunk_s`` seconds simulated on its own, with an overlap either side.

>>> res = simulate_day_in_chunks(workload, config, policy, chunk_s=3600, cold_start_s=135)  # doctest: +SKIP

One run over a whole day holds every request in every live replica's engine; a chunk holds only its own
hour (and the overlaps), so memory stays bounded and each finished chunk can be kept. Chunk ``h`` reports the
requests arriving in ``[S, E)`` (``S = h x chunk_s``, ``E = S + chunk_s``) and the replica-seconds billed in
that span, and simulates the arrivals of ``[S - overlap, E + overlap)``:

* **warm-up** ``[S - overlap, S)``: the fleet starts with the replicas the previous chunk had alive at
  ``S - overlap`` (ready, or starting with their own ready time), empty caches, and takes at each sync the
  replica count the previous chunk's policy chose; the policy observes (an HPA rebuilds its stabilization
  window if ``overlap`` is at least that window) but does not act;
* **its own span** ``[S, E)``: the policy decides;
* **cool-down** ``[E, E + overlap)``: arrivals go on, so the chunk's last requests meet the load they would
  have met, not an emptied fleet; nothing of it is reported.

What a chunk cannot see: requests of the previous chunk still in the fleet at ``S - overlap`` (the warm-up
replaces them by the ones that arrived after), prefix-cache contents older than the warm-up, and multi-turn
parents before it (the turn is then a fresh prompt). With ``chunk_s`` at least the whole run it is
:func:`~simulator.day.fleet_day.simulate_day` exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simulator.autoscale import Policy
from simulator.base import ConfigError
from simulator.day.fleet_day import (
    STATUS_NAMES,
    DayResult,
    FleetSample,
    PodRecord,
    check_day_input,
    result_of,
    run_fleet,
)
from simulator.engine import EngineConfig
from simulator.workload import Workload

#: Columns a chunk keeps of each request it reports.
COLUMNS = ("first_token_time_s", "finish_time_s", "num_output_tokens", "num_preemptions", "status", "pod")


@dataclass(frozen=True)
class ChunkPlan:
    """Chunk ``index``: reports ``[start_s, end_s)`` (``end_s`` inf for the last), simulates ``[lo_s, hi_s)``."""

    index: int
    start_s: float
    end_s: float
    lo_s: float
    hi_s: float


@dataclass(frozen=True)
class Handover:
    """What the next chunk starts from: replicas alive at its ``lo_s`` (their ready times) and the counts this
    chunk's policy chose at the syncs of the next chunk's warm-up."""

    ready_s: tuple[float, ...]
    script: dict[float, int]

    def to_dict(self) -> dict[str, Any]:
        return {"ready_s": list(self.ready_s), "script": [[t, d] for t, d in sorted(self.script.items())]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Handover:
        return cls(tuple(float(x) for x in data["ready_s"]), {float(t): int(d) for t, d in data["script"]})


@dataclass(frozen=True, eq=False)
class DayChunk:
    """One chunk's share of the day: its requests' columns (global indices), billed pods and fleet samples."""

    plan: ChunkPlan
    request_index: np.ndarray
    columns: dict[str, np.ndarray]
    pods: tuple[PodRecord, ...]
    samples: tuple[FleetSample, ...]
    started: int
    handover: Handover | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinities as None), for keeping a finished chunk; :meth:`from_dict` reads it back."""
        plan = {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in self.plan.__dict__.items()}
        return {"plan": plan, "request_index": self.request_index.tolist(),
                "columns": {k: [None if isinstance(x, float) and math.isnan(x) else x for x in v.tolist()]
                            for k, v in self.columns.items()},
                "pods": [p.to_dict() for p in self.pods], "samples": [dict(s.__dict__) for s in self.samples],
                "started": self.started, "handover": None if self.handover is None else self.handover.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DayChunk:
        plan = ChunkPlan(**{k: (math.inf if v is None else v) for k, v in data["plan"].items()})
        floats = {"first_token_time_s", "finish_time_s"}
        columns = {k: (np.array([math.nan if x is None else x for x in v], np.float64) if k in floats
                       else np.array(v, np.int64)) for k, v in data["columns"].items()}
        return cls(plan=plan, request_index=np.array(data["request_index"], np.int64), columns=columns,
                   pods=tuple(PodRecord(**p) for p in data["pods"]),
                   samples=tuple(FleetSample(**{k: (math.nan if v is None else v) for k, v in s.items()})
                                 for s in data["samples"]),
                   started=int(data["started"]),
                   handover=None if data["handover"] is None else Handover.from_dict(data["handover"]))


def _whole(name: str, v: float, sync_s: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ConfigError(f"must be a number of seconds >= 0, got {v!r}", field=name)
    if abs(v / sync_s - round(v / sync_s)) > 1e-9:
        raise ConfigError(f"must be a whole number of the policy's syncs ({sync_s:g} s), got {v:g}", field=name)
    return float(v)


#: The least overlap :func:`default_overlap_s` gives: requests arriving at a chunk's end finish within it.
MIN_OVERLAP_S = 300.0


def default_overlap_s(policy: Policy) -> float:
    """At least :data:`MIN_OVERLAP_S` and the policy's longest stabilization window (an HPA rebuilds it in the
    warm-up), in whole syncs."""
    longest = max(MIN_OVERLAP_S, float(getattr(policy, "scale_down_window_s", 0.0)),
                  float(getattr(policy, "scale_up_window_s", 0.0)))
    return math.ceil(longest / policy.sync_s - 1e-9) * float(policy.sync_s)


def chunk_plans(last_arrival_s: float, chunk_s: float, overlap_s: float, sync_s: float) -> list[ChunkPlan]:
    """The chunks covering arrivals up to ``last_arrival_s`` (both lengths whole numbers of syncs)."""
    chunk_s = _whole("chunk_s", chunk_s, sync_s)
    overlap_s = _whole("overlap_s", overlap_s, sync_s)
    if chunk_s <= 0:
        raise ConfigError("must be > 0 seconds", field="chunk_s")
    if overlap_s > chunk_s:
        raise ConfigError(f"at most chunk_s ({chunk_s:g} s), got {overlap_s:g}", field="overlap_s")
    count = max(1, math.floor(last_arrival_s / chunk_s) + 1)
    plans = []
    for h in range(count):
        start = h * chunk_s
        last = h == count - 1
        end = math.inf if last else start + chunk_s
        plans.append(ChunkPlan(h, start, end, max(0.0, start - overlap_s), math.inf if last else end + overlap_s))
    return plans


def sub_workload(wl: Workload, lo_s: float, hi_s: float) -> tuple[Workload, np.ndarray]:
    """The requests arriving in ``[lo_s, hi_s)`` as a workload of their own, and their global indices; a parent
    outside the window is dropped (the turn becomes a fresh prompt)."""
    arrival = np.asarray(wl.arrival)
    idx = np.flatnonzero((arrival >= lo_s) & (arrival < hi_s))
    return wl.select(idx), idx


def _alive_at(pods, t: float) -> list[float]:
    return sorted(p.ready_s for p in pods if p.asked_s <= t and (p.stop_s is None or p.stop_s > t))


def handover_of(pods, samples, next_plan: ChunkPlan) -> Handover:
    """The handover to ``next_plan``: the replicas of ``pods`` alive at its ``lo_s`` and the counts of
    ``samples`` at the syncs of its warm-up. Known once the run has passed the last sync before
    ``next_plan.start_s``: a later sync neither asks for a replica before ``lo_s`` nor stops one then.

    A replica ready by ``lo_s`` is handed over as ready at ``lo_s`` (its own ready time changes nothing in the
    next chunk, whose router queue starts empty): two chunks that leave the fleet alike hand over equal
    handovers, which a speculative start (``bench/bench_day.py --speculate``) compares."""
    script = {s.time_s: s.desired for s in samples if next_plan.lo_s < s.time_s < next_plan.start_s}
    return Handover(tuple(max(r, next_plan.lo_s) for r in _alive_at(pods, next_plan.lo_s)), script)


def simulate_chunk(workload: Workload, config: EngineConfig, policy: Policy, plan: ChunkPlan, *,
                   cold_start_s: float, routing: str, handover: Handover | None,
                   next_plan: ChunkPlan | None,
                   on_handover: Callable[[Handover, float], None] | None = None) -> DayChunk:
    """Chunk ``plan`` of the day (module docstring), from the previous chunk's ``handover``.

    ``on_handover(h, t_s)``: called once with the next chunk's handover as soon as it is known, at the run's
    time ``t_s`` (the last sync before the next chunk's start), before this chunk simulates its cool-down, so the
    next chunk may start on another worker meanwhile; ``h`` equals the returned chunk's ``handover`` (a run that
    ends before that sync tells it at its end). Not called for the last chunk.
    """
    sub, idx = sub_workload(workload, plan.lo_s, plan.hi_s)
    check_day_input(sub, config, policy, cold_start_s, routing)
    if handover is None and plan.lo_s > 0:
        raise ConfigError("a chunk after the first needs the previous chunk's handover", field="handover")
    told: list[Handover] = []

    def synced(run, t: float) -> None:
        if not told and t + policy.sync_s >= next_plan.start_s - 1e-9:  # the last sync before it
            told.append(handover_of(run.pods, run.samples, next_plan))
            on_handover(told[0], t)

    run = run_fleet(sub, config, policy, cold_start_s, routing, start_s=plan.lo_s,
                    start_pods=None if handover is None else list(handover.ready_s),
                    script=None if handover is None else handover.script,
                    synced=synced if on_handover is not None and next_plan is not None else None)
    res = result_of(run, sub)
    arrival = np.asarray(sub.arrival)
    mine = (arrival >= plan.start_s) & (arrival < plan.end_s)
    cols = {k: np.asarray(res.requests[k])[mine] for k in COLUMNS if k != "status"}
    cols["status"] = run.cols["status"][mine]
    pods = []
    for p in res.pods:
        lo, hi = max(p.asked_s, plan.start_s), min(p.gone_s if p.gone_s is not None else math.inf, plan.end_s)
        if hi > lo:
            pods.append(replace(p, asked_s=lo, gone_s=None if math.isinf(hi) else hi))
    samples = tuple(s for s in res.samples if plan.start_s < s.time_s <= plan.end_s)
    started = sum(1 for p in res.pods if plan.start_s <= p.asked_s < plan.end_s)
    nxt = None if next_plan is None else handover_of(res.pods, res.samples, next_plan)
    if nxt is not None and on_handover is not None and not told:
        on_handover(nxt, run.samples[-1].time_s if run.samples else plan.lo_s)  # the run ended before that sync
    return DayChunk(plan, idx[mine], cols, tuple(pods), samples, started, nxt)


def speculation_point(count: int) -> int | None:
    """The chunk a second, speculative chain starts at among ``count`` chunks: about the middle (the first chain
    runs chunks ``0..k-1``, the second ``k..count-1``); None below 4 chunks (nothing to win)."""
    return (count + 2) // 2 if count >= 4 else None


class _Told(Exception):
    """Raised from a lead-in's ``on_handover``: the guess is known, the rest of the chunk is not needed."""


def guess_handover(workload: Workload, config: EngineConfig, policy: Policy, plans: list[ChunkPlan], k: int, *,
                   cold_start_s: float, routing: str) -> Handover:
    """A guess at chunk ``k``'s handover, told by a **lead-in**: chunk ``k - 1`` simulated from
    ``policy.start()`` replicas ready at its warm-up's start and no script (the policy acting from there), up to
    the sync where it knows chunk ``k``'s handover (its cool-down is not simulated). A policy that decides on the
    current load forgets within an hour where it started, so the guess usually equals the true handover; a
    chain started from it is kept only from where it does (``simulator.day.parallel``,
    ``planner/dayplans/services.py``)."""
    if not 1 <= k < len(plans):
        raise ConfigError(f"a lead-in needs a chunk before and after it, got chunk {k} of {len(plans)}", field="k")
    told: list[Handover] = []

    def stop(h: Handover, _t: float) -> None:
        told.append(h)
        raise _Told

    lead = plans[k - 1]
    try:
        simulate_chunk(workload, config, policy, lead, cold_start_s=cold_start_s, routing=routing,
                       handover=Handover((lead.lo_s,) * policy.start(), {}), next_plan=plans[k], on_handover=stop)
    except _Told:
        pass
    return told[0]


def join_chunks(workload: Workload, chunks: list[DayChunk], policy: Policy, *, cold_start_s: float,
                routing: str) -> DayResult:
    """The day from its chunks, as :func:`~simulator.day.fleet_day.simulate_day` reports one run."""
    n = workload.n
    cols = {"first_token_time_s": np.full(n, np.nan), "finish_time_s": np.full(n, np.nan),
            "num_output_tokens": np.zeros(n, np.int64), "num_preemptions": np.zeros(n, np.int64),
            "status": np.zeros(n, np.int64), "pod": np.full(n, -1, np.int64)}
    pods: list[PodRecord] = []
    for c in chunks:
        for k in COLUMNS:
            cols[k][c.request_index] = c.columns[k]
        renumber = np.full(max((p.index for p in c.pods), default=-1) + 2, -1, np.int64)  # last slot: -1 stays
        for p in c.pods:
            renumber[p.index] = len(pods)
            pods.append(replace(p, index=len(pods)))
        cols["pod"][c.request_index] = renumber[c.columns["pod"]]
    fin = cols["finish_time_s"]
    end_s = float(max(np.nanmax(fin) if np.isfinite(fin).any() else 0.0, float(workload.arrival.max(initial=0.0))))
    requests = {"arrival": workload.arrival, "prompt_len": workload.prompt_len, "max_tokens": workload.output_len,
                **{k: v for k, v in cols.items() if k != "status"}, "status": tuple(STATUS_NAMES[cols["status"]].tolist())}
    return DayResult(requests=requests, pods=tuple(pods),
                     samples=tuple(s for c in chunks for s in c.samples), policy=policy.to_dict(), routing=routing,
                     cold_start_s=float(cold_start_s), sync_s=float(policy.sync_s), end_s=end_s,
                     started=sum(c.started for c in chunks))


def simulate_day_in_chunks(workload: Workload, config: EngineConfig, policy: Policy, *, chunk_s: float = 3600.0,
                           overlap_s: float | None = None, cold_start_s: float = 135.0, routing: str = "least-loaded",
                           progress: Callable[[float], None] | None = None) -> DayResult:
    """The whole day, chunk after chunk in this process (a worker pool runs :func:`simulate_chunk` itself);
    ``overlap_s`` defaults to :func:`default_overlap_s`."""
    if not isinstance(workload, Workload) or workload.arrival_unit != "s":
        raise ConfigError("a day needs arrivals in seconds", field="workload")
    if overlap_s is None:
        overlap_s = default_overlap_s(policy)
    plans = chunk_plans(float(np.max(workload.arrival, initial=0.0)), chunk_s, overlap_s, float(policy.sync_s))
    chunks: list[DayChunk] = []
    handover = None
    for i, plan in enumerate(plans):
        nxt = plans[i + 1] if i + 1 < len(plans) else None
        chunk = simulate_chunk(workload, config, policy, plan, cold_start_s=cold_start_s, routing=routing,
                               handover=handover, next_plan=nxt)
        chunks.append(chunk)
        handover = chunk.handover
        if progress is not None:
            progress((i + 1) / len(plans))
    return join_chunks(workload, chunks, policy, cold_start_s=cold_start_s, routing=routing)


__all__ = ["COLUMNS", "MIN_OVERLAP_S", "ChunkPlan", "DayChunk", "Handover", "chunk_plans", "default_overlap_s",
           "guess_handover", "handover_of", "join_chunks", "simulate_chunk", "simulate_day_in_chunks",
           "speculation_point", "sub_workload"]
