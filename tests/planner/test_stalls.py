"""Issue 23: work whose worker died is seen as stalled and sent again (grid chunks, cliff rounds, search chunks).

The broker is not under test here (its ``send_task`` is watched); the real worker killed mid-run is in
``tests/integration/test_worker_faults.py``.
"""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from gpuprofiles.catalog import load_catalog
from gpuprofiles.models import GpuProfile, ModelProfile
from planner.jobs import MAX_CHUNK_ATTEMPTS
from planner.models import Report, Sweep, SweepChunk
from planner.search import selectors as search_selectors
from planner.search import services as search_services
from planner.search import stalls as search_stalls
from planner.search.models import Search, SearchChunk
from planner.sweeps import selectors, services, stalls

pytestmark = pytest.mark.django_db

GRID = {"engine": {"num_gpu_blocks": 2000, "max_num_seqs": 32},
        "workload": {"spec": {"n": 40, "prompt": "normal:200,50", "output": "normal:60,10"}, "seed": 3},
        "axes": [{"param": "num_gpu_blocks", "values": [100, 300, 900]}]}
CLIFF = {"mode": "cliff", "engine": {"num_gpu_blocks": 2000, "max_num_seqs": 32},
         "workload": {"spec": {"n": 40, "prompt": "normal:200,40", "output": "normal:60,10"}, "seed": 5},
         "cliff": {"param": "num_gpu_blocks", "lo": 60, "hi": 1200, "resolution": 40}}
SEARCH = {"model": "llama-3-1-8b",
          "workload": {"spec": {"n": 24, "prompt": "normal:1024,256", "output": "normal:128,32",
                                "arrival": {"kind": "poisson", "rate": 10, "unit": "s"}}, "seed": 0},
          "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]},
          "space": {"gpus": ["h100-sxm5-80gb", "l40s"], "tensor_parallel": [1], "precisions": ["bf16"],
                    "max_replicas": 2}}


@pytest.fixture
def user():
    return get_user_model().objects.create_user("gus", password="pw-123456789")


def _ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def _running_chunk(user, *, beat_age_s: float) -> SweepChunk:
    sweep = services.sweep_create(owner=user, definition=GRID)
    chunk = sweep.chunks.first()
    Sweep.objects.filter(pk=sweep.pk).update(status=Sweep.Status.RUNNING, started_at=timezone.now())
    SweepChunk.objects.filter(pk=chunk.pk).update(
        status=SweepChunk.Status.RUNNING, attempts=1, started_at=_ago(beat_age_s), heartbeat_at=_ago(beat_age_s),
        progress=0.5)
    return SweepChunk.objects.get(pk=chunk.pk)


# --------------------------------------------------------------------------- grid sweeps


def test_a_chunk_whose_heartbeat_stopped_shows_as_stalled_without_an_eta(user):
    chunk = _running_chunk(user, beat_age_s=120)
    progress = selectors.sweep_progress(sweep=chunk.sweep)
    assert progress["status"] == "stalled" and progress["eta_s"] is None and progress["chunks"]["stalled"] == 1
    fresh = _running_chunk(user, beat_age_s=1)
    assert selectors.sweep_progress(sweep=fresh.sweep)["status"] == "running"


def test_healing_sends_stalled_chunks_again_and_leaves_live_ones(user):
    stalled = _running_chunk(user, beat_age_s=120)
    live = _running_chunk(user, beat_age_s=1)
    old_task = stalled.task_id
    with mock.patch.object(stalls, "send_task") as send:
        assert stalls.chunks_heal() == 1
    stalled.refresh_from_db()
    assert stalled.status == SweepChunk.Status.PENDING and stalled.task_id != old_task
    assert send.call_args.args == (services.CHUNK_TASK, [stalled.sweep_id, stalled.index])
    assert send.call_args.kwargs == {"task_id": stalled.task_id}
    live.refresh_from_db()
    assert live.status == SweepChunk.Status.RUNNING


