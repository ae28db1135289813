"""A data-parallel group: one engine per DP rank, requests balanced as vLLM's DP client does (issue 34, item 3).

>>> res = simulate_dp(workload, rank_config, 4, clock=DPClockGroup(DPClock.build(model, gpu, DPShape(dep))))  # doctest: +SKIP
>>> res.totals["duration_s"], res.ranks[0]["dummy_steps"]                                                   # doctest: +SKIP

Under ``--data-parallel-size N`` vLLM runs one engine core per DP rank (``vllm/v1/engine/core.py``
``DPEngineCoreProc``), each with its own scheduler and KV cache pool; here each rank is a
:class:`simulator.engine.core.FastEngine` over ``config`` (a rank's engine: its ``num_gpu_blocks`` are one rank's,
:mod:`simulator.sizing.moe_parallel`'s per-rank pool), run in external mode.

**Balancing** (``vllm/v1/engine/core_client.py`` ``DPLBAsyncMPClient.get_core_engine_for_request``): a request
goes to the rank with the smallest ``waiting x 4 + running``, the ranks scanned from the client's start index (0
with one API server) and the first minimum taken (strict ``<``); the client then counts the request as waiting on
that rank until the coordinator's next stats (``vllm/v1/engine/coordinator.py`` ``DPCoordinatorProc``, every
100 ms). Here the counts are the ranks' own at the decision (the request just routed is in its waiting queue at
once, which is the client's local count): the 100 ms staleness is not modelled. ``routing="round-robin"`` is the
plain rotation (tests).

**Lockstep** (an MoE model: its MoE layers exchange every rank's tokens, ``ParallelConfig.use_all2all``): the
group steps together. At each group step every rank with work makes one schedule call (vLLM's rules, its own
batch); the step lasts :meth:`GroupClock.seconds` of all the ranks' batches (:class:`DPClockGroup`:
:func:`simulator.clock.expert_parallel.step_time_dp`, the slowest rank + experts + dispatch + combine + sync,
an idle rank running vLLM's one-token dummy batch while any rank has work, ``DPEngineCoreProc`` ``execute_dummy_batch``);
every rank's clock moves by that same duration, the idle ranks' too (counted as dummy steps). When no rank has
work the group waits for the next arrival (vLLM's ranks pause together at the end of a wave).

How a step's duration reaches the ranks, through the engine's public interface only: each rank's engine gets a
batched cost hook (``step_cost``, :class:`simulator.engine.step_clock.StepClock`), which the engine calls with
its batch's cost terms when it times its step. The hook records the batch, lets the ranks after it in the group
make their schedule calls (each inside the previous one's hook, so the ranks' calls nest ``DP`` deep), and
returns the group's duration once the last has scheduled; each rank's step therefore ends at the same time,
known before its outputs are processed. The ranks run without the engine's accelerators (``accelerate=False``:
the same results, one schedule call at a time, which lockstep needs).

**Independent ranks** (a dense model: ``ParallelConfig.reconfigure_for_independent_dp_rank``, no collective across
ranks): each rank keeps its own clock; requests are balanced at their arrival times (the ranks brought to it
first, as :class:`simulator.cluster.fleet.Fleet` does).

Not modelled: speculative decoding in lockstep (the drafter's passes are timed per rank), arrivals in steps.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulator.base import DeploymentSpec, FieldError, ModelSpec, SpecError, StepTimeModel
from simulator.clock import overlapped
from simulator.clock.expert_parallel import DUMMY_BATCH, DPClock, RankBatch, step_time_dp
from simulator.cluster.fleet import Fleet
from simulator.cluster.replicas import ClusterResult, _assemble
from simulator.cluster.routing import ClusterError, parse_routing
from simulator.engine import EngineConfig, FastEngine, WorkloadPrep
from simulator.sizing.moe_parallel import MAX_DATA_PARALLEL_SIZE, check_moe_shape
from simulator.workload import Workload

#: Ways a request picks its rank: vLLM's DP load balancing (the default) or a rotation.
DP_ROUTINGS = ("vllm", "round-robin")
#: vLLM's weight of a waiting request against a running one in the balancing score.
WAITING_WEIGHT = 4


class DPError(ClusterError):
    """Bad data-parallel input; the message names the field and, for a shape, vLLM's rule."""


