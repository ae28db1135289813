"""Step-time cost models: the seed figure, physical sanity, batching and the closed-form decode jump."""

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.base.specs import GpuSpec
from simulator.clock.cost_model import (
    BatchStepTime,
    CostModelError,
    LinearStepTime,
    RooflineCoefficients,
    RooflineStepTime,
    build_step_time_model,
)
from simulator.engine.config import StepTimeModel
from simulator.sizing.hf_config import parse_hf_config

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "sizing" / "hf_configs"


def _model(name):
    return parse_hf_config(json.loads((CONFIGS / name).read_text()))


LLAMA_8B = _model("meta-llama--Meta-Llama-3.1-8B_config.json")
LLAMA_70B = _model("meta-llama--Meta-Llama-3.1-70B_config.json")
GPT_OSS_20B = _model("openai--gpt-oss-20b_config.json")
# gpus.csv: H100 SXM5 80GB (3.35 TB/s, 989 bf16 / 1979 fp8 dense TFLOPS, NVLink4 900 GB/s total)
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)


def _prefill_attention(tokens, start=0):
    return tokens * start + tokens * (tokens + 1) / 2


# -- published figures ----------------------------------------------------------


def test_seed_000_prefill_of_2048_tokens_on_h100_takes_about_43_ms():
    # seed 000 (BLIS): "a 2,048-token prefill takes ~43ms" for Llama 3.1 8B on H100; tolerance 10 %
    t = build_step_time_model("roofline", model=LLAMA_8B, gpu=H100).prefill_time(2048)
    assert t == pytest.approx(0.043, rel=0.10)


def test_70b_tp4_single_stream_decode_is_near_the_published_17_8_ms():
    # vLLM, Llama 3.3 70B bf16, 4x H100: 56.15 tokens/s at batch 1 (see docs/cost-model.md); tolerance 15 %
    t = build_step_time_model("roofline", model=LLAMA_70B, gpu=H100, tp=4).decode_step_time(1, 600)
    assert t == pytest.approx(1 / 56.15, rel=0.15)


# -- physical sanity --------------------------------------------------------------


def test_decode_step_grows_with_batch_context():
    m = RooflineStepTime.from_specs(LLAMA_8B, H100)
    ctx = np.array([0, 1_000, 10_000, 100_000, 1_000_000], dtype=float)
    t = m.step_time(0, 0, 64, ctx, 64)
    assert np.all(np.diff(t) > 0)
    # KV bytes: 1M context tokens x 128 KiB / (3.35 TB/s x kv_bandwidth_efficiency 0.90) ~ 43 ms more than the
    # weights-only step (KV pages stream closer to peak than the weight GEMVs: the H100 table's KV slope)
    assert t[-1] - t[0] == pytest.approx(1e6 * 131072 / (3.35e12 * 0.90), rel=0.05)


def test_small_decode_batches_cost_about_the_weights_read_the_fixed_time_per_layer_and_the_cpu_time():
    m = RooflineStepTime.from_specs(LLAMA_8B, H100)
    c = m.components(0, 0, 1, 100, 1)
    co = m.coefficients
    # one token's GEMMs are bound by the weights read, not by their FLOPs
    assert c["gemm"] == pytest.approx(m.terms.weights_s, rel=1e-12)
    assert m.terms.tok_s * (1 + co.gemm_half_tokens) < m.terms.weights_s / 4
    # the fixed GPU time: each layer's kernels, and the sampler over the 128K vocabulary for one request
    sampler = co.sampling_step_s + co.sampling_vocab_s * 128256 + co.sampling_request_vocab_s * 128256
    assert c["fixed"] == pytest.approx(32 * co.layer_overhead_s + sampler, rel=1e-12) and co.layer_overhead_s > 0
    expected = (m.weights_bytes / (3.35e12 * co.bandwidth_efficiency) + 32 * co.layer_overhead_s + sampler
                + co.step_overhead_s + co.per_request_overhead_s)
    assert c["total"] == pytest.approx(expected, rel=0.01)


def test_prefill_time_is_linear_in_tokens_at_large_counts():
    m = RooflineStepTime.from_specs(LLAMA_8B, H100)
    # without the context-dependent attention FLOPs the step is affine in tokens once compute-bound
    # (the prefill's KV read of its own tokens stays)
    n = np.array([4096, 8192, 16384], dtype=float)
    t = m.step_time(n, 0, 0, 0, 1)
    slope1 = (t[1] - t[0]) / 4096
    slope2 = (t[2] - t[1]) / 8192
    assert slope1 == pytest.approx(slope2, rel=1e-9)
    co = m.coefficients
    assert slope1 == pytest.approx(m.body_flops_per_token / (989e12 * co.mfu) + co.per_token_overhead_s
                                   + m.terms.kv_read_full_s + m.terms.kv_write_s + m.terms.comm_tok_s, rel=1e-9)
    # with causal attention, doubling a prompt costs more than twice
    t1, t2 = m.prefill_time(8192), m.prefill_time(16384)
    assert 2.0 < t2 / t1 < 2.6


