"""Issue 37 on a real ``celery worker`` over Redis (no eager mode): a simulation priced over the inline bound is
answered 202 at once, runs on the worker, and the job polled at its URL holds the synchronous answer's JSON."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from planner.runs.models import Run

from .conftest import wait_for

pytestmark = pytest.mark.integration

#: One simulation of 300 requests (priced at about 0.3 s): over a bound of 0.01 s, so it goes to the worker.
SIMULATION = {"engine": {"num_gpu_blocks": 2000},
              "workload": {"spec": {"n": 300, "arrival": "poisson:4"}, "seed": 0}}


def test_a_priced_over_run_is_polled_until_it_holds_the_synchronous_answer(worker_factory, sender_on_redis,
                                                                          settings):
    worker = worker_factory(concurrency=1)
    api = APIClient()
    api.force_authenticate(get_user_model().objects.create_user("wren", password="pw-123456789"))
    settings.KVP_INLINE_MAX_SECONDS = 100  # the synchronous answer first (it also warms this process's imports)
    inline = api.post("/api/simulations/", SIMULATION, format="json")
    assert inline.status_code == 200
    settings.KVP_INLINE_MAX_SECONDS = 0.01
    start = time.monotonic()
    response = api.post("/api/simulations/", SIMULATION, format="json")
    accepted_ms = (time.monotonic() - start) * 1000
    assert response.status_code == 202, response.content
    assert accepted_ms < 1000
    job = response.json()
    seen = []

    def done() -> bool:
        out = api.get(job["url"]).json()
        seen.append(out["status"])
        return out["status"] in ("done", "failed")

    wait_for(done, timeout=120, interval=0.1, what="the run on the worker", logs=[worker])
    finished_s = time.monotonic() - start
    polled = api.get(job["url"]).json()
    assert polled["status"] == "done", polled["error"]
    run = Run.objects.get(pk=job["id"])
    assert list(run.chunks.values_list("status", "attempts")) == [("done", 1)]
    assert polled["result"] == inline.json()
    print(f"\nrun priced {run.price_s:.2f} s: 202 in {accepted_ms:.0f} ms, done after {finished_s:.1f} s on the "
          f"worker (statuses polled: {sorted(set(seen))}); result identical to the synchronous answer")
