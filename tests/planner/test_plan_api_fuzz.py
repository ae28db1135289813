"""POST /api/plan/ never answers 500, whatever JSON a client sends (hypothesis fuzz over the body)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from planner.api.sizing import PlanCreateApi

pytestmark = pytest.mark.django_db

FIELDS = ["model", "gpu", "tensor_parallel_size", "pipeline_parallel_size", "num_gpus", "dtype", "kv_cache_dtype",
          "block_size", "gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "max_num_seqs",
          "vllm_version", "cpu_tier_gib", "weights_gib", "available_kv_gib"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.sampled_from(["nan", "inf", "-1", "0", "1e999", "16", "0.9", "auto", "fp8", "llama-3-1-8b",
                     "h100-sxm5-80gb", "", " "]),
)
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)

config_keys = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
               "intermediate_size", "vocab_size", "max_position_embeddings", "torch_dtype", "model_type",
               "kv_lora_rank", "qk_rope_head_dim", "sliding_window", "layer_types", "num_local_experts",
               "num_experts_per_tok", "text_config", "quantization_config", "tie_word_embeddings"]
configs = st.dictionaries(st.sampled_from(config_keys), json_values, max_size=10)
models = st.one_of(json_values, st.fixed_dictionaries({"config": configs}, optional={
    "num_parameters": json_values, "name": json_values}))
gpus = st.one_of(json_values, st.fixed_dictionaries({}, optional={"memory_gib": json_values, "name": json_values,
                                                                   "price_per_hour": json_values}))
LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
one_bad_key = st.builds(lambda k, v: {"model": {"config": {**LLAMA, k: v}}, "gpu": {"memory_gib": 80}},
                        st.sampled_from(config_keys), json_values)
bodies = st.one_of(
    one_bad_key,
    json_values,
    st.fixed_dictionaries({"model": models, "gpu": gpus},
                          optional={f: json_values for f in FIELDS if f not in ("model", "gpu")}),
    st.fixed_dictionaries({"model": st.just("llama-3-1-8b"), "gpu": st.just("h100-sxm5-80gb")},
                          optional={f: scalars for f in FIELDS if f not in ("model", "gpu")}),
)


@pytest.fixture(autouse=True)
def _no_throttle(monkeypatch):
    monkeypatch.setattr(PlanCreateApi, "throttle_classes", [])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(body=bodies)
def test_never_a_500(body):
    r = APIClient().post("/api/plan/", json.dumps(body), content_type="application/json")
    # 404: a model or GPU slug that does not exist (or is another user's private profile).
    assert r.status_code in (200, 400, 404), (r.status_code, body, r.content[:500])
    data = r.json()
    if r.status_code in (400, 404):
        assert isinstance(data["errors"], dict) and data["errors"]
        assert all(isinstance(m, list) and m and all(isinstance(x, str) for x in m) for m in data["errors"].values())
    else:
        assert isinstance(data["fits"], bool) and "summary" in data


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_raw_bytes_never_a_500(raw):
    r = APIClient().post("/api/plan/", raw, content_type="application/json")
    assert r.status_code in (200, 400, 404, 415), (r.status_code, raw)
