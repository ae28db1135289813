"""Quantized checkpoints (issue 18): golden rows, the auto KV dtype, config parsing, properties.

Golden rows are the AWQ, GPTQ and fp8 rows of tests/data/sizing/vllm_startup_logs.csv (copied from the
project's reference logs; each row's ``source`` column names the public issue or write-up).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.base.specs import GIB, DeploymentSpec, GpuSpec, ModelSpec, SpecError
from simulator.sizing.closed_form import plan, weights_bytes_per_gpu
from simulator.sizing.hf_config import parse_hf_config
from simulator.sizing.quantization import scheme_for
from tests.simulator._sizing_data import first_number, golden_knobs, golden_model, hf_config, load_json, log_rows

ROWS = log_rows()
GOLDEN = load_json("golden_rows.json")
QUANT_ROWS = ["R16", "R21", "R26"]  # fp8 (dynamic), AWQ int4, GPTQ int4


@pytest.mark.parametrize("rid", QUANT_ROWS)
def test_quantized_rows_keep_a_16_bit_kv_cache_and_match_vllm_tokens(rid):
    row, entry = ROWS[rid], GOLDEN[rid]
    model = golden_model(entry)
    assert model.quantization in ("fp8", "awq", "gptq")
    res = plan(model, GpuSpec(name=entry["gpu"], memory_gib=entry["gpu_memory_gib"] or 200.0),
               DeploymentSpec(**golden_knobs(entry), available_kv_gib=first_number(row["available_kv_gib"])))
    assert res.kv_cache_dtype in ("bf16", "fp16")
    assert res.kv_bytes_per_token_per_gpu == first_number(row["expected_bytes_per_token_per_gpu"])
    printed = first_number(row["kv_tokens"])
    assert res.kv_cache_tokens == pytest.approx(printed, rel=0.01)


@pytest.mark.parametrize(("rid", "dtype"), [("R16", "fp8"), ("R21", "int4"), ("R26", "int4")])
def test_weights_storage_dtype_never_quantizes_the_auto_kv_cache(rid, dtype):
    # The bug: dtype int4 / fp8 with kv_cache_dtype auto priced the KV cache at 0.5 / 1 byte.
    row, entry = ROWS[rid], GOLDEN[rid]
    model = replace(golden_model(entry), quantization=None)
    knobs = {**golden_knobs(entry), "dtype": dtype}
    res = plan(model, GpuSpec(name="g", memory_gib=entry["gpu_memory_gib"] or 200.0),
               DeploymentSpec(**knobs, available_kv_gib=first_number(row["available_kv_gib"])))
    assert res.kv_bytes_per_token_per_gpu == first_number(row["expected_bytes_per_token_per_gpu"])
    assert res.kv_cache_tokens == pytest.approx(first_number(row["kv_tokens"]), rel=0.01)


@pytest.mark.parametrize(("rid", "tol"), [("R16", 0.01), ("R21", 0.02), ("R26", 0.01)])
def test_quantized_weights_match_model_loading(rid, tol):
    row, entry = ROWS[rid], GOLDEN[rid]
    w = weights_bytes_per_gpu(golden_model(entry), DeploymentSpec(**golden_knobs(entry))) / GIB
    assert w == pytest.approx(first_number(row["model_loading"]), rel=tol)


# --- config.json parsing ---------------------------------------------------------------------------------

LLAMA = hf_config("meta-llama--Meta-Llama-3.1-8B_config.json")


def with_quant(qc: dict) -> ModelSpec:
    return parse_hf_config({**LLAMA, "quantization_config": qc})


@pytest.mark.parametrize(("qc", "method", "label", "bytes_per_weight"), [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "awq",
     "awq w4a16, group 128", 0.5 + 2.5 / 128),
    ({"quant_method": "gptq", "bits": 8, "group_size": 64}, "gptq", "gptq w8a16, group 64", 1 + 3 / 64),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}}},
     "compressed-tensors", "compressed-tensors w4a16, group 128", 0.5 + 2 / 128),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
        "input_activations": {"num_bits": 8, "type": "int", "dynamic": True}}}},
     "compressed-tensors", "compressed-tensors w8a8-int8, per channel", 1 + 2 / 4096),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
        "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}}},
     "compressed-tensors", "compressed-tensors w8a8-fp8, per channel", 1 + 2 / 4096),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}},
     "compressed-tensors", "compressed-tensors nvfp4, group 16", 0.5 + 1 / 16),
    ({"quant_method": "fp8", "activation_scheme": "static"}, "fp8", "fp8 fp8-static, per tensor", 1.0),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8", "fp8 fp8-dynamic, per tensor", 1.0),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8", "fp8 fp8-block, 128x128 blocks",
     1 + 4 / 128**2),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": False}, "bitsandbytes",
     "bitsandbytes nf4, group 64", 0.5 + 4 / 64),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bitsandbytes", "bitsandbytes int8, per channel",
     1 + 4 / 4096),
])
def test_each_method_is_read_with_its_scales(qc, method, label, bytes_per_weight):
    spec = with_quant(qc)
    s = scheme_for(spec)
    assert spec.quantization == method and s.label == label
    assert s.bytes_per_weight(4096) == pytest.approx(bytes_per_weight)


def test_gpt_oss_mxfp4_quantizes_experts_only_and_reads_its_ignore_list():
    spec = parse_hf_config(hf_config("openai--gpt-oss-20b_config.json"))
    s = scheme_for(spec)
    assert s.method == "mxfp4" and s.experts_only and "model.layers.*.self_attn" in s.ignore
    assert weights_bytes_per_gpu(spec, DeploymentSpec()) / GIB == pytest.approx(13.47, rel=0.01)  # R42 log


def test_modelopt_fp8_checkpoint_is_fp8_weights_with_a_bf16_auto_kv():
    spec = parse_hf_config(hf_config("nvidia--Llama-3.1-70B-Instruct-FP8_config.json"),
                           quant_config=hf_config("nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json"))
    assert spec.quantization == "fp8" and spec.quant_ignore == ("lm_head",)
    res = plan(spec, GpuSpec(name="H100", memory_gib=79.18), DeploymentSpec(tensor_parallel_size=2,
                                                                            max_model_len=8192))
    assert res.kv_cache_dtype == "bf16"
    assert any("kv_cache_dtype fp8" in n for n in res.notes)


def test_ignored_layers_stay_16_bit():
    plain = with_quant({"quant_method": "awq", "bits": 4, "group_size": 128})
    skip = with_quant({"quant_method": "awq", "bits": 4, "group_size": 128,
                       "modules_to_not_convert": ["model.layers.0.mlp.down_proj"]})
    extra = weights_bytes_per_gpu(skip, DeploymentSpec()) - weights_bytes_per_gpu(plain, DeploymentSpec())
    # one 14336 x 4096 matrix moves from 0.5 + 2.5/128 to 2 bytes per weight
    assert extra == pytest.approx(14336 * 4096 * (2 - 0.5 - 2.5 / 128), rel=0.02)


@pytest.mark.parametrize(("qc", "fragment"), [
    ({"quant_method": "exl9"}, "quantization_config.quant_method: 'exl9' is not a quantization method"),
    ({"quant_method": "awq", "bits": 4, "group_size": 100}, "quantization_config.group_size: 100 does not divide "
                                                            "hidden_size 4096"),
    ({"quant_method": "awq", "bits": 3}, "quantization_config.bits: 3-bit awq is not supported"),
    ({"bits": 4}, "quantization_config.quant_method: missing"),
])
def test_bad_quantization_config_is_refused_naming_the_field(qc, fragment):
    with pytest.raises(SpecError, match=fragment.replace(".", r"\.")):
        with_quant(qc)


# --- properties ----------------------------------------------------------------------------------------

METHODS = st.sampled_from(["awq", "gptq", "int4", "fp8", "int8", "nvfp4", "compressed-tensors", "bitsandbytes"])


@st.composite
def dense_models(draw):
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv * draw(st.sampled_from([1, 2, 4]))
    return ModelSpec(name="m", num_layers=draw(st.integers(1, 64)), hidden_size=heads * 128,
                     num_attention_heads=heads, num_kv_heads=kv, head_dim=128,
                     vocab_size=draw(st.integers(1000, 200000)), intermediate_size=128 * draw(st.integers(1, 200)),
                     max_position_embeddings=65536)


@settings(max_examples=40, deadline=None)
@given(dense_models(), METHODS, st.floats(20, 200), st.sampled_from(["auto", "fp8"]))
def test_quantizing_weights_never_shrinks_the_kv_budget(model, method, mem, kv_dtype):
    dep = DeploymentSpec(max_model_len=4096, kv_cache_dtype=kv_dtype)
    gpu = GpuSpec(name="g", memory_gib=mem)
    plain, quant = plan(model, gpu, dep), plan(replace(model, quantization=method), gpu, dep)
    assert quant.memory_gib.kv >= plain.memory_gib.kv
    assert quant.kv_bytes_per_token == plain.kv_bytes_per_token
    assert quant.num_gpu_blocks >= plain.num_gpu_blocks


@settings(max_examples=40, deadline=None)
@given(dense_models(), st.floats(1, 100), st.sampled_from([16, 32, 128]), st.sampled_from([None, "awq", "fp8"]))
def test_fp8_kv_doubles_tokens_against_bf16_at_equal_memory(model, kv_gib, block, method):
    model = replace(model, quantization=method)
    gpu = GpuSpec(name="g", memory_gib=200)
    bf16 = plan(model, gpu, DeploymentSpec(max_model_len=1024, block_size=block, available_kv_gib=kv_gib))
    fp8 = plan(model, gpu, DeploymentSpec(max_model_len=1024, block_size=block, available_kv_gib=kv_gib,
                                          kv_cache_dtype="fp8"))
    assert bf16.kv_cache_dtype == "bf16"
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    # each figure is floor(memory / block bytes) x block: doubling holds to within one block
    assert abs(fp8.kv_cache_tokens - 2 * bf16.kv_cache_tokens) <= block


def test_a_vision_towers_ignore_list_leaves_the_language_models_experts_quantized():
    """Llama 4 Scout FP8 (compressed-tensors) ignores its vision tower's ``mlp.fc1``/``fc2`` and the LM's
    attention and router: the LM's experts stay fp8, so at TP 2 the weights are ~56 GiB per GPU with the
    shared expert, the bf16 vision tower (0.81 GiB per GPU) and the 10M-position rotary cache (2.5 GiB; vLLM ran it
    on two H100s), not the ~95 GiB of an all-bf16 count. Config from
    simulator/data/latency_trainval."""
    import json
    from pathlib import Path

    from simulator.base.specs import DeploymentSpec
    from simulator.sizing import quantization
    from simulator.sizing.closed_form import weights_bytes_per_gpu
    from simulator.sizing.hf_config import parse_hf_config

    data = Path(__file__).resolve().parents[2] / "simulator" / "data" / "latency_trainval" / "experiments.json"
    exp = next(e for e in json.loads(data.read_text()) if "scout" in e["name"])
    model = parse_hf_config(exp["model_config"], name=exp["model"])
    fractions, unknown = quantization.unquantized_fractions(model, quantization.scheme_for(model, "auto"))
    assert fractions == {"attention": 1.0, "dense_mlp": 0.0, "shared": 0.0, "experts": 0.0}
    assert unknown == []
    assert 50 < weights_bytes_per_gpu(model, DeploymentSpec(tensor_parallel_size=2)) / 2**30 < 60
