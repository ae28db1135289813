"""Prefill and decode pools searched jointly: each pool its own shape (GPU, TP, precision) and count.

The xPyD stage (:mod:`simulator.search.disaggregated`) splits the aggregated answer's own replicas; here the
prefill pool and the decode pool are chosen among every shape of the space, as AIConfigurator proposes "4
prefill x TP1 + 1 decode x TP4". :func:`search_pools` does it in three steps, each a simulation of the whole
workload:

1. **Prefill sizing**, per shape: the fewest instances whose prefill-only cluster (every request's output cut
   to its first token, vLLM's ``max_tokens = 1`` on the prefill side) meets the SLO's TTFT targets. The client's
   TTFT is that plus the handoff, the transfer and the first decode step, so this count is a lower bound.
2. **Decode sizing**, per shape: with the cheapest prefill pool of step 1 in front, the fewest decode instances
   of that shape whose disaggregated deployment (:class:`simulator.cluster.DisaggregatedDeployment`) meets the
   whole SLO, judged as the search judges replicas (:func:`simulator.search.evaluate.judge`).
3. **Pairs**, cheapest first: every prefill shape at its count with every decode shape at its count, verified
   by one disaggregated simulation; a pair that misses comes back with one more prefill instance. The first
   pair that meets is the answer (``max_pair_checks`` simulations at most). The answer is the cheapest pair
   found this way, not proven cheapest: a decode count was sized behind one prefill pool.

A pool's instance is one engine or, for a shape that is a DP group (``data_parallel`` > 1, or EP over several
GPUs), one DP group of TP x PP x DP GPUs: its ranks balanced as vLLM's DP client does and, for an MoE model,
stepping in lockstep on the DP / EP clock (:class:`simulator.cluster.Pool` ``group``), so each pool has its own
TP / DP / EP ("2P [TP 1] + 1D [TP 1 x DP 4 + EP]"). Pairs vLLM's NIXL connector cannot join are left out with
the reason (vLLM ``docs/features/nixl_connector_compatibility.md``): P and D must use the same speculation
configuration; the blocks move as they are, so the KV cache dtype and the block size must match; an MLA model's
prefill and decode TP must be equal (heterogeneous TP is partial for MLA; the TP of a DP rank). A request's KV
lives on one prefill rank (its TP x PP GPUs) and moves to one decode rank: what moves is what the decode rank's
layout holds (``kv_bytes_per_block`` x the rank's TP x PP GPUs per token: KV heads replicated by a TP above their
count move once for each copy, an MLA latent once per TP rank), and a decode rank reads from every prefill rank
GPU that holds part of its heads: one transfer's latency is paid ``max(1, TP_prefill / TP_decode)`` times.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace
from typing import Any

import numpy as np

from simulator.base import ModelSpec
from simulator.cluster import DisaggregatedDeployment, KvLink, Pool, simulate_cluster
from simulator.cluster.replicas import smallest_meeting
from simulator.search.disaggregated import as_cluster, kv_bytes_per_token
from simulator.search.evaluate import Prepared, default_max_model_len, judge, prepare_candidate
from simulator.search.space import SearchError, SearchSpace, Slo
from simulator.workload import Workload

#: Disaggregated simulations step 3 may run before it gives up (each a pair checked).
MAX_PAIR_CHECKS = 12
#: Prefill instances step 2 may add to the cheapest prefill pool when no decode pool meets the SLO behind it
#: (the prefill pool alone met the TTFT targets, not with the handoff and the transfer added).
FRONT_MARGIN = 2


def _ttft_only(slo: Slo) -> Slo | None:
    """The SLO's TTFT targets alone (what a prefill pool answers for), None without one."""
    targets = tuple(t for t in slo.targets if t.metric == "ttft")
    return None if not targets else Slo(targets, 0.0)


def first_tokens(workload: Workload) -> Workload:
    """The workload as a prefill instance serves it: every request's output cut to its first token."""
    return replace(workload, output_len=np.ones(workload.n, dtype=np.int64))


def _is_mla(model: ModelSpec) -> bool:
    return bool(getattr(model, "kv_lora_rank", None))


