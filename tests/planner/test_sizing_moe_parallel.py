"""DP / EP shapes in the sizing API, page and ``manage.py plan``: the per-deployment figures, the comparison in
words, vLLM's rules as 400s naming the field (never a 500). The simulator side: tests/simulator/test_sizing_moe_parallel.py."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework import status
from rest_framework.test import APIClient

from planner.api.sizing import PlanCreateApi

pytestmark = pytest.mark.django_db

URL = "/api/plan/"
V3_DP8 = {"model": "deepseek-v3", "gpu": "h200-sxm-141gb", "max_model_len": 32768, "data_parallel_size": 8,
          "enable_expert_parallel": True}


@pytest.fixture(autouse=True)
def _no_throttle(monkeypatch):
    monkeypatch.setattr(PlanCreateApi, "throttle_classes", [])


@pytest.fixture
def api():
    return APIClient()


def _post(api, body):
    return api.post(URL, body, format="json")


def test_dp8_ep8_answers_per_rank_and_per_deployment(api):
    r = _post(api, V3_DP8)
    assert r.status_code == status.HTTP_200_OK, r.content
    d = r.json()
    assert d["fits"] and d["num_gpus"] == 8 and d["replicas"] == 1
    assert (d["data_parallel_size"], d["enable_expert_parallel"], d["expert_parallel_size"], d["local_experts"]) \
        == (8, True, 8, 32)
    assert d["kv_cache_tokens_per_deployment"] == d["total_kv_cache_tokens"] == 8 * d["kv_cache_tokens"]
    assert d["total_max_concurrency"] == pytest.approx(8 * d["max_concurrency"])
    assert " at DP 8 + EP 8: " in d["summary"] and f"{d['total_kv_cache_tokens']:,} tokens" in d["summary"]
    assert "--data-parallel-size 8 --enable-expert-parallel" in d["launch"]["vllm_serve"]


def test_the_comparison_is_computed_from_both_shapes(api):
    dp = _post(api, V3_DP8).json()
    tp = _post(api, {**V3_DP8, "data_parallel_size": 1, "enable_expert_parallel": False,
                     "tensor_parallel_size": 8}).json()
    ratio = dp["total_kv_cache_tokens"] / tp["total_kv_cache_tokens"]
    words = (f"DP 8 + EP 8 holds {ratio:.1f}x the KV tokens of TP 8 for DeepSeek-V3 on 8 x H200 SXM 141GB "
             f"({dp['total_kv_cache_tokens']:,} vs {tp['total_kv_cache_tokens']:,} tokens)")
    assert dp["shape_comparison"] == tp["shape_comparison"] == words
    dense = _post(api, {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 2}).json()
    assert dense["shape_comparison"] == ""


def test_dp1_and_ep_off_answer_as_before(api):
    body = {"model": "deepseek-v3", "gpu": "h200-sxm-141gb", "max_model_len": 32768, "tensor_parallel_size": 8}
    plain = _post(api, body).json()
    explicit = _post(api, {**body, "data_parallel_size": 1, "enable_expert_parallel": False}).json()
    assert plain == explicit
    assert plain["total_kv_cache_tokens"] == plain["kv_cache_tokens"] and plain["expert_parallel_size"] == 1


@pytest.mark.parametrize(("body", "field", "fragment"), [
    ({"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "enable_expert_parallel": True}, "enable_expert_parallel",
     "expert parallelism (--enable-expert-parallel) applies to MoE layers only"),
    ({**V3_DP8, "num_gpus": 12}, "num_gpus", "TP x PP x DP"),
    ({**V3_DP8, "data_parallel_size": 0}, "data_parallel_size", "greater than or equal to 1"),
    ({**V3_DP8, "data_parallel_size": 100_000}, "data_parallel_size", "less than or equal to 1024"),
    ({**V3_DP8, "data_parallel_size": True}, "data_parallel_size", "integer"),
    ({**V3_DP8, "data_parallel_size": "eight"}, "data_parallel_size", "integer"),
    ({**V3_DP8, "enable_expert_parallel": "sometimes"}, "enable_expert_parallel", "boolean"),
    ({"model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 4, "data_parallel_size": 64,
      "enable_expert_parallel": True}, "enable_expert_parallel", "128 routed experts"),
    ({**V3_DP8, "tensor_parallel_size": 512, "data_parallel_size": 16}, "num_gpus", "8,192"),
    # EP off: every routed expert split TP x DP = 5 ways, which does not divide Qwen3-30B-A3B's 768 (FusedMoE)
    ({"model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb", "data_parallel_size": 5}, "data_parallel_size",
     "which does not divide Qwen3 30B-A3B's expert intermediate size 768"),
])
def test_shapes_vllm_refuses_are_a_400_at_the_field(api, body, field, fragment):
    r = _post(api, body)
    assert r.status_code == status.HTTP_400_BAD_REQUEST, r.content
    errors = r.json()["errors"]
    assert field in errors, errors
    assert fragment in " ".join(errors[field]), errors


def test_the_page_shows_the_ranks_and_the_comparison(client):
    r = client.get("/", {"model": "deepseek-v3", "gpu": "h200-sxm-141gb", "max_model_len": "32768",
                         "data_parallel_size": "8", "enable_expert_parallel": "on"})
    assert r.status_code == 200
    html = r.content.decode()
    outcome = r.context["outcome"]
    assert f"8 DP ranks of {outcome.result.kv_cache_tokens:,}" in html
    assert re.search(r'id="shape-comparison">DP 8 \+ EP 8 holds \d+\.\dx the KV tokens of TP 8', html)
    assert 'id="shape">TP 1 × PP 1 × DP 8 = 8 GPUs; expert parallelism EP 8; 32 routed experts per GPU' in html
    assert 'data-term="all2all"' in html


def test_the_page_attaches_vllms_rule_to_the_ep_field(client):
    r = client.get("/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "enable_expert_parallel": "on"})
    assert r.status_code == 200
    html = r.content.decode()
    m = re.search(r'<ul class="errorlist" id="id_enable_expert_parallel_error"[^>]*>(.*?)</ul>', html, re.S)
    assert m and "MoE layers only" in m.group(1)


def test_manage_py_plan_takes_the_shape():
    out = StringIO()
    call_command("plan", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm5-80gb", "--dp", "8",
                 "--enable-expert-parallel", "--summary", stdout=out)
    assert out.getvalue().startswith("Qwen3 30B-A3B on 8x H100 SXM5 80GB at DP 8 + EP 8: ")


def test_dp_pages_do_not_offer_a_replicas_run_they_would_not_match(client):
    html = client.get("/", {"model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb", "data_parallel_size": "8",
                            "enable_expert_parallel": "on"}).content.decode()
    assert 'id="replicas-link"' not in html and 'id="replicas-later"' in html
    html = client.get("/", {"model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": "2"}
                      ).content.decode()
    assert 'id="replicas-link"' in html and 'id="replicas-later"' not in html


#: The MoE figures of the issue's models as their published config.json files give them (huggingface.co
#: deepseek-ai/DeepSeek-V3, Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B): layers, hidden, KV heads, routed
#: experts, experts per token, expert intermediate, shared experts, dense layers, MLA latent.
PUBLISHED = {
    "deepseek-v3": (61, 7168, None, 256, 8, 2048, 1, 3, (512, 64)),
    "qwen3-30b-a3b": (48, 2048, 4, 128, 8, 768, 0, 0, None),
    "qwen3-235b-a22b": (94, 4096, 4, 128, 8, 1536, 0, 0, None),
}


@pytest.mark.parametrize("slug", sorted(PUBLISHED))
def test_the_catalog_has_the_issues_moe_models_as_published(slug):
    from gpuprofiles.models import ModelProfile

    m = ModelProfile.objects.get(slug=slug).to_spec()
    layers, hidden, kv_heads, experts, top_k, inter, shared, dense, mla = PUBLISHED[slug]
    assert (m.num_layers, m.hidden_size, m.num_experts, m.num_experts_per_tok, m.moe_intermediate_size,
            m.num_shared_experts, m.num_dense_layers) == (layers, hidden, experts, top_k, inter, shared, dense)
    if mla:
        assert m.attention == "MLA" and (m.kv_lora_rank, m.qk_rope_head_dim) == mla
    else:
        assert m.attention == "GQA" and m.num_kv_heads == kv_heads


def test_the_concurrency_curve_counts_every_dp_rank():
    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.sizing import services

    model = ModelProfile.objects.get(slug="qwen3-30b-a3b").to_spec()
    gpu = GpuProfile.objects.get(slug="h100-sxm5-80gb").to_spec()
    outcome = services.plan_deployment(model=model, gpu=gpu, knobs={"data_parallel_size": 4,
                                                                     "enable_expert_parallel": True})
    curve = services.concurrency_curve(outcome)
    at_mml = curve["max_concurrency"][curve["context_tokens"].index(outcome.result.max_model_len)]
    assert at_mml == pytest.approx(outcome.total_max_concurrency) == pytest.approx(4 * outcome.result.max_concurrency)
