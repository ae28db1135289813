"""A deployment search with ``disaggregated.pools`` (issue 34 item 5): prefill and decode pools of their own
shapes searched jointly, through the API, the page, the report and its exports.

Proved: ``"pools": true`` reaches the snapshot, is priced into the last stage (a 400 on ``disaggregated.pools``
past the chunk limit), runs in that stage after the answer is gathered, and its answer is a pair that meets the
SLO with a verdict against the aggregated answer; the report, the standalone HTML and the CSV show every pair
checked; a bad value or an SLO without a TTFT target is a 400 naming ``disaggregated.pools``; the search form's
checkbox asks for it.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from planner import tasks
from planner.search.models import Search

pytestmark = pytest.mark.django_db


def _definition(**dis) -> dict:
    """60 requests at 20/s of 2,048-token prompts on H100 and L40S at TP 1, bf16 and fp8; TTFT and ITL targets."""
    return {"model": "llama-3-1-8b",
            "workload": {"spec": {"n": 60, "prompt": "normal:2048,256", "output": "normal:128,32",
                                  "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
            "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.4},
                                {"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
            "space": {"gpus": ["h100-sxm5-80gb", "l40s"], "tensor_parallel": [1], "precisions": ["bf16", "fp8"],
                      "max_replicas": 4},
            "check_seeds": 0, "disaggregated": {"pools": True, **dis}}



def test_the_pools_run_in_the_last_stage_and_the_report_shows_every_pair(signed_in_api):
    r = signed_in_api.post("/api/searches/", _definition(), format="json")
    assert r.status_code == 202, r.content
    s = Search.objects.get(pk=r.json()["id"])
    assert s.snapshot["disaggregated"]["pools"] is True and s.num_chunks == 3  # two GPU types, then the stage
    for index in range(3):
        assert tasks.run_search_chunk(s.pk, index) == "done"
    res = signed_in_api.get(f"/api/searches/{s.pk}/").json()["result"]
    pools = res["disaggregated_pools"]
    best = pools["best"]
    assert best is not None and best["meets"] and pools["simulations"] > 0
    assert best in pools["pairs"] and all(not p["meets"] for p in pools["pairs"][:pools["pairs"].index(best)])
    agg = res["best"]["cost_per_hour"]
    assert pools["verdict"]["winner"] == ("pools" if best["cost_per_hour"] < agg - 1e-9 else "aggregated")
    page = Client().get(f"/searches/r/{s.slug}/").content.decode().replace("&#x27;", "'")
    assert 'id="pools-h"' in page and pools["verdict"]["reason"][:40] in page
    assert all(p["name"].replace("[", "").split("]")[0][:20] in page.replace("[", "") for p in pools["pairs"])
    standalone = Client().get(f"/searches/r/{s.slug}/download.html").content.decode()
    assert 'id="pools-h"' in standalone
    rows = list(csv.DictReader(io.StringIO(Client().get(f"/searches/r/{s.slug}/download.csv").content.decode())))
    pooled = [row for row in rows if row["serving"] == "pools"]
    assert len(pooled) == len(pools["pairs"]) and [row["status"] for row in pooled].count("answer") == 1
    answer = next(row for row in pooled if row["status"] == "answer")
    assert int(answer["prefill_instances"]) == best["prefill"]["instances"]
    assert float(answer["cost_per_hour_usd"]) == pytest.approx(best["cost_per_hour"], rel=1e-5)


def test_bad_pools_values_are_400s_naming_the_field(signed_in_api, settings):
    r = signed_in_api.post("/api/searches/", _definition(pools="yes"), format="json")
    assert r.status_code == 400 and "must be true or false" in r.json()["errors"]["disaggregated.pools"][0]
    no_ttft = _definition()
    no_ttft["slo"]["targets"] = [{"metric": "itl", "percentile": "p90", "max_s": 0.05}]
    r = signed_in_api.post("/api/searches/", no_ttft, format="json")
    assert r.status_code == 400 and "needs a TTFT target" in r.json()["errors"]["disaggregated.pools"][0]
    from planner.search.definition import build_inputs
    from planner.search.pricing import price_pools

    ok = signed_in_api.post("/api/searches/", _definition(), format="json")
    assert ok.status_code == 202
    joint = price_pools(*build_inputs(Search.objects.get(pk=ok.json()["id"]).snapshot))
    settings.KVP_CHUNK_MAX_SECONDS = joint.seconds / 2
    r = signed_in_api.post("/api/searches/", _definition(), format="json")
    assert r.status_code == 400, r.content
    assert r.json()["errors"]["disaggregated.pools"][0].startswith("The joint prefill/decode pools search")
    assert Search.objects.count() == 1


def test_the_search_form_asks_for_the_pools(django_user_model):
    web = Client()
    web.force_login(django_user_model.objects.create_user("fern", password="pw-fern-12345"))
    assert 'name="pools"' in web.get("/searches/").content.decode()
    form = {"model": "llama-3-1-8b", "gpus": ["h100-sxm5-80gb"], "rate": "10", "duration_s": "2.4",
            "prompt_mean": "1024", "prompt_std": "256", "output_mean": "64", "output_std": "16", "ttft_ms": "500",
            "ttft_pct": "p90", "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1", "precisions": ["bf16"],
            "max_num_seqs": "256", "max_replicas": "2", "pools": "on"}
    assert web.post("/searches/", form).status_code == 302
    assert Search.objects.get().snapshot["disaggregated"]["pools"] is True