def test_gemm_efficiency_grows_with_the_tokens_of_a_step():
    m = RooflineStepTime.from_specs(LLAMA_8B, H100, coefficients={"gemm_half_tokens": 128.0})
    per_token = [m.components(n, 0, 0, 0, 1)["gemm"] / n for n in (512, 1024, 4096)]
    assert per_token[0] > per_token[1] > per_token[2]
    # efficiency mfu x T / (T + 128): 512 tokens run at 80 % of the large-step efficiency
    assert per_token[0] == pytest.approx((512 + 128) / 512 * m.terms.tok_s + m.terms.req_s / 512, rel=1e-9)


def test_tensor_parallelism_cuts_compute_and_adds_communication():
    one = RooflineStepTime.from_specs(LLAMA_70B, H100, tp=1)
    four = RooflineStepTime.from_specs(LLAMA_70B, H100, tp=4)
    args = (2048, _prefill_attention(2048), 0, 0, 1)
    c1, c4 = one.components(*args), four.components(*args)
    assert c4["gemm"] == pytest.approx(c1["gemm"] / 4, rel=1e-9)
    assert c4["attention"] < c1["attention"] / 3.5
    assert c1["comm"] == 0.0 and c4["comm"] > 0
    assert c4["total"] < c1["total"]
    # ring all-reduce: 2 per layer x 80 layers x (latency + 1.5 x 2048 x 8192 x 2 bytes / (450 GB/s x efficiency)),
    # on the faster of the two paths: 32 MB messages go through NCCL's ring near the link's bandwidth
    co = four.coefficients
    small = 160 * (co.allreduce_latency_s + 1.5 * 2048 * 8192 * 2 / (450e9 * co.interconnect_efficiency))
    large = 160 * (co.nccl_allreduce_latency_s + 1.5 * 2048 * 8192 * 2 / (450e9 * co.nccl_interconnect_efficiency))
    assert large < small
    assert c4["comm"] == pytest.approx(large, rel=1e-9)
    # a one-token decode step's 16 KB messages take the one-shot kernel's path (its latency)
    assert four.components(0, 0, 1, 600, 1)["comm"] == pytest.approx(
        160 * (co.allreduce_latency_s + 1.5 * 8192 * 2 / (450e9 * co.interconnect_efficiency)), rel=1e-9)


def test_fp8_checkpoint_uses_the_fp8_flops():
    from dataclasses import replace

    fp8 = replace(LLAMA_8B, quantization="fp8")
    bf = RooflineStepTime.from_specs(LLAMA_8B, H100)
    q = RooflineStepTime.from_specs(fp8, H100)
    assert q.flops_dtype == "fp8" and bf.flops_dtype == "bf16"
    assert q.weights_bytes < 0.6 * bf.weights_bytes


def test_moe_reads_more_experts_as_the_batch_grows():
    m = RooflineStepTime.from_specs(GPT_OSS_20B, H100)
    assert m.experts_bytes > 0
    t = m.step_time(0, 0, np.array([1, 8, 64, 512]), np.array([1, 8, 64, 512]) * 100, np.array([1, 8, 64, 512]))
    assert np.all(np.diff(t) > 0)
    assert m.terms.windows == (128,)


def test_nothing_scheduled_takes_no_time():
    m = RooflineStepTime.from_specs(LLAMA_8B, H100, tp=2)
    assert m.step_time(0, 0, 0, 0, 0)[0] == 0.0


# -- linear model and the factory ------------------------------------------------------


def test_linear_model_is_the_oracle_formula():
    m = build_step_time_model("linear", linear={"base_s": 0.01, "per_token_s": 1e-4, "per_req_s": 1e-3})
    assert isinstance(m.linear, StepTimeModel)
    # 100 prefill + 3 decode tokens, 4 requests
    assert m.step_time(100, 5050, 3, 300, 4)[0] == pytest.approx(0.01 + 103e-4 + 4e-3)
    assert build_step_time_model("linear").step_time(1, 1, 0, 0, 1)[0] == pytest.approx(0.025)