def pair_problem(prefill: Prepared, decode: Prepared, model: ModelSpec) -> str | None:
    """Why vLLM's NIXL connector cannot join these two shapes (module docstring), or None."""
    p, d = prefill.candidate, decode.candidate
    if (p.speculative is None) != (d.speculative is None) or (
            p.speculative is not None and p.speculative.to_dict() != d.speculative.to_dict()):
        return "P and D instances must use the same speculation configuration"
    if prefill.sizing.get("kv_cache_dtype") != decode.sizing.get("kv_cache_dtype"):
        return (f"KV cache dtype {prefill.sizing.get('kv_cache_dtype')} on prefill, "
                f"{decode.sizing.get('kv_cache_dtype')} on decode: the blocks move as they are")
    if prefill.config.block_size != decode.config.block_size:
        return f"block size {prefill.config.block_size} on prefill, {decode.config.block_size} on decode"
    if _is_mla(model) and p.tensor_parallel != d.tensor_parallel:
        return "an MLA model's prefill and decode TP must be equal (vLLM's heterogeneous TP is partial for MLA)"
    return None


class _Pools:
    """The simulations of one joint search, counted."""

    def __init__(self, workload: Workload, slo: Slo, space: SearchSpace, link: KvLink, routing: str):
        self.workload, self.slo, self.space, self.link, self.routing = workload, slo, space, link, routing
        self.first_tokens = first_tokens(workload)
        self.simulations = 0

    def prefill_meets(self, p: Prepared, n: int, ttft: Slo) -> bool:
        self.simulations += 1
        if p.group is not None:  # n DP groups behind a round-robin router
            res = p.group.simulate(self.first_tokens, p.config, replicas=n).cluster
        else:
            res = simulate_cluster(self.first_tokens, p.config, n, routing=self.routing)
        return judge(res, self.first_tokens, ttft, 0.0).meets

    def deployment(self, p: Prepared, x: int, d: Prepared, y: int) -> DisaggregatedDeployment:
        reads = max(1, math.ceil(p.candidate.tensor_parallel / d.candidate.tensor_parallel))
        link = KvLink(self.link.bandwidth_gbps, self.link.latency_s * reads)
        return DisaggregatedDeployment(self._pool(p, x), self._pool(d, y), link,
                                       kv_bytes_per_token=kv_bytes_per_token(d))

    def _pool(self, p: Prepared, n: int) -> Pool:
        c = p.candidate
        return Pool(p.config, n, routing="round-robin" if p.group is not None else self.routing,
                    gpus_per_instance=c.gpus_per_replica, cost_per_hour=c.price_per_replica, label=c.label,
                    group=p.group)

    def trial(self, p: Prepared, x: int, d: Prepared, y: int):
        self.simulations += 1
        dep = self.deployment(p, x, d, y)
        res = dep.run(self.workload)
        return dep, res, judge(as_cluster(res, x + y), self.workload, self.slo, dep.cost_per_hour)


def _layout(c) -> dict[str, Any]:
    """A pool's parallel layout as the report shows it: TP, PP, DP and EP (vLLM's flags)."""
    return {"tensor_parallel": c.tensor_parallel, "pipeline_parallel": c.pipeline_parallel,
            "data_parallel": c.data_parallel, "expert_parallel": bool(c.expert_parallel and c.dp_group)}


def _row(dep: DisaggregatedDeployment, res, trial, p: Prepared, d: Prepared) -> dict[str, Any]:
    return {"prefill": {"shape": p.candidate.label, "instances": dep.prefill.num_instances,
                        "gpus": dep.prefill.num_instances * dep.prefill.gpus_per_instance,
                        **_layout(p.candidate)},
            "decode": {"shape": d.candidate.label, "instances": dep.decode.num_instances,
                       "gpus": dep.decode.num_instances * dep.decode.gpus_per_instance,
                       **_layout(d.candidate)},
            "name": f"{dep.prefill.num_instances}P [{p.candidate.label}] + {dep.decode.num_instances}D "
                    f"[{d.candidate.label}]",
            "num_gpus": dep.num_gpus, "cost_per_hour": dep.cost_per_hour, "meets": trial.meets,
            "values": trial.values, "misses": list(trial.misses), "goodput": trial.goodput,
            "kv_bytes_per_token": dep.kv_bytes_per_token, "transfer_p90_s": res.transfer["p90_s"],
            "prefill_utilisation": res.pools["prefill"]["utilisation"],
            "decode_utilisation": res.pools["decode"]["utilisation"]}


