"""Closed-form sizing: seed worked numbers, formulas, TP/PP, dtypes, weights, log parsing."""

from __future__ import annotations

import math

import pytest

from simulator.base.specs import GIB, DeploymentSpec, GpuSpec, LayerSpec, ModelSpec, SpecError
from simulator.sizing.closed_form import (
    activation_bytes,
    blocks_for_tokens,
    calibrate,
    estimate_num_parameters,
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_element_bytes,
    last_block_waste,
    min_blocks_unservable,
    paged_vs_naive,
    parse_vllm_log,
    plan,
    pp_layer_partition,
    tier_blocks,
    weights_bytes_per_gpu,
)
from simulator.sizing.hf_config import parse_hf_config
from tests.simulator._sizing_data import first_number, hf_config, load_json, model_rows

SEEDS = load_json("seed_worked_numbers.json")
H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, memory_mib=81559)


def dense(n_layers=32, heads=32, kv=8, head_dim=128, hidden=None, **kw) -> ModelSpec:
    return ModelSpec(name="m", num_layers=n_layers, hidden_size=hidden or heads * head_dim, num_attention_heads=heads,
                     num_kv_heads=kv, head_dim=head_dim, vocab_size=kw.pop("vocab_size", 32000),
                     intermediate_size=kw.pop("intermediate_size", 4 * (hidden or heads * head_dim)),
                     max_position_embeddings=kw.pop("max_position_embeddings", 8192), **kw)


# --- seed worked numbers ----------------------------------------------------


def test_seed_001_llama70b_bytes_per_token_and_32k_request():
    s = SEEDS["llama70b_bytes_per_token"]
    m = dense(n_layers=80, heads=64, kv=8, head_dim=128, weights_dtype="fp16")
    assert kv_bytes_per_token(m, "fp16") == s["bytes_per_token"]
    r = SEEDS["llama70b_32k_request_gb"]
    assert kv_bytes_per_request(m, r["tokens"], "fp16") / 1e9 == pytest.approx(r["approx_gb"], rel=0.06)


def test_seed_001_llama70b_on_8xh100_budget():
    s = SEEDS["llama70b_8xh100"]
    m = dense(n_layers=80, heads=64, kv=8, head_dim=128, max_position_embeddings=131072)
    # 640 GB total, 140 GB weights, 20 GB overhead -> 480 GB KV over 8 GPUs (doc's GB = 1e9 B).
    gpu = GpuSpec(name="H100", memory_gib=80e9 / GIB)
    dep = DeploymentSpec(tensor_parallel_size=8, gpu_memory_utilization=1.0, max_model_len=4096,
                         available_kv_gib=s["kv_gb"] * 1e9 / 8 / GIB)
    res = plan(m, gpu, dep)
    assert res.kv_bytes_per_token_per_gpu == 327680 / 8
    assert res.kv_cache_tokens == pytest.approx(s["approx_tokens"], rel=0.05)
    assert res.max_concurrency == pytest.approx(s["approx_requests_4k"], rel=0.06)
    res32 = plan(m, gpu, dep.with_(max_model_len=32768))
    assert res32.max_concurrency == pytest.approx(s["approx_requests_32k"], rel=0.06)


def test_seed_002_gpt2_small():
    s = SEEDS["gpt2_small"]
    m = ModelSpec(name="gpt2", num_layers=12, hidden_size=768, num_attention_heads=12, num_kv_heads=12,
                  vocab_size=50257, intermediate_size=3072, gated_mlp=False, max_position_embeddings=1024)
    assert kv_bytes_per_token(m, "fp16") / 12 == s["bytes_per_token_per_layer"]
    assert kv_bytes_per_request(m, s["tokens"], "fp16") == s["total_bytes"]


