"""Deployment search (simulator/search/deployments.py): equals brute force, meets its SLO, prunes with reasons.

The model is Llama 3.1 8B from the catalog's verbatim config.json
(``gpuprofiles/data/hf_configs``, shipped with the product); the GPUs are
inline specs with data-sheet figures (H100 SXM, L40S, L4 rows of
``gpuprofiles/data/gpus.csv``). Workloads are small (tens of requests) so
each simulation takes milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.base.specs import GpuSpec
from simulator.cluster.replicas import simulate_cluster
from simulator.search.deployments import SearchError, search_deployments
from simulator.search.evaluate import judge, latency_floors
from simulator.search.space import SearchSpace, Slo, SloTarget, parse_slo_target
from simulator.sizing.hf_config import parse_hf_config
from simulator.workload.generators import WorkloadSpec, generate_workload

CONFIGS = Path(__file__).resolve().parents[2] / "gpuprofiles" / "data" / "hf_configs"
LLAMA_8B = parse_hf_config(json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text()),
                           name="Llama 3.1 8B")
LLAMA_70B = parse_hf_config(json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-70B_config.json").read_text()),
                            name="Llama 3.1 70B")
H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900, price_per_hour=3.78)
L40S = GpuSpec(name="L40S", memory_gib=44.42, bandwidth_tbps=0.864, bf16_tflops=362.05, fp8_tflops=733,
               price_per_hour=1.9512)
L4 = GpuSpec(name="L4", memory_gib=22.0, bandwidth_tbps=0.3, bf16_tflops=121, fp8_tflops=242, price_per_hour=0.7992)


def _workload(n: int = 40, rate: float = 20.0, seed: int = 0):
    return generate_workload(WorkloadSpec.from_dict({
        "n": n, "prompt": "normal:1024,256", "output": "normal:128,32",
        "arrival": {"kind": "poisson", "rate": rate, "unit": "s"}}), seed=seed)


def _key(res):
    b = res.best
    return None if b is None else (b.index, b.replicas, round(b.cost_per_hour, 6))


SMALL = SearchSpace((H100, L40S, L4), tensor_parallel=(1,), precisions=("bf16", "fp8"), max_num_seqs=(16,),
                    max_replicas=3)


def test_search_equals_brute_force_and_simulates_less():
    wl = _workload()
    slo = Slo((SloTarget("ttft", "p90", 0.3), SloTarget("itl", "p90", 0.05)))
    fast = search_deployments(wl, LLAMA_8B, SMALL, slo)
    brute = search_deployments(wl, LLAMA_8B, SMALL, slo, exhaustive=True)
    assert fast.best is not None
    assert _key(fast) == _key(brute)
    assert fast.num_simulations < 0.6 * brute.num_simulations  # 8 of 15 with the operator-group clock
    statuses = {o.status for o in fast.outcomes}
    assert "answer" in statuses and ("dominated" in statuses or "rejected" in statuses)


def test_answer_meets_the_slo_in_a_confirming_run():
    wl = _workload(seed=3)
    slo = Slo((SloTarget("ttft", "p99", 0.4), SloTarget("e2e", "p90", 4.0)), min_goodput=0.9)
    res = search_deployments(wl, LLAMA_8B, SMALL, slo)
    best = res.best
    assert best is not None
    cand = SMALL.candidates()[best.index]
    from simulator.search.evaluate import default_max_model_len, prepare_candidate

    prep = prepare_candidate(best.index, cand, LLAMA_8B, SMALL, default_max_model_len(wl, LLAMA_8B), wl, slo)
    again = simulate_cluster(wl, prep.config, best.replicas, routing=SMALL.routing)
    verdict = judge(again, wl, slo, best.cost_per_hour)
    assert verdict.meets and verdict.goodput >= 0.9
    assert again.latency.ttft.p99 <= 0.4 and again.latency.e2e.p90 <= 4.0
    if best.replicas > 1:  # one replica fewer misses (the search's bisection is tight)
        fewer = judge(simulate_cluster(wl, prep.config, best.replicas - 1), wl, slo, 0.0)
        assert not fewer.meets
    assert best.cost_per_hour == pytest.approx(best.replicas * cand.price_per_replica)
    assert best.cost_per_million_tokens > 0


@settings(max_examples=3, deadline=None)
@given(ttft=st.sampled_from([0.15, 0.3, 1.0, 5.0]), itl=st.sampled_from([0.02, 0.04, 0.1]),
       rate=st.sampled_from([10.0, 40.0]), seed=st.integers(0, 3))
def test_pruning_never_drops_the_optimum(ttft, itl, rate, seed):
    wl = _workload(n=30, rate=rate, seed=seed)
    space = SearchSpace((H100, L40S), tensor_parallel=(1,), precisions=("bf16", "int4"), max_num_seqs=(16,),
                        max_replicas=3)
    slo = Slo((SloTarget("ttft", "p90", ttft), SloTarget("itl", "p90", itl)))
    assert _key(search_deployments(wl, LLAMA_8B, space, slo)) == \
        _key(search_deployments(wl, LLAMA_8B, space, slo, exhaustive=True))


def test_rejections_say_why_in_words():
    wl = _workload(n=20)
    space = SearchSpace((L4, GpuSpec(name="No price", memory_gib=80, bandwidth_tbps=2, bf16_tflops=300)),
                        tensor_parallel=(1, 2), max_replicas=2)
    res = search_deployments(wl, LLAMA_70B, space, Slo((SloTarget("ttft", "p90", 1.0),)))
    reasons = {o.candidate["label"]: o.reason for o in res.outcomes}
    assert all(o.status == "rejected" for o in res.outcomes)
    one_l4 = reasons["1x L4 (TP 1), bf16 weights, KV auto, max_num_seqs 256"]
    assert one_l4.startswith("does not fit: needs ") and "GiB for weights per GPU on 1x L4" in one_l4
    assert "no price per hour for No price" in reasons["1x No price (TP 1), bf16 weights, KV auto, max_num_seqs 256"]
    assert res.best is None and res.num_simulations == 0
    assert res.message.startswith("No deployment in this space can run this model")


def test_an_slo_nobody_meets_names_the_closest():
    wl = _workload(n=40, rate=40)
    space = SearchSpace((L40S,), tensor_parallel=(1,), max_num_seqs=(256,), max_replicas=2)
    res = search_deployments(wl, LLAMA_8B, space, Slo((SloTarget("ttft", "p90", 0.12),)))
    assert res.best is None and res.closest is not None
    assert res.message.startswith("No deployment in this space meets TTFT p90 <= 120 ms; the closest is 2 replica(s)")
    assert "misses TTFT p90 by" in res.message


def test_latency_floor_rejects_without_simulating():
    wl = _workload(n=20)
    space = SearchSpace((L4,), tensor_parallel=(1,), precisions=("bf16",), max_replicas=4)
    res = search_deployments(wl, LLAMA_8B, space, Slo((SloTarget("itl", "p50", 0.01),)))
    (o,) = res.outcomes
    assert o.status == "rejected" and res.num_simulations == 0
    assert o.reason.startswith("cannot meet the SLO with any number of replicas: ITL p50 is at least")
    from simulator.search.evaluate import prepare_candidate

    floors = latency_floors(wl, prepare_candidate(0, space.candidates()[0], LLAMA_8B,
                                                  SearchSpace((L4,), tensor_parallel=(1,), precisions=("bf16",)),
                                                  4096, wl,
                                                  Slo((SloTarget("itl", "p50", 10.0),))).config.cost_model)
    sim = simulate_cluster(wl, prepare_candidate(0, space.candidates()[0], LLAMA_8B, space, 4096, wl,
                                                 Slo((SloTarget("itl", "p50", 10.0),))).config, 1)
    ttft = sim.requests["first_token_time_s"] - sim.requests["arrival"]
    assert (ttft >= floors["ttft"] - 1e-12).all()  # the floors are lower bounds of what the engine does


def test_precision_changes_memory_and_step_time():
    wl = _workload(n=20)
    space = SearchSpace((L40S,), tensor_parallel=(1,), precisions=("bf16", "fp8", "int4"), max_replicas=1)
    res = search_deployments(wl, LLAMA_8B, space, Slo((SloTarget("e2e", "p99", 600.0),)))
    by = {o.candidate["precision"]: o for o in res.outcomes}
    assert by["bf16"].sizing["weights_gib"] > by["fp8"].sizing["weights_gib"] > by["int4"].sizing["weights_gib"]
    assert by["bf16"].sizing["kv_cache_tokens"] < by["fp8"].sizing["kv_cache_tokens"] < by["int4"].sizing["kv_cache_tokens"]
    from simulator.search.evaluate import prepare_candidate

    terms = {c.precision: prepare_candidate(i, c, LLAMA_8B, space, 4096, wl, Slo((SloTarget("e2e", "p99", 600.0),)))
             .config.cost_model for i, c in enumerate(space.candidates())}
    assert terms["fp8"].tok_s < terms["bf16"].tok_s == terms["int4"].tok_s  # fp8 GEMMs on L40S; int4 computes in bf16
    assert terms["int4"].weights_s < terms["fp8"].weights_s < terms["bf16"].weights_s  # fewer weight bytes per step


@pytest.mark.parametrize("make, field", [
    (lambda: SearchSpace((), max_replicas=2), "space.gpus"),
    (lambda: SearchSpace((L4,), tensor_parallel=()), "space.tensor_parallel"),
    (lambda: SearchSpace((L4,), precisions=("fp7",)), "space.precisions"),
    (lambda: SearchSpace((L4,), max_replicas=0), "space.max_replicas"),
    (lambda: SearchSpace((L4,), routing="telepathy"), "space.routing"),
    (lambda: Slo(()), "slo.targets"),
    (lambda: Slo((SloTarget("ttft", "p90", 1.0),), min_goodput=1.5), "slo.min_goodput"),
    (lambda: SloTarget("ttft", "p100", 1.0), "slo.percentile"),
    (lambda: SloTarget("ttft", "p0", 1.0), "slo.percentile"),
    (lambda: SloTarget("ttft", "90", 1.0), "slo.percentile"),
    (lambda: SloTarget("ttft", "pnan", 1.0), "slo.percentile"),
    (lambda: SloTarget("tbt", "p90", 1.0), "slo.metric"),
    (lambda: SloTarget("ttft", "p90", 0), "slo.max_s"),
    (lambda: parse_slo_target("ttft:p90"), "slo"),
])
def test_bad_input_names_the_field(make, field):
    with pytest.raises(SearchError) as exc:
        make()
    assert str(exc.value).startswith(field + ":")


def test_step_arrivals_and_overlong_requests_are_refused():
    step_wl = generate_workload(WorkloadSpec.from_dict({"n": 5, "arrival": {"kind": "poisson", "rate": 1,
                                                                             "unit": "step"}}))
    slo = Slo((SloTarget("ttft", "p90", 1.0),))
    with pytest.raises(SearchError, match="^workload: give arrivals in seconds"):
        search_deployments(step_wl, LLAMA_8B, SMALL, slo)
    with pytest.raises(SearchError, match="^workload: its longest request"):
        search_deployments(_workload(n=5), LLAMA_8B, SearchSpace((L4,), max_model_len=512), slo)


def test_screening_on_leading_requests_keeps_the_answer_and_is_sound():
    from simulator.search.evaluate import SCREEN_SHARES, leading_requests, screen_miss

    wl = _workload(n=160, rate=200, seed=1)
    slo = Slo((SloTarget("ttft", "p90", 0.3), SloTarget("e2e", "p99", 6.0)))
    space = SearchSpace((H100, L40S), tensor_parallel=(1,), precisions=("bf16", "fp8"), max_num_seqs=(4, 64),
                        max_replicas=3)
    screened = search_deployments(wl, LLAMA_8B, space, slo, screen_min_requests=100)
    plain = search_deployments(wl, LLAMA_8B, space, slo, screen_min_requests=None)
    assert _key(screened) == _key(plain)
    reasons = [m for o in screened.outcomes for t in o.trials for m in t.misses if "of the first 20 requests" in m]
    assert any("wait longer behind them" in m for m in reasons), "the eighth's backlog should reject some deployment"
    # soundness: every deployment a screening run rejects misses the SLO in the whole run
    from simulator.search.evaluate import default_max_model_len, prepare_candidate

    rejected = 0
    for i, cand in enumerate(space.candidates()):
        p = prepare_candidate(i, cand, LLAMA_8B, space, default_max_model_len(wl, LLAMA_8B), wl, slo)
        if p.config is None:
            continue
        for n in (1, 3):
            whole = judge(simulate_cluster(wl, p.config, n), wl, slo, 0.0)
            for share in SCREEN_SHARES:
                lead = leading_requests(wl, round(wl.n * share))
                if screen_miss(simulate_cluster(lead, p.config, n), wl, slo, p.config.cost_model):
                    rejected += 1
                    assert not whole.meets
    assert rejected >= 4


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 50), rate=st.sampled_from([5.0, 40.0, 400.0]), blocks=st.sampled_from([None, 120]),
       prefixes=st.booleans(), replicas=st.sampled_from([1, 2]))
def test_first_tokens_come_in_arrival_order_on_each_instance(seed, rate, blocks, prefixes, replicas):
    """The rule the screen's backlog rests on (search_eval.screen_miss): whatever the load, the
    preemptions (a small KV cache) or the prefix hits, a request on an instance gets its first token
    (engine time, serving time taken off) no earlier than any request that arrived before it there."""
    from dataclasses import replace

    from simulator.engine.serving import async_lag, serving_offsets
    from simulator.search.evaluate import default_max_model_len, prepare_candidate

    spec = {"n": 120, "prompt": "uniform:16,1500", "output": "uniform:1,200",
            "arrival": {"kind": "poisson", "rate": rate, "unit": "s"}}
    if prefixes:
        spec["prefixes"] = [{"count": 2, "length": 256, "fraction": 0.7}]
    wl = generate_workload(WorkloadSpec.from_dict(spec), seed=seed)
    slo = Slo((SloTarget("ttft", "p90", 100.0),))
    space = SearchSpace((L40S,), tensor_parallel=(1,), max_num_seqs=(32,))
    p = prepare_candidate(0, space.candidates()[0], LLAMA_8B, space, default_max_model_len(wl, LLAMA_8B), wl, slo)
    cfg = p.config if blocks is None else replace(p.config, num_gpu_blocks=blocks)
    res = simulate_cluster(wl, cfg, replicas)
    req = res.requests
    pre, post = serving_offsets(cfg.cost_model, req["prompt_len"], req["num_output_tokens"])
    first = np.asarray(req["first_token_time_s"]) - pre
    if cfg.async_scheduling:  # (vLLM's default since 0.14: each request's one-step lag is added after the run too)
        first = first - async_lag(cfg.cost_model.serve_async_lag_steps, first + pre,
                                  np.asarray(req["finish_time_s"]) - (post - pre), req["num_output_tokens"])
    order = np.argsort(wl.arrival, kind="stable")
    for i in range(replicas):
        mine = first[order][req["instance"][order] == i]
        mine = mine[~np.isnan(mine)]
        assert np.all(np.diff(mine) >= -1e-12)  # one step's time, up to the serving time's rounding
    if blocks is not None and rate >= 40:
        assert res.totals["preemptions"] > 0


def test_processes_split_gpu_types_and_give_the_same_answer():
    from simulator.search.deployments import gpu_groups

    wl = _workload(n=30)
    slo = Slo((SloTarget("ttft", "p90", 0.3), SloTarget("itl", "p90", 0.05)))
    space = SearchSpace((H100, L40S, L4), tensor_parallel=(1,), precisions=("bf16",), max_num_seqs=(16,),
                        max_replicas=3)
    assert sorted(i for g in gpu_groups(space, 2) for i in g) == list(range(3)) and len(gpu_groups(space, 2)) == 2
    assert _key(search_deployments(wl, LLAMA_8B, space, slo, processes=2)) == \
        _key(search_deployments(wl, LLAMA_8B, space, slo))


def test_a_cost_bound_from_another_chunk_prunes_without_losing_ties():
    wl = _workload(n=30)
    slo = Slo((SloTarget("ttft", "p90", 0.3), SloTarget("itl", "p90", 0.05)))
    free = search_deployments(wl, LLAMA_8B, SMALL, slo)
    cost = free.best.cost_per_hour
    tied = search_deployments(wl, LLAMA_8B, SMALL, slo, cost_bound=cost)
    assert _key(tied) == _key(free)  # an equal-cost answer is still found (ties break as in one search)
    below = search_deployments(wl, LLAMA_8B, SMALL, slo, cost_bound=cost * 0.99)
    assert below.best is None and below.num_simulations <= free.num_simulations


@pytest.mark.parametrize("prefixes", [False, True])
def test_round_robin_replicas_run_as_plain_engines_with_the_same_verdict(prefixes):
    """Round-robin makes replicas independent: the search runs each as the plain engine over its share
    of the requests (search._Replicas) and judges exactly what the cluster simulation gives."""
    from simulator.search.deployments import _Run
    from simulator.search.evaluate import prepare_candidate

    spec = {"n": 60, "prompt": "normal:1024,256", "output": "normal:128,32",
            "arrival": {"kind": "poisson", "rate": 30, "unit": "s"}}
    if prefixes:
        spec["prefixes"] = [{"count": 3, "length": 300, "fraction": 0.8}]
    wl = generate_workload(WorkloadSpec.from_dict(spec), seed=2)
    slo = Slo((SloTarget("ttft", "p90", 0.3), SloTarget("itl", "p99", 0.05)), min_goodput=0.8)
    run = _Run(wl, slo, SMALL, None, None)
    assert run.independent
    compared = 0
    for i, cand in enumerate(SMALL.candidates()[:4]):
        p = prepare_candidate(i, cand, LLAMA_8B, SMALL, 4096, wl, slo)
        if p.config is None:
            continue
        for n in (1, 2, 3):
            via_cluster = judge(simulate_cluster(wl, p.config, n), wl, slo, 1.0).to_dict()
            via_engines = judge(run._simulate(wl, run.prep, p, n), wl, slo, 1.0).to_dict()
            assert via_engines == via_cluster
            compared += 1
    assert compared >= 6


def test_with_no_path_in_the_space_each_model_is_timed_by_its_own_sampler():
    """``space.sampling`` None (the default): each candidate's clock times its model's own path
    (``ModelSpec.sampling``; top_k_top_p when not known); a path in the space wins over it."""
    from dataclasses import replace

    from simulator.search.evaluate import prepare_candidate

    wl, slo = _workload(), Slo((SloTarget("itl", "p90", 0.05),))
    space = SearchSpace((H100,), tensor_parallel=(1,), max_num_seqs=(16,), max_replicas=2)
    assert space.sampling is None and space.to_dict()["sampling"] is None
    cand = space.candidates()[0]

    def terms(model, sp):
        return prepare_candidate(0, cand, model, sp, 4096, wl, slo).config.cost_model.to_dict()

    greedy, temperature = replace(LLAMA_8B, sampling="greedy"), replace(LLAMA_8B, sampling="temperature")
    unknown = replace(LLAMA_8B, sampling=None)
    for model, path in ((greedy, "greedy"), (temperature, "temperature"), (unknown, "top_k_top_p")):
        assert terms(model, space) == terms(LLAMA_8B, replace(space, sampling=path)), path
    assert terms(greedy, space) != terms(temperature, space)
    assert terms(greedy, replace(space, sampling="temperature")) == terms(temperature, space)  # the space's wins