def test_factory_errors_name_the_field():
    with pytest.raises(CostModelError, match="kind"):
        build_step_time_model("magic")
    with pytest.raises(CostModelError, match="model"):
        build_step_time_model("roofline", gpu=H100)
    with pytest.raises(CostModelError, match="interconnect_gbps"):
        build_step_time_model("roofline", model=LLAMA_8B, gpu=GpuSpec(name="x", memory_gib=80, bandwidth_tbps=2,
                                                                      bf16_tflops=300), tp=2)
    with pytest.raises(CostModelError, match="mfu"):
        RooflineCoefficients(mfu=1.5)
    with pytest.raises(CostModelError, match="unknown roofline coefficient"):
        RooflineCoefficients.from_dict({"mfu": 0.5, "speed": 2})


def test_coefficients_are_overridable():
    slow = build_step_time_model("roofline", model=LLAMA_8B, gpu=H100, coefficients={"mfu": 0.35})
    fast = build_step_time_model("roofline", model=LLAMA_8B, gpu=H100, coefficients={"mfu": 0.70})
    assert slow.prefill_time(8192) > 1.6 * fast.prefill_time(8192)
    assert RooflineCoefficients(bandwidth_efficiency=0.5).to_dict()["bandwidth_efficiency"] == 0.5


# -- batching and the closed-form decode jump --------------------------------------------


def _configs():
    return [
        build_step_time_model("roofline", model=LLAMA_8B, gpu=H100),
        build_step_time_model("roofline", model=LLAMA_70B, gpu=H100, tp=4, coefficients={"mfu": 0.5}),
        build_step_time_model("linear", linear={"base_s": 0.002, "per_token_s": 1e-5, "per_req_s": 2e-4}),
        build_step_time_model("roofline", model=GPT_OSS_20B, gpu=H100),
    ]


def test_batch_equals_each_configuration_alone():
    models = _configs()
    batch = BatchStepTime.from_models(models)
    rng = np.random.default_rng(0)
    for _ in range(20):
        p, d = rng.integers(0, 3000, 4).astype(float), rng.integers(0, 300, 4).astype(float)
        a = p * rng.integers(1, 5000, 4)
        c = d * rng.integers(1, 20000, 4)
        r = d + (p > 0)
        got = batch.step_time(p, a, d, c, r)
        for i, m in enumerate(models):
            assert got[i] == pytest.approx(m.step_time(p[i], a[i], d[i], c[i], r[i])[0], rel=1e-12)


@pytest.mark.parametrize("n,c0,k", [(1, 10, 1), (64, 64 * 20, 300), (256, 256 * 2000, 57), (3, 3 * 120, 40),
                                    (512, 512 * 5, 1000), (7, 0, 0)])
def test_decode_jump_equals_the_sum_of_its_steps(n, c0, k):
    models = _configs()
    batch = BatchStepTime.from_models(models)
    got = batch.decode_jump_time(k, n, c0)
    for i, m in enumerate(models):
        ref = sum(float(m.step_time(0, 0, n, c0 + j * n, n)[0]) for j in range(k))
        assert got[i] == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_decode_jump_crosses_a_sliding_window_kink():
    # gpt-oss-20b alternates 128-token sliding layers: once the mean context passes the window the
    # sliding layers' decode cost stops growing; the closed form splits the jump at that step
    m = build_step_time_model("roofline", model=GPT_OSS_20B, gpu=H100)
    n, c0, k = 64, 64 * 20, 300
    steps = m.step_time(np.zeros(k), 0, n, c0 + np.arange(k) * n, n)
    slopes = np.diff(steps)
    assert slopes[0] > slopes[-1] * 1.05
    assert m.decode_jump_time(k, n, c0) == pytest.approx(float(np.sum(steps)), rel=1e-9)


def test_decode_jump_vectorized_over_configurations_with_different_k():
    models = _configs()
    batch = BatchStepTime.from_models(models)
    k = np.array([0, 5, 17, 200])
    n = np.array([4, 32, 1, 100])
    c0 = n * np.array([100, 50, 4000, 127])
    got = batch.decode_jump_time(k, n, c0)
    for i, m in enumerate(models):
        ref = sum(float(m.step_time(0, 0, n[i], c0[i] + j * n[i], n[i])[0]) for j in range(k[i]))
        assert got[i] == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_linear_decode_jump_is_k_times_a_step():
    m = LinearStepTime(StepTimeModel(base_s=0.01, per_token_s=1e-3, per_req_s=0.0))
    assert m.decode_jump_time(10, 5, 500) == pytest.approx(10 * (0.01 + 5e-3))
