"""Preparing and judging the candidates of a deployment search.

:func:`prepare_candidate` sizes a replica shape the way vLLM starts it
(:func:`simulator.sizing.closed_form.plan`) and builds its engine configuration with the
roofline clock; a shape that does not start, has no price or no roofline is
rejected here, before any simulation, with the reason in words.
:func:`replicas_lower_bound` gives the fewest replicas the roofline's own
arithmetic allows (the search starts there and skips shapes whose bound
already costs more than the best answer). :func:`judge` turns one simulated
cluster into a :class:`Trial`: the SLO figures, the goodput share and why it
misses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulator.base import DeploymentSpec, ModelSpec, figure, ms_against
from simulator.clock import CostModelError, RooflineStepTime, overlapped
from simulator.engine import EngineConfig, request_latencies, serving_offsets
from simulator.engine.steady_state import queue_growth
from simulator.search.space import SLO_METRIC_LABELS, SLO_METRICS, Candidate, SearchSpace, Slo, format_seconds
from simulator.sizing import default_async_scheduling
from simulator.speculative import DraftSpec, draft_step_terms, plan_with_draft
from simulator.workload import Workload


@dataclass(frozen=True)
class Prepared:
    """A candidate after sizing: its engine config (None when rejected) and figures."""

    index: int
    candidate: Candidate
    config: EngineConfig | None
    reason: str
    sizing: dict[str, Any] = field(default_factory=dict)
    min_replicas: int = 1
    group: Any = None  # a DP group's run (simulator.cluster.data_parallel.DPRun); None: one engine a replica


@dataclass(frozen=True)
class Trial:
    """One simulated deployment: ``num_instances`` replicas of a candidate.

    ``values`` maps each SLO target's label (``TTFT p90``) to seconds (None
    when no request produced the figure); ``goodput`` is the share of all
    requests meeting every per-request limit; ``misses`` says in words why it
    fails (empty when it meets the SLO).
    """

    num_instances: int
    cost_per_hour: float  # USD/h
    values: dict[str, float | None]
    goodput: float
    finished: int
    dropped: int
    unfinished: int
    output_tokens_per_s: float  # tokens/s
    request_imbalance: float
    meets: bool
    misses: tuple[str, ...]
    severity: float  # worst (value / target), 1.0 or less when met
    figures: dict[str, float | None] = field(default_factory=dict)  # s: TTFT/TPOT/ITL/E2E percentiles

    @property
    def cost_per_million_tokens(self) -> float | None:
        """USD per million output tokens at the served rate.  # USD"""
        if not self.output_tokens_per_s or not math.isfinite(self.output_tokens_per_s):
            return None
        return self.cost_per_hour / (self.output_tokens_per_s * 3600.0) * 1e6

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinite or undefined figures become None)."""
        d = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.__dict__.items()}
        d["misses"] = list(self.misses)
        d["cost_per_million_tokens"] = self.cost_per_million_tokens
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trial:
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        kw["misses"] = tuple(kw["misses"])
        kw["severity"] = math.inf if kw["severity"] is None else kw["severity"]
        kw["output_tokens_per_s"] = math.nan if kw["output_tokens_per_s"] is None else kw["output_tokens_per_s"]
        return cls(**kw)


def default_max_model_len(workload: Workload, model: ModelSpec) -> int:
    """The workload's longest request rounded up to 256 tokens, within the model's context.  # tokens"""
    longest = int((workload.prompt_len + workload.output_len).max())
    mml = int(math.ceil(longest / 256) * 256)
    cap = model.max_position_embeddings
    return min(mml, cap) if cap else mml


def _weights_words(sizing, cand: Candidate) -> str:
    mem = sizing.memory_gib
    if mem.weights > mem.total:
        return (f"does not fit: needs {mem.weights:.1f} GiB for weights per GPU on "
                f"{cand.gpus_per_replica}x {cand.gpu.name} ({mem.total:.1f} GiB each)")
    return f"does not fit on {cand.gpus_per_replica}x {cand.gpu.name}: {sizing.reason}"