def test_a_second_delivery_of_a_live_chunk_is_skipped_and_a_stale_one_runs(user):
    live = _running_chunk(user, beat_age_s=1)
    assert services.chunk_run(sweep_id=live.sweep_id, index=live.index) == "running-elsewhere"
    stale = _running_chunk(user, beat_age_s=120)
    assert services.chunk_run(sweep_id=stale.sweep_id, index=stale.index) == "done"
    stale.refresh_from_db()
    assert stale.attempts == 2 and stale.status == SweepChunk.Status.DONE and stale.heartbeat_at is not None


def test_a_chunk_past_its_attempts_fails_the_sweep_with_a_message(user):
    chunk = _running_chunk(user, beat_age_s=120)
    SweepChunk.objects.filter(pk=chunk.pk).update(attempts=MAX_CHUNK_ATTEMPTS)
    assert services.chunk_run(sweep_id=chunk.sweep_id, index=chunk.index) == "failed"
    sweep = Sweep.objects.get(pk=chunk.sweep_id)
    assert sweep.status == Sweep.Status.FAILED
    assert "gave up after 3 attempts" in sweep.error


def test_cancel_shows_no_chunk_as_running(user):
    chunk = _running_chunk(user, beat_age_s=1)
    services.sweep_cancel(sweep=chunk.sweep, user=user)
    counts = selectors.sweep_progress(sweep=Sweep.objects.get(pk=chunk.sweep_id))["chunks"]
    assert counts["running"] == 0 and counts["pending"] == 0


# --------------------------------------------------------------------------- cliff sweeps


def _report_body(sweep: Sweep) -> dict:
    body = dict(Report.objects.get(sweep=sweep).snapshot)
    body.pop("sweep")
    return body


def _cliff_killed_in_round(user, r: int, *, beat_age_s: float) -> Sweep:
    """A cliff sweep whose worker died in round ``r``: rounds before it stored, round ``r`` left running."""
    sweep = services.sweep_create(owner=user, definition=CLIFF)
    assert services.cliff_run(sweep_id=sweep.pk) == "done"
    rounds = SweepChunk.objects.filter(sweep=sweep)
    assert rounds.count() > r + 1
    rounds.filter(index__gt=r).delete()
    rounds.filter(index=r).update(status=SweepChunk.Status.RUNNING, results=None, attempts=1,
                                  heartbeat_at=_ago(beat_age_s), started_at=_ago(beat_age_s))
    Report.objects.filter(sweep=sweep).delete()
    Sweep.objects.filter(pk=sweep.pk).update(status=Sweep.Status.RUNNING, finished_at=None,
                                             snapshot={k: v for k, v in sweep.snapshot.items() if k != "cliff_result"})
    return Sweep.objects.get(pk=sweep.pk)


def test_a_cliff_round_whose_heartbeat_stopped_is_stalled_and_its_search_sent_again(user):
    sweep = _cliff_killed_in_round(user, 1, beat_age_s=120)
    assert selectors.sweep_progress(sweep=sweep)["status"] == "stalled"
    with mock.patch.object(stalls, "send_task") as send:
        assert stalls.chunks_heal() == 1
    assert send.call_args.args == (services.CLIFF_TASK, [sweep.pk])
    assert SweepChunk.objects.get(sweep=sweep, index=1).status == SweepChunk.Status.PENDING
    assert selectors.sweep_progress(sweep=sweep)["status"] == "running"


def test_a_healed_cliff_search_replays_its_rounds_and_reports_like_an_undisturbed_one(user):
    undisturbed = services.sweep_create(owner=user, definition=CLIFF)
    assert services.cliff_run(sweep_id=undisturbed.pk) == "done"
    sweep = _cliff_killed_in_round(user, 1, beat_age_s=120)
    live = _cliff_killed_in_round(user, 1, beat_age_s=1)
    assert services.cliff_run(sweep_id=live.pk) == "running-elsewhere"
    assert services.cliff_run(sweep_id=sweep.pk) == "done"
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.DONE
    assert SweepChunk.objects.get(sweep=sweep, index=1).attempts == 2
    assert _report_body(sweep) == _report_body(Sweep.objects.get(pk=undisturbed.pk))


