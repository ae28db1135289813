"""POST /api/plan/: golden figures from published vLLM logs, field errors, schema, query counts.

Golden rows are copied from the project's reference file of vLLM start-up logs
(``vllm_startup_logs.csv``; each row names its public source) — the test never
reads that file.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import status
from rest_framework.test import APIClient

from planner.api.sizing import PlanCreateApi

pytestmark = pytest.mark.django_db

URL = "/api/plan/"

# A Llama 3.1 8B config.json (meta-llama/Meta-Llama-3.1-8B, the keys sizing reads).
LLAMA_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
}


@pytest.fixture(autouse=True)
def _no_throttle(monkeypatch):
    monkeypatch.setattr(PlanCreateApi, "throttle_classes", [])


@pytest.fixture
def api():
    return APIClient()


def post(api, body):
    return api.post(URL, body, format="json")


def rel(a, b):
    return abs(a - b) / abs(b)


# --- golden -------------------------------------------------------------------


def test_llama_8b_calibrated_matches_vllm_log_r11(api):
    """R11: vLLM 0.10.1.1, Meta-Llama-3.1-8B-Instruct, --dtype float16, gmu 0.9, max_model_len 131072.
    Log: "Model loading took 14.9889 GiB", "Available KV cache memory: 19.25 GiB",
    num_gpu_blocks 9853, "GPU KV cache size: 157,648 tokens", "Maximum concurrency for 131,072 tokens per
    request: 1.20x" (source: a public vLLM 0.10.1.1 start-up log, row R11 of vllm_startup_logs.csv)."""
    r = post(api, {"model": {"config": LLAMA_8B_CONFIG, "num_parameters": 8030261248},
                   "gpu": {"memory_gib": 39.39, "name": "40 GB card"}, "dtype": "fp16",
                   "gpu_memory_utilization": 0.9, "max_model_len": 131072, "max_num_batched_tokens": 2048,
                   "weights_gib": 14.9889, "available_kv_gib": 19.25})
    assert r.status_code == status.HTTP_200_OK, r.json()
    d = r.json()
    assert d["kv_bytes_per_token"] == 131072  # 2 x 32 layers x 8 heads x 128 x 2 bytes
    assert d["bytes_per_block_per_gpu"] == 16 * 131072
    assert rel(d["kv_cache_tokens"], 157648) < 0.01
    assert rel(d["num_gpu_blocks"], 9853) < 0.01
    assert d["max_concurrency"] == pytest.approx(1.20, abs=0.01)
    assert d["min_blocks_unservable"] == 131072 // 16
    assert d["fits"] is True
    assert d["weights_source"] == "given" and d["available_kv_source"] == "given"


def test_llama_70b_on_mi300x_calibrated_matches_vllm_log_r16(api):
    """R16: Llama-3.1-70B-Instruct on one MI300X (total_gpu_memory=191.98GiB), gmu 0.98, max_model_len 32768.
    Log: "Loading model weights took 67.6979 GB", kv_cache_size=95.28GiB, # GPU blocks: 19513,
    312,208 tokens, max concurrency 9.53x (source: vLLM ROCm V0 log, row R16 of vllm_startup_logs.csv)."""
    r = post(api, {"model": "llama-3-1-70b", "gpu": "mi300x", "gpu_memory_utilization": 0.98,
                   "max_model_len": 32768, "weights_gib": 67.6979, "available_kv_gib": 95.28})
    assert r.status_code == 200, r.json()
    d = r.json()
    assert d["kv_bytes_per_token"] == 327680  # seed 001: 2 x 80 x 8 x 128 x 2
    assert rel(d["kv_cache_tokens"], 312208) < 0.01
    assert rel(d["num_gpu_blocks"], 19513) < 0.01
    assert d["max_concurrency"] == pytest.approx(9.53, abs=0.02)


