"""The one chunked-job lifecycle (planner.jobs), step by step, over the real database and without a simulation.

The job kind under test is the sweeps' own (:class:`planner.sweeps.services.Sweeps`) with its run and store steps
replaced by stubs, on sweep rows written directly: what is checked is the lifecycle (claim, heartbeat, store under
a lock, fail, heal, cancel, time left), not a sweep's simulation, which tests/planner/test_sweep_services.py and
the worker tests in tests/integration cover.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from planner import jobs
from planner.dayplans.models import DayPlan, DayPlanChunk
from planner.dayplans.services import DAY_PLANS
from planner.models import Sweep, SweepChunk
from planner.sweeps.services import Sweeps

pytestmark = pytest.mark.django_db


class StubSweeps(Sweeps):
    """The sweeps' lifecycle with a run that returns (or raises) what the test says, and a store with no gather."""

    def __init__(self, run=None) -> None:
        self.runs = 0
        self._run = run or (lambda sweep, chunk, watch: [{"index": p["index"]} for p in chunk.points])

    def run(self, sweep, chunk, watch):
        self.runs += 1
        return self._run(sweep, chunk, watch)

    def store(self, sweep, chunk, result):
        self.store_done(sweep.pk, chunk.index, {"results": result})


@pytest.fixture
def owner():
    return get_user_model().objects.create_user("lifecycle", password="pw-123456789")


def _job(owner, chunks: int = 2) -> Sweep:
    sweep = Sweep.objects.create(owner=owner, definition={}, snapshot={}, total_points=chunks, num_chunks=chunks)
    SweepChunk.objects.bulk_create([SweepChunk(sweep=sweep, index=i, workload={}, points=[{"index": i}],
                                               task_id=f"task-{sweep.pk}-{i}") for i in range(chunks)])
    return sweep


def _ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def _chunk(sweep: Sweep, index: int) -> SweepChunk:
    return SweepChunk.objects.get(sweep=sweep, index=index)


def test_a_claim_makes_the_chunk_running_and_a_second_claim_from_the_same_read_fails(owner):
    sweep = _job(owner)
    kind = StubSweeps()
    first_read, second_read = _chunk(sweep, 0), _chunk(sweep, 0)  # two deliveries read the same row
    assert kind.claim(first_read, label="chunk 0") == jobs.CLAIMED
    assert kind.claim(second_read, label="chunk 0") == "running-elsewhere"
    chunk = _chunk(sweep, 0)
    assert chunk.status == "running" and chunk.attempts == 1 and chunk.heartbeat_at is not None
    assert chunk.progress == 0.0 and first_read.attempts == 1  # the caller's copy follows the row
    assert Sweep.objects.get(pk=sweep.pk).status == Sweep.Status.RUNNING


def test_a_live_running_chunk_is_left_alone_and_a_done_one_is_not_run_again(owner):
    sweep = _job(owner)
    kind = StubSweeps()
    SweepChunk.objects.filter(sweep=sweep, index=0).update(status="running", attempts=1, heartbeat_at=_ago(1))
    assert kind.run_chunk(sweep.pk, 0) == "running-elsewhere"
    assert kind.run_chunk(sweep.pk, 1) == "done"
    assert kind.run_chunk(sweep.pk, 1) == "already-done"
    assert kind.run_chunk(sweep.pk, 7) == "missing"
    assert kind.runs == 1


def test_a_finished_run_is_stored_done_under_the_lock_and_storing_it_again_changes_nothing(owner):
    sweep = _job(owner)
    kind = StubSweeps()
    assert kind.run_chunk(sweep.pk, 0) == "done"
    chunk = _chunk(sweep, 0)
    assert (chunk.status, chunk.results, chunk.progress, chunk.error) == ("done", [{"index": 0}], 1.0, "")
    seen = []
    again, gathered = kind.store_done(sweep.pk, 0, {"results": chunk.results},
                                gather=lambda job, ch: seen.append((job.pk, ch.index)) or "gathered")
    assert gathered == "gathered" and seen == [(sweep.pk, 0)] and again.pk == chunk.pk
    assert SweepChunk.objects.filter(sweep=sweep).count() == 2


def test_a_chunk_that_raises_fails_itself_and_its_job_with_the_reason(owner):
    sweep = _job(owner)

    def boom(sweep, chunk, watch):
        raise RuntimeError("boom")

    assert StubSweeps(boom).run_chunk(sweep.pk, 1) == "failed"
    assert _chunk(sweep, 1).error == "RuntimeError: boom"
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.FAILED and sweep.error == "chunk 1: RuntimeError: boom"
    assert StubSweeps().run_chunk(sweep.pk, 0) == "skipped"  # a failed job runs no other chunk
    assert _chunk(sweep, 0).status == "skipped"


def test_a_stale_heartbeat_is_healed_and_a_live_one_is_not(owner):
    stale, live = _job(owner), _job(owner)
    kind = StubSweeps()
    for sweep, age in ((stale, 120), (live, 1)):
        SweepChunk.objects.filter(sweep=sweep, index=0).update(status="running", attempts=1, started_at=_ago(age),
                                                                heartbeat_at=_ago(age))
    old_task = _chunk(stale, 0).task_id
    sent = []
    assert jobs.heal_stalled(kind, send=lambda name, args, *, task_id: sent.append((name, args, task_id))) == 2
    healed = _chunk(stale, 0)
    assert healed.status == "pending" and healed.task_id != old_task
    assert sent == [(kind.chunk_task, [stale.pk, 0], healed.task_id),  # the stalled chunk and the other pending one
                    (kind.chunk_task, [stale.pk, 1], _chunk(stale, 1).task_id)]
    assert _chunk(live, 0).status == "running"
    assert kind.run_chunk(stale.pk, 0) == "done" and _chunk(stale, 0).attempts == 2