def test_seed_003_tutorial_gqa_mha_mqa_and_quantized_kv():
    s = SEEDS["tutorial_gqa_8b"]
    m = dense(n_layers=32, heads=32, kv=8)
    assert kv_bytes_per_token(m, "bf16") == s["bytes_per_token"]
    assert s["batch"] * kv_bytes_per_request(m, s["tokens"], "bf16") / GIB == s["total_gib"]
    t = SEEDS["tutorial_mha_gqa_mqa"]
    for kind, kv in (("MHA", 32), ("GQA", 8), ("MQA", 1)):
        mm = dense(n_layers=32, heads=32, kv=kv)
        assert mm.attention == kind
        assert t["batch"] * kv_bytes_per_request(mm, t["tokens"], "bf16") / GIB == t["gib"][kind]
    q = SEEDS["tutorial_quantized_kv"]
    for dt, gib in q["gib"].items():
        got = q["batch"] * kv_bytes_per_request(m, q["tokens"], dt) / GIB
        # int4 carries a per-group scale the tutorial leaves out (+6.25%)
        assert got == pytest.approx(gib, rel=0.07 if dt == "int4" else 0)


def test_seed_000_blis_unservable_and_002_last_block():
    s = SEEDS["blis_unservable"]
    assert min_blocks_unservable(s["max_input_tokens"], s["block_size"]) == s["min_blocks"]
    v = SEEDS["vllm_last_block"]
    assert blocks_for_tokens(v["tokens"], v["block_size"]) == v["blocks"]
    assert last_block_waste(v["tokens"], v["block_size"]) == v["block_size"] - v["last_block_used"]
    assert last_block_waste(2048, 16) == 0


def test_seed_001_paged_fits_more_than_naive_preallocation():
    # 1K, 2K, 1K tokens against 32K pre-allocated each: 4K used of 96K reserved (96% waste).
    r = paged_vs_naive([1024, 2048, 1024], num_blocks=6144, block_size=16, max_model_len=32768)
    assert r.naive_requests == 3
    assert r.naive_utilization == pytest.approx(4096 / 3 / 32768)
    assert r.paged_requests == 72
    assert r.paged_utilization == 1.0
    assert r.paged_gain == 24


# --- formulas ------------------------------------------------------------------


def test_vllm_reference_llama3_8b_two_mib_per_block():
    m = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    res = plan(m, H100, DeploymentSpec(max_model_len=8192, available_kv_gib=10.0))
    assert res.bytes_per_block_per_gpu == 2 * 2**20
    assert res.num_gpu_blocks == 5120
    assert res.kv_cache_tokens == 5120 * 16
    assert res.max_concurrency == 5120 / 512
    assert res.min_blocks_unservable == 512


def test_tp_splits_kv_heads_and_replicates_beyond_kv_heads():
    m = dense(n_layers=32, heads=32, kv=8)
    full = kv_bytes_per_token(m, "bf16")
    assert kv_bytes_per_token(m, "bf16", 4, per_gpu=True) == full / 4
    assert kv_bytes_per_token(m, "bf16", 8, per_gpu=True) == full / 8
    assert kv_bytes_per_token(m, "bf16", 16, per_gpu=True) == full / 8  # one head per rank, replicated
    assert kv_bytes_per_token(m, "bf16", 16) == full  # whole-model figure unchanged


def test_mla_latent_is_not_split_by_tp():
    m = parse_hf_config(hf_config("deepseek-ai--DeepSeek-V3_config.json"))
    assert m.attention == "MLA"
    assert kv_bytes_per_token(m, "bf16") == 61 * 576 * 2 == 70272
    assert kv_bytes_per_token(m, "bf16", 8, per_gpu=True) == 70272


def test_kv_dtype_element_bytes_with_scale_overhead():
    assert kv_element_bytes("fp32") == 4
    assert kv_element_bytes("bf16") == kv_element_bytes("fp16") == 2
    assert kv_element_bytes("fp8") == kv_element_bytes("int8") == 1
    assert kv_element_bytes("int4") == 0.5 + 2 / 64
    assert kv_element_bytes("fp4") == 0.5 + 1 / 16


