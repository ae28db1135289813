"""Hugging Face config.json import: every fixture imports; bad configs name the field."""

from __future__ import annotations

import copy

import pytest

from simulator.base.specs import SpecError
from simulator.sizing.hf_config import parse_hf_config
from tests.simulator._sizing_data import DATA, hf_config, load_json

CONFIGS = sorted(p.name for p in (DATA / "hf_configs").glob("*_config.json") if "hf_quant" not in p.name)


def test_fixture_set_is_complete():
    assert len(CONFIGS) == 15


@pytest.mark.parametrize("name", CONFIGS)
def test_every_fixture_imports(name):
    m = parse_hf_config(hf_config(name))
    assert m.num_layers > 0 and m.num_parameters > 0 and m.max_position_embeddings


def test_deepseek_mla():
    m = parse_hf_config(hf_config("deepseek-ai--DeepSeek-R1_config.json"))
    assert (m.attention, m.kv_lora_rank, m.qk_rope_head_dim) == ("MLA", 512, 64)
    assert m.quantization == "fp8" and m.num_experts == 256 and m.num_shared_experts == 1
    assert m.num_dense_layers == 3


def test_gemma4_sliding_windows_and_global_layers():
    m = parse_hf_config(hf_config("google--gemma-4-26B-A4B_config.json"))
    kinds = [lay.kind for lay in m.layers]
    assert kinds.count("full") == 5 and kinds.count("sliding") == 25
    full = [lay for lay in m.layers if lay.kind == "full"][0]
    assert (full.num_kv_heads, full.head_dim) == (2, 512)
    assert {lay.window for lay in m.layers if lay.kind == "sliding"} == {1024}
    assert m.tie_word_embeddings and m.num_experts == 128


def test_gpt_oss_alternating_layers_and_mxfp4():
    m = parse_hf_config(hf_config("openai--gpt-oss-120b_config.json"))
    assert [lay.kind for lay in m.layers[:2]] == ["sliding", "full"]
    assert m.quantization == "mxfp4" and m.num_experts == 128 and m.num_experts_per_tok == 4


def test_mixtral_and_qwen_moe():
    mx = parse_hf_config(hf_config("mistralai--Mixtral-8x7B-v0.1_config.json"))
    assert (mx.num_experts, mx.num_experts_per_tok, mx.moe_intermediate_size, mx.layers) == (8, 2, 14336, ())
    qw = parse_hf_config(hf_config("Qwen--Qwen3-30B-A3B_config.json"))
    assert (qw.num_experts, qw.num_experts_per_tok, qw.moe_intermediate_size) == (128, 8, 768)
    assert qw.layers == ()  # use_sliding_window false


def test_fp8_checkpoint_with_hf_quant_config():
    qc = load_json("hf_configs/nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json")
    m = parse_hf_config(hf_config("nvidia--Llama-3.1-70B-Instruct-FP8_config.json"), quant_config=qc)
    assert m.quantization == "fp8"
    assert parse_hf_config(hf_config("nvidia--Llama-3.1-70B-Instruct-FP8_config.json")).quantization is None


def test_llama_head_dim_implicit():
    m = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    assert (m.head_dim, m.num_kv_heads, m.attention, m.weights_dtype) == (128, 8, "GQA", "bf16")


@pytest.mark.parametrize("change, field", [
    ({"num_key_value_heads": 7}, "num_key_value_heads: 7 does not divide num_attention_heads 32"),
    ({"num_key_value_heads": 64}, "num_key_value_heads"),
    ({"num_hidden_layers": None}, "num_hidden_layers"),
    ({"hidden_size": "big"}, "hidden_size"),
    ({"vocab_size": 0}, "vocab_size"),
    ({"torch_dtype": "float7"}, "torch_dtype"),
    ({"num_attention_heads": 0}, "num_attention_heads"),
])
def test_inconsistent_config_names_the_field(change, field):
    cfg = copy.deepcopy(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    for k, v in change.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    with pytest.raises(SpecError) as exc:
        parse_hf_config(cfg)
    assert str(exc.value).startswith(field)


def test_other_inconsistencies():
    cfg = hf_config("openai--gpt-oss-20b_config.json")
    with pytest.raises(SpecError, match="^layer_types"):
        parse_hf_config({**cfg, "layer_types": cfg["layer_types"][:3]})
    with pytest.raises(SpecError, match="^sliding_window"):
        parse_hf_config({**cfg, "sliding_window": None})
    with pytest.raises(SpecError, match="^num_experts_per_tok"):
        parse_hf_config({**cfg, "num_experts_per_tok": 64, "experts_per_token": 64})
    with pytest.raises(SpecError, match="^quantization_config.quant_method"):
        parse_hf_config({**cfg, "quantization_config": {"quant_method": "magic"}})
    ds = hf_config("deepseek-ai--DeepSeek-V3_config.json")
    with pytest.raises(SpecError, match="^qk_rope_head_dim"):
        parse_hf_config({k: v for k, v in ds.items() if k != "qk_rope_head_dim"})
    with pytest.raises(SpecError, match="^config"):
        parse_hf_config([1, 2])


@pytest.mark.parametrize("window", [100_000_001, 2**63])
def test_an_absurd_sliding_window_is_refused_with_its_limit(window):
    cfg = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
           "sliding_window": float(window)}
    with pytest.raises(SpecError, match="window: .* is more than the limit of 100,000,000"):
        parse_hf_config(cfg)
