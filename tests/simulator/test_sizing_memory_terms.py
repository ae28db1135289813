"""Memory terms beyond weights and KV (issue 18): version rules, CUDA graphs, LoRA, multimodal encoder cache."""

from __future__ import annotations

import pytest

from simulator.base.specs import GIB, DeploymentSpec, GpuSpec, SpecError
from simulator.sizing.closed_form import encoder_cache_bytes, lora_bytes_per_gpu, plan, version_rules
from simulator.sizing.hf_config import parse_hf_config
from tests.simulator._sizing_data import golden_knobs, golden_model, hf_config, load_json

H100 = GpuSpec(name="H100", memory_gib=79.18)
LLAMA = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))


@pytest.mark.parametrize(("version", "cg", "hybrid"), [
    ("0.6.4", False, "blocks_per_group"), ("0.10.1.1", False, "blocks_per_group"),
    ("0.11.0", False, "blocks_per_group"), ("0.19.0", False, "blocks_per_group"), ("0.20.2", False, "concurrency_x_len"),
    ("0.21.0", True, "concurrency_x_len"), ("0.28.0", True, "concurrency_x_len"), (None, True, "concurrency_x_len"),
])
def test_version_rules_follow_the_release_that_changed_them(version, cg, hybrid):
    r = version_rules(version)
    assert (r.cudagraph_subtracted, r.hybrid_tokens_rule) == (cg, hybrid)
    assert r.summary.startswith(f"vLLM {version or '0.28'} rules")


def test_cudagraph_estimate_comes_off_the_kv_budget_from_0_21_unless_turned_off():
    dep = DeploymentSpec(max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=8192)
    old = plan(LLAMA, H100, dep.with_(vllm_version="0.20.0"))
    new = plan(LLAMA, H100, dep.with_(vllm_version="0.21.0"))
    off = plan(LLAMA, H100, dep.with_(vllm_version="0.21.0", subtract_cudagraph=False))
    assert new.memory_gib.kv == pytest.approx(off.memory_gib.kv - new.memory_gib.cudagraph)
    assert old.memory_gib.kv == pytest.approx(off.memory_gib.kv)
    assert "not subtracted" in old.vllm_rule and "memory subtracted" in new.vllm_rule


def test_hybrid_kv_size_rule_changes_with_the_version():
    # R35 (gpt-oss-120b, 0.10.1.1) printed blocks // groups x 16, and so did 0.19.0 (vLLM issue #40691: 290,864
    # tokens beside 33.04x of 32,768); from 0.20 (PR #40694) vLLM prints int(concurrency x max_model_len).
    entry = load_json("golden_rows.json")["R35"]
    model, knobs = golden_model(entry), golden_knobs(entry)
    gpu = GpuSpec(name="A100", memory_gib=79.15)
    old = plan(model, gpu, DeploymentSpec(**knobs, available_kv_gib=45.32))
    v019 = plan(model, gpu, DeploymentSpec(**{**knobs, "vllm_version": "0.19.0"}, available_kv_gib=45.32))
    new = plan(model, gpu, DeploymentSpec(**{**knobs, "vllm_version": "0.20.0"}, available_kv_gib=45.32))
    assert old.kv_cache_tokens == pytest.approx(2_640_144, rel=0.001)
    assert v019.num_gpu_blocks == new.num_gpu_blocks == old.num_gpu_blocks
    assert v019.kv_cache_tokens == v019.num_gpu_blocks // 2 * 16
    assert "blocks / groups x block_size" in v019.vllm_rule
    assert new.kv_cache_tokens == int(new.max_concurrency * 16384)


def test_lora_memory_matches_the_stacked_buffers_and_splits_with_tp():
    dep = DeploymentSpec(max_loras=8, max_lora_rank=32)
    per_layer = 32 * (2 * (4096 + 4096) + 2 * (4096 + 1024) + 2 * (4096 + 14336) + (14336 + 4096))
    assert lora_bytes_per_gpu(LLAMA, dep) == per_layer * 32 * 8 * 2
    tp2 = lora_bytes_per_gpu(LLAMA, dep.with_(tensor_parallel_size=2))
    assert lora_bytes_per_gpu(LLAMA, dep) / 2 < tp2 < lora_bytes_per_gpu(LLAMA, dep)  # A or B stays whole
    attn_only = lora_bytes_per_gpu(LLAMA, dep.with_(lora_target_modules=("q_proj", "v_proj")))
    assert attn_only == 32 * ((4096 + 4096) + (4096 + 1024)) * 32 * 8 * 2
    assert lora_bytes_per_gpu(LLAMA, DeploymentSpec()) == 0
    with pytest.raises(SpecError, match="lora_target_modules: unknown module 'lm_head'"):
        lora_bytes_per_gpu(LLAMA, dep.with_(lora_target_modules=("lm_head",)))


def test_vision_config_sets_an_encoder_cache_that_costs_kv():
    cfg = {"model_type": "mistral3", "architectures": ["Mistral3ForConditionalGeneration"],
           "spatial_merge_size": 2, "text_config": {**hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"),
                                                   "model_type": "mistral"},
           "vision_config": {"image_size": 1540, "patch_size": 14, "hidden_size": 1024}}
    spec = parse_hf_config(cfg)
    assert spec.mm_tokens_per_item == (1540 // 14) ** 2 // 4  # 3,025 tokens per full-size image
    assert encoder_cache_bytes(spec, DeploymentSpec(), 2048) == 3025 * 4096 * 2  # budget = the largest image
    assert encoder_cache_bytes(spec, DeploymentSpec(), 8192) == 8192 * 4096 * 2
    dep = DeploymentSpec(max_model_len=8192, max_num_batched_tokens=8192)
    with_mm, text = plan(spec, H100, dep), plan(LLAMA, H100, dep)
    assert with_mm.memory_gib.encoder_cache == pytest.approx(8192 * 4096 * 2 / GIB)
    assert with_mm.memory_gib.kv == pytest.approx(text.memory_gib.kv - with_mm.memory_gib.encoder_cache)


def test_gemma_4_reads_its_own_tokens_per_image():
    spec = parse_hf_config(hf_config("google--gemma-4-26B-A4B_config.json"))
    assert spec.mm_tokens_per_item == 280  # vision_soft_tokens_per_image
    assert parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json")).mm_tokens_per_item is None
