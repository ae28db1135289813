"""Sweeps over a CPU KV tier, and the roofline clock a sweep gets from its model and GPU."""

from __future__ import annotations

import pytest

from planner.sweeps import definition as defn
from planner.sweeps.runner import build_workload, simulate_points
from simulator.engine.config import EngineConfig

# Llama 3.1 8B: 131,072 KV bytes per token x 16-token blocks
BPB = 16 * 131_072

# Seed 004's pattern: 20K-token prefixes (5 of them) on a GPU that holds 3; one request a second
TIER_SWEEP = {
    "engine": {"num_gpu_blocks": 4000, "kv_bytes_per_block": BPB,
               "step_time_model": {"base_s": 0.01, "per_token_s": 2e-5}},
    "workload": {"spec": {"n": 40, "prompt": {"kind": "constant", "value": 200},
                          "output": {"kind": "constant", "value": 20},
                          "arrival": {"kind": "poisson", "rate": 1.0, "unit": "s"},
                          "prefixes": [{"length": 20000, "fraction": 1.0, "count": 5}]}, "seed": 3},
    "axes": [{"param": "cpu_tier_gib", "values": [0, 10, 40]}],
}


def test_cpu_tier_points_carry_the_tier_and_0_means_none():
    _, snapshot, points = defn.validate(TIER_SWEEP, owner=None)
    tiers = [EngineConfig.from_dict(p["config"]).cpu_tier for p in points]
    assert tiers[0] is None
    assert [t.size_gib for t in tiers[1:]] == [10, 40]
    assert tiers[2].blocks(BPB) == 40 * 1024 ** 3 // BPB


def test_a_bigger_cpu_tier_raises_the_hit_rate_and_cuts_ttft():
    _, snapshot, points = defn.validate(TIER_SWEEP, owner=None)
    wl = build_workload(points[0]["workload"])
    out = simulate_points(wl, points, record_steps=False)
    hit = [o["metrics"]["prefix_cache_hit_rate"] for o in out]
    ttft = [o["metrics"]["ttft_p99_s"] for o in out]
    assert hit[2] > hit[0] + 0.15  # without a tier the 5 prefixes evict each other
    assert hit[0] <= hit[1] <= hit[2]
    # the cold misses (first use of each prefix) stay; the re-computations after eviction go
    assert ttft[2] < 0.9 * ttft[0]
    assert [o["metrics"]["cpu_tier_gib"] for o in out] == [0.0, 10.0, 40.0]
    assert out[2]["metrics"]["cpu_tier_hit_tokens"] > 0 and out[0]["metrics"]["cpu_tier_hit_tokens"] is None


@pytest.mark.django_db
def test_a_sweep_with_model_and_gpu_runs_on_the_roofline_clock():
    raw = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
           "workload": {"spec": {"n": 30, "arrival": {"kind": "poisson", "rate": 5.0, "unit": "s"}}, "seed": 1},
           "axes": [{"param": "cpu_tier_gib", "values": [0, 8]}]}
    _, snapshot, points = defn.validate(raw, owner=None)
    cfg = EngineConfig.from_dict(points[1]["config"])
    assert cfg.cost_model is not None and cfg.cost_model.weights_s > 0  # 16 GB of weights read per step
    assert cfg.kv_bytes_per_block == snapshot["sizing"]["bytes_per_block_per_gpu"] == BPB
    # a 2,048-token prefill of Llama 3.1 8B on H100 takes about 43 ms (seed 000), 10 %
    assert cfg.cost_model.time(2048, 2048 * 2049 // 2, 0, 0, 1) == pytest.approx(0.043, rel=0.10)
    out = simulate_points(build_workload(points[0]["workload"]), points, record_steps=False)
    assert all(o["metrics"]["clock"] == "cost_model" for o in out)


@pytest.mark.django_db
def test_an_explicit_step_time_model_keeps_the_linear_clock():
    raw = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "engine": {"step_time_model": {"base_s": 0.02}},
           "workload": {"spec": {"n": 10}, "seed": 1},
           "axes": [{"param": "max_num_seqs", "values": [8, 16]}]}
    _, _, points = defn.validate(raw, owner=None)
    assert all(EngineConfig.from_dict(p["config"]).cost_model is None for p in points)
