"""A deployment search runs end to end on a real ``celery worker`` over Redis (no eager mode).

One chunk per GPU type, two worker processes; the gathered answer equals the same search
run in the test process. Bounded: a small workload and space, every wait has a timeout.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from gpuprofiles.catalog import load_catalog
from gpuprofiles.models import GpuProfile, ModelProfile
from planner.search import definition as sdefn
from planner.search import selectors, services
from planner.search.models import Search
from simulator.search.deployments import search_deployments

from .conftest import wait_for

pytestmark = pytest.mark.integration

DEFINITION = {
    "model": "llama-3-1-8b",
    "workload": {"spec": {"n": 24, "prompt": "normal:1024,256", "output": "normal:128,32",
                          "arrival": {"kind": "poisson", "rate": 10, "unit": "s"}}, "seed": 0},
    "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]},
    "space": {"gpus": ["h100-sxm5-80gb", "l40s", "l4"], "tensor_parallel": [1], "precisions": ["bf16", "fp8"],
              "max_replicas": 2},
}


def test_search_runs_end_to_end_on_a_real_worker(worker_factory, sender_on_redis):
    # a transactional test before this one (same worker process) flushed the rows the migration loaded
    load_catalog(GpuProfile, ModelProfile)
    worker = worker_factory(concurrency=2)
    owner = get_user_model().objects.create_user("searcher", password="pw-123456789")
    search = services.search_create(owner=owner, definition=DEFINITION)
    assert search.num_chunks == 4 and search.total_candidates == 6  # one chunk per GPU type, then the seed check

    def finished():
        search.refresh_from_db()
        return search.is_final

    wait_for(finished, timeout=180, what="the search to finish", logs=[worker])
    assert search.status == Search.Status.DONE, search.error
    progress = selectors.search_progress(search=search)
    assert progress["candidates_done"] == 6 and progress["fraction"] == 1.0
    here = search_deployments(*sdefn.build_inputs(search.snapshot)).to_dict()
    assert search.result["best"]["index"] == here["best"]["index"]
    assert search.result["best"]["replicas"] == here["best"]["replicas"]
    assert search.result["message"] == here["message"]
    assert search.result["seed_check"]["seeds"] == [1, 2, 3]  # the last stage ran on the worker (sent after commit)
    assert search.result["seed_check"]["replicas"] == here["best"]["replicas"]


def test_a_search_with_disaggregated_runs_its_xpyd_stage_on_the_worker(worker_factory, sender_on_redis):
    """The stage chunk is sent by the worker that gathers the answer (after commit), then finishes the search."""
    load_catalog(GpuProfile, ModelProfile)
    worker = worker_factory(concurrency=2)
    owner = get_user_model().objects.create_user("splitter", password="pw-123456789")
    definition = {**DEFINITION, "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1],
                                          "precisions": ["bf16"], "max_replicas": 3, "routing": "least-loaded"},
                  "workload": {"spec": {"n": 40, "prompt": "normal:2048,256", "output": "normal:64,16",
                                        "arrival": {"kind": "poisson", "rate": 16, "unit": "s"}}, "seed": 0},
                  "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.4},
                                      {"metric": "itl", "percentile": "p90", "max_s": 0.013}]},
                  "disaggregated": {"link_gbps": 50}}
    search = services.search_create(owner=owner, definition=definition)
    assert search.num_chunks == 2

    def finished():
        search.refresh_from_db()
        return search.is_final

    wait_for(finished, timeout=180, what="the search and its xPyD stage to finish", logs=[worker])
    assert search.status == Search.Status.DONE, search.error
    alt = search.result["disaggregated"]
    assert alt["aggregated"]["replicas"] == search.result["best"]["replicas"] >= 2
    assert alt["splits"] and alt["verdict"]["winner"] in ("aggregated", "disaggregated")
    assert len(search.result["seed_check"]["meets"]) == 3  # the same stage checks the answer's seeds
