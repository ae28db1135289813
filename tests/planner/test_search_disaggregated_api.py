"""A deployment search with ``disaggregated`` (issue 20): the xPyD splits of the answer through the API and the page.

Proved: the definition's ``disaggregated`` object reaches the snapshot and adds a last chunk (the xPyD
stage) that waits for the answer, then simulates the answer's splits and finishes the search; the
answer holds the aggregated answer, the splits at equal GPUs and cost, the best split and a verdict;
every bad field is a 400 naming it; the stage is priced before queueing; the page has the inputs and
shows the comparison.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from planner import tasks
from planner.search.models import Search
from tests.search_definitions import xpyd_search

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(django_user_model):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("dee", password="pw-dee-12345"))
    return c




def test_the_xpyd_stage_runs_last_and_adds_the_comparison(client):
    r = client.post("/api/searches/", xpyd_search(), format="json")
    assert r.status_code == 202, r.content
    out = r.json()
    assert len(out["progress"]["chunks"]) == 2  # one GPU type, then the xPyD stage
    s = Search.objects.get(pk=out["id"])
    assert s.snapshot["disaggregated"] == {"link_gbps": 50.0, "link_latency_s": 0.0001, "routing": None,
                                           "prefill_instances": None, "decode_instances": None, "pools": False}
    assert tasks.run_search_chunk(s.pk, 1) == "waiting"  # the answer is not gathered yet
    assert tasks.run_search_chunk(s.pk, 0) == "done"
    s.refresh_from_db()
    assert s.status == Search.Status.RUNNING and s.result["best"] is not None  # gathered, not finished
    assert tasks.run_search_chunk(s.pk, 1) == "done"
    detail = client.get(f"/api/searches/{s.pk}/").json()
    assert detail["status"] == "done"
    res = detail["result"]
    n, alt = res["best"]["replicas"], res["disaggregated"]
    assert n >= 2 and alt["aggregated"]["replicas"] == n and alt["aggregated"]["num_gpus"] == n
    assert [(x["prefill_instances"], x["decode_instances"]) for x in alt["splits"]] == [
        (x, m - x) for m in sorted({n - 1, n}) for x in range(1, m)]
    same = [x for x in alt["splits"] if x["num_gpus"] == n]
    assert same and all(x["cost_per_hour"] == pytest.approx(res["best"]["cost_per_hour"]) for x in same)
    assert alt["verdict"]["winner"] in ("aggregated", "disaggregated") and alt["verdict"]["reason"]
    page = APIClient().get(f"/searches/r/{s.slug}/").content.decode()
    assert 'id="xpyd-h"' in page and alt["verdict"]["reason"].split(";")[0][:40] in page.replace("&#x27;", "'")
    assert all(x["name"] in page for x in alt["splits"])
    standalone = APIClient().get(f"/searches/r/{s.slug}/download.html").content.decode()
    assert 'id="xpyd-h"' in standalone and all(x["name"] in standalone for x in alt["splits"])


def test_pool_size_filters_and_router_reach_the_stage(client):
    body = xpyd_search(disaggregated={"prefill_instances": [1], "routing": "round-robin"})
    s = Search.objects.get(pk=client.post("/api/searches/", body, format="json").json()["id"])
    for i in range(s.num_chunks):
        assert tasks.run_search_chunk(s.pk, i) == "done"
    s.refresh_from_db()
    assert {x["prefill_instances"] for x in s.result["disaggregated"]["splits"]} == {1}


def test_without_the_object_there_is_no_stage(client):
    body = xpyd_search(check_seeds=0)  # nor a seed check: that has the same last stage
    del body["disaggregated"]
    out = client.post("/api/searches/", body, format="json").json()
    assert len(out["progress"]["chunks"]) == 1
    assert tasks.run_search_chunk(out["id"], 0) == "done"
    s = Search.objects.get(pk=out["id"])
    assert s.status == Search.Status.DONE and "disaggregated" not in s.result and "disaggregated" not in s.snapshot


@pytest.mark.parametrize("dis, field", [
    ({"link_gbps": 0}, "disaggregated.link_gbps"),
    ({"link_gbps": -5}, "disaggregated.link_gbps"),
    ({"link_gbps": "fast"}, "disaggregated.link_gbps"),
    ({"link_latency_s": -1}, "disaggregated.link_latency_s"),
    ({"prefill_instances": [0]}, "disaggregated.prefill_instances"),
    ({"decode_instances": [0, 1]}, "disaggregated.decode_instances"),
    ({"decode_instances": []}, "disaggregated.decode_instances"),
    ({"prefill_instances": [9]}, "disaggregated.prefill_instances"),
    ({"prefill_instances": [3], "decode_instances": [3]}, "disaggregated.decode_instances"),
    ({"routing": "telepathy"}, "disaggregated.routing"),
    ({"bogus": 1}, "disaggregated.bogus"),
    ("yes", "disaggregated"),
])
def test_bad_fields_are_400s_naming_them(client, dis, field):
    r = client.post("/api/searches/", xpyd_search(disaggregated=dis), format="json")
    assert r.status_code == 400, r.content
    assert field in r.json()["errors"], r.json()
    assert Search.objects.count() == 0


def test_one_replica_at_most_has_no_split_and_is_a_400(client):
    body = xpyd_search()
    body["space"]["max_replicas"] = 1
    r = client.post("/api/searches/", body, format="json")
    assert r.status_code == 400 and "space.max_replicas of 2 or more" in r.json()["errors"]["disaggregated"][0]


def test_the_stage_is_priced_before_queueing(client, settings):
    """The replicas search alone fits one chunk's time; with 64 replicas' splits the stage does not."""
    settings.KVP_CHUNK_MAX_SECONDS = 2
    body = xpyd_search(check_seeds=0)  # the splits alone (a seed check adds to the stage)
    body["space"]["max_replicas"] = 64
    del body["disaggregated"]
    assert client.post("/api/searches/", body, format="json").status_code == 202
    r = client.post("/api/searches/", {**body, "disaggregated": True}, format="json")
    assert r.status_code == 400, r.content
    (msg,) = r.json()["errors"]["disaggregated"]
    assert msg.startswith("The prefill/decode stage (125 splits of up to 64 instances) is estimated to need about")
    assert "(the limit is 2.0 s)" in msg
    assert Search.objects.count() == 1


def test_the_page_form_has_the_inputs_and_sends_them(django_user_model):
    from django.test import Client

    web = Client()
    web.force_login(django_user_model.objects.create_user("lee", password="pw-lee-12345"))
    page = web.get("/searches/").content.decode()
    assert all(f'name="{f}"' in page for f in ("disaggregated", "link_gbps", "link_latency_ms"))
    form = {"model": "llama-3-1-8b", "gpus": ["h100-sxm5-80gb"], "rate": "16", "duration_s": "2",
            "prompt_mean": "2048", "prompt_std": "256", "output_mean": "64", "output_std": "16", "ttft_ms": "250",
            "ttft_pct": "p90", "itl_ms": "20", "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1",
            "precisions": ["bf16"], "max_num_seqs": "256", "max_replicas": "4", "routing": "least-loaded",
            "disaggregated": "on", "link_gbps": "25", "link_latency_ms": "0.5"}
    bad = web.post("/searches/", {**form, "link_gbps": "0"})
    assert bad.status_code == 200 and "must be" in bad.content.decode() and not Search.objects.exists()
    assert web.post("/searches/", form).status_code == 302
    s = Search.objects.get(owner__username="lee")
    assert s.snapshot["disaggregated"]["link_gbps"] == 25.0
    assert s.snapshot["disaggregated"]["link_latency_s"] == pytest.approx(5e-4)
    assert web.post("/searches/", {**form, "disaggregated": ""}).status_code == 302
    assert "disaggregated" not in Search.objects.filter(owner__username="lee").first().snapshot


def test_the_schema_documents_the_field_with_an_example_that_is_accepted(client):
    from django.test import Client

    from planner.search.api import EXAMPLE_SEARCH_XPYD

    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    props = schema["components"]["schemas"]["SearchDefinitionRequest"]["properties"]
    assert "link_gbps" in props["disaggregated"]["description"]
    examples = schema["paths"]["/api/searches/"]["post"]["requestBody"]["content"]["application/json"]["examples"]
    assert any(e["value"].get("disaggregated") == EXAMPLE_SEARCH_XPYD["disaggregated"] for e in examples.values())
    r = client.post("/api/searches/", EXAMPLE_SEARCH_XPYD, format="json")
    assert r.status_code == 202, r.content
    assert len(r.json()["progress"]["chunks"]) == 2


def test_the_example_file_is_the_schema_example():
    import json
    from pathlib import Path

    from planner.search.api import EXAMPLE_SEARCH_XPYD

    path = Path(__file__).resolve().parents[2] / "examples" / "search_xpyd.json"
    assert json.loads(path.read_text()) == EXAMPLE_SEARCH_XPYD
