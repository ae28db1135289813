"""Every memory term in the API and on the sizing page, with its formula, vLLM source and version rule; a figure
pasted from the user's log wins over the formula, term by term (issue 31)."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from planner.api.sizing import PlanCreateApi

pytestmark = pytest.mark.django_db

KEYS = {"weights", "activation_forward", "activation_sampler", "activation", "non_torch", "cudagraph",
        "sampler_warmup"}


@pytest.fixture(autouse=True)
def _no_throttle(monkeypatch):
    monkeypatch.setattr(PlanCreateApi, "throttle_classes", [])


def test_the_api_lists_every_term_with_its_rule():
    r = APIClient().post("/api/plan/", {"model": "gpt-oss-20b", "gpu": "h100-sxm5-80gb", "max_model_len": 16000,
                                        "gpu_memory_utilization": 0.95, "vllm_version": "0.19.0"}, format="json")
    assert r.status_code == 200, r.json()
    d = r.json()
    terms = {t["key"]: t for t in d["memory_terms"]}
    assert KEYS <= set(terms)
    for t in terms.values():
        assert t["formula"] and t["vllm_source"] and t["rule"] and t["source"] == "modelled"
    assert "model runner V1" in terms["activation_sampler"]["rule"]
    assert terms["activation"]["gib"] == pytest.approx(d["memory_gib"]["activation"])
    # the start-up failure after sizing (gpt-oss-20b at 0.95)
    assert d["fits"] is False and "warming up the sampler" in d["reason"]


def test_given_figures_win_term_by_term_in_the_api():
    r = APIClient().post("/api/plan/", {"model": "gpt-oss-20b", "gpu": "h100-sxm5-80gb", "max_model_len": 16000,
                                        "vllm_version": "0.11.0", "weights_gib": 13.47, "non_torch_gib": 0.2},
                         format="json")
    assert r.status_code == 200, r.json()
    terms = {t["key"]: t for t in r.json()["memory_terms"]}
    assert terms["weights"]["source"] == "given" and terms["weights"]["gib"] == pytest.approx(13.47)
    assert terms["non_torch"]["source"] == "given" and terms["non_torch"]["gib"] == pytest.approx(0.2)
    assert terms["activation"]["source"] == "modelled"


def test_a_pasted_log_wins_term_by_term_on_the_page(client):
    log = ("INFO [gpu_model_runner.py] Model loading took 13.47 GiB and 31.7 seconds\n"
           "INFO [gpu_worker.py] Memory profiling: activation peak memory takes 7.38 GiB\n")
    r = client.get("/", {"model": "gpt-oss-20b", "gpu": "h100-sxm5-80gb", "max_model_len": "16000",
                         "vllm_version": "0.11.0", "vllm_log": log})
    terms = {t.key: t for t in r.context["outcome"].result.memory_terms}
    assert terms["weights"].source == "given" and terms["weights"].gib == pytest.approx(13.47)
    assert terms["activation"].source == "given" and terms["activation"].gib == pytest.approx(7.38)
    assert terms["non_torch"].source == "modelled"


def test_the_page_shows_the_terms_table(client):
    r = client.get("/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "max_model_len": "16000",
                         "vllm_version": "0.19.0"})
    html = r.content.decode()
    table = re.search(r'<table class="terms stack" id="memory-terms".*?</table>', html, re.S).group(0)
    for key in KEYS:
        assert f'data-term="{key}"' in table
    assert "topk_topp_sampler.apply_top_k_top_p" in table
    assert "128,256 vocab x 38.5 B per logit" in table
