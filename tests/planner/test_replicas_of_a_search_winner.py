"""Issue 32 item 5: ``/api/replicas/`` asked for a search's winner (its shape, the search's traffic, SLO and
``max_replicas``) prices it as the search priced that shape, runs it (on a worker when dearer than the inline
bound, never refused when the search was not) and answers the search's replica count with the same figures."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from planner import tasks
from planner.runs import services as runs
from planner.runs.models import Run
from planner.search import definition as sdefn
from planner.search.models import Search

pytestmark = pytest.mark.django_db

WORKLOAD = {"spec": {"n": 600, "prompt": "normal:1024,256", "output": "normal:128,32",
                     "arrival": {"kind": "poisson", "rate": 150, "unit": "s"}}, "seed": 0}
SEARCH = {"model": "llama-3-1-8b", "workload": WORKLOAD, "check_seeds": 0,
          "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5},
                              {"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
          "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "precisions": ["bf16"],
                    "max_num_seqs": [64], "max_replicas": 16}}


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("win", password="pw-win-12345")


@pytest.fixture
def client(owner):
    c = APIClient()
    c.force_authenticate(owner)
    return c


def _searched(client) -> dict:
    r = client.post("/api/searches/", SEARCH, format="json")
    assert r.status_code == 202, r.content
    search = Search.objects.get(pk=r.json()["id"])
    for index in range(search.num_chunks):  # what the workers do
        assert tasks.run_search_chunk(search.pk, index) == "done"
    best = client.get(f"/api/searches/{search.pk}/").json()["result"]["best"]
    assert best["status"] == "answer" and best["replicas"] > 4  # a winner of many replicas, as in the issue
    return best


def _replicas_body(best: dict) -> dict:
    """The winner asked of /api/replicas/: its shape, the search's traffic, targets and most replicas."""
    cand = best["candidate"]
    return {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "workload": WORKLOAD,
            "deployment": {"tensor_parallel_size": cand["tensor_parallel"],
                           "pipeline_parallel_size": cand["pipeline_parallel"], "dtype": "bfloat16",
                           "max_num_seqs": cand["max_num_seqs"],
                           "max_model_len": best["sizing"]["max_model_len"]},
            "slo": {"ttft_s": 0.5, "itl_s": 0.05, "percentile": "p90"},
            "max_instances": SEARCH["space"]["max_replicas"]}


def test_the_winner_is_priced_as_the_search_priced_it_and_gets_the_search_s_answer(client, owner, settings):
    best = _searched(client)
    _, _, search_price = sdefn.validate(SEARCH, owner=owner)
    settings.KVP_INLINE_MAX_SECONDS = 0  # whatever its price, it goes to a worker: the job path is what is held
    r = client.post("/api/replicas/", _replicas_body(best), format="json")
    assert r.status_code == 202, r.content
    run = Run.objects.get(pk=r.json()["id"])
    assert run.price_s == pytest.approx(search_price.heaviest.seconds, abs=5e-5)  # stored to 4 decimals
    assert runs.chunk_run(run_id=run.pk) == "done"  # what the worker's task calls
    answer = client.get(f"/api/runs/{run.pk}/").json()["result"]
    assert answer["num_instances"] == best["replicas"], answer["reason"]
    assert answer["num_gpu_blocks"] == best["sizing"]["num_gpu_blocks"]
    mine = {t["num_instances"]: t for t in answer["trials"]}[best["replicas"]]
    theirs = {t["num_instances"]: t for t in best["trials"]}[best["replicas"]]
    assert mine["ttft_s"] == pytest.approx(theirs["values"]["TTFT p90"], rel=1e-9)
    assert mine["itl_s"] == pytest.approx(theirs["values"]["ITL p90"], rel=1e-9)


def test_a_winner_the_search_could_run_is_never_refused_by_the_replicas_price(client, owner, settings):
    """The issue's failure: the search ran a shape up to 16 replicas; /api/replicas/ refused the same at 16 on its
    time estimate (the sync limit). Both now hold one shape's whole replicas search to the chunk limit."""
    best = _searched(client)
    _, _, search_price = sdefn.validate(SEARCH, owner=owner)
    settings.KVP_SYNC_MAX_SECONDS = search_price.heaviest.seconds / 2  # past what a web request may run ...
    settings.KVP_CHUNK_MAX_SECONDS = search_price.heaviest.seconds * 1.01  # ... the search's shape just fits a chunk
    assert sdefn.validate(SEARCH, owner=owner)[2] is not None
    r = client.post("/api/replicas/", _replicas_body(best), format="json")
    assert r.status_code in (200, 202), r.content
    settings.KVP_CHUNK_MAX_SECONDS = search_price.heaviest.seconds * 0.99  # ... and both refuse it past the limit
    r = client.post("/api/replicas/", _replicas_body(best), format="json")
    assert r.status_code == 400 and "workload" in r.json()["errors"], r.content
