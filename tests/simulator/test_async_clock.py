"""What vLLM's asynchronous scheduling does to the clock (simulator/clock/terms.py, simulator/engine/serving.py).

vLLM 0.15's engine core (``EngineCore.step_with_batch_queue``) schedules step k+1 as soon as step k is
launched: the step's CPU work runs under the GPU's (a step lasts the longer of the two), and a request
arriving while step k runs joins step k+2, one step later than the simulator's step boundary admits it
(its times move by one step of its own batch). Neither changes a scheduling decision.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.base.specs import GpuSpec
from simulator.batch.runner import simulate
from simulator.clock.cost_model import RooflineCoefficients, RooflineStepTime
from simulator.clock.terms import StepCostTerms, overlapped
from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.engine.serving import async_lag
from simulator.sizing.hf_config import parse_hf_config
from simulator.workload.requests import Workload

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "sizing" / "hf_configs"
# gpus.csv: H100 SXM5 80GB (3.35 TB/s, 989 bf16 dense TFLOPS, NVLink4 900 GB/s total)
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)
LLAMA_8B = parse_hf_config(json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text()))


def _workload(n: int = 150) -> Workload:
    rng = np.random.default_rng(5)
    return Workload(prompt_len=rng.integers(16, 900, n), output_len=rng.integers(2, 120, n),
                    arrival=np.sort(rng.exponential(0.02, n).cumsum()), arrival_unit="s")


def _terms(**kw) -> StepCostTerms:
    return replace(RooflineStepTime.from_specs(LLAMA_8B, H100).terms, **kw)


def test_async_scheduling_hides_the_cpu_part_of_a_step():
    terms = _terms(base_s=2e-3, per_req_s=50e-6)
    hidden = overlapped(terms, True)
    assert overlapped(terms, False) is terms and overlapped(None, True) is None
    for D, C in ((1, 600), (64, 64 * 900), (256, 256 * 3000)):
        parts = RooflineStepTime.from_specs(LLAMA_8B, H100).components(0, 0, D, C, D)
        gpu = parts["gemm"] + parts["attention"] + parts["moe"] + parts["comm"] + parts["fixed"]
        cpu = 2e-3 + 50e-6 * D
        assert terms.time(0, 0, D, C, D) == pytest.approx(gpu + cpu, rel=1e-12)
        assert hidden.time(0, 0, D, C, D) == pytest.approx(max(gpu, cpu), rel=1e-12)
    # 256 requests x 50 us of CPU outlast a small decode step: then the CPU sets the pace
    assert hidden.time(0, 0, 256, 256 * 10, 256) == pytest.approx(2e-3 + 256 * 50e-6)


def test_an_async_engine_times_its_steps_with_the_overlapped_row_and_a_sync_one_does_not():
    terms = _terms()
    for async_mode in (False, True):
        sim = FastEngine(_workload(), EngineConfig(num_gpu_blocks=4000, cost_model=terms,
                                                   async_scheduling=async_mode))
        assert sim.step_clock.terms.cpu_overlap == (1.0 if async_mode else 0.0)


def test_lazy_and_general_paths_give_the_same_clock_under_async_scheduling():
    cfg = EngineConfig(num_gpu_blocks=3000, cost_model=_terms(base_s=6e-3), async_scheduling=True)
    out = []
    for lazy in (True, False):
        sim = FastEngine(_workload(), cfg, accelerate=lazy)
        sim.run_all()
        out.append((sim.requests.first_token.copy(), sim.requests.first_token_t.copy(), sim.requests.finish_t.copy(), sim.clock))
    assert np.array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(out[0][2], out[1][2])
    assert out[0][3] == out[1][3]


def test_an_async_request_joins_one_of_its_own_steps_later():
    wl = _workload()
    base = _terms(serve_request_s=0.0, serve_prompt_token_s=0.0)
    runs = {}
    for lag in (0.0, 1.0):
        for async_mode in (False, True):
            cfg = EngineConfig(num_gpu_blocks=4000, cost_model=replace(base, serve_async_lag_steps=lag),
                               async_scheduling=async_mode)
            runs[lag, async_mode] = simulate(wl, [cfg])[0].requests
    # the engine's schedule is the same; only the times move
    for async_mode in (False, True):
        assert np.array_equal(runs[0.0, async_mode]["first_token_step"], runs[1.0, async_mode]["first_token_step"])
    # a synchronous engine schedules at the step boundary: no lag
    np.testing.assert_array_equal(runs[0.0, False]["first_token_time_s"], runs[1.0, False]["first_token_time_s"])
    plain, lagged = runs[0.0, True], runs[1.0, True]
    out = np.asarray(plain["num_output_tokens"], np.float64)
    own_step = (plain["finish_time_s"] - plain["first_token_time_s"]) / np.maximum(out - 1, 1)
    want = np.where(out > 1, own_step, 0.0)
    assert np.all(want[out > 1] > 0)
    np.testing.assert_allclose(lagged["first_token_time_s"] - plain["first_token_time_s"], want, rtol=1e-9)
    np.testing.assert_allclose(lagged["finish_time_s"] - plain["finish_time_s"], want, rtol=1e-9)


def test_async_lag_is_zero_for_one_output_token_and_nan_for_an_unfinished_request():
    lag = async_lag(1.0, np.array([1.0, 1.0, np.nan]), np.array([3.0, 1.0, np.nan]), np.array([5, 1, 4]))
    assert lag[0] == pytest.approx(0.5) and lag[1] == 0.0 and np.isnan(lag[2])


def test_kv_reads_stream_at_the_kv_bandwidth_efficiency():
    # the H100 table's decode KV slope (batch 32-128, 512 -> 8192 context) is ~90 % of 3.35 TB/s
    clock = RooflineStepTime.from_specs(LLAMA_8B, H100)
    kv = clock.kv_bytes_per_token_full
    assert clock.terms.dec_attn_s == pytest.approx(kv / (3.35e12 * 0.90))
    assert clock.terms.weights_s == pytest.approx(clock.weights_bytes / (3.35e12 * clock.coefficients.bandwidth_efficiency))
    slower = RooflineStepTime.from_specs(LLAMA_8B, H100, coefficients=RooflineCoefficients(kv_bandwidth_efficiency=0.45))
    assert slower.terms.dec_attn_s == pytest.approx(2 * clock.terms.dec_attn_s)


def test_llama4_counts_its_shared_expert():
    """Llama 4 Scout: 17B active of 109B (16 experts, top-1, one shared expert per MoE layer; the config has
    no key for the shared expert). Config from simulator/data/latency_trainval (inference-sim/inference-sim)."""
    from simulator.sizing.closed_form import estimate_num_parameters

    data = Path(__file__).resolve().parents[2] / "simulator" / "data" / "latency_trainval" / "experiments.json"
    exp = next(e for e in json.loads(data.read_text()) if "scout" in e["name"])
    model = parse_hf_config(exp["model_config"], name=exp["model"])
    total, active = estimate_num_parameters(model)
    assert model.num_shared_experts == 1 and model.shared_expert_intermediate_size == 8192
    assert 16.5e9 < active < 17.5e9 and 105e9 < total < 110e9