def test_a_cliff_round_past_its_attempts_fails_the_sweep_with_a_message(user):
    sweep = _cliff_killed_in_round(user, 2, beat_age_s=120)
    SweepChunk.objects.filter(sweep=sweep, index=2).update(attempts=MAX_CHUNK_ATTEMPTS)
    assert services.cliff_run(sweep_id=sweep.pk) == "failed"
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.FAILED
    assert sweep.error.startswith("round 3 of the cliff search: gave up after 3 attempts")


# --------------------------------------------------------------------------- deployment searches


@pytest.fixture
def search(user):
    load_catalog(GpuProfile, ModelProfile)
    return search_services.search_create(owner=user, definition=SEARCH)


def _search_chunk_running(search: Search, *, beat_age_s: float) -> SearchChunk:
    Search.objects.filter(pk=search.pk).update(status=Search.Status.RUNNING, started_at=timezone.now())
    search.refresh_from_db()
    chunk = search.chunks.get(index=0)
    SearchChunk.objects.filter(pk=chunk.pk).update(status="running", attempts=1, started_at=_ago(beat_age_s),
                                                   heartbeat_at=_ago(beat_age_s))
    return SearchChunk.objects.get(pk=chunk.pk)


def test_a_search_chunk_whose_heartbeat_stopped_is_stalled_and_sent_again(search, user, client):
    chunk = _search_chunk_running(search, beat_age_s=120)
    assert search_selectors.search_progress(search=search)["status"] == "stalled"
    client.force_login(user)
    page = client.get(f"/searches/{search.pk}/").content.decode()
    assert "Stalled (a worker stopped; its chunk is being sent again)" in page
    with mock.patch.object(search_stalls, "send_task") as send:
        assert search_stalls.chunks_heal() == 3  # the stalled chunk and the pending ones (the last, the seed check,
    chunk.refresh_from_db()                         # waits for the answer when it comes early)
    assert chunk.status == "pending"
    assert [c.args[1] for c in send.call_args_list] == [[search.pk, 0], [search.pk, 1], [search.pk, 2]]
    assert send.call_args_list[0].args[0] == search_services.CHUNK_TASK


def test_a_live_search_chunk_is_left_running_and_a_second_delivery_skipped(search):
    chunk = _search_chunk_running(search, beat_age_s=1)
    assert search_selectors.search_progress(search=search)["status"] == "running"
    with mock.patch.object(search_stalls, "send_task") as send:
        assert search_stalls.chunks_heal() == 0
    assert not send.called
    assert search_services.chunk_run(search_id=search.pk, index=chunk.index) == "running-elsewhere"


def test_a_stale_search_chunk_runs_again_and_one_past_its_attempts_fails(search):
    chunk = _search_chunk_running(search, beat_age_s=120)
    assert search_services.chunk_run(search_id=search.pk, index=0) == "done"
    chunk.refresh_from_db()
    assert chunk.attempts == 2 and chunk.heartbeat_at is not None
    other = search.chunks.get(index=1)
    SearchChunk.objects.filter(pk=other.pk).update(status="running", attempts=MAX_CHUNK_ATTEMPTS,
                                                   heartbeat_at=_ago(120))
    assert search_services.chunk_run(search_id=search.pk, index=1) == "failed"
    search.refresh_from_db()
    assert search.status == Search.Status.FAILED and "gave up after 3 attempts" in search.error


def test_cancel_shows_no_search_chunk_as_running(search, user):
    _search_chunk_running(search, beat_age_s=1)
    search_services.search_cancel(search=search, user=user)
    progress = search_selectors.search_progress(search=Search.objects.get(pk=search.pk))
    assert progress["status"] == "cancelled"
    assert {c["status"] for c in progress["chunks"]} == {"skipped"}
