"""A cost model chosen per configuration (``EngineConfig.cost_model``) drives the engine's clock.

The engine evaluates the coefficient row in plain floats every step
(``StepCostTerms.time``) and sums decode-only stretches with
``StepCostTerms.decode_times``; both must equal the batched numpy model.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.base.specs import GpuSpec
from simulator.batch.runner import simulate
from simulator.clock.cost_model import BatchStepTime, RooflineStepTime, StepCostTerms
from simulator.engine.config import ConfigError, EngineConfig, StepTimeModel
from simulator.engine.core import FastEngine
from simulator.engine.serving import serving_offsets
from simulator.sizing.hf_config import parse_hf_config
from simulator.workload.requests import Workload

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "sizing" / "hf_configs"
LLAMA_8B_JSON = json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text())
# gpus.csv: H100 SXM5 80GB (3.35 TB/s, 989 bf16 dense TFLOPS, NVLink4 900 GB/s total)
H100 = dict(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
            interconnect_gbps=900)


def _terms(name: str, tp: int = 1) -> StepCostTerms:
    model = parse_hf_config(json.loads((CONFIGS / name).read_text()))
    return RooflineStepTime.from_specs(model, GpuSpec(**H100), tp).terms


ROWS = [
    _terms("meta-llama--Meta-Llama-3.1-8B_config.json"),
    _terms("meta-llama--Meta-Llama-3.1-70B_config.json", tp=4),
    _terms("openai--gpt-oss-20b_config.json"),  # sliding windows + MoE
    StepCostTerms(base_s=0.01, per_token_s=2e-5, per_req_s=1e-4),
]
# async scheduling (cpu_overlap): a step lasts the longer of its GPU and CPU parts; a CPU time between the
# GPU time of the first and the last decode step below puts the GPU/CPU kink inside the decode stretches
ROWS += [replace(ROWS[0], cpu_overlap=1.0, base_s=6e-3), replace(ROWS[2], cpu_overlap=1.0, base_s=5.3e-3)]


@pytest.mark.parametrize("row", range(len(ROWS)))
def test_scalar_time_equals_the_batched_model(row):
    terms = ROWS[row]
    batch = BatchStepTime([terms])
    rng = np.random.default_rng(row)
    for _ in range(200):
        P, D = int(rng.integers(0, 3000)), int(rng.integers(0, 300))
        A = P * int(rng.integers(0, 5000)) + P * (P + 1) // 2
        C = D * int(rng.integers(1, 20000))
        R = D + (1 if P else 0)
        PK = P + int(rng.integers(0, 5000)) if P else 0
        want = float(batch.step_time(P, A, D, C, R, prefill_kv_tokens=PK)[0])
        assert terms.time(P, A, D, C, R, PK) == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert terms.time(0, 0, 0, 0, 0) == 0.0


@pytest.mark.parametrize("row", range(len(ROWS)))
def test_decode_times_are_the_steps_and_sum_to_the_closed_form_jump(row):
    terms = ROWS[row]
    k, n, c0 = 700, 37, 37 * 120
    times = terms.decode_times(k, n, c0)
    each = [terms.time(0, 0, n, c0 + j * n, n) for j in range(k)]
    assert times == pytest.approx(each, rel=1e-12)
    jump = float(BatchStepTime([terms]).decode_jump_time(k, n, c0)[0])
    assert times.sum() == pytest.approx(jump, rel=1e-9)


@pytest.mark.parametrize("row", range(len(ROWS)))
def test_decode_step_is_time_to_the_last_bit(row):
    """The lazy window's per-step clock (``decode_step``) must add up exactly as the stepping engine's."""
    terms = ROWS[row]
    rng = np.random.default_rng(100 + row)
    for n in (1, 7, 256, 1024):
        step = terms.decode_step(n)
        for C in rng.integers(n, n * 40_000, 50).tolist():
            assert step(C) == terms.time(0, 0, n, C, n, 0), (n, C)
    assert terms.decode_step(0)(0) == 0.0


def _workload(unit: str) -> Workload:
    rng = np.random.default_rng(11)
    n = 120
    if unit == "s":
        arrival = np.sort(rng.exponential(0.05, n).cumsum())
    else:
        arrival = np.sort(rng.integers(0, 200, n)).astype(float)
    return Workload(prompt_len=rng.integers(1, 900, n), output_len=rng.integers(1, 200, n),
                    arrival=arrival, arrival_unit=unit)


def _cfgs(terms):
    return [EngineConfig(num_gpu_blocks=b, block_size=16, cost_model=terms) for b in (150, 400, 5000)]


@pytest.mark.parametrize("unit", ["step", "s"])
def test_config_cost_model_equals_the_batched_hook(unit):
    """Fast scalar clock (with decode jumps) == BatchStepTime through the hook (no jumps)."""
    wl = _workload(unit)
    terms = ROWS[0]
    fast = simulate(wl, _cfgs(terms))
    hook = simulate(wl, [EngineConfig(num_gpu_blocks=b, block_size=16) for b in (150, 400, 5000)],
                    step_cost=BatchStepTime([terms] * 3))
    for a, b in zip(fast, hook):
        assert a.totals["num_steps"] == b.totals["num_steps"]
        assert a.totals["preemptions"] == b.totals["preemptions"]
        assert np.array_equal(a.requests["first_token_step"], b.requests["first_token_step"])
        # a config's cost model also adds the time outside the steps (seconds arrivals only); the hook does not
        first_add, finish_add = serving_offsets(terms, a.requests["prompt_len"], a.requests["num_output_tokens"])
        if unit == "step":
            first_add = finish_add = 0.0
        else:
            assert np.all(first_add > 0)
        np.testing.assert_allclose(a.requests["first_token_time_s"] - first_add, b.requests["first_token_time_s"],
                                   rtol=1e-9)
        np.testing.assert_allclose(a.requests["finish_time_s"] - finish_add, b.requests["finish_time_s"], rtol=1e-9)


def test_lazy_and_general_paths_give_the_same_clock():
    wl = _workload("s")
    cfg = EngineConfig(num_gpu_blocks=300, block_size=16, cost_model=ROWS[2])
    out = []
    for lazy in (True, False):
        sim = FastEngine(wl, cfg, accelerate=lazy)
        sim.run_all()
        out.append((sim.requests.first_token.copy(), sim.requests.first_token_t.copy(), sim.requests.finish_t.copy(), sim.clock))
    assert np.array_equal(out[0][0], out[1][0])
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12)
    np.testing.assert_allclose(out[0][2], out[1][2], rtol=1e-12)
    assert out[0][3] == pytest.approx(out[1][3], rel=1e-12)


def test_roofline_makes_long_prompts_slower_than_the_linear_default():
    wl = _workload("s")
    lin = simulate(wl, [EngineConfig(num_gpu_blocks=5000, step_time_model=StepTimeModel(base_s=0.001))])[0]
    roof = simulate(wl, [EngineConfig(num_gpu_blocks=5000, cost_model=ROWS[1])])[0]
    # 70B on 4x H100 takes tens of ms per step, far more than a flat 1 ms
    ttft = [np.nanmean(r.requests["first_token_time_s"] - wl.arrival) for r in (lin, roof)]
    assert ttft[1] > 5 * ttft[0]
    assert roof.totals["duration_s"] > lin.totals["duration_s"]


def test_cost_model_from_config_json_kinds():
    roof = EngineConfig.from_dict({"cost_model": {"kind": "roofline", "model": LLAMA_8B_JSON, "gpu": H100}})
    assert roof.cost_model == ROWS[0]
    # a 2,048-token prefill of Llama 3.1 8B on H100 takes about 43 ms (seed 000), 10 %
    assert roof.cost_model.time(2048, 2048 * 2049 // 2, 0, 0, 1) == pytest.approx(0.043, rel=0.10)
    lin = EngineConfig.from_dict({"cost_model": {"kind": "linear", "base_s": 0.02, "per_token_s": 1e-5}})
    assert lin.cost_model.time(100, 0, 0, 0, 1) == pytest.approx(0.021)
    again = EngineConfig.from_dict(roof.to_dict())
    assert again == roof


def test_a_roofline_config_times_the_sampler_its_generation_config_asks_for():
    def decode_s(**extra):  # a decode step of 32 requests at 1K context
        cfg = EngineConfig.from_dict({"cost_model": {"kind": "roofline", "model": LLAMA_8B_JSON, "gpu": H100, **extra}})
        return cfg.cost_model.time(0, 0, 32, 32 * 1024, 32)

    unknown, plain = decode_s(), decode_s(generation_config={})
    sorting = decode_s(generation_config={"temperature": 0.6, "top_p": 0.9})
    assert sorting == pytest.approx(unknown)  # a model not known: the default top-k / top-p path
    assert unknown - plain == pytest.approx(0.8e-3, abs=0.05e-3)  # no sort of 32 x 128K logits
    assert decode_s(generation_config={}, coefficients={"sampling_vocab_s": 2.068e-9, "sampling_step_s": 1.145e-4,
                                                        "sampling_request_vocab_s": 1.378e-10}) == pytest.approx(unknown)


@pytest.mark.parametrize("bad, msg", [
    ({"kind": "quantum"}, "cost_model.kind"),
    ({"kind": "linear", "base_s": -1}, "base_s"),
    ({"kind": "linear", "bogus": 1}, "cost_model.bogus"),
    ({"kind": "roofline", "gpu": H100}, "cost_model.model"),
    ({"kind": "roofline", "model": LLAMA_8B_JSON}, "cost_model.gpu"),
    ({"kind": "roofline", "model": LLAMA_8B_JSON, "gpu": {"name": "X"}}, "memory_gib"),
    ({"kind": "roofline", "model": LLAMA_8B_JSON, "gpu": H100, "coefficients": {"mfu": 3}}, "mfu"),
    ({"kind": "roofline", "model": LLAMA_8B_JSON, "gpu": H100, "generation_config": {"top_p": "0.9"}},
     "cost_model.generation_config.top_p: "),
    ({"kind": "roofline", "model": LLAMA_8B_JSON, "gpu": H100, "generation_config": "greedy"},
     "cost_model.generation_config: must be a JSON object"),
    ({"kind": "terms", "tok_s": "fast"}, "cost_model.tok_s"),
    ([1, 2], "cost_model"),
])
def test_bad_cost_models_name_the_field(bad, msg):
    with pytest.raises(ConfigError, match=msg.replace(".", r"\.")):
        EngineConfig.from_dict({"cost_model": bad})