def test_qwen3_32b_first_principles_within_5_percent_r13(api):
    """R13: Qwen3-32B, TP 2 on RTX PRO 6000 Blackwell Server (95.01 GiB), gmu 0.426, max_model_len 32768,
    vLLM 0.27.1: "GPU KV cache size: 67,296 tokens", max concurrency 2.05x (source: blog 'Running a single LLM
    across two GPUs with vLLM', row R13 of vllm_startup_logs.csv). Computed from model, GPU and knobs only."""
    r = post(api, {"model": "qwen3-32b", "gpu": "rtx-pro-6000-blackwell-server", "tensor_parallel_size": 2,
                   "gpu_memory_utilization": 0.426, "max_model_len": 32768})
    assert r.status_code == 200, r.json()
    d = r.json()
    assert rel(d["kv_cache_tokens"], 67296) < 0.05
    assert rel(d["max_concurrency"], 2.05) < 0.05
    assert d["num_gpus"] == 2


def test_llama_8b_on_one_h100_default_plan(api):
    """The page's default: Llama 3.1 8B on one H100 SXM (79.18 GiB as vLLM sees it), vLLM defaults."""
    r = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"})
    assert r.status_code == 200
    d = r.json()
    assert d["max_model_len"] == 131072 and d["block_size"] == 16
    assert d["kv_bytes_per_token"] == d["kv_bytes_per_token_per_gpu"] == 131072
    assert d["bytes_per_block"] == d["bytes_per_block_per_gpu"] == 2 * 2**20
    assert d["kv_cache_tokens"] == d["num_gpu_blocks"] * 16
    assert d["max_concurrency"] == pytest.approx(d["num_gpu_blocks"] / 8192)
    # weights ~15 GiB, budget 0.9 x 79.18, so ~55 GiB of KV: ~450K tokens
    assert 14.5 < d["memory_gib"]["weights"] < 15.5
    assert d["memory_gib"]["budget"] == pytest.approx(0.9 * 79.18, rel=1e-6)
    assert 400_000 < d["kv_cache_tokens"] < 480_000
    assert set(d["memory_gib"]) >= {"total", "budget", "weights", "activation", "non_torch", "kv", "free"}
    assert d["summary"].startswith("Llama 3.1 8B on 1x H100 SXM5 80GB at TP 1: ")
    assert "requests of 128K tokens at once" in d["summary"]


def test_llama_70b_on_4_h100_summary(api):
    r = post(api, {"model": "llama-3-1-70b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 4})
    d = r.json()
    assert r.status_code == 200
    assert d["kv_bytes_per_token_per_gpu"] == 327680 / 4
    assert d["summary"].startswith(f"Llama 3.1 70B on 4x H100 SXM5 80GB at TP 4: {d['kv_cache_tokens']:,} tokens")
    assert d["price_per_hour"] == pytest.approx(4 * 3.78)


def test_replicas_multiply_the_cache(api):
    one = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}).json()
    four = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "num_gpus": 4}).json()
    assert four["replicas"] == 4 and four["kv_cache_tokens"] == one["kv_cache_tokens"]
    assert four["total_kv_cache_tokens"] == 4 * one["kv_cache_tokens"]


def test_cpu_tier_blocks(api):
    d = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "cpu_tier_gib": 64}).json()
    assert d["cpu_tier_blocks"] == 64 * 2**30 // (2 * 2**20)


def test_model_that_does_not_fit_is_200_with_reason(api):
    r = post(api, {"model": "llama-3-1-70b", "gpu": "h100-sxm5-80gb"})
    assert r.status_code == 200
    d = r.json()
    assert d["fits"] is False and "weights need" in d["reason"]
    assert "does not fit" in d["summary"]


