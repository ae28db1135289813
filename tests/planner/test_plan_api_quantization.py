"""POST /api/plan/ with quantized weights, negative available KV memory, LoRA and version rules (issue 18)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from planner.api.sizing import PlanCreateApi

pytestmark = pytest.mark.django_db

URL = "/api/plan/"


@pytest.fixture(autouse=True)
def _no_throttle(monkeypatch):
    monkeypatch.setattr(PlanCreateApi, "throttle_classes", [])


@pytest.fixture
def api():
    return APIClient()


def post(api, body):
    return api.post(URL, {"model": "qwen3-8b", "gpu": "h100-sxm5-80gb", "max_model_len": 32768, **body},
                    format="json")


@pytest.mark.parametrize("dtype", ["int4", "fp8", "int8", "nvfp4"])
def test_auto_kv_follows_the_activation_dtype_whatever_the_weights(api, dtype):
    # Qwen3-8B: 36 layers x 2 x 8 KV heads x 128 x 2 B = 147,456 B per token in bf16 (the figure).
    d = post(api, {"dtype": dtype, "kv_cache_dtype": "auto"}).json()
    assert d["kv_bytes_per_token"] == 147456
    assert d["kv_cache_dtype"] == "bf16" and d["activation_dtype"] == "bf16"
    assert d["quantization"].startswith(("int4", "fp8", "int8", "nvfp4"))


def test_quantized_weights_leave_more_memory_for_kv_but_same_bytes_per_token(api):
    bf16 = post(api, {}).json()
    awq = post(api, {"quantization": "awq"}).json()
    assert awq["kv_bytes_per_token"] == bf16["kv_bytes_per_token"]
    assert awq["memory_gib"]["weights"] < 0.45 * bf16["memory_gib"]["weights"]
    assert awq["kv_cache_tokens"] > bf16["kv_cache_tokens"]
    assert awq["quantization"] == "awq w4a16, group 128"


def test_fp8_kv_cache_is_explicit_and_halves_bytes(api):
    d = post(api, {"dtype": "fp8", "kv_cache_dtype": "fp8"}).json()
    assert d["kv_bytes_per_token"] == 147456 / 2


def test_negative_available_kv_is_a_200_that_does_not_fit_with_the_shortfall(api):
    r = post(api, {"available_kv_gib": -1.25})
    assert r.status_code == 200, r.json()
    d = r.json()
    assert d["fits"] is False
    assert d["kv_shortfall_gib"] == pytest.approx(1.25)
    assert d["memory_gib"]["kv_shortfall"] == pytest.approx(1.25)
    assert "short by 1.25 GiB" in d["reason"] and d["num_gpu_blocks"] == 0


def test_first_principles_shortfall_when_the_budget_is_too_small(api):
    d = post(api, {"gpu_memory_utilization": 0.2}).json()
    assert d["fits"] is False and d["kv_shortfall_gib"] > 0
    assert f"short by {d['kv_shortfall_gib']:.2f} GiB" in d["reason"]


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"quantization": "hqq"}, "quantization", "'hqq' is not a quantization method the planner knows"),
        ({"quantization": "awq", "quant_group_size": 100}, "quant_group_size", "100 does not divide hidden_size 4096"),
        ({"quant_group_size": 64}, "quant_group_size", "weights are not quantized; give quantization as well"),
        ({"max_loras": 2, "lora_target_modules": ["qkv"]}, "lora_target_modules", "unknown module 'qkv'"),
        ({"available_kv_gib": -10**6}, "available_kv_gib", "greater than or equal to"),
    ],
)
def test_bad_quantization_and_lora_input_is_a_400_naming_the_field(api, body, field, fragment):
    r = post(api, body)
    assert r.status_code == 400, r.json()
    errors = r.json()["errors"]
    assert field in errors and any(fragment in m for m in errors[field]), errors


def test_inline_config_with_unknown_quant_method_is_a_400_naming_it(api):
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
           "max_position_embeddings": 8192, "quantization_config": {"quant_method": "exl9"}}
    r = api.post(URL, {"model": {"config": cfg}, "gpu": "h100-sxm5-80gb"}, format="json")
    assert r.status_code == 400
    assert "'exl9' is not a quantization method" in r.json()["errors"]["model.config"][0]


def test_lora_slots_show_in_the_breakdown_and_cost_kv(api):
    plain = post(api, {}).json()
    lora = post(api, {"max_loras": 4, "max_lora_rank": 64}).json()
    # 36 layers x 64 x (q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096, gate/up 2x(4096+12288),
    # down 12288+4096) x 4 slots x 2 B
    per_layer = 64 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096) + 2 * (4096 + 12288) + (12288 + 4096))
    assert lora["memory_gib"]["lora"] == pytest.approx(per_layer * 36 * 4 * 2 / 2**30)
    assert plain["memory_gib"]["lora"] == 0
    assert lora["memory_gib"]["kv"] == pytest.approx(plain["memory_gib"]["kv"] - lora["memory_gib"]["lora"])


def test_answer_names_the_vllm_rule_it_followed(api):
    new = post(api, {}).json()
    old = post(api, {"vllm_version": "0.10.1"}).json()
    assert "vLLM 0.28 rules" in new["vllm_rule"] and "CUDA-graph memory subtracted" in new["vllm_rule"]
    assert "vLLM 0.10.1 rules" in old["vllm_rule"] and "not subtracted" in old["vllm_rule"]
    off = post(api, {"subtract_cudagraph": False}).json()
    assert new["memory_gib"]["cudagraph"] > 0
    assert new["memory_gib"]["kv"] == pytest.approx(off["memory_gib"]["kv"] - new["memory_gib"]["cudagraph"])