def search_pools(workload: Workload, model: ModelSpec, space: SearchSpace, slo: Slo, *,
                 link: KvLink | None = None, routing: str | None = None,
                 max_pair_checks: int = MAX_PAIR_CHECKS) -> dict[str, Any]:
    """The cheapest prefill pool + decode pool, each of its own shape and count, meeting ``slo`` (module
    docstring).

    Returns ``{"prefill": [...], "decode": [...], "pairs": [...], "best": row or None, "simulations",
    "message"}``: per shape its prefill and decode counts (None with the reason when none up to
    ``space.max_replicas`` meets), every pair checked (a row: both pools' shape, instances and GPUs, the cost,
    ``meets``, the SLO ``values`` and ``misses``, the KV bytes per token moved, transfer p90 and pool
    utilisations) and the pairs left out with vLLM's reason. A :class:`SearchError` on ``slo`` without a TTFT
    target (a prefill pool has nothing to answer for).
    """
    ttft = _ttft_only(slo)
    if ttft is None:
        raise SearchError("a joint prefill/decode search needs a TTFT target (the prefill pool is sized by it)",
                          field="slo")
    link = link or KvLink()
    run = _Pools(workload, slo, space, link, routing or space.routing)
    mml = space.max_model_len or default_max_model_len(workload, model)
    prepared = [prepare_candidate(i, c, model, space, mml, workload, slo) for i, c in enumerate(space.candidates())]
    shapes = [p for p in prepared if p.config is not None and p.config.enable_prefix_caching]
    prefill_rows, prefill_counts = [], {}
    for p in shapes:
        cap = space.replicas_cap(p.candidate)  # (within space.max_gpus)
        n = smallest_meeting(lambda k, p=p: run.prefill_meets(p, k, ttft), cap)
        prefill_rows.append({"shape": p.candidate.label, "instances": n,
                             "reason": None if n else f"no prefill pool of up to {cap} instances meets {ttft.describe()}"})
        if n:
            prefill_counts[p.index] = n
    by_index = {p.index: p for p in shapes}
    if not prefill_counts:
        return _result(prefill_rows, [], [], None, run, "no shape's prefill pool meets the TTFT targets")
    cheapest = min(prefill_counts, key=lambda i: (prefill_counts[i] * by_index[i].candidate.price_per_replica, i))
    front = by_index[cheapest]
    for front_n in range(prefill_counts[cheapest],
                         min(space.replicas_cap(front.candidate), prefill_counts[cheapest] + FRONT_MARGIN) + 1):
        decode_rows, decode_counts = _decode_sizing(run, shapes, front, front_n, model, space)
        if decode_counts:  # else the prefill pool alone met the TTFT, not with the transfer: one more instance
            break
    pairs, left_out = _pairs(shapes, prefill_counts, decode_counts, model, space.max_gpus)
    rows, best = [], None
    while pairs and len(rows) < max_pair_checks:
        _, _, pi, x, di, y = heapq.heappop(pairs)
        p, d = by_index[pi], by_index[di]
        dep, res, trial = run.trial(p, x, d, y)
        rows.append(_row(dep, res, trial, p, d))
        if trial.meets:
            best = rows[-1]
            break
        if x < space.replicas_cap(p.candidate) and _within(space.max_gpus, p, x + 1, d, y):
            heapq.heappush(pairs, _pair_key(p, x + 1, d, y))
    message = ("no pair of pools checked meets the SLO" if best is None else
               f"{best['name']}: {best['num_gpus']} GPUs at ${best['cost_per_hour']:,.2f}/h meets the SLO")
    return _result(prefill_rows, decode_rows, rows + left_out, best, run, message)