def choose_rank(waiting: Sequence[int], running: Sequence[int], start: int = 0) -> int:
    """The rank vLLM's DP client sends a request to: the smallest ``waiting x 4 + running``, scanning from
    ``start``, the first minimum winning (``DPLBAsyncMPClient.get_core_engine_for_request``)."""
    n = len(waiting)
    best, pick = None, start % n
    for k in range(n):
        i = (start + k) % n
        score = WAITING_WEIGHT * waiting[i] + running[i]
        if best is None or score < best:
            best, pick = score, i
    return pick


class GroupClock:
    """Seconds of one lockstep group step from the ranks' batches (``None``: the rank made no schedule call)."""

    def seconds(self, batches: Sequence[RankBatch | None]) -> float:  # s
        raise NotImplementedError


@dataclass(frozen=True)
class LinearGroupClock(GroupClock):
    """The linear clock over a group: the slowest rank's ``base + per_token x tokens + per_req x requests`` (an
    idle rank the one-token dummy batch while any rank has tokens) plus ``sync_s`` at DP > 1. With ``sync_s = 0``
    and equal batches it is each rank's own linear step (the plumbing's check)."""

    model: StepTimeModel
    sync_s: float = 0.0  # s

    def _one(self, tokens: int, reqs: int) -> float:
        m = self.model
        return m.base_s + m.per_token_s * tokens + m.per_req_s * reqs

    def seconds(self, batches: Sequence[RankBatch | None]) -> float:
        called = [b for b in batches if b is not None]
        if not called:
            return 0.0
        t = max(self._one(int(b.tokens), int(b.num_reqs)) for b in called)
        if any(b.tokens > 0 for b in called) and len(batches) > 1:
            if len(called) < len(batches) or any(b.tokens <= 0 for b in called):
                t = max(t, self._one(int(DUMMY_BATCH.tokens), int(DUMMY_BATCH.num_reqs)))
            t += self.sync_s
        return t


@dataclass(frozen=True)
class TermsGroupClock(GroupClock):
    """A rank config's cost model over a group (:class:`simulator.clock.terms.StepCostTerms`, as the engine times
    a step: 0 for a call that scheduled nothing): the slowest rank's step plus ``sync_s`` at DP > 1 while any rank
    has tokens (an idle rank runs the one-token dummy batch)."""

    terms: Any
    sync_s: float = 0.0  # s

    def _one(self, b: RankBatch) -> float:
        if b.num_reqs <= 0:
            return 0.0
        pk = b.prefill_tokens if b.prefill_kv_tokens is None else b.prefill_kv_tokens
        return self.terms.time(int(b.prefill_tokens), int(b.prefill_attention_tokens), int(b.decode_tokens),
                               int(b.decode_context_tokens), int(b.num_reqs), int(pk))

    def seconds(self, batches: Sequence[RankBatch | None]) -> float:
        called = [b for b in batches if b is not None]
        if not called:
            return 0.0
        t = max(self._one(b) for b in called)
        if any(b.tokens > 0 for b in called) and len(batches) > 1:
            if len(called) < len(batches) or any(b.tokens <= 0 for b in called):
                t = max(t, self._one(DUMMY_BATCH))
            t += self.sync_s
        return t


def default_group_clock(config: EngineConfig) -> GroupClock:
    """The rank config's own clock over a group, no sync cost: its cost model (as the engine runs it, async
    scheduling's overlap included), else its linear ``step_time_model``."""
    if config.cost_model is not None:
        return TermsGroupClock(overlapped(config.cost_model, config.async_scheduling))
    return LinearGroupClock(config.step_time_model)


@dataclass(frozen=True)
class DPClockGroup(GroupClock):
    """The DP / EP clock (:func:`simulator.clock.expert_parallel.step_time_dp`) of an MoE model's group."""

    clock: DPClock
    async_scheduling: bool = False

    def seconds(self, batches: Sequence[RankBatch | None]) -> float:
        return step_time_dp([b if b is not None else RankBatch() for b in batches], self.clock,
                            async_scheduling=self.async_scheduling).total