def prepare_candidate(index: int, cand: Candidate, model: ModelSpec, space: SearchSpace, max_model_len: int,
                      workload: Workload, slo: Slo) -> Prepared:
    """Size ``cand``; reject it (config None, reason in words) when it cannot run or be priced."""
    if cand.price_per_replica is None:
        return Prepared(index, cand, None, f"no price per hour for {cand.gpu.name}: its cost cannot be compared")
    if space.replicas_cap(cand) < 1:
        return Prepared(index, cand, None, f"needs {cand.gpus_per_replica:,} GPUs a replica, more than the "
                                           f"{space.max_gpus:,} of space.max_gpus")
    m = cand.model_for(model)
    try:
        dep = DeploymentSpec(tensor_parallel_size=cand.tensor_parallel, pipeline_parallel_size=cand.pipeline_parallel,
                             kv_cache_dtype=cand.kv_cache_dtype, max_num_seqs=cand.max_num_seqs,
                             gpu_memory_utilization=space.gpu_memory_utilization, max_model_len=max_model_len,
                             **({"data_parallel_size": cand.data_parallel,
                                 "enable_expert_parallel": cand.expert_parallel} if cand.dp_group else {}))
        if cand.dp_group and cand.speculative is not None:
            return Prepared(index, cand, None, "speculative decoding in a DP group is not modelled")
        if cand.dp_group and space.routing != "round-robin":
            return Prepared(index, cand, None, "replicas of a DP group are routed round-robin (each group balances "
                                               f"its own ranks as vLLM's DP client does), not {space.routing}")
        draft = None if cand.speculative is None else DraftSpec(cand.speculative.method,
                                                                  cand.speculative.num_speculative_tokens)
        sizing = plan_with_draft(m, cand.gpu, dep, draft)
    except ValueError as exc:
        return Prepared(index, cand, None, f"cannot be built: {exc}")
    info = {"num_gpu_blocks": sizing.num_gpu_blocks, "kv_cache_tokens": sizing.kv_cache_tokens,
            "weights_gib": round(sizing.memory_gib.weights, 3), "kv_gib": round(sizing.memory_gib.kv, 3),
            "kv_cache_dtype": sizing.kv_cache_dtype, "max_num_batched_tokens": sizing.max_num_batched_tokens,
            "max_model_len": sizing.max_model_len}
    if not sizing.fits or sizing.num_gpu_blocks < 2:
        return Prepared(index, cand, None, _weights_words(sizing, cand), info)
    try:
        coefficients = space.coefficients_for(cand.gpu)  # None: the model's own path, every default
        rank = replace(dep, data_parallel_size=1, enable_expert_parallel=False)  # a DP rank's own clock
        terms = RooflineStepTime.from_specs(m, cand.gpu, coefficients=coefficients, deployment=rank).terms
        speculative = None if draft is None else cand.speculative.config(
            draft_step_terms(m, draft, cand.gpu, cand.tensor_parallel, coefficients))
    except (CostModelError, ValueError) as exc:
        return Prepared(index, cand, None, f"no step-time model: {exc}", info)
    cfg = EngineConfig(num_gpu_blocks=sizing.num_gpu_blocks, block_size=sizing.block_size,
                       max_num_seqs=sizing.max_num_seqs, max_num_batched_tokens=sizing.max_num_batched_tokens,
                       max_model_len=max_model_len, cost_model=terms,
                       kv_bytes_per_block=int(sizing.bytes_per_block_per_gpu),
                       async_scheduling=default_async_scheduling(dep.vllm_version, space.async_scheduling),
                       speculative=speculative)
    if cand.dp_group:
        return _dp_group(index, cand, m, dep, cfg, coefficients, info, workload, sizing.kv_cache_tokens)
    per_step = 1 if draft is None else 1 + draft.num_speculative_tokens  # most tokens a request gets per step
    timed = overlapped(terms, cfg.async_scheduling)  # as the engine times the steps (async: CPU time overlapped)
    floor_miss = slo_floor_miss(workload, timed, slo, per_step)
    if floor_miss:
        info["floor_severity"] = floor_severity(workload, timed, slo, per_step)
        return Prepared(index, cand, None, f"cannot meet the SLO with any number of replicas: {floor_miss}", info)
    bound = replicas_lower_bound(workload, timed, cfg.max_num_seqs, per_step)
    return Prepared(index, cand, cfg, f"{sizing.kv_cache_tokens:,} tokens of KV cache per GPU", info, bound)