# --- errors at the field --------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"tensor_parallel_size": 3}, "tensor_parallel_size", "does not divide num_attention_heads 32"),
        ({"gpu_memory_utilization": 0}, "gpu_memory_utilization", "more than 0 and at most 1"),
        ({"gpu_memory_utilization": 1.01}, "gpu_memory_utilization", "more than 0 and at most 1"),
        ({"gpu_memory_utilization": "nan"}, "gpu_memory_utilization", "valid number"),
        ({"max_model_len": 200_000}, "max_model_len", "beyond Llama 3.1 8B's 131,072 positions"),
        ({"max_model_len": 10**12}, "max_model_len", "less than or equal to 10000000"),
        ({"tensor_parallel_size": 10**9}, "tensor_parallel_size", "less than or equal to 512"),
        ({"tensor_parallel_size": True}, "tensor_parallel_size", "valid integer"),
        ({"block_size": 0}, "block_size", "one of vLLM's block sizes"),
        ({"kv_cache_dtype": "fp7"}, "kv_cache_dtype", "Must be one of the KV cache dtypes: auto, fp32"),
        ({"num_gpus": 3, "tensor_parallel_size": 2}, "num_gpus", "multiple of 2"),
        ({"available_kv_gib": 500}, "available_kv_gib", "more than the GPU's 79.18 GiB"),
        ({"gpu": {"name": "x"}}, "gpu.memory_gib", "required"),
        ({"gpu": {"memory_gib": -1}}, "gpu.memory_gib", "greater than or equal to"),
        ({"model": 42}, "model", "catalog slug"),
        ({"model": {"config": {"model_type": "llama"}}}, "model.config", "num_hidden_layers"),
        ({"model": {"config": {**LLAMA_8B_CONFIG, "num_key_value_heads": 7}}}, "model.config",
         "num_key_value_heads"),
    ],
)
def test_bad_input_is_400_with_a_message_at_the_field(api, body, field, fragment):
    r = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", **body})
    assert r.status_code == status.HTTP_400_BAD_REQUEST, r.json()
    errors = r.json()["errors"]
    assert field in errors, errors
    assert any(fragment in m for m in errors[field]), errors


@pytest.mark.parametrize(("body", "field", "fragment"), [
    ({"model": "no-such-model"}, "model", "No model 'no-such-model'"),
    ({"gpu": "no-such-gpu"}, "gpu", "No GPU 'no-such-gpu'"),
])
def test_unknown_slug_is_404_with_a_message_at_the_field(api, body, field, fragment):
    # 404, as for another user's private profile (tests/api/test_ownership.py): the two look the same.
    r = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", **body})
    assert r.status_code == status.HTTP_404_NOT_FOUND, r.json()
    assert any(fragment in m for m in r.json()["errors"][field])


def test_missing_model_and_gpu(api):
    r = post(api, {})
    assert r.status_code == 400
    assert set(r.json()["errors"]) >= {"model", "gpu"}


def test_body_that_is_not_an_object(api):
    r = api.post(URL, [1, 2, 3], format="json")
    assert r.status_code == 400
    r = api.post(URL, "{not json", content_type="application/json")
    assert r.status_code == 400


def test_deeply_nested_json_is_400(api):
    body = '{"model": {"config": ' + "[" * 50_000 + "]" * 50_000 + "}}"
    r = api.post(URL, body, content_type="application/json")
    assert r.status_code == 400


def test_public_no_auth_needed(api):
    r = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"})
    assert r.status_code == 200


def test_two_queries_for_two_slugs(api):
    with CaptureQueriesContext(connection) as ctx:
        r = post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"})
    assert r.status_code == 200
    assert len(ctx.captured_queries) <= 2


def test_inline_specs_need_no_query(api):
    with CaptureQueriesContext(connection) as ctx:
        r = post(api, {"model": {"config": LLAMA_8B_CONFIG}, "gpu": {"memory_gib": 79.18}})
    assert r.status_code == 200
    assert len(ctx.captured_queries) == 0


def test_schema_documents_plan_with_examples(api):
    r = api.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert r.status_code == 200
    op = r.json()["paths"]["/api/plan/"]["post"]
    body = op["requestBody"]["content"]["application/json"]
    assert "examples" in body
    assert "examples" in op["responses"]["200"]["content"]["application/json"]
    assert "400" in op["responses"]


def test_every_refused_knob_comes_back_at_once(api):
    """Issue 33 item 5: the TP that does not divide the heads is not hidden behind max_model_len."""
    r = api.post("/api/plan/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 64,
                                   "max_model_len": 200_000, "weights_gib": 500}, format="json")
    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    assert set(errors) == {"tensor_parallel_size", "max_model_len", "weights_gib"}, errors
    assert "64 does not divide num_attention_heads 32" in errors["tensor_parallel_size"][0]