class _RankCost:
    """Rank ``i``'s batched cost hook: ``step_time(P, A, D, C, R, prefill_kv_tokens=PK)`` -> the group's step."""

    __slots__ = ("group", "i")

    def __init__(self, group: _Lockstep, i: int) -> None:
        self.group, self.i = group, i

    def step_time(self, P, A, D, C, R, prefill_kv_tokens=None):
        batch = RankBatch(float(P), float(A), float(D), float(C), float(R),
                          None if prefill_kv_tokens is None else float(prefill_kv_tokens))
        return (self.group.rank_scheduled(self.i, batch),)


@dataclass(frozen=True, eq=False)
class DPResult:
    """A DP group's outcome: the cluster result over its ranks (``instances[i]`` is rank ``i``) and per-rank
    figures (``ranks``: requests, preemptions, peak and mean KV usage, dummy steps and their seconds)."""

    data_parallel_size: int
    lockstep: bool
    routing: str
    cluster: ClusterResult
    ranks: tuple[dict[str, Any], ...]
    group_steps: int
    engines: tuple = field(default=(), repr=False)  # the ranks' engines (their hooks: a disaggregated pool's figures)

    @property
    def totals(self) -> dict[str, Any]:
        return self.cluster.totals

    @property
    def latency(self):
        return self.cluster.latency

    def to_dict(self, *, requests: bool = False) -> dict[str, Any]:
        d = self.cluster.to_dict(requests=requests)
        d["data_parallel"] = {"data_parallel_size": self.data_parallel_size, "lockstep": self.lockstep,
                              "routing": self.routing, "group_steps": self.group_steps, "ranks": list(self.ranks)}
        return d