def _dp_group(index: int, cand: Candidate, model: ModelSpec, dep: DeploymentSpec, cfg: EngineConfig,
              coefficients, info: dict, workload: Workload, kv_tokens: int) -> Prepared:
    """A DP group's candidate: its ranks' engine ``cfg`` and the group's run (an MoE model's ranks in lockstep on
    the DP / EP clock, a dense model's independent). The latency floors are left out (they time one engine's
    clock, not the group's); the replicas' estimate is the engines' divided by the ranks."""
    from simulator.clock.expert_parallel import DPClock, DPShape
    from simulator.cluster.data_parallel import DPClockGroup, DPRun

    clock = None
    if model.is_moe:
        try:
            clock = DPClockGroup(DPClock.build(model, cand.gpu, DPShape(dep), coefficients=coefficients),
                                 cfg.async_scheduling)
        except (CostModelError, ValueError) as exc:
            return Prepared(index, cand, None, f"no DP / EP clock: {exc}", info)
    group = DPRun(dep.data_parallel_size, dep.enable_expert_parallel, "vllm", lockstep=model.is_moe, clock=clock)
    timed = overlapped(cfg.cost_model, cfg.async_scheduling)
    bound = max(1, replicas_lower_bound(workload, timed, cfg.max_num_seqs) // dep.data_parallel_size)
    return Prepared(index, cand, cfg, f"{kv_tokens:,} tokens of KV cache per GPU, {dep.data_parallel_size} DP "
                                      "ranks a replica", info, bound, group)


def replicas_lower_bound(workload: Workload, terms, max_num_seqs: int, tokens_per_step: int = 1) -> int:
    """Replicas whose work fits in the traffic's span, by the roofline's own arithmetic (an estimate).

    A step's time is at least its compute, ``tok_s`` per scheduled token, so
    all steps together take at least ``tok_s x (unique prompt tokens +
    decode tokens)`` (cached prefixes are not recomputed; every output token
    after the first is one decode token). A step of ``D <= max_num_seqs``
    decode tokens also takes at least ``D x tau``, ``tau = time(0, 0, mns, 0,
    mns) / mns`` (a full decode batch with no context: the weights are read
    once per step and every other term grows with the batch). The replicas
    together are busy at least the larger of the two, ``W``; over a long
    trace replicas busier than the arrival span fall ever further behind, so
    ``floor(W / span)`` is where the search starts. It is not a proof (a short
    trace can finish its decodes after the last arrival and still meet a
    TTFT target), so the search also tries fewer replicas when it meets.
    Under speculative decoding a request gets up to ``tokens_per_step`` tokens
    (``1 + k``) from one step, so the decode steps' bound is divided by it.
    """
    decode = float(np.maximum(workload.output_len - 1, 0).sum())  # tokens
    unique = float(np.maximum(workload.prompt_len - workload.shared_len(), 1).sum())  # tokens
    tau = terms.time(0, 0, max_num_seqs, 0, max_num_seqs) / max_num_seqs  # s per decode token
    busy = max(terms.tok_s * (unique + decode), tau * decode / tokens_per_step)  # s
    span = float(workload.arrival.max() - workload.arrival.min())  # s
    if span <= 0:
        return 1
    return max(1, math.floor(busy / span))


def latency_floors(workload: Workload, terms, tokens_per_step: int = 1) -> dict[str, np.ndarray]:
    """Per-request lower bounds of TTFT, mean ITL and E2E that no replica count can beat, shape (n,).  # s

    TTFT: the unique prompt tokens' compute plus one step's fixed cost
    (chunks of a prefill are at least their own tokens' compute each). ITL:
    a token gap spans at least one step holding the request's decode, at
    least ``time(0, 0, 1, 0, 1)``. E2E: TTFT plus that per later token. Under
    speculative decoding a step can give a request ``tokens_per_step`` tokens
    (``1 + k``): the gap floors are divided by it.
    """
    unique = np.maximum(workload.prompt_len - workload.shared_len(), 1).astype(np.float64)  # tokens
    ttft = (terms.tok_s + terms.per_token_s) * unique + terms.base_s  # s
    gap = terms.time(0, 0, 1, 0, 1) / tokens_per_step  # s
    e2e = ttft + gap * np.maximum(workload.output_len - 1, 0)  # s
    return {"ttft": ttft, "tpot": np.full(workload.n, gap), "itl": np.full(workload.n, gap), "e2e": e2e}


def floor_severity(workload: Workload, terms, slo: Slo, tokens_per_step: int = 1) -> float:
    """The worst ratio of a target's floor (:func:`latency_floors`) to its bound: how far the hardware's best
    is from the SLO (the shape nearest to meeting it has the smallest)."""
    floors = latency_floors(workload, terms, tokens_per_step)
    return max(float(np.percentile(floors[tg.metric], tg.q)) / tg.max_s for tg in slo.targets)


def slo_floor_miss(workload: Workload, terms, slo: Slo, tokens_per_step: int = 1) -> str | None:
    """Why ``slo`` cannot hold at any replica count by :func:`latency_floors`, or None."""
    floors = latency_floors(workload, terms, tokens_per_step)
    for tg in slo.targets:
        v = float(np.percentile(floors[tg.metric], tg.q))
        if v > tg.max_s:
            return (f"{tg.label} is at least {format_seconds(v)} on this hardware (target "
                    f"{format_seconds(tg.max_s)})")
    if slo.min_goodput > 0:
        limits = slo.per_request_limits()
        good = np.ones(workload.n, bool)
        for metric, lim in limits.items():
            good &= floors[metric] <= lim
        share = float(good.mean())
        if share < slo.min_goodput:
            return (f"at most {share:.1%} of requests can meet the per-request limits "
                    f"(at least {slo.min_goodput:.0%} must)")
    return None


def judge(res, workload: Workload, slo: Slo, cost_per_hour: float) -> Trial:
    """The SLO verdict of one simulated cluster (:class:`simulator.cluster.replicas.ClusterResult`)."""
    lat = res.latency
    t = res.totals
    values: dict[str, float | None] = {}
    misses: list[str] = []
    severity = 0.0
    for tg in slo.targets:
        v = lat.percentile(tg.metric, tg.q)
        values[tg.label] = None if math.isnan(v) else v
        if tg.metric in ("itl", "tpot") and math.isnan(v):
            continue  # one-token answers have no gap: any ITL or TPOT target holds
        if math.isnan(v) or v > tg.max_s:
            misses.append(miss_words(tg.label, math.inf if math.isnan(v) else v, tg.max_s))
        severity = max(severity, (v if not math.isnan(v) else math.inf) / tg.max_s)
    dropped, unfinished = int(t["dropped_unservable"]), int(t["unfinished"])
    if dropped:
        misses.insert(0, f"drops {dropped:,} requests as unservable (a prompt does not fit one replica's KV cache)")
        severity = math.inf
    if unfinished:
        misses.insert(0, f"leaves {unfinished:,} requests unfinished")
        severity = math.inf
    growth = queue_growth(res.requests["arrival"], res.requests["first_token_time_s"])
    if growth is not None and growth.growing:
        misses.insert(0, growth.words())
        severity = max(severity, 1.0 + growth.rate_per_s / growth.arrival_rate_per_s)
    share = goodput_share(res.requests, slo)
    if slo.min_goodput > 0 and share < slo.min_goodput:
        misses.append(f"only {share:.1%} of requests meet the SLO (at least {slo.min_goodput:.0%} must)")
        severity = max(severity, slo.min_goodput / max(share, 1e-9))
    return Trial(int(res.num_instances), float(cost_per_hour), values, share, int(t["finished"]), dropped,
                 unfinished, float(lat.output_tokens_per_s), float(res.load.request_imbalance), not misses,
                 tuple(misses), severity, latency_figures(lat, slo))


def latency_figures(lat, slo: Slo) -> dict[str, float | None]:
    """TTFT, TPOT, ITL and E2E at p50, p90, p99 and at each target's percentile (labels such as ``ITL p99``;
    None where no request gave the figure), so that an answer shows TPOT and ITL side by side.  # s"""
    qs = sorted({50.0, 90.0, 99.0} | {t.q for t in slo.targets})
    out: dict[str, float | None] = {}
    for metric in SLO_METRICS:
        for q in qs:
            v = lat.percentile(metric, q)
            out[f"{SLO_METRIC_LABELS[metric]} p{q:g}"] = None if math.isnan(v) else v
    return out


def miss_words(label: str, value_s: float, target_s: float) -> str:
    """``misses ITL p90 by 0.06 ms (39.36 ms against 39.3 ms)``: the figures with as many digits as it takes
    for the value, its target and the margin to read as they compare."""
    value, target = ms_against(value_s, target_s)
    if not math.isfinite(value_s):
        return f"misses {label} (no figure: {value} against {target} ms)"
    return f"misses {label} by {figure((value_s - target_s) * 1000)} ms ({value} ms against {target} ms)"


def goodput_share(requests: dict[str, Any], slo: Slo) -> float:
    """Fraction of all requests that finished within every per-request limit of ``slo``."""
    lat = request_latencies(arrival_time=requests["arrival"], first_token_time=requests["first_token_time_s"],
                            finish_time=requests["finish_time_s"], num_output_tokens=requests["num_output_tokens"])
    good = lat.completed.copy()
    limits = slo.per_request_limits()
    with np.errstate(invalid="ignore"):
        if "ttft" in limits:
            good &= lat.ttft <= limits["ttft"]
        if "e2e" in limits:
            good &= lat.e2e <= limits["e2e"]
        if "tpot" in limits:
            good &= ~(lat.tpot > limits["tpot"])
    n = good.shape[0]
    return float(good.sum() / n) if n else 0.0


#: Workloads at least this large are screened on their first requests before a full simulation.
SCREEN_MIN_REQUESTS = 2_000
#: Shares of the requests (in arrival order) the screening runs take, in the order they are tried.
SCREEN_SHARES = (0.125, 0.25)


def leading_requests(workload: Workload, k: int) -> Workload | None:
    """The first ``k`` requests, when they are also the first to arrive (else None: no screening)."""
    arr = workload.arrival
    if k >= workload.n or not bool(np.all(arr[k:] >= arr[:k].max())):
        return None
    return workload.select(np.arange(k))


def backlog_end(res, terms=None) -> float:
    """The earliest, over the instances, of the last engine first-token time of a run (-inf when an
    instance gave no first token), less a nanosecond.  # s

    ``terms``: the step clock whose serving time (:func:`simulator.engine.serving.serving_offsets`) the
    result's first-token times include; it is taken off, leaving the step the first token came in.
    """
    req = res.requests
    first = np.asarray(req["first_token_time_s"], np.float64)
    if terms is not None:
        first = first - serving_offsets(terms, req["prompt_len"], req["num_output_tokens"])[0]
    inst = np.asarray(req.get("instance", np.zeros(first.size, np.int64)), np.int64)
    ends = np.full(int(res.num_instances), -np.inf)
    ok = ~np.isnan(first)
    np.maximum.at(ends, inst[ok], first[ok])
    return float(ends.min()) - 1e-9  # taking the serving time off rounds in the last bits


def screen_miss(res, workload: Workload, slo: Slo, terms=None) -> str | None:
    """Why the whole run of ``workload`` must miss ``slo``, judged from a run of its leading requests
    only (``res``, a run of :func:`leading_requests`), or None.

    Two rules of the scheduler (vLLM's FCFS) make the leading run a bound on the whole one:

    * later arrivals only add work that shares the steps of the leading requests (they queue behind
      them), so a leading request's TTFT and E2E in the whole run are at least those of the leading run;
    * on one instance first tokens come in arrival order: the running queue followed by the waiting
      one stays in arrival order (admission takes the head of the waiting queue, preemption the tail
      of the running one, back to the head of the waiting one) and a step's token budget goes to the
      running requests in that order, so a request finishes its prefill no earlier than any request
      that arrived before it on its instance. A later request therefore gets its first token no
      earlier than :func:`backlog_end` of the leading run, and one arriving more than a target before
      that time misses it (TTFT and E2E).

    When more requests are known to exceed a bound this way than the percentile allows over all
    ``workload.n`` requests, the whole run misses it (ITL and TPOT, bounds on token gaps, are not
    screened). ``terms``: the deployment's step clock (for its serving time; None: none).
    """
    req = res.requests
    lat = request_latencies(arrival_time=req["arrival"], first_token_time=req["first_token_time_s"],
                            finish_time=req["finish_time_s"], num_output_tokens=req["num_output_tokens"])
    k, n_total = lat.completed.shape[0], workload.n
    wait = backlog_end(res, terms) - workload.arrival[k:]  # s: the least TTFT of each later request
    for tg in slo.targets:
        if tg.metric in ("itl", "tpot"):
            continue
        vals = lat.ttft if tg.metric == "ttft" else lat.e2e
        late = int(np.sum(~lat.completed | (np.nan_to_num(vals, nan=np.inf) > tg.max_s)))
        queued = int(np.sum(wait > tg.max_s))
        allowed = math.floor((1.0 - tg.q / 100.0) * (n_total - 1))
        if late + queued > allowed + 1:
            behind = f" and the next {queued:,} wait longer behind them" if queued else ""
            return (f"misses {tg.label}: {late:,} of the first {k:,} requests already exceed "
                    f"{format_seconds(tg.max_s)}{behind}, more than the {allowed + 1:,} of {n_total:,} "
                    "the percentile allows")
    if slo.min_goodput > 0:
        limits = [v for m, v in slo.per_request_limits().items() if m != "tpot"]
        queued = int(np.sum(wait > min(limits))) if limits else 0
        bad = k - round(goodput_share(req, slo) * k) + queued
        if bad > (1.0 - slo.min_goodput) * n_total:
            return (f"only {1 - bad / n_total:.1%} of requests can meet the SLO at most ({bad:,} already miss: "
                    f"{bad - queued:,} of the first {k:,} and the next {queued:,}; at least "
                    f"{slo.min_goodput:.0%} must meet it)")
    return None


def screened_trial(n: int, cost_per_hour: float, slo: Slo, why: str) -> Trial:
    """A deployment rejected by :func:`screen_miss` (figures of the whole run unknown)."""
    return Trial(n, float(cost_per_hour), {t.label: None for t in slo.targets}, 0.0, 0, 0, 0, math.nan, 1.0,
                 False, (why,), math.inf)


__all__ = ["Prepared", "Trial", "backlog_end", "default_max_model_len", "goodput_share", "judge", "latency_figures",
           "floor_severity", "latency_floors", "miss_words",
           "leading_requests", "prepare_candidate", "replicas_lower_bound", "screen_miss", "screened_trial",
           "slo_floor_miss"]