def _decode_sizing(run: _Pools, shapes: list[Prepared], front: Prepared, front_n: int, model: ModelSpec,
                   space: SearchSpace) -> tuple[list[dict], dict]:
    """Step 2: each shape's fewest decode instances behind ``front_n`` x ``front`` (rows, and index -> count)."""
    rows, counts = [], {}
    for d in shapes:
        why = pair_problem(front, d, model)
        top = space.replicas_cap(d.candidate)
        if space.max_gpus is not None:  # the decode pool within the GPUs the prefill pool leaves
            top = min(top, (space.max_gpus - front_n * front.candidate.gpus_per_replica) // d.candidate.gpus_per_replica)
        n = None if why or top < 1 else smallest_meeting(lambda k, d=d: run.trial(front, front_n, d, k)[2].meets, top)
        rows.append({"shape": d.candidate.label, "instances": n, "behind": f"{front_n}P [{front.candidate.label}]",
                     "reason": why or (None if n else f"no decode pool of up to {top} instances meets the SLO")})
        if n:
            counts[d.index] = n
    return rows, counts


def _pair_key(p: Prepared, x: int, d: Prepared, y: int) -> tuple:
    cost = x * p.candidate.price_per_replica + y * d.candidate.price_per_replica
    return (cost, x * p.candidate.gpus_per_replica + y * d.candidate.gpus_per_replica, p.index, x, d.index, y)


def _within(max_gpus: int | None, p: Prepared, x: int, d: Prepared, y: int) -> bool:
    """Whether ``x`` prefill and ``y`` decode instances fit in ``max_gpus`` GPUs (None: no limit)."""
    return max_gpus is None or x * p.candidate.gpus_per_replica + y * d.candidate.gpus_per_replica <= max_gpus


def _pairs(shapes: list[Prepared], prefill_counts: dict, decode_counts: dict, model: ModelSpec,
           max_gpus: int | None = None):
    """Every joinable (prefill shape, decode shape) at their counts as a heap by cost, and the pairs left out."""
    heap, left_out = [], []
    for p in shapes:
        for d in shapes:
            if p.index not in prefill_counts or d.index not in decode_counts:
                continue
            why = pair_problem(p, d, model) or (
                None if _within(max_gpus, p, prefill_counts[p.index], d, decode_counts[d.index]) else
                f"{prefill_counts[p.index] * p.candidate.gpus_per_replica + decode_counts[d.index] * d.candidate.gpus_per_replica}"
                f" GPUs, more than the {max_gpus:,} of space.max_gpus")
            if why:
                left_out.append({"name": f"P [{p.candidate.label}] + D [{d.candidate.label}]",
                                 "meets": None, "left_out": why})
                continue
            heap.append(_pair_key(p, prefill_counts[p.index], d, decode_counts[d.index]))
    heapq.heapify(heap)
    return heap, left_out


def _result(prefill, decode, pairs, best, run: _Pools, message: str) -> dict[str, Any]:
    return {"prefill": prefill, "decode": decode, "pairs": pairs, "best": best, "simulations": run.simulations,
            "message": message}


def pools_verdict(pools: dict[str, Any], result) -> dict[str, Any]:
    """Which wins, the aggregated answer of :func:`simulator.search.search_deployments` (``result``) or the
    pools: ``{"winner": "aggregated" | "pools" | None, "reason"}``; the cheaper per hour wins, the aggregated
    answer at equal cost (one kind of instance, no KV link)."""
    best, agg = pools["best"], result.best
    if best is None and agg is None:
        return {"winner": None, "reason": "neither an aggregated deployment nor a pair of pools meets the SLO"}
    if agg is None:
        return {"winner": "pools", "reason": f"{best['name']} meets the SLO at ${best['cost_per_hour']:,.2f}/h; "
                                             "no aggregated deployment does"}
    agg_text = f"{agg.replicas} aggregated replica{'s' if agg.replicas != 1 else ''} at ${agg.cost_per_hour:,.2f}/h"
    if best is None:
        return {"winner": "aggregated", "reason": f"no pair of pools meets the SLO; the answer is {agg_text}"}
    if best["cost_per_hour"] < agg.cost_per_hour - 1e-9:
        return {"winner": "pools", "reason": f"{best['name']} at ${best['cost_per_hour']:,.2f}/h is cheaper than "
                                             f"{agg_text}"}
    return {"winner": "aggregated", "reason": f"{agg_text}, against ${best['cost_per_hour']:,.2f}/h for the "
                                              f"cheapest pools ({best['name']})"}


__all__ = ["FRONT_MARGIN", "MAX_PAIR_CHECKS", "first_tokens", "kv_bytes_per_token", "pair_problem", "pools_verdict",
           "search_pools"]
