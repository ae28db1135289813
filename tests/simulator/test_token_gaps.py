"""vLLM bench's latency definitions (TTFT, TPOT, ITL, E2E) checked against the step log of small runs.

The engine keeps every inter-token gap as one value per step with a count
(:class:`simulator.engine.metrics.TokenGaps`); here the gaps are rebuilt
independently from the recorded step series: in a run that is never idle, step
``s`` ends when step ``s + 1`` starts, and a request that was never preempted
receives one token in every step from its first token's to its last's, so its
gaps are the differences of those steps' ends. vLLM bench's ``itl`` is the list
of all those gaps; its TPOT the per-request mean ``(e2e - ttft) / (out - 1)``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.base.specs import DeploymentSpec, GpuSpec
from simulator.batch.runner import simulate
from simulator.cluster.replicas import simulate_cluster
from simulator.engine.config import EngineConfig
from simulator.engine.metrics import MetricsError, weighted_percentiles
from simulator.sizing.closed_form import plan
from simulator.sizing.hf_config import parse_hf_config
from simulator.workload.generators import ArrivalProcess, WorkloadSpec, generate_workload

ROOT = Path(__file__).resolve().parents[2]
LLAMA_8B = ROOT / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
H100 = dict(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
            interconnect_gbps=900)


def _config(**kw):
    model_cfg = json.loads(LLAMA_8B.read_text())
    sized = plan(parse_hf_config(model_cfg), GpuSpec(**H100), DeploymentSpec())
    base = dict(num_gpu_blocks=sized.num_gpu_blocks, max_num_batched_tokens=2048, max_num_seqs=64,
                cost_model={"kind": "roofline", "model": model_cfg, "gpu": H100})
    base.update(kw)
    return EngineConfig(**base)


def _busy_workload(n=150, seed=3):
    # everything arrives in the first 0.2 s: the engine is busy from the first step to the last
    return generate_workload(WorkloadSpec(n=n, prompt="normal:300,80", output="normal:60,25",
                                          arrival=ArrivalProcess("poisson", rate=n / 0.2, unit="s")), seed)


def _gaps_from_step_log(res):
    """Every gap of every finished, never-preempted request, from the step series alone."""
    steps = res.steps
    start = steps["time_s"]
    idx = steps["step"]
    assert np.array_equal(idx, np.arange(idx.size)), "one entry per engine step"
    ends = np.append(start[1:], res.totals["duration_s"])  # busy run: a step ends when the next starts
    req = res.requests
    gaps, tpots = [], []
    for f0, f1, out, npre in zip(req["first_token_step"], req["finish_step"], req["num_output_tokens"],
                                 req["num_preemptions"]):
        if f1 < 0 or out < 2:
            continue
        assert npre == 0
        assert f1 - f0 == out - 1  # one token a step
        g = np.diff(ends[f0:f1 + 1])
        gaps.append(g)
        tpots.append(g.mean())
    return np.concatenate(gaps), np.array(tpots)


@pytest.mark.parametrize("accelerate", [True, False])
def test_itl_is_every_token_gap_and_tpot_each_requests_mean(accelerate):
    wl = _busy_workload()
    res = simulate(wl, [_config()], record_steps=True, accelerate=accelerate)[0]
    assert res.totals["preemptions"] == 0 and res.totals["finished"] == wl.n
    gaps, tpots = _gaps_from_step_log(res)
    lat = res.latency()
    assert lat.itl_requests_approximate == 0
    assert lat.itl.count == gaps.size == int((res.requests["num_output_tokens"] - 1).sum())
    for q in (50, 90, 99):
        assert getattr(lat.itl, f"p{q}") == pytest.approx(np.percentile(gaps, q), rel=1e-9)
        assert getattr(lat.tpot, f"p{q}") == pytest.approx(np.percentile(tpots, q), rel=1e-9)
    for q in (37.5, 95, 99.9):
        assert lat.percentile("itl", q) == pytest.approx(np.percentile(gaps, q), rel=1e-9)
        assert lat.percentile("tpot", q) == pytest.approx(np.percentile(tpots, q), rel=1e-9)
    assert lat.itl.max == pytest.approx(gaps.max(), rel=1e-9)
    assert lat.itl.mean == pytest.approx(gaps.mean(), rel=1e-9)
    # the two are different statistics: the per-token p99 sees the steps slowed by prefills
    assert lat.itl.p99 > lat.tpot.p99


def test_serving_time_per_token_is_in_every_gap():
    cfg = _config()
    wl = _busy_workload(n=60)
    plain = simulate(wl, [cfg], record_steps=True)[0]
    gaps, _ = _gaps_from_step_log(plain)
    per_tok = 0.002
    served_cfg = replace(cfg, cost_model=replace(cfg.cost_model, serve_output_token_s=per_tok))
    lat = simulate(wl, [served_cfg])[0].latency()
    assert lat.itl.p50 == pytest.approx(np.percentile(gaps + per_tok, 50), rel=1e-9)
    assert lat.itl.mean == pytest.approx((gaps + per_tok).mean(), rel=1e-9)


def test_a_cluster_merges_its_instances_gaps():
    wl = _busy_workload(n=120)
    cfg = _config()
    one = simulate(wl, [cfg], record_steps=True)[0]
    gaps_one, _ = _gaps_from_step_log(one)
    clus = simulate_cluster(wl, cfg, 3, routing="round-robin")
    per = [inst.result.latency() for inst in clus.instances]
    assert clus.latency.itl.count == sum(p.itl.count for p in per) == gaps_one.size
    assert clus.latency.itl_requests_approximate == 0


def test_preempted_requests_count_their_tpot_and_are_counted():
    wl = _busy_workload(n=120)
    res = simulate(wl, [_config(num_gpu_blocks=200, max_num_seqs=64)])[0]
    assert res.totals["preemptions"] > 0
    lat = res.latency()
    pre = int(((res.requests["num_preemptions"] > 0) & (res.requests["num_output_tokens"] >= 2)).sum())
    assert lat.itl_requests_approximate >= pre > 0
    assert lat.itl.count == int((res.requests["num_output_tokens"] - 1).sum())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10, allow_nan=False), st.integers(1, 6)), min_size=1, max_size=30),
       st.lists(st.floats(0, 100), min_size=1, max_size=5))
def test_weighted_percentiles_equal_the_expanded_computation(pairs, qs):
    v = np.array([p[0] for p in pairs])
    c = np.array([p[1] for p in pairs])
    assert np.array_equal(weighted_percentiles(v, c, qs), np.percentile(np.repeat(v, c), qs))


def test_percentile_rejects_unknown_metrics_and_bounds():
    lat = simulate(_busy_workload(n=20), [_config()])[0].latency()
    with pytest.raises(MetricsError, match="metric"):
        lat.percentile("itl_p90", 90)
    for q in (0, 100, -1, 101, True):
        with pytest.raises(MetricsError, match="percentile"):
            lat.percentile("itl", q)


def test_replicas_trials_show_tpot_beside_the_judged_itl():
    from simulator.cluster.replicas import smallest_replicas

    wl = generate_workload(WorkloadSpec(n=80, prompt="normal:300,80", output="normal:60,25",
                                        arrival=ArrivalProcess("poisson", rate=40, unit="s")), 1)
    cfg = _config()
    found = smallest_replicas(wl, cfg, slo_ttft_s=1.0, slo_itl_s=0.05, max_instances=4)
    for t in found.trials:
        lat = simulate_cluster(wl, cfg, t.num_instances).latency
        assert t.itl_s == lat.itl.p90 and t.tpot_s == lat.tpot.p90
        assert t.to_dict()["tpot_s"] == t.tpot_s