def test_sliding_window_layers_hold_at_most_window_tokens():
    m = parse_hf_config(hf_config("openai--gpt-oss-20b_config.json"))
    per_layer = 2 * 8 * 64 * 2
    assert kv_bytes_per_request(m, 100_000, "bf16") == 12 * 100_000 * per_layer + 12 * 128 * per_layer
    assert kv_bytes_per_request(m, 100, "bf16") == 24 * 100 * per_layer


def test_linear_layers_hold_fixed_state():
    layers = tuple(LayerSpec(kind="linear", state_bytes=1000) if i % 2 else LayerSpec() for i in range(4))
    m = dense(n_layers=4, heads=8, kv=8, head_dim=64, layers=layers)
    per = 2 * 8 * 64 * 2
    assert kv_bytes_per_token(m, "bf16") == 2 * per
    assert kv_bytes_per_request(m, 10, "bf16") == 10 * 2 * per + 2000
    res = plan(m, H100, DeploymentSpec(max_model_len=1024, available_kv_gib=1.0))
    assert res.fits and res.notes


def test_pipeline_parallel_tightest_stage_decides():
    assert [len(r) for r in pp_layer_partition(10, 3)] == [3, 4, 3]
    m = dense(n_layers=80, heads=64, kv=8, head_dim=128, vocab_size=128256, intermediate_size=28672,
              max_position_embeddings=8192)
    one = plan(m, H100, DeploymentSpec(tensor_parallel_size=4, max_model_len=8192))
    two = plan(m, H100, DeploymentSpec(tensor_parallel_size=4, pipeline_parallel_size=2, max_model_len=8192))
    assert two.kv_bytes_per_token_per_gpu == one.kv_bytes_per_token_per_gpu / 2
    assert two.num_gpu_blocks > one.num_gpu_blocks


def test_weights_from_parameters_and_quantization():
    llama = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    assert weights_bytes_per_gpu(llama, DeploymentSpec()) / GIB == pytest.approx(14.99, rel=0.01)  # R01/R11 logs
    fp8 = parse_hf_config(hf_config("nvidia--Llama-3.1-70B-Instruct-FP8_config.json"),
                          quant_config=load_json("hf_configs/nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json"))
    assert fp8.quantization == "fp8"
    assert weights_bytes_per_gpu(fp8, DeploymentSpec()) / GIB == pytest.approx(67.70, rel=0.01)  # R16 log
    oss = parse_hf_config(hf_config("openai--gpt-oss-20b_config.json"))
    assert weights_bytes_per_gpu(oss, DeploymentSpec()) / GIB == pytest.approx(13.47, rel=0.01)  # R42 log
    with_tp = weights_bytes_per_gpu(llama, DeploymentSpec(tensor_parallel_size=2))
    assert with_tp == pytest.approx(weights_bytes_per_gpu(llama, DeploymentSpec()) / 2, rel=0.01)


def test_estimate_num_parameters_matches_models_csv():
    files = {
        "Llama 3.1 8B": "meta-llama--Meta-Llama-3.1-8B_config.json",
        "Llama 3.1 70B": "meta-llama--Meta-Llama-3.1-70B_config.json",
        "Llama 3.1 405B": "meta-llama--Meta-Llama-3.1-405B_config.json",
        "Mixtral 8x7B": "mistralai--Mixtral-8x7B-v0.1_config.json",
        "Mixtral 8x22B": "mistralai--Mixtral-8x22B-v0.1_config.json",
        "Qwen3 8B": "Qwen--Qwen3-8B_config.json",
        "Qwen3 32B": "Qwen--Qwen3-32B_config.json",
        "Qwen3 30B-A3B": "Qwen--Qwen3-30B-A3B_config.json",
        "Qwen3 235B-A22B": "Qwen--Qwen3-235B-A22B_config.json",
        "DeepSeek-V3": "deepseek-ai--DeepSeek-V3_config.json",
        "gpt-oss-20b": "openai--gpt-oss-20b_config.json",
        "gpt-oss-120b": "openai--gpt-oss-120b_config.json",
    }
    rows = {r["name"]: r for r in model_rows()}
    for name, f in files.items():
        m = parse_hf_config(hf_config(f))
        total, active = estimate_num_parameters(m)
        assert total / 1e9 == pytest.approx(float(rows[name]["total_params_B"]), rel=0.002), name
        if name.startswith("gpt-oss"):  # OpenAI's card leaves the input embedding out of "active"
            active -= m.vocab_size * m.hidden_size
        assert active / 1e9 == pytest.approx(float(rows[name]["active_params_B"]), rel=0.002), name


