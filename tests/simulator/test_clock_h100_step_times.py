"""The sum-of-operator-groups clock against step times measured on one H100 (tests/data/latency/README.md).

The measurements are plain PyTorch, not vLLM (vLLM's fused prefill is ~25 % faster), so the tolerances
are wide; what must hold is the shape: decode follows the weights plus the KV read, a mixed step costs
about the sum of its parts (not their maximum), MoE steps follow the experts touched.
"""

import json
from pathlib import Path

import pytest

from simulator.base.specs import GpuSpec
from simulator.clock.cost_model import RooflineStepTime
from simulator.sizing.hf_config import parse_hf_config

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)


def _points(name):
    return json.loads((DATA / "latency" / name).read_text())["points"]


def _clock(config):
    model = parse_hf_config(json.loads((DATA / "sizing" / "hf_configs" / config).read_text()))
    # the table replays the forward pass alone: no sampler time
    return RooflineStepTime.from_specs(model, H100, coefficients={"sampling_step_s": 0.0, "sampling_vocab_s": 0.0,
                                                                  "sampling_request_vocab_s": 0.0})


def _predict(clock, p):
    """GPU seconds of the measured step: the clock's step less its CPU part (the table replays CUDA graphs,
    with no scheduler or sampling time)."""
    if p["kind"] == "prefill":
        n, t = p["seqs"], p["tokens_each"]
        args = (n * t, n * t * (t + 1) / 2, 0, 0, n)
    elif p["kind"] == "decode":
        b = p["batch"]
        args = (0, 0, b, b * p["context"], b)
    else:
        b, c, ch = p["batch"], p["context"], p["chunk"]
        args = (ch, ch * (ch + 1) / 2, b, b * c, b + 1)
    parts = clock.components(*args)
    return parts["total"] - parts["overhead"]


# tolerance per kind (relative): decode -35 %..+20 % (the script has no split-KV decode, so batch 1 at 8K
# context reads its KV slowly: -31 % there); prefill and mixed -35 %..+10 % (vLLM's kernels are faster
# than the script's, so the clock, fitted to vLLM runs, may be lower but not much higher)
TOL = {"decode": (-0.35, 0.20), "prefill": (-0.35, 0.10), "mixed": (-0.35, 0.10)}


@pytest.mark.parametrize("p", [p for p in _points("h100_llama8b_step_times.json") if p["kind"] in TOL],
                         ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items() if k not in ("ms", "ms_min")))
def test_llama_8b_steps_within_tolerance(p):
    clock = _clock("meta-llama--Meta-Llama-3.1-8B_config.json")
    err = (_predict(clock, p) * 1e3 - p["ms"]) / p["ms"]
    lo, hi = TOL[p["kind"]]
    assert lo <= err <= hi, f"{p}: {err:+.0%}"


def test_a_mixed_step_costs_the_sum_of_its_parts_not_their_maximum():
    # 64 decodes at 2K context + a 512-token chunk: measured 25.1 ms; compute ~12 ms, memory ~13 ms
    clock = _clock("meta-llama--Meta-Llama-3.1-8B_config.json")
    mixed = next(p for p in _points("h100_llama8b_step_times.json") if p["kind"] == "mixed" and p["batch"] == 64)
    t = _predict(clock, mixed)
    c = clock.components(512, 512 * 513 / 2, 64, 64 * 2048, 65)
    assert t == pytest.approx(c["gemm"] + c["attention"] + c["comm"] + c["fixed"], rel=1e-12)
    assert t > 1.4 * max(c["gemm"], c["attention"])
    assert t * 1e3 == pytest.approx(mixed["ms"], rel=0.25)


def test_moe_step_time_follows_the_experts_touched():
    clock = _clock("Qwen--Qwen3-30B-A3B_config.json")
    pts = [p for p in _points("h100_qwen3_30b_a3b_moe_step_times.json") if p["prefill_chunk"] == 0]
    keep = clock.terms.expert_keep
    for p in pts:  # expected distinct experts of top-8 of 128 over T tokens vs the measured count (+-12 %)
        assert 128 * (1 - keep ** p["decodes"]) == pytest.approx(p["distinct_experts_per_layer"], rel=0.12)
    t = [_predict(clock, {"kind": "decode", "batch": p["decodes"], "context": p["context"]}) for p in pts[:4]]
    ms = [p["ms"] for p in pts[:4]]
    # steep while experts are being added: 1 -> 32 decodes more than doubles the step, as measured (3.8x)
    assert t[3] / t[0] > 2.0 and ms[3] / ms[0] > 2.0
    # flat once all are touched: 128 decodes cost within 25 % of 64
    flat = [_predict(clock, {"kind": "decode", "batch": b, "context": 1024}) for b in (64, 128)]
    assert flat[1] < 1.25 * flat[0]
