"""Sweep services called directly (as a task would call them): chunks, idempotence, progress, cancel."""

from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from planner import tasks
from planner.models import Report, Sweep, SweepChunk
from planner.sweeps import selectors, services

pytestmark = pytest.mark.django_db

DEF = {"engine": {"num_gpu_blocks": 2000, "max_num_seqs": 32},
       "workload": {"spec": {"n": 40, "prompt": "normal:200,50", "output": "normal:60,10"}, "seed": 3},
       "axes": [{"param": "num_gpu_blocks", "values": [100, 300, 900]},
                {"param": "enable_prefix_caching", "values": [True, False]}]}


@pytest.fixture
def user():
    return get_user_model().objects.create_user("ann", password="pw-123456789")


def test_create_plans_chunks_and_enqueues_after_commit(user, settings, django_capture_on_commit_callbacks):
    settings.KVP_SWEEP_CHUNK_POINTS = 4
    with mock.patch("config.celery.app.send_task") as send:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            sweep = services.sweep_create(owner=user, definition=DEF)
        assert send.call_count == 0  # nothing is sent before the transaction commits
        for cb in callbacks:
            cb()
    assert sweep.total_points == 6 and sweep.num_chunks == 2
    chunks = list(sweep.chunks.all())
    sent = {(c.args[0], *c.kwargs["args"], c.kwargs["task_id"]) for c in send.call_args_list}
    assert sent == {("planner.run_sweep_chunk", sweep.pk, ch.index, ch.task_id) for ch in chunks}  # ids, not objects
    assert services.CHUNK_TASK == tasks.run_sweep_chunk.name and services.CLIFF_TASK == tasks.run_cliff_sweep.name