def test_kv_bytes_per_token_matches_models_csv():
    files = {"Llama 3.1 70B": "meta-llama--Meta-Llama-3.1-70B_config.json",
             "Qwen3 235B-A22B": "Qwen--Qwen3-235B-A22B_config.json",
             "DeepSeek-R1": "deepseek-ai--DeepSeek-R1_config.json",
             "gpt-oss-120b": "openai--gpt-oss-120b_config.json",
             "Mixtral 8x22B": "mistralai--Mixtral-8x22B-v0.1_config.json"}
    rows = {r["name"]: r for r in model_rows()}
    for name, f in files.items():
        m = parse_hf_config(hf_config(f))
        assert kv_bytes_per_token(m, "bf16") == float(rows[name]["kv_bytes_per_token_bf16_all_attn_layers"])
        assert kv_bytes_per_token(m, "fp8") == float(rows[name]["kv_bytes_per_token_fp8_full"])


def test_activation_model_matches_printed_breakdown():
    # llm-d H100 logs (vLLM 0.11, 8192 tokens, 1024 sequences): gpt-oss-20b 7.38 GiB, R01 V0 RTX 3090 2.07 GiB.
    oss = parse_hf_config(hf_config("openai--gpt-oss-20b_config.json"))
    dep = DeploymentSpec(vllm_version="0.11.0")
    assert activation_bytes(oss, dep, 8192, 1024) / GIB == pytest.approx(7.38, rel=0.03)
    llama = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    assert activation_bytes(llama, DeploymentSpec(vllm_version="0.6.4"), 20000, 256) / GIB == pytest.approx(
        2.07, rel=0.03)


def test_does_not_fit_reasons():
    m = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-70B_config.json"))
    res = plan(m, H100, DeploymentSpec(max_model_len=8192))
    assert not res.fits and "weights" in res.reason
    small = plan(m, H100, DeploymentSpec(tensor_parallel_size=2, max_model_len=131072, gpu_memory_utilization=0.95))
    assert not small.fits and "max_model_len" in small.reason
    with pytest.raises(SpecError, match="tensor_parallel_size"):
        plan(m, H100, DeploymentSpec(tensor_parallel_size=3))
    d = plan(m, H100, DeploymentSpec(tensor_parallel_size=4, max_model_len=8192)).to_dict()
    for key in ("kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "bytes_per_block_per_gpu", "num_gpu_blocks",
                "kv_cache_tokens", "max_concurrency", "min_blocks_unservable", "fits", "memory_gib"):
        assert key in d
    assert set(d["memory_gib"]) >= {"total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv",
                                     "free"}


def test_budget_identity():
    m = parse_hf_config(hf_config("Qwen--Qwen3-8B_config.json"))
    res = plan(m, H100, DeploymentSpec(max_model_len=32768, subtract_cudagraph=True))
    mem = res.memory_gib
    assert mem.kv == pytest.approx(mem.budget - mem.weights - mem.activation - mem.non_torch - mem.cudagraph)
    assert res.num_gpu_blocks == math.floor(mem.kv * GIB / res.bytes_per_block_per_gpu)


def test_cpu_and_disk_tiers():
    m = dense(n_layers=32, heads=32, kv=8)
    res = plan(m, H100, DeploymentSpec(max_model_len=8192, cpu_tier_gib=64, disk_tier_gib=512))
    assert res.cpu_tier_blocks == 64 * GIB // (2 * 2**20)
    assert res.disk_tier_blocks == 8 * res.cpu_tier_blocks
    assert tier_blocks(1.0, 2**20) == 1024