def test_a_chunk_whose_worker_dies_is_sent_again_up_to_the_limit_then_its_job_fails_with_a_message(owner):
    sweep = _job(owner, chunks=1)
    kind = StubSweeps()
    for _ in range(jobs.MAX_CHUNK_ATTEMPTS):  # each time: claimed, then the worker dies and the healer sees it
        assert kind.claim(_chunk(sweep, 0), label="chunk 0") == jobs.CLAIMED
        SweepChunk.objects.filter(sweep=sweep).update(heartbeat_at=_ago(120), started_at=_ago(120))
        assert jobs.heal_stalled(kind, send=lambda *a, **k: None) == 1
    assert kind.run_chunk(sweep.pk, 0) == "failed" and kind.runs == 0
    sweep.refresh_from_db()
    assert sweep.status == Sweep.Status.FAILED
    assert sweep.error == ("chunk 0: gave up after 3 attempts: the worker running this chunk stopped each time "
                           "(killed, or out of memory)")
    assert _chunk(sweep, 0).status == "failed"


def test_a_cancelled_job_keeps_its_finished_chunks_and_skips_the_rest(owner):
    sweep = _job(owner, chunks=3)
    kind = StubSweeps()
    assert kind.run_chunk(sweep.pk, 0) == "done"
    with pytest.raises(PermissionDenied):
        kind.cancel(sweep, user=get_user_model().objects.create_user("other", password="pw-123456789"))

    def cancelled_midway(job, chunk, watch):  # the owner cancels while this chunk runs; it had one point done
        watch.finished.append({"index": chunk.index, "kept": True})
        kind.cancel(job, user=owner)
        watch(0.5)  # the next progress check notices the cancel
        raise AssertionError("not stopped")

    kind._run = cancelled_midway
    assert kind.run_chunk(sweep.pk, 1) == "skipped"
    assert Sweep.objects.get(pk=sweep.pk).status == Sweep.Status.CANCELLED
    assert [(c.status, c.results) for c in SweepChunk.objects.filter(sweep=sweep)] == [
        ("done", [{"index": 0}]), ("skipped", [{"index": 1, "kept": True}]), ("skipped", None)]
    assert kind.run_chunk(sweep.pk, 2) == "skipped" and kind.runs == 2
    assert kind.cancel(sweep, user=owner).status == Sweep.Status.CANCELLED  # cancelling twice changes nothing


def test_a_kind_without_a_progress_column_is_claimed_and_stored_the_same(owner):
    plan = DayPlan.objects.create(owner=owner, definition={}, snapshot={}, num_chunks=1)
    DayPlanChunk.objects.create(plan=plan, index=0, start_s=0.0, task_id="t")
    chunk = DayPlanChunk.objects.get(plan=plan)
    assert DAY_PLANS.claim(chunk, label="chunk 0") == jobs.CLAIMED
    chunk, _ = DAY_PLANS.store_done(plan.pk, 0, {"result": {"ok": 1}})
    assert (chunk.status, chunk.result, chunk.attempts) == ("done", {"ok": 1}, 1)


def test_the_watch_writes_progress_and_notices_a_cancel(owner):
    sweep = _job(owner)
    kind = StubSweeps()
    watch = jobs.Watch(kind, sweep.pk, _chunk(sweep, 0).pk)
    watch(0.25)
    assert _chunk(sweep, 0).progress == 0.25 and not watch.should_stop()
    Sweep.objects.filter(pk=sweep.pk).update(status=Sweep.Status.CANCELLED)
    watch.last = 0.0  # as if the interval had passed
    with pytest.raises(jobs.JobCancelled):
        watch(2.0)
    assert _chunk(sweep, 0).progress == 1.0  # clipped to 0..1


def _row(status, cost, took=None, ran=None, now=None):
    now = now or timezone.now()
    row = {"status": status, "cost": cost, "started_at": None, "finished_at": None}
    if took is not None:
        row.update(started_at=now - timedelta(seconds=100), finished_at=now - timedelta(seconds=100 - took))
    if ran is not None:
        row["started_at"] = now - timedelta(seconds=ran)
    return row


def test_time_left_scales_the_prices_left_by_the_pace_of_the_finished_chunks():
    now = timezone.now()
    cost = lambda c: c["cost"]  # noqa: E731
    chunks = [_row("done", 10, took=20, now=now), _row("running", 10, ran=5, now=now), _row("pending", 4)]
    # twice as slow as priced: pending 2 x 4 = 8 s, the running one 2 x 10 - 5 = 15 s, one chunk at a time
    assert jobs.time_left(chunks, elapsed=30, fraction=0.5, cost=cost, now=now) == pytest.approx(23.0)
    assert jobs.time_left(chunks, elapsed=30, fraction=0.5, cost=cost, now=now,
                          pending_cost=lambda cs: 1.0) == pytest.approx(17.0)
    assert jobs.time_left([_row("running", 1), _row("pending", 1)], elapsed=9, fraction=0.5, cost=cost) is None
    assert jobs.time_left([_row("running", 1)], elapsed=9, fraction=0.75, cost=cost) == pytest.approx(3.0)
    assert jobs.time_left([_row("running", 1)], elapsed=9, fraction=0.2, cost=cost) is None