class _Lockstep:
    """The group's drive: group steps until every rank is done (see the module docstring)."""

    def __init__(self, workload: Workload, config: EngineConfig, dp: int, clock: GroupClock, routing: str,
                 prep: WorkloadPrep, record_steps: bool, share: tuple[int, int] = (0, 1), engine_factory=None,
                 stream: tuple[list, list] | None = None) -> None:
        self.wl, self.N, self.clock, self.routing, self.prep = workload, dp, clock, routing, prep
        self.share = share  # (g, G): this group takes the requests k = g mod G in arrival order
        self.stream = stream  # (requests, times) in the order they reach the group (None: the workload's arrivals)
        make = engine_factory or FastEngine
        self.engines = [make(workload, config, prep=prep, record_steps=record_steps, accelerate=False,
                             step_cost=_RankCost(self, i)) for i in range(dp)]
        self.assign = np.full(workload.n, -1, np.int64)
        self.dummy_steps = [0] * dp
        self.dummy_s = [0.0] * dp
        self.group_steps = 0
        self._batches: list[RankBatch | None] = [None] * dp
        self._duration: float | None = None
        self._chain: tuple[list[int], float] = ([], 0.0)

    def rank_scheduled(self, i: int, batch: RankBatch) -> float:
        """Rank ``i`` scheduled ``batch``: the ranks after it schedule theirs, then the group step's seconds."""
        if self._batches[i] is not None:  # a second schedule call in the same instant (the step took 0 s)
            alone: list[RankBatch | None] = [None] * self.N
            alone[i] = batch
            return self.clock.seconds(alone)
        self._batches[i] = batch
        busy, until = self._chain
        self._run_from(busy.index(i) + 1, busy, until)
        if self._duration is None:
            self._duration = self.clock.seconds(self._batches)
        return self._duration

    def _run_from(self, j: int, busy: list[int], until: float) -> None:
        for k in range(j, len(busy)):
            i = busy[k]
            self.engines[i].advance(until)
            if self._batches[i] is not None:
                return  # its hook ran the ranks after it

    def _route(self, q: int, p: int) -> None:
        if self.routing == "round-robin":
            i = p % self.N
        else:
            i = choose_rank([len(e.requests.waiting) for e in self.engines], [e.num_running for e in self.engines])
        self.engines[i].submit(q)
        self.assign[q] = i

    def run(self) -> None:
        if self.stream is None:
            order, arr = self.prep.order.tolist(), self.prep.arrival_sorted.tolist()
        else:
            order, arr = list(self.stream[0]), list(self.stream[1])
        n, p = len(order), 0
        engines = self.engines
        for e in engines:
            e.start(external=True)
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, 1000 + 40 * self.N))  # the ranks' calls nest DP deep
        try:
            while True:
                T = max(e.clock for e in engines)
                for e in engines:
                    e.idle_until(T)
                g, G = self.share
                while p < n and arr[p] <= T:
                    if p % G == g:
                        self._route(order[p], p // G)
                    p += 1
                busy = [i for i, e in enumerate(engines) if e.busy]
                if not busy:
                    if p >= n:
                        break
                    for e in engines:
                        e.idle_until(arr[p])
                    continue
                self._step(T, busy, arr[p] if p < n else None)
            for e in engines:
                e.advance(None)
                e.close()
        finally:
            sys.setrecursionlimit(old_limit)

    def _step(self, T: float, busy: list[int], next_arrival: float | None) -> None:
        """One group step at ``T``: the ranks with requests schedule, every rank's clock moves by the group's
        duration. A rank whose only work is a step in flight (async scheduling) processes it after, up to the
        step's end (or, when no rank stepped, up to the next arrival, as an engine of its own would idle)."""
        engines = self.engines
        self._batches = [None] * self.N
        self._duration = None
        chain = [i for i in busy if engines[i].num_running or engines[i].requests.waiting]
        until = math.nextafter(T, math.inf)  # (one schedule call each: its step ends later)
        self._chain = (chain, until)
        self._run_from(0, chain, until)
        d = self._duration or 0.0
        for i in busy:
            if i not in chain:
                engines[i].advance(T + d if d > 0 else next_arrival)
        self.group_steps += d > 0
        if d <= 0 and chain:  # no rank could schedule: the group waits for the ranks' next events
            self._wait_for_events(T, chain, next_arrival)
        for i, e in enumerate(engines):
            if self._batches[i] is None and d > 0:
                self.dummy_steps[i] += 1
                self.dummy_s[i] += d
            e.idle_until(T + d)

    def _wait_for_events(self, T: float, chain: list[int], next_arrival: float | None) -> None:
        """The ranks with work scheduled nothing (a disaggregated pool's rank whose requests wait for their KV
        transfer, or for blocks held until the decode side reads them): every rank's clock moves to the
        earliest of those ranks' next events (their hooks' ``next_event_s``) and the next arrival, as one
        engine of its own idles until its next event. Ranks whose hooks say nothing are left as they are."""
        events = []
        for i in chain:
            when = getattr(self.engines[i].hooks, "next_event_s", None)
            t = None if when is None else when()
            if t is not None and t > T:
                events.append(t)
        if events:
            t_next = min(events if next_arrival is None else [*events, next_arrival])
            for e in self.engines:
                e.idle_until(t_next)


def _independent(workload: Workload, config: EngineConfig, dp: int, routing: str, prep: WorkloadPrep,
                 record_steps: bool, groups: int = 1, engine_factory=None,
                 stream: tuple[list, list] | None = None) -> tuple[list[FastEngine], np.ndarray]:
    """Independent ranks (a dense model's DP): each its own clock, requests balanced at their arrivals; with
    ``groups`` > 1, ``groups`` such DP groups, request ``k`` (in arrival order) to group ``k mod groups``."""
    fleet = Fleet(workload, config, dp * groups, prep=prep, record_steps=record_steps,
                  **({} if engine_factory is None else {"engine_factory": engine_factory}))
    fleet.start()
    assign = np.full(workload.n, -1, np.int64)
    if stream is None:
        order, arr = prep.order.tolist(), prep.arrival_sorted.tolist()
    else:
        order, arr = list(stream[0]), list(stream[1])
    for p in range(len(order)):
        q, t = order[p], arr[p]
        fleet.advance(t)
        g, k = (p % groups) * dp, p // groups
        i = g + (k % dp if routing == "round-robin" else choose_rank(fleet.waiting[g:g + dp].tolist(),
                                                                      fleet.running[g:g + dp].tolist()))
        fleet.submit(i, q, t)
        assign[q] = i
    fleet.finish()
    return fleet.engines, assign


def simulate_dp(workload: Workload, config: EngineConfig, data_parallel_size: int, *,
                clock: GroupClock | None = None, lockstep: bool = True, routing: str = "vllm",
                record_steps: bool = False, prep: WorkloadPrep | None = None,
                slo_ttft_s: float | None = None, slo_itl_s: float | None = None, replicas: int = 1,
                engine_factory=None, stream: tuple[Sequence[int], Sequence[float]] | None = None) -> DPResult:
    """Simulate ``workload`` on a DP group of ``data_parallel_size`` ranks, each an engine over ``config``
    (``replicas`` > 1: that many DP groups behind a round-robin router, request ``k`` in arrival order to group
    ``k mod replicas``; the result's instances are every group's ranks, group by group).

    Parameters
    ----------
    config : EngineConfig
        One rank's engine (its ``num_gpu_blocks`` are one rank's pool).
    clock : GroupClock, optional
        The lockstep group's step (default :func:`default_group_clock`: the config's own clock, the slowest rank,
        no sync cost). Ignored with ``lockstep=False`` (each rank its own config's clock).
    lockstep : bool
        The ranks step together (an MoE model); False: independent ranks (a dense model).
    routing : {"vllm", "round-robin"}
    engine_factory : callable, optional
        Builds each rank's engine as ``FastEngine(workload, config, **kw)`` does (default :class:`FastEngine`): a
        disaggregated pool's prefill or decode engine (:mod:`simulator.cluster.disaggregated`). When the ranks
        with work schedule nothing (waiting for a KV transfer), the group moves to the earliest next event their
        hooks name (``next_event_s``) or the next arrival.
    stream : (requests, times), optional
        The requests in the order they reach the groups and when (ascending; default: the workload's arrivals),
        e.g. a decode pool's requests at their handoffs. Requests not in it never run.
    """
    if not isinstance(workload, Workload):
        raise DPError("must be a simulator.workload.requests.Workload", field="workload")
    dp = data_parallel_size
    if isinstance(dp, bool) or not isinstance(dp, (int, np.integer)) or not 1 <= dp <= MAX_DATA_PARALLEL_SIZE:
        raise DPError(f"must be a whole number from 1 to {MAX_DATA_PARALLEL_SIZE:,}, got {dp!r}",
                      field="data_parallel_size")
    if routing not in DP_ROUTINGS:
        raise DPError(f"must be one of {', '.join(DP_ROUTINGS)}, got {routing!r}", field="routing")
    if lockstep:
        if workload.arrival_unit != "s":
            raise DPError("a lockstep DP group needs arrivals in seconds", field="workload.arrival_unit")
        if config.speculative is not None:
            raise DPError("speculative decoding in a lockstep DP group is not modelled", field="speculative")
    if isinstance(replicas, bool) or not isinstance(replicas, (int, np.integer)) or not 1 <= replicas <= 256:
        raise DPError(f"must be a whole number from 1 to 256, got {replicas!r}", field="replicas")
    prep = prep or WorkloadPrep(workload)
    dp, G = int(dp), int(replicas)
    dummy = [0] * (dp * G)
    dummy_s = [0.0] * (dp * G)
    steps = 0
    if lockstep:
        engines, assign = [], np.full(workload.n, -1, np.int64)
        for g in range(G):
            group = _Lockstep(workload, config, dp, clock or default_group_clock(config), routing, prep,
                              record_steps, share=(g, G), engine_factory=engine_factory, stream=stream)
            group.run()
            mine = group.assign >= 0
            assign[mine] = group.assign[mine] + g * dp
            engines += group.engines
            dummy[g * dp:(g + 1) * dp], dummy_s[g * dp:(g + 1) * dp] = group.dummy_steps, group.dummy_s
            steps += group.group_steps
    else:
        engines, assign = _independent(workload, config, dp, routing, prep, record_steps, G, engine_factory, stream)
    cluster = _assemble(workload, engines, assign, parse_routing("round-robin" if routing == "round-robin" else "least-loaded"),
                        0.0, slo_ttft_s, slo_itl_s, record_steps, None)
    ranks = tuple({"rank": i, "requests": int(inst.request_index.size),
                   "preemptions": int(inst.totals["preemptions"]),
                   "peak_kv_usage": float(inst.totals["peak_kv_usage"]),
                   "mean_kv_usage": float(inst.totals["mean_kv_usage"]),
                   "dummy_steps": int(dummy[i]), "dummy_s": float(dummy_s[i])}
                  for i, inst in enumerate(cluster.instances))
    return DPResult(dp, lockstep, routing, cluster, ranks, int(steps), tuple(engines))


def dp_shape_from_cost_model(cost_model: Any, data_parallel_size: int, enable_expert_parallel: bool,
                             all2all_backend: str = "allgather_reducescatter"):
    """``(model, gpu, deployment)`` of a roofline ``cost_model`` object with a DP / EP shape, the shape checked
    against vLLM's rules (:func:`simulator.sizing.moe_parallel.check_moe_shape`); None for another cost model.

    Raises :class:`DPError` naming the field."""
    from simulator.base import GpuSpec
    from simulator.sizing import parse_hf_config

    if not (isinstance(cost_model, dict) and cost_model.get("kind") == "roofline"):
        if enable_expert_parallel:
            raise DPError("needs the model to check vLLM's rule (expert parallelism applies to MoE layers only): "
                          "give a roofline cost_model with the model's config.json", field="enable_expert_parallel")
        return None
    try:
        model: ModelSpec = parse_hf_config(cost_model["model"], generation_config=cost_model.get("generation_config"))
        gpu = GpuSpec.from_dict(cost_model["gpu"])
        dep = DeploymentSpec(tensor_parallel_size=cost_model.get("tp", 1), data_parallel_size=data_parallel_size,
                             enable_expert_parallel=enable_expert_parallel)
        check_moe_shape(model, dep)
    except SpecError as exc:
        raise DPError(exc.message, field=exc.field or "data_parallel_size") from None
    return model, gpu, dep


def sized_rank_config(data: dict[str, Any], fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A run config with ``"num_gpu_blocks": "auto"`` sized the way vLLM starts one rank of its shape:
    ``(config, sizing)``, the config as it is and None otherwise.

    The shape is the roofline ``cost_model``'s model, GPU and ``tp`` with the DP fields (``fields``); one rank's
    pool is what vLLM sizes on each of its GPUs (:func:`simulator.sizing.closed_form.plan`: attention and KV per
    rank, routed experts over EP; ``docs/moe_parallelism.md``), at the config's ``block_size``,
    ``max_model_len`` and ``gpu_memory_utilization`` (0.9 when left out; it is not an engine field and is taken
    out). ``kv_bytes_per_block`` is filled in when left out. ``sizing`` says what was sized: ``num_gpu_blocks``,
    ``kv_cache_tokens``, ``max_concurrency`` and the shape. :class:`DPError` names the field."""
    from simulator.sizing import plan

    if data.get("num_gpu_blocks") != "auto":
        if "gpu_memory_utilization" in data:
            raise DPError('only with "num_gpu_blocks": "auto" (it sizes the pool; a given pool is used as it is)',
                          field="gpu_memory_utilization")
        return data, None
    dp, ep = fields.get("data_parallel_size", 1), fields.get("enable_expert_parallel", False)
    shape = dp_shape_from_cost_model(data.get("cost_model"), dp, ep) if isinstance(dp, int) and isinstance(ep, bool) \
        else None
    if shape is None:
        raise DPError('"auto" sizes the pool from a roofline cost_model (the model\'s config.json, the GPU and tp)',
                      field="num_gpu_blocks")
    model, gpu, dep = shape
    knobs = {k: data[k] for k in ("block_size", "max_model_len", "gpu_memory_utilization") if k in data}
    try:
        res = plan(model, gpu, replace(dep, **knobs))
    except SpecError as exc:
        raise DPError(exc.message, field=exc.field or "num_gpu_blocks") from None
    except (TypeError, ValueError) as exc:
        raise DPError(str(exc), field="num_gpu_blocks") from None
    if not res.fits or res.num_gpu_blocks < 1:
        raise DPError(f"one rank of this shape does not start on {gpu.name}: no memory is left for the KV cache "
                      f"(weights {res.memory_gib.weights:.1f} GiB per GPU)", field="num_gpu_blocks")
    out = {k: v for k, v in data.items() if k != "gpu_memory_utilization"}
    out["num_gpu_blocks"] = int(res.num_gpu_blocks)
    out.setdefault("kv_bytes_per_block", int(res.bytes_per_block_per_gpu))
    sizing = {"num_gpu_blocks": int(res.num_gpu_blocks), "kv_cache_tokens": int(res.kv_cache_tokens),
              "max_concurrency": round(float(res.max_concurrency), 2),
              "shape": f"TP {dep.tensor_parallel_size} x DP {dp}{' + EP' if ep else ''} on {gpu.name}"}
    return out, sizing


#: A config's data-parallel fields (beside the rank's engine fields; ``python -m simulator run``).
DP_FIELDS = ("data_parallel_size", "enable_expert_parallel", "all2all_backend", "data_parallel_routing")


@dataclass(frozen=True)
class DPRun:
    """A config's DP shape as a run takes it: ``lockstep`` for an MoE model (its clock, :class:`DPClockGroup`),
    independent ranks for a dense model or the linear clock (no model named); ``active`` when it is not today's
    single engine (DP 1, EP off)."""

    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    routing: str = "vllm"
    lockstep: bool = False
    clock: GroupClock | None = None

    @property
    def active(self) -> bool:
        return self.data_parallel_size > 1 or self.enable_expert_parallel

    def simulate(self, workload: Workload, config: EngineConfig, **kw) -> DPResult:
        return simulate_dp(workload, config, self.data_parallel_size, clock=self.clock, lockstep=self.lockstep,
                           routing=self.routing, **kw)


def split_dp_fields(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(engine fields, DP fields)`` of a config object (:data:`DP_FIELDS`)."""
    return ({k: v for k, v in data.items() if k not in DP_FIELDS},
            {k: v for k, v in data.items() if k in DP_FIELDS})


def dp_run_from_config(fields: dict[str, Any], cost_model: Any, config: EngineConfig) -> DPRun:
    """The :class:`DPRun` of a config's DP ``fields`` (:func:`split_dp_fields`), its raw ``cost_model`` object
    and its rank engine ``config``; :class:`DPError` names the field and vLLM's rule."""
    from simulator.clock.expert_parallel import ALL2ALL_BACKENDS, DPShape

    dp = fields.get("data_parallel_size", 1)
    if isinstance(dp, bool) or not isinstance(dp, int) or not 1 <= dp <= MAX_DATA_PARALLEL_SIZE:
        raise DPError(f"must be a whole number from 1 to {MAX_DATA_PARALLEL_SIZE:,}, got {dp!r}",
                      field="data_parallel_size")
    ep = fields.get("enable_expert_parallel", False)
    if not isinstance(ep, bool):
        raise DPError(f"must be true or false, got {ep!r}", field="enable_expert_parallel")
    backend = fields.get("all2all_backend", ALL2ALL_BACKENDS[0])
    if backend not in ALL2ALL_BACKENDS:
        raise DPError(f"must be one of {', '.join(ALL2ALL_BACKENDS)} (vLLM's all2all_backend), got {backend!r}",
                      field="all2all_backend")
    routing = fields.get("data_parallel_routing", "vllm")
    if routing not in DP_ROUTINGS:
        raise DPError(f"must be one of {', '.join(DP_ROUTINGS)}, got {routing!r}", field="data_parallel_routing")
    if dp == 1 and not ep:
        return DPRun()
    shape = dp_shape_from_cost_model(cost_model, dp, ep)
    if shape is None or not shape[0].is_moe:
        return DPRun(dp, ep, routing, lockstep=False)
    model, gpu, dep = shape
    try:
        clock = DPClock.build(model, gpu, DPShape(dep, all2all_backend=backend),
                              coefficients=cost_model.get("coefficients"))
    except FieldError as exc:
        raise DPError(f"the DP / EP clock: {exc.message}",
                      field=f"cost_model.{exc.field}" if exc.field else "cost_model") from None
    return DPRun(dp, ep, routing, lockstep=True, clock=DPClockGroup(clock, config.async_scheduling))


__all__ = ["DP_FIELDS", "DPRun", "dp_run_from_config", "sized_rank_config", "split_dp_fields", "DP_ROUTINGS", "DPClockGroup", "DPError", "DPResult", "GroupClock", "LinearGroupClock", "TermsGroupClock", "default_group_clock",
           "WAITING_WEIGHT", "choose_rank", "dp_shape_from_cost_model", "simulate_dp"]