LOG_V1 = """
INFO 08-20 [gpu_model_runner.py:1953] Model loading took 14.9889 GiB and 5.2 seconds
INFO 08-20 [gpu_worker.py:276] Available KV cache memory: 19.25 GiB
INFO 08-20 [kv_cache_utils.py:849] GPU KV cache size: 157,648 tokens
INFO 08-20 [kv_cache_utils.py:853] Maximum concurrency for 131,072 tokens per request: 1.20x
INFO 08-20 [gpu_model_runner.py:2567] Graph capturing finished in 6 secs, took 0.52 GiB
"""
LOG_V0 = ("INFO Loading model weights took 14.9888 GB\nINFO Memory profiling results: total_gpu_memory=23.58GiB "
          "initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.41GiB "
          "non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90\n"
          "INFO # GPU blocks: 1952, # CPU blocks: 2048\n")


def test_parse_vllm_log_v1_and_v0():
    p = parse_vllm_log(LOG_V1)
    assert p == {"model_loading_gib": 14.9889, "available_kv_gib": 19.25, "kv_cache_tokens": 157648,
                 "max_concurrency_len": 131072, "max_concurrency": 1.2, "cudagraph_gib": 0.52}
    q = parse_vllm_log(LOG_V0)
    assert q["model_loading_gib"] == 14.9888 and q["available_kv_gib"] == 3.81
    assert q["num_gpu_blocks"] == 1952 and q["num_cpu_blocks"] == 2048
    assert q["total_gpu_memory_gib"] == 23.58 and q["non_torch_memory_gib"] == 0.35
    assert q["gpu_memory_utilization"] == 0.9


def test_calibrate_from_pasted_log_reproduces_its_token_count():
    m = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    dep = calibrate(DeploymentSpec(dtype="fp16", max_model_len=131072), LOG_V1)
    assert dep.weights_gib == 14.9889 and dep.available_kv_gib == 19.25
    res = plan(m, GpuSpec(name="A100 40GB", memory_mib=40960), dep)
    assert res.kv_cache_tokens == pytest.approx(first_number("157,648"), rel=0.01)
    assert res.weights_source == "given" and res.available_kv_source == "given"


def test_every_spec_reads_its_own_json_back_and_names_what_it_cannot():
    """``from_dict`` (issue 29 item 5: typed inputs): each spec is rebuilt from its ``to_dict`` JSON equal to itself;
    an unknown key is refused naming it and the closest field, a nested layer's by its index."""
    import json
    from dataclasses import asdict

    model = ModelSpec(name="m", num_layers=2, hidden_size=64, num_attention_heads=4, num_kv_heads=2,
                      intermediate_size=128, vocab_size=100, layers=(LayerSpec(), LayerSpec(kind="sliding", window=16)))
    gpu = GpuSpec(name="g", memory_gib=80.0, bandwidth_tbps=3.35, bf16_tflops=989.0)
    dep = DeploymentSpec(tensor_parallel_size=2, max_num_seqs=64)
    for spec in (model, gpu, dep, LayerSpec(kind="sliding", window=8)):
        data = json.loads(json.dumps(asdict(spec)))
        assert type(spec).from_dict(data) == spec
        assert type(spec).from_dict(spec) is spec
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_dict({"tensor_paralel_size": 2})
    assert caught.value.field == "tensor_paralel_size" and "did you mean 'tensor_parallel_size'" in caught.value.message
    data = json.loads(json.dumps(asdict(model)))
    data["layers"][1]["windw"] = 4
    with pytest.raises(SpecError) as caught:
        ModelSpec.from_dict(data)
    assert caught.value.field == "layers[1].windw" and "did you mean 'window'" in caught.value.message
    with pytest.raises(SpecError, match="must be a JSON object of GpuSpec fields"):
        GpuSpec.from_dict([1, 2])