def test_chunks_run_once_even_when_delivered_twice(user, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 2
    sweep = services.sweep_create(owner=user, definition=DEF)
    assert services.chunk_run(sweep_id=sweep.pk, index=0) == "done"
    first = SweepChunk.objects.get(sweep=sweep, index=0).results
    assert services.chunk_run(sweep_id=sweep.pk, index=0) == "already-done"
    sweep.refresh_from_db()
    assert sweep.points_done == len(first) and sweep.status == Sweep.Status.RUNNING
    # a stale re-delivery that stores the same chunk again does not double count
    services.chunk_store(sweep_id=sweep.pk, index=0, results=first)
    sweep.refresh_from_db()
    assert sweep.points_done == len(first)
    for ch in sweep.chunks.exclude(index=0):
        services.chunk_run(sweep_id=sweep.pk, index=ch.index)
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.DONE and sweep.points_done == 6
    assert [p["index"] for p in selectors.sweep_points(sweep=sweep)] == list(range(6))
    assert Report.objects.filter(sweep=sweep).count() == 1


def test_more_blocks_mean_fewer_preemptions(user):
    sweep = services.sweep_create(owner=user, definition=DEF)
    for ch in sweep.chunks.all():
        services.chunk_run(sweep_id=sweep.pk, index=ch.index)
    pts = [p for p in selectors.sweep_points(sweep=sweep) if p["params"]["enable_prefix_caching"]]
    pre = [p["metrics"]["preemptions_per_request"] for p in sorted(pts, key=lambda p: p["params"]["num_gpu_blocks"])]
    assert pre[0] > pre[-1] == 0


def test_progress_reports_points_elapsed_and_eta(user, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 2
    sweep = services.sweep_create(owner=user, definition=DEF)
    p = selectors.sweep_progress(sweep=sweep)
    assert (p["status"], p["points_done"], p["points_total"], p["fraction"], p["eta_s"]) == ("queued", 0, 6, 0, None)
    services.chunk_run(sweep_id=sweep.pk, index=0)
    sweep.refresh_from_db()
    p = selectors.sweep_progress(sweep=sweep)
    assert p["points_done"] == 2 and p["fraction"] == pytest.approx(1 / 3, abs=1e-3)
    # an estimate once a batch is done: the time it took, scaled by the estimated cost of what is left
    assert p["elapsed_s"] >= 0 and p["eta_s"] is not None and p["eta_s"] >= 0 and p["chunks"]["done"] == 1
    services.chunk_run(sweep_id=sweep.pk, index=1)
    sweep.refresh_from_db()
    p = selectors.sweep_progress(sweep=sweep)
    assert p["points_done"] == 4 and p["eta_s"] is not None and p["eta_s"] >= 0 and p["chunks"]["done"] == 2


NOW = timezone.now()


def _chunk(status, costs, *, took=None, ran=None, progress=0.0):
    now = NOW
    started = now - timedelta(seconds=took if took is not None else ran or 0)
    return {"status": status, "progress": progress, "points": [{"cost_s": c} for c in costs],
            "started_at": started if status != "pending" else None,
            "finished_at": now if status == "done" else None}


def test_time_left_weighs_points_by_their_estimated_cost_not_their_number():
    # Done: a point priced 9 s took 20 s, i.e. 2x its cost with overheads (0.5 + 0.5 + 9 = 10).
    done = _chunk("done", [9.0], took=20.0)
    # Left: three cheap points (1 + 1 + 1 estimated s each -> 2 s each with overheads = 3 x 2 x 2 = 12 s real).
    left = [_chunk("pending", [1.0]) for _ in range(3)]
    assert selectors.time_left([done, *left], elapsed=20.0, fraction=0.25, now=NOW) == pytest.approx(12.0, abs=0.01)
    # A running chunk counts what it has not used yet of its share; two running at once share the rest.
    running = _chunk("running", [1.0], ran=1.0)
    assert selectors.time_left([done, running, *left[:2]], elapsed=21, fraction=0.3, now=NOW) == pytest.approx(2 * 4.0 + 3.0, abs=0.01)
    two = [done, running, _chunk("running", [1.0], ran=3.0), left[0]]
    assert selectors.time_left(two, elapsed=23, fraction=0.4, now=NOW) == pytest.approx((4.0 + 3.0 + 1.0) / 2, abs=0.01)
    assert selectors.time_left([_chunk("running", [9.0], ran=5.0), *left], elapsed=5, fraction=0.1, now=NOW) is None


def test_cancel_skips_pending_chunks(user, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 2
    sweep = services.sweep_create(owner=user, definition=DEF)
    services.chunk_run(sweep_id=sweep.pk, index=0)
    services.sweep_cancel(sweep=sweep, user=user)
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.CANCELLED
    assert services.chunk_run(sweep_id=sweep.pk, index=1) == "already-done" or \
        SweepChunk.objects.get(sweep=sweep, index=1).status == SweepChunk.Status.SKIPPED
    assert not Report.objects.filter(sweep=sweep).exists()


def test_cancel_by_another_user_is_refused(user):
    from django.core.exceptions import PermissionDenied

    other = get_user_model().objects.create_user("eve", password="pw-123456789")
    sweep = services.sweep_create(owner=user, definition=DEF)
    with pytest.raises(PermissionDenied):
        services.sweep_cancel(sweep=sweep, user=other)


def test_a_failing_chunk_fails_the_sweep_with_the_reason(user):
    sweep = services.sweep_create(owner=user, definition=DEF)
    with mock.patch("planner.sweeps.runner.simulate_points", side_effect=RuntimeError("boom")):
        assert services.chunk_run(sweep_id=sweep.pk, index=0) == "failed"
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.FAILED and "boom" in sweep.error


def test_missing_sweep_is_a_no_op():
    assert services.chunk_run(sweep_id=999999, index=0) == "missing"
    assert services.cliff_run(sweep_id=999999) == "missing"


def test_tasks_are_thin_adapters_over_the_services(user):
    sweep = services.sweep_create(owner=user, definition=DEF)
    assert tasks.run_sweep_chunk.run(sweep.pk, 0) == "done"
    assert tasks.run_sweep_chunk.acks_late and tasks.run_sweep_chunk.reject_on_worker_lost


def test_cliff_sweep_runs_rounds_as_chunks_and_records_the_cliff(user):
    sweep = services.sweep_create(owner=user, definition={
        "mode": "cliff", "engine": {"num_gpu_blocks": 2000, "max_num_seqs": 32},
        "workload": DEF["workload"],
        "cliff": {"param": "num_gpu_blocks", "lo": 60, "hi": 1200, "resolution": 40}})
    assert services.cliff_run(sweep_id=sweep.pk) == "done"
    sweep.refresh_from_db()
    cr = sweep.snapshot["cliff_result"]
    assert sweep.status == Sweep.Status.DONE and cr["status"] == "found"
    assert cr["cliff"] - cr["bad"] <= 40
    assert sweep.points_done == cr["evaluations"] == sweep.total_points
    assert sweep.chunks.count() == cr["rounds"] + 1
    # re-running replays stored rounds without simulating again
    assert services.cliff_run(sweep_id=sweep.pk) == "already-done"
