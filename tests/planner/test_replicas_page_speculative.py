"""Speculative decoding on the replicas (cluster) page (issue 20 item 3).

Proved: the page offers the drafter, k and the acceptance rate; a submitted EAGLE head is sized into each
replica (fewer KV blocks than without it, as the plan API says) and simulated (at the same replica count
the ITL is lower than without: each step yields more than one token); k = 0 is the page without
speculation; bad values and incomplete settings are errors on their fields, never a 500; the
disaggregated comparison runs the same drafter.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db

BASE = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "rate": "8", "num_requests": "40",
        "prompt_mean": "512", "prompt_std": "64", "output_mean": "64", "output_std": "16", "routing": "round-robin",
        "max_instances": "1", "itl_ms": "500"}
EAGLE = {"speculative_method": "eagle", "num_speculative_tokens": "3", "acceptance_rate": "0.7"}


def field_errors(html: str, field: str) -> list[str]:
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error"[^>]*>(.*?)</ul>', html, re.S)
    return re.findall(r"<li>(.*?)</li>", m.group(1), re.S) if m else []


def test_the_form_offers_the_drafter():
    from django.test import Client

    html = Client().get("/replicas/").content.decode()
    assert all(f'name="{f}"' in html for f in ("speculative_method", "num_speculative_tokens", "acceptance_rate"))


def test_an_eagle_head_is_sized_and_simulated_on_every_replica(client):
    from django.test import Client

    plain = client.get("/replicas/", BASE)
    eagle = client.get("/replicas/", {**BASE, **EAGLE})
    assert plain.status_code == eagle.status_code == 200
    a, b = plain.context["answer"], eagle.context["answer"]
    assert a["num_instances"] == b["num_instances"] == 1
    plan = Client().post("/api/plan/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "max_model_len": 8192,
                                        "speculative": {"method": "eagle", "num_speculative_tokens": 3}},
                         content_type="application/json").json()["speculative"]
    # the head's share of the memory, as the plan API sizes it (the page's max_model_len differs: compare ratios)
    assert b["num_gpu_blocks"] < a["num_gpu_blocks"]
    ratio = plan["num_gpu_blocks"] / plan["num_gpu_blocks_without_draft"]
    assert b["num_gpu_blocks"] / a["num_gpu_blocks"] == pytest.approx(ratio, abs=0.01)
    itl_plain = float(a["rows"][0]["itl"].replace(",", ""))
    itl_eagle = float(b["rows"][0]["itl"].replace(",", ""))
    assert itl_eagle < itl_plain  # 1 + 0.7 + 0.49 + 0.343 = 2.5 tokens per verification
    assert 'id="replicas-speculative"' in eagle.content.decode()
    assert b["speculative"] == {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}


def test_k_zero_is_the_page_without_speculation(client):
    plain = client.get("/replicas/", BASE).context["answer"]
    zero = client.get("/replicas/", {**BASE, "speculative_method": "ngram", "num_speculative_tokens": "0"})
    z = zero.context["answer"]
    assert z["num_gpu_blocks"] == plain["num_gpu_blocks"] and z["rows"] == plain["rows"]


@pytest.mark.parametrize("extra,field", [
    ({**EAGLE, "num_speculative_tokens": "-1"}, "num_speculative_tokens"),
    ({**EAGLE, "num_speculative_tokens": "17"}, "num_speculative_tokens"),
    ({**EAGLE, "acceptance_rate": "1.5"}, "acceptance_rate"),
    ({**EAGLE, "acceptance_rate": "-0.1"}, "acceptance_rate"),
    ({**EAGLE, "speculative_method": "medusa"}, "speculative_method"),
    ({"speculative_method": "eagle", "num_speculative_tokens": "3"}, "acceptance_rate"),
    ({"speculative_method": "eagle"}, "num_speculative_tokens"),
    ({"num_speculative_tokens": "3", "acceptance_rate": "0.7"}, "speculative_method"),
])
def test_bad_settings_are_errors_on_their_field(client, extra, field):
    r = client.get("/replicas/", {**BASE, **extra})
    assert r.status_code == 200 and r.context["answer"] is None
    assert field_errors(r.content.decode(), field), r.content.decode()[:3000]


def test_the_disaggregated_comparison_runs_the_drafter_too(client):
    small = {**BASE, "num_requests": "20", "prefill_instances": "1", "decode_instances": "1"}
    r, plain = client.get("/replicas/", {**small, **EAGLE}), client.get("/replicas/", small)
    spec_rows, plain_rows = r.context["disaggregated"], plain.context["disaggregated"]
    assert [x["name"] for x in spec_rows] == ["aggregated ×2", "1P1D"]
    assert spec_rows[1]["itl_p90_s"] < plain_rows[1]["itl_p90_s"]


def test_the_replicas_api_takes_the_same_object_and_names_bad_fields(django_user_model):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(django_user_model.objects.create_user("spec", password="pw-spec-12345"))
    body = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
            "workload": {"spec": {"n": 20, "prompt": "const:512", "output": "const:32",
                                  "arrival": {"kind": "poisson", "rate": 4, "unit": "s"}}, "seed": 0},
            "slo": {"itl_s": 0.5}, "max_instances": 1}
    ok = api.post("/api/replicas/", {**body, "engine": {"speculative": {"method": "eagle", "num_speculative_tokens": 3,
                                                                         "acceptance_rate": 0.7}}}, format="json")
    assert ok.status_code == 200, ok.content
    bad = api.post("/api/replicas/", {**body, "engine": {"speculative": {"method": "eagle", "num_speculative_tokens": 3,
                                                                          "acceptance_rate": 1.5}}}, format="json")
    assert bad.status_code == 400 and any("acceptance_rate" in k for k in bad.json()["errors"]), bad.content
