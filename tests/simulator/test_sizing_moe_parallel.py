"""Sizing under TP x PP x DP with expert parallelism on or off, as vLLM places the layers (docs/moe_parallelism.md).

The configs are the published config.json files in tests/data/sizing/hf_configs. Expected figures are computed
here from the config by hand (parameter counts, vLLM's expert map), not read back from the code under test.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from simulator.base import DeploymentSpec, GpuSpec, SpecError
from simulator.sizing.closed_form import plan
from simulator.sizing.hf_config import parse_hf_config
from simulator.sizing.moe_parallel import local_experts, shape_label
from simulator.sizing.weights import weights_bytes_per_gpu
from tests.simulator._sizing_data import hf_config

H200 = GpuSpec(name="H200 SXM 141GB", memory_gib=140.40, interconnect_gbps=900)
H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, interconnect_gbps=900)


@pytest.fixture(scope="module")
def v3():
    return parse_hf_config(hf_config("deepseek-ai--DeepSeek-V3_config.json"), name="DeepSeek-V3")


@pytest.fixture(scope="module")
def qwen30():
    return parse_hf_config(hf_config("Qwen--Qwen3-30B-A3B_config.json"), name="Qwen3-30B-A3B")


@pytest.fixture(scope="module")
def llama8():
    return parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"), name="Llama 3.1 8B")


def test_the_deployment_counts_tp_x_pp_x_dp_gpus():
    d = DeploymentSpec(tensor_parallel_size=2, pipeline_parallel_size=2, data_parallel_size=4,
                       enable_expert_parallel=True)
    assert (d.num_gpus, d.gpus_per_dp_rank, d.moe_parallel_size, d.expert_parallel_size) == (16, 4, 8, 8)
    assert DeploymentSpec(tensor_parallel_size=4, data_parallel_size=2).expert_parallel_size == 1
    # vLLM: use_ep = TP x DP > 1 and enable_expert_parallel; one GPU has no expert parallelism
    assert DeploymentSpec(enable_expert_parallel=True).expert_parallel_size == 1


@pytest.mark.parametrize(("changes", "field"), [
    ({"data_parallel_size": 0}, "data_parallel_size"),
    ({"data_parallel_size": True}, "data_parallel_size"),
    ({"data_parallel_size": 2.0}, "data_parallel_size"),
    ({"enable_expert_parallel": "yes"}, "enable_expert_parallel"),
])
def test_a_bad_shape_field_is_named(changes, field):
    with pytest.raises(SpecError, match=f"^{field}: "):
        DeploymentSpec(**changes)


def test_expert_parallelism_needs_experts(llama8):
    with pytest.raises(SpecError, match=r"^enable_expert_parallel: .*no experts.*--enable-expert-parallel"):
        plan(llama8, H100, DeploymentSpec(tensor_parallel_size=2, enable_expert_parallel=True, max_model_len=8192))
    # data parallelism of a dense model is allowed (vLLM runs its ranks as independent engines)
    r = plan(llama8, H100, DeploymentSpec(data_parallel_size=4, max_model_len=8192))
    one = plan(llama8, H100, DeploymentSpec(max_model_len=8192))
    assert r.num_gpu_blocks == one.num_gpu_blocks and r.kv_cache_tokens_per_deployment == 4 * one.kv_cache_tokens


def test_more_ep_ranks_than_experts_is_refused(qwen30):
    with pytest.raises(SpecError, match=r"^enable_expert_parallel: EP size = TP x DP = 4 x 64 = 256 .* 128"):
        plan(qwen30, H100, DeploymentSpec(tensor_parallel_size=4, data_parallel_size=64, enable_expert_parallel=True))


def test_the_fullest_rank_holds_ceil_e_over_ep_experts(qwen30):
    # vLLM's determine_expert_map: base = E // ep, the first E % ep ranks one more
    for ep in (1, 3, 5, 8, 128):
        dep = DeploymentSpec(data_parallel_size=ep, enable_expert_parallel=True)
        counts = [128 // ep + (1 if r < 128 % ep else 0) for r in range(ep)]
        assert sum(counts) == 128 and local_experts(qwen30, dep) == max(counts)


def _qwen30_parameters(cfg: dict) -> tuple[int, int]:
    """(all parameters, routed-expert parameters) of Qwen3-30B-A3B counted from its config.json by hand."""
    H, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    d, nq, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    E, ie = cfg["num_experts"], cfg["moe_intermediate_size"]
    attention = L * (H * nq * d + 2 * H * nkv * d + nq * d * H)
    experts = L * E * 3 * H * ie
    router = L * E * H
    norms = (2 * L + 1) * H
    return 2 * V * H + attention + experts + router + norms, experts


@pytest.mark.parametrize(("tp", "dp", "ep"), [(1, 8, True), (1, 8, False), (2, 4, True), (4, 2, False), (8, 1, True)])
def test_routed_experts_are_sharded_over_tp_x_dp_the_rest_over_tp(qwen30, tp, dp, ep):
    """Qwen3-30B-A3B (bf16, no shared expert): one GPU holds (everything but the experts) / TP + experts / (TP x DP)
    — with EP whole experts, 128 / (TP x DP) of them, the same bytes since TP x DP divides 128."""
    total, experts = _qwen30_parameters(hf_config("Qwen--Qwen3-30B-A3B_config.json"))
    dep = DeploymentSpec(tensor_parallel_size=tp, data_parallel_size=dp, enable_expert_parallel=ep)
    cfg = hf_config("Qwen--Qwen3-30B-A3B_config.json")
    kv_proj = 2 * cfg["hidden_size"] * 4 * 128 * cfg["num_hidden_layers"]  # K and V projections, 4 heads of 128
    replicated = kv_proj * (tp / 4 - 1) if tp > 4 else 0  # TP > KV heads: each rank keeps a whole head
    expected = 2 * ((total - experts + replicated) / tp + experts / (tp * dp))  # bytes, bf16
    assert weights_bytes_per_gpu(qwen30, dep, buffers=False) == pytest.approx(expected, rel=1e-12)


def test_an_uneven_expert_split_loads_the_fullest_rank(qwen30):
    """128 experts over EP 3: the first two ranks hold 43, so 43/128 of the experts, not 1/3."""
    total, experts = _qwen30_parameters(hf_config("Qwen--Qwen3-30B-A3B_config.json"))
    dep = DeploymentSpec(data_parallel_size=3, enable_expert_parallel=True)
    assert weights_bytes_per_gpu(qwen30, dep, buffers=False) == pytest.approx(
        2 * (total - experts + experts * 43 / 128), rel=1e-12)


def test_dp1_and_ep_off_is_todays_plan_exactly(v3, qwen30):
    for model, gpu, tp in ((v3, H200, 8), (qwen30, H100, 2), (qwen30, H100, 8)):
        base = plan(model, gpu, DeploymentSpec(tensor_parallel_size=tp, max_model_len=32768))
        same = plan(model, gpu, DeploymentSpec(tensor_parallel_size=tp, max_model_len=32768, data_parallel_size=1,
                                               enable_expert_parallel=False))
        assert same == base
        assert base.kv_cache_tokens_per_deployment == base.kv_cache_tokens
        assert base.max_concurrency_per_deployment == base.max_concurrency


def test_the_mla_latent_is_whole_on_every_tp_rank(v3):
    """DeepSeek-V3 caches one latent of kv_lora_rank + qk_rope_head_dim per token per layer, not split by TP: a
    block costs the same on a GPU of TP 8 as on a GPU of TP 1 (bf16: (512 + 64) x 2 B x 61 layers x 16 tokens)."""
    per_block = (512 + 64) * 2 * 61 * 16
    tp8 = plan(v3, H200, DeploymentSpec(tensor_parallel_size=8, max_model_len=32768))
    dp8 = plan(v3, H200, DeploymentSpec(data_parallel_size=8, enable_expert_parallel=True, max_model_len=32768))
    assert tp8.bytes_per_block_per_gpu == dp8.bytes_per_block_per_gpu == per_block


def test_gqa_heads_are_split_by_tp_within_a_dp_rank(qwen30):
    """Qwen3-30B-A3B has 4 KV heads of 128: TP 4 holds one per GPU, TP 8 replicates it (still one), DP 8 holds
    all four on each GPU; 48 layers, bf16."""
    one_head = 2 * 1 * 128 * 2 * 48  # bytes per token per GPU, K and V
    for tp, dp, heads in ((4, 1, 1), (8, 1, 1), (1, 8, 4), (2, 4, 2)):
        r = plan(qwen30, H100, DeploymentSpec(tensor_parallel_size=tp, data_parallel_size=dp,
                                              enable_expert_parallel=dp > 1))
        assert r.kv_bytes_per_token_per_gpu == heads * one_head


def test_each_dp_rank_has_its_own_pool(v3):
    r = plan(v3, H200, DeploymentSpec(data_parallel_size=8, enable_expert_parallel=True, max_model_len=32768))
    assert r.num_gpus == 8 and r.fits
    assert r.kv_cache_tokens == (r.num_gpu_blocks // r.num_kv_groups) * 16
    assert r.kv_cache_tokens_per_deployment == 8 * r.kv_cache_tokens
    assert r.max_concurrency_per_deployment == pytest.approx(8 * r.max_concurrency)
    assert r.local_experts == 32 and r.expert_parallel_size == 8


def test_dp8_ep8_holds_more_tokens_than_tp8_by_the_kv_memory_each_gpu_keeps(v3):
    """The ratio of the two shapes is 8 x (KV memory per GPU at DP 8) / (KV memory per GPU at TP 8): every GPU
    of both holds the whole latent, but TP 8 holds one pool for 8 GPUs and DP 8 eight. It is below 8 because a
    TP 1 rank keeps the attention, embeddings, dense layers and shared expert whole."""
    tp8 = plan(v3, H200, DeploymentSpec(tensor_parallel_size=8, max_model_len=32768))
    dp8 = plan(v3, H200, DeploymentSpec(data_parallel_size=8, enable_expert_parallel=True, max_model_len=32768))
    ratio = dp8.kv_cache_tokens_per_deployment / tp8.kv_cache_tokens_per_deployment
    assert ratio == pytest.approx(8 * dp8.num_gpu_blocks / tp8.num_gpu_blocks, rel=1e-3)
    assert dp8.memory_gib.weights > tp8.memory_gib.weights
    assert 1 < ratio < 8


def test_shared_experts_are_whole_on_every_tp_rank_under_sequence_parallel_moe(v3):
    """vLLM's use_sequence_parallel_moe (EP on, TP > 1, DP > 1): DeepSeek's shared expert is built with
    disable_tp, so a GPU of TP 2 x DP 4 + EP 8 holds it whole, where TP 2 x DP 4 with EP off splits it by TP.
    The routed experts cost the same in both (32 whole of 256, or 1/8 of each)."""
    sp = DeploymentSpec(tensor_parallel_size=2, data_parallel_size=4, enable_expert_parallel=True)
    shared = 58 * 1 * 3 * 7168 * 2048  # parameters: MoE layers x shared experts x gate/up/down x H x I
    fp8_block = 1 + 4 / (128 * 128)  # bytes a weight: fp8 plus one fp32 scale per 128 x 128 block
    gap = weights_bytes_per_gpu(v3, sp, buffers=False) - \
        weights_bytes_per_gpu(v3, replace(sp, enable_expert_parallel=False), buffers=False)
    assert gap == pytest.approx(shared * fp8_block / 2, rel=1e-3)


def test_the_breakdown_names_the_all_to_all_and_the_expert_placement(v3):
    r = plan(v3, H200, DeploymentSpec(data_parallel_size=8, enable_expert_parallel=True, max_model_len=32768))
    terms = {t.key: t for t in r.memory_terms}
    assert terms["all2all"].gib == 0.0 and "DeepEP" in terms["all2all"].formula
    assert "32 of 256 per GPU (EP 8" in terms["weights"].formula
    assert "all-to-all" in terms["non_torch"].rule
    tp8 = plan(v3, H200, DeploymentSpec(tensor_parallel_size=8, max_model_len=32768))
    assert "all2all" not in {t.key for t in tp8.memory_terms}


@pytest.mark.parametrize(("kw", "label"), [
    ({"tensor_parallel_size": 8}, "TP 8"),
    ({"data_parallel_size": 8, "enable_expert_parallel": True}, "DP 8 + EP 8"),
    ({"tensor_parallel_size": 2, "data_parallel_size": 4, "enable_expert_parallel": True}, "TP 2 x DP 4 + EP 8"),
    ({"tensor_parallel_size": 4, "pipeline_parallel_size": 2}, "TP 4 x PP 2"),
    ({}, "TP 1"),
])
def test_shape_label(kw, label):
    assert shape_label(DeploymentSpec(**kw)) == label


def test_ep_activation_uses_whole_experts(qwen30):
    """The dummy forward's fused-MoE width is top_k x (3 x I / split + H): EP keeps I whole, so TP 8 + EP 8
    profiles a wider peak than TP 8 (I split 8 ways)."""
    tp8 = plan(qwen30, H100, DeploymentSpec(tensor_parallel_size=8))
    ep8 = plan(qwen30, H100, DeploymentSpec(tensor_parallel_size=8, enable_expert_parallel=True))
    fwd = {t.key: t.gib for t in ep8.memory_terms}["activation_forward"]
    H, ie, k = 2048, 768, 8
    assert fwd * 2**30 == pytest.approx(8192 * 2 * (3 * H + k * (3 * ie + H)), rel=1e-12)
    assert fwd > {t.key: t.gib for t in tp8.memory_terms}["activation_forward"]
    assert math.isclose(ep8.memory_gib.weights, tp8.memory_gib.weights, rel_tol=1e-9)
