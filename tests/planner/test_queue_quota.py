"""Issue 37: one per-user quota of queued work in seconds (``KVP_USER_QUEUE_SECONDS``) across sweeps, runs and
deployment searches, the first job included (planner/jobs/quota.py).

Before: a sweep's check counted only sweeps, and both sweeps and runs were checked only when something was queued
already (``queued > 0 and ...``), so a single sweep estimated at 25 h was accepted against the 1 h limit; a
search was counted by number only. Each test here fails on that code.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from planner.jobs.quota import queued_seconds
from planner.models import Sweep
from planner.runs.models import Run
from planner.search.models import Search

pytestmark = pytest.mark.django_db

SWEEP = {"engine": {"num_gpu_blocks": 2000, "max_num_seqs": 32},
         "workload": {"spec": {"n": 2000, "prompt": "const:400", "output": "const:400"}},
         "axes": [{"param": "num_gpu_blocks", "values": [20000, 30000, 40000, 50000]}]}
SIMULATION = {"engine": {"num_gpu_blocks": 2000}, "workload": {"spec": {"n": 50, "arrival": "poisson:4"}, "seed": 0}}
SEARCH = {"model": "llama-3-1-8b",
          "workload": {"spec": {"n": 24, "prompt": "normal:1024,256", "output": "normal:128,32",
                                "arrival": {"kind": "poisson", "rate": 10, "unit": "s"}}, "seed": 0},
          "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]},
          "space": {"gpus": ["h100-sxm5-80gb", "l40s"], "tensor_parallel": [1], "precisions": ["bf16"],
                    "max_replicas": 2}}
_SECONDS = r"([\d,.]+) (ms|s|min|h)"
_UNIT = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def _seconds(text: str) -> float:
    value, unit = re.fullmatch(_SECONDS, text).groups()
    return float(value.replace(",", "")) * _UNIT[unit]


def _api(name: str) -> APIClient:
    c = APIClient()
    c.force_authenticate(get_user_model().objects.create_user(name, password="pw-123456789"))
    return c


def _accepted_once(api, path: str, body: dict, settings) -> dict:
    """The job posted under a quota it passes (so it is a valid job), then cancelled: nothing left queued."""
    settings.KVP_USER_QUEUE_SECONDS = 10**9
    r = api.post(path, body, format="json")
    assert r.status_code == 202, r.content
    Sweep.objects.all().update(status="cancelled")
    Run.objects.all().update(status="cancelled")
    Search.objects.all().update(status="cancelled")
    return r.json()


@pytest.mark.parametrize(("path", "body", "what"), [
    ("/api/sweeps/", SWEEP, "This sweep"),
    ("/api/simulations/", SIMULATION, "This run"),
    ("/api/searches/", SEARCH, "This deployment search"),
])
def test_a_first_job_over_the_quota_is_refused_with_its_estimate_and_the_limit(settings, path, body, what):
    settings.KVP_INLINE_MAX_SECONDS = 0  # a simulation goes to the workers: a run
    api = _api("first")
    _accepted_once(api, path, body, settings)
    settings.KVP_USER_QUEUE_SECONDS = 0.001
    r = api.post(path, body, format="json")
    assert r.status_code == 429, r.content
    message = r.json()["errors"]["non_field_errors"][0]
    m = re.fullmatch(rf"{what} is estimated at {_SECONDS} of work; the limit per user is {_SECONDS} of queued and "
                     r"running work\. Make it smaller \(fewer points, requests or shapes\)\.", message)
    assert m, message
    assert _seconds(f"{m[1]} {m[2]}") > _seconds(f"{m[3]} {m[4]}")
    assert not Sweep.objects.filter(status="queued").exists() and not Run.objects.filter(status="queued").exists()
    assert not Search.objects.filter(status="queued").exists()
    # under a quota it fits, the same first job is accepted
    settings.KVP_USER_QUEUE_SECONDS = 10**9
    assert api.post(path, body, format="json").status_code == 202


def test_one_queue_counts_every_kind_and_another_user_is_not_held(settings):
    settings.KVP_INLINE_MAX_SECONDS = 0
    settings.KVP_USER_QUEUE_SECONDS = 10**9
    api = _api("mixed")
    assert api.post("/api/simulations/", SIMULATION, format="json").status_code == 202
    assert api.post("/api/searches/", SEARCH, format="json").status_code == 202
    run = Run.objects.get()
    search = Search.objects.get()
    assert search.snapshot["price"]["seconds"] > 0
    owner = run.owner
    queued = queued_seconds(owner=owner)
    assert queued == pytest.approx(run.price_s + search.snapshot["price"]["seconds"], rel=1e-6)
    # a sweep that alone fits the quota is refused behind the run and the search (the old check counted sweeps only)
    settings.KVP_USER_QUEUE_SECONDS = queued + 0.0001
    r = api.post("/api/sweeps/", SWEEP, format="json")
    assert r.status_code == 429, r.content
    message = r.json()["errors"]["non_field_errors"][0]
    assert message.startswith("Your queued and running work (sweeps, runs, deployment searches) is estimated at ")
    assert "and this sweep at " in message and "the limit per user is" in message
    # another user's queue is their own: the same run, refused to this user, is accepted from them
    assert api.post("/api/simulations/", SIMULATION, format="json").status_code == 429
    other = _api("other")
    assert other.post("/api/simulations/", SIMULATION, format="json").status_code == 202
    assert queued_seconds(owner=get_user_model().objects.get(username="other")) == pytest.approx(run.price_s)
    # finished or cancelled work is not counted
    Run.objects.filter(pk=run.pk).update(status="cancelled")
    assert queued_seconds(owner=owner) == pytest.approx(search.snapshot["price"]["seconds"], rel=1e-6)
    Search.objects.filter(pk=search.pk).update(status="done")
    assert queued_seconds(owner=owner) == 0


def test_a_visitors_runs_are_counted_by_address(settings):
    settings.KVP_INLINE_MAX_SECONDS = 0
    settings.KVP_USER_QUEUE_SECONDS = 10**9
    page = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "rate": "20", "num_requests": "60", "max_instances": "2"}
    visitor = Client(REMOTE_ADDR="203.0.113.7")
    assert visitor.get("/replicas/", page).status_code == 302
    run = Run.objects.get()
    assert run.owner is None
    assert queued_seconds(owner=None, client=run.client) == pytest.approx(run.price_s)
    assert queued_seconds(owner=None, client="203.0.113.99") == 0
    settings.KVP_USER_QUEUE_SECONDS = run.price_s * 0.5  # the first run of another address is over it alone
    refused = Client(REMOTE_ADDR="203.0.113.8").get("/replicas/", page)
    assert refused.status_code == 200 and "This run is estimated at" in refused.content.decode()
    assert Run.objects.count() == 1


def test_the_search_page_shows_the_refusal_as_a_form_error(settings):
    settings.KVP_USER_QUEUE_SECONDS = 0.001
    web = Client()
    web.force_login(get_user_model().objects.create_user("pages", password="pw-123456789"))
    form = {"model": "llama-3-1-8b", "gpus": ["l40s"], "rate": "10", "duration_s": "4", "prompt_mean": "1024",
            "prompt_std": "256", "output_mean": "128", "output_std": "32", "ttft_ms": "500", "ttft_pct": "p90",
            "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1", "pipeline_parallel": "1",
            "precisions": ["bf16"], "kv_cache_dtypes": ["fp8"], "max_num_seqs": "256", "max_replicas": "2"}
    r = web.post("/searches/", form)
    assert r.status_code == 200, r.status_code
    assert "This deployment search is estimated at" in r.content.decode(), r.context["form"].errors
    assert not Search.objects.exists()
