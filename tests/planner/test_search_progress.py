"""A running search's progress: the count is the bar's own, and the time left is estimated from the finished
chunks' pace with the shapes the later chunks will skip left out (``planner/search/selectors.py``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from planner.search.selectors import UNBOUNDED_TRIALS, chunk_cost, time_left
from tests.search_definitions import two_gpu_search


def _chunk(index, status, shapes, *, bound=None, best=None, took=None, ran=None):
    now = timezone.now()
    started = now - timedelta(seconds=took if took is not None else (ran or 0))
    return {"index": index, "status": status, "shapes": shapes, "cost_bound": bound, "best_cost": best,
            "started_at": started if status != "pending" else None,
            "finished_at": now if status == "done" else None}


def test_a_chunk_costs_its_shapes_cheaper_than_the_best_known():
    shapes = [[1.0, 2.0], [3.0, 4.0], [8.0, 10.0]]
    assert chunk_cost(shapes, 3.0) == pytest.approx(0.5 + 2.0)  # 3.0 and 8.0 are skipped: not cheaper
    assert chunk_cost(shapes, None) == pytest.approx(0.5 + 16.0 * UNBOUNDED_TRIALS)
    assert chunk_cost(shapes, 0.5) == pytest.approx(0.5)


def test_no_estimate_before_a_chunk_is_done():
    chunks = [_chunk(0, "running", [[1.0, 1.0]], ran=3), _chunk(1, "pending", [[1.0, 1.0]])]
    assert time_left(chunks, elapsed=3, fraction=0.3) is None


def test_the_time_left_is_the_pending_chunks_estimate_at_the_finished_ones_pace():
    # The first chunk (no answer known) took 10 s for an estimate of 0.5 + 4 * 2 * UNBOUNDED_TRIALS.
    first = _chunk(0, "done", [[2.0, 2.0], [4.0, 2.0]], best=4.0, took=10)
    scale = 10 / chunk_cost(first["shapes"], None)
    # Pending: one shape cheaper than the answer found (4.0), one dearer (skipped); the answer foreseen from
    # the first chunk's (4.0 for a least cost of 2.0: twice) makes the last chunk's 3.0 shape dearer too.
    second = _chunk(1, "pending", [[1.0, 5.0], [6.0, 50.0]])
    third = _chunk(2, "pending", [[3.0, 7.0]])
    left = time_left([first, second, third], elapsed=10, fraction=0.3)
    assert left == pytest.approx(scale * ((0.5 + 5.0) + 0.5))
    # Without the foresight (the first chunk found no answer) the third chunk's shape counts.
    first_none = {**first, "best_cost": None}
    left = time_left([first_none, second, third], elapsed=10, fraction=0.3)
    scale = 10 / chunk_cost(first["shapes"], None)
    assert left == pytest.approx(scale * ((0.5 + 5.0 * UNBOUNDED_TRIALS + 50.0 * UNBOUNDED_TRIALS)
                                          + (0.5 + 7.0 * UNBOUNDED_TRIALS)))


def test_a_running_chunk_counts_what_it_has_not_used_yet():
    first = _chunk(0, "done", [[2.0, 2.0]], bound=1.0, best=None, took=4)  # everything skipped: overhead only
    scale = 4 / 0.5
    running = _chunk(1, "running", [[0.5, 1.0]], bound=1.0, ran=2)
    assert time_left([first, running], elapsed=6, fraction=0.6) == pytest.approx(scale * 1.5 - 2, abs=0.05)


def test_one_chunk_uses_its_own_progress():
    only = [_chunk(0, "running", [[1.0, 1.0]], ran=6)]
    assert time_left(only, elapsed=6, fraction=0.2) is None
    assert time_left(only, elapsed=6, fraction=0.5) == pytest.approx(6)


@pytest.mark.django_db
def test_search_progress_counts_the_bars_own_shapes(django_user_model, monkeypatch):
    from gpuprofiles.catalog import load_catalog
    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.search import selectors, services
    from planner.search.models import SearchChunk

    load_catalog(GpuProfile, ModelProfile)
    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    owner = django_user_model.objects.create_user("pro", password="pw-123456789")
    search = services.search_create(owner=owner, definition={**two_gpu_search(), "check_seeds": 0})  # no last stage
    chunks = list(search.chunks.order_by("index"))
    assert [len(c.shapes) for c in chunks] == [2, 2] and all(s[0] > 0 and s[1] > 0 for c in chunks for s in c.shapes)
    p = selectors.search_progress(search=search)
    assert (p["candidates_shown"], p["candidates_total"], p["eta_s"]) == (0, 4, None)
    # half of the first chunk settled: the bar at 25 %, and the count beside it says 1 of 4, not 0
    SearchChunk.objects.filter(pk=chunks[0].pk).update(status="running", progress=0.5, started_at=timezone.now(),
                                                       heartbeat_at=timezone.now())
    search.status = search.Status.RUNNING
    search.started_at = timezone.now()
    search.save()
    p = selectors.search_progress(search=search)
    assert p["fraction"] == 0.25 and p["candidates_shown"] == 1 and p["candidates_done"] == 0
    SearchChunk.objects.filter(pk=chunks[0].pk).update(status="pending")  # else a second delivery: left alone
    assert services.chunk_run(search_id=search.pk, index=0) == "done"
    p = selectors.search_progress(search=search)
    assert p["candidates_shown"] == 2 and p["eta_s"] is not None and p["eta_s"] >= 0
    assert SearchChunk.objects.get(pk=chunks[1].pk).cost_bound is None  # not started yet
    services.chunk_run(search_id=search.pk, index=1)
    assert SearchChunk.objects.get(pk=chunks[1].pk).cost_bound == pytest.approx(3.78)  # the H100 answer
    search.refresh_from_db()
    p = selectors.search_progress(search=search)
    assert search.status == "done" and p["candidates_shown"] == 4 and p["eta_s"] is None


@pytest.mark.django_db
def test_the_xpyd_stage_keeps_the_bar_below_100_until_the_search_is_done(django_user_model, monkeypatch):
    """Every shape settled but the xPyD stage still running: the bar said 100 % beside status "running"."""
    from gpuprofiles.catalog import load_catalog
    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.search import selectors, services
    from planner.search.models import SearchChunk

    load_catalog(GpuProfile, ModelProfile)
    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    owner = django_user_model.objects.create_user("xpyd", password="pw-123456789")
    search = services.search_create(owner=owner, definition={
        "model": "llama-3-1-8b",
        "workload": {"spec": {"n": 24, "prompt": "normal:1024,256", "output": "normal:64,16",
                              "arrival": {"kind": "poisson", "rate": 10, "unit": "s"}}, "seed": 0},
        "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]},
        "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "precisions": ["bf16"], "max_replicas": 2},
        "disaggregated": {"link_gbps": 50}})
    assert services.chunk_run(search_id=search.pk, index=0) == "done"
    search.refresh_from_db()
    p = selectors.search_progress(search=search)
    assert search.status == "running" and p["candidates_done"] == p["candidates_total"]
    assert p["fraction"] < 1 and p["phase"] == "xpyd"
    stage = SearchChunk.objects.get(search=search, index=search.num_chunks - 1)
    SearchChunk.objects.filter(pk=stage.pk).update(status="running", started_at=timezone.now(),
                                                   heartbeat_at=timezone.now())
    p = selectors.search_progress(search=search)
    assert p["fraction"] < 1 and p["phase"] == "xpyd"
    client = Client()
    client.force_login(owner)
    page = client.get(f"/searches/{search.pk}/").content.decode()
    assert 'aria-valuenow="99"' in page and "width: 99%" in page and "comparing prefill/decode splits" in page
    SearchChunk.objects.filter(pk=stage.pk).update(status="pending")
    assert services.chunk_run(search_id=search.pk, index=stage.index) == "done"
    search.refresh_from_db()
    p = selectors.search_progress(search=search)
    assert search.status == "done" and p["fraction"] == 1 and p["phase"] == "shapes"


@pytest.mark.django_db
def test_the_last_stage_is_priced_for_the_answer_so_far_before_the_answer_is_gathered(django_user_model,
                                                                                      monkeypatch):
    """Priced at the heaviest shape until every shape chunk was done, the seed check put 3 s of a 3.8 s estimate
    with 0.8 s left (tests/integration/test_search_eta.py); once a chunk has an answer it is priced for that."""
    from gpuprofiles.catalog import load_catalog
    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.search import services
    from planner.search.definition import build_inputs
    from planner.search.pricing import price_stage

    load_catalog(GpuProfile, ModelProfile)
    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    owner = django_user_model.objects.create_user("stage", password="pw-123456789")
    search = services.search_create(owner=owner, definition={**two_gpu_search(), "check_seeds": 2})
    stage = search.chunks.get(index=2)
    heaviest = stage.shapes
    assert services.chunk_run(search_id=search.pk, index=0) == "done"  # the H100s: the answer
    answer = search.chunks.get(index=0).result["best"]
    so_far = price_stage(*build_inputs(search.snapshot), answer, None, 2).seconds
    stage.refresh_from_db()
    assert stage.shapes == [[0.0, round(so_far, 4)]] and stage.shapes != heaviest and so_far > 0
    search.refresh_from_db()
    assert search.result is None and search.status != "done"  # not gathered yet: the L40S chunk still pending


def test_a_running_chunk_past_a_quarter_is_held_to_its_own_pace():
    """Its price foresees from the other chunks; once a quarter is done its own pace bounds what is left."""
    first = _chunk(0, "done", [[1.0, 10.0]], bound=2.0, took=10.5)  # took its price: the scale is 1
    running = {**_chunk(1, "running", [[1.0, 10.0]], bound=2.0, ran=2), "progress": 0.5}
    assert time_left([first, running], elapsed=12.5, fraction=0.5) == pytest.approx(2.0, abs=0.05)  # not 8.5 s
    early = {**running, "progress": 0.2}
    assert time_left([first, early], elapsed=12.5, fraction=0.5) == pytest.approx(10.5 - 2, abs=0.05)  # its price
    overran = {**_chunk(1, "running", [[1.0, 10.0]], bound=2.0, ran=12), "progress": 0.75}
    assert time_left([first, overran], elapsed=22.5, fraction=0.9) == pytest.approx(4.0, abs=0.05)  # not 0
