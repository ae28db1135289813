"""Day plans on real ``celery worker`` processes over Redis (no eager mode): each chunk task sends the next, a
second chain starts from the middle of the day (speculative), the last one answers with the answer of chunks one
after another; a worker killed mid-chunk loses no stored chunk, and the healer of a second worker finishes
the plan with the same answer."""

from __future__ import annotations

import copy
import time

import pytest
from django.contrib.auth import get_user_model

from planner.dayplans import selectors, services
from planner.dayplans.api import EXAMPLE_DAY_PLAN
from planner.dayplans.models import DayPlan, DayPlanChunk

from .conftest import FAST_HEAL, STALL_AFTER_S, wait_for

pytestmark = pytest.mark.integration

#: Six chunks of 300 s, each a second or two of simulation: long enough to kill a worker in one.
LONGER = {**copy.deepcopy(EXAMPLE_DAY_PLAN), "name": "kill test",
          "workload": {"spec": {"n": 9000, "prompt": "normal:256,64", "output": "normal:128,32",
                                "arrival": {"kind": "piecewise", "segments": [[3, 600], [8, 600], [3, 600]],
                                            "unit": "s"}}, "seed": 1}}


def _here(definition: dict, owner, monkeypatch) -> dict:
    """The same plan's answer, run in this process (nothing sent to the workers)."""
    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    plan = DayPlan.objects.get(pk=services.dayplan_create(owner=owner, definition=definition).pk)
    return services.dayplan_run_here(plan=plan).answer


def test_a_plan_runs_pipelined_on_a_real_worker_with_the_answer_of_chunks_one_after_another(
        worker_factory, sender_on_redis, monkeypatch):
    worker = worker_factory(concurrency=2)
    owner = get_user_model().objects.create_user("planner", password="pw-123456789")
    plan = services.dayplan_create(owner=owner, definition=LONGER)
    wait_for(lambda: DayPlan.objects.get(pk=plan.pk).is_final, timeout=180, what="the day plan", logs=[worker])
    plan.refresh_from_db()
    assert plan.status == "done", plan.error
    chunks = list(plan.chunks.order_by("index"))
    assert [(c.status, c.attempts) for c in chunks] == [("done", 1)] * 6
    # pipelined: a chunk started (from the handover its predecessor told) before that one was stored
    overlaps = [c.index for p, c in zip(chunks, chunks[1:]) if c.started_at < p.finished_at]
    assert overlaps, [(c.started_at, c.finished_at) for c in chunks]
    spec = plan.snapshot["day"]["speculate_at"]
    assert spec == 4 and chunks[spec].started_at < chunks[1].started_at  # the second chain began at once
    worker.kill()  # the reference run is this process's alone (a live healer could send its chunks to the worker)
    here = _here(LONGER, owner, monkeypatch)  # one after another in this process
    for key in ("gpu_hours", "cost", "attainment", "peak_replicas", "fixed_peak_gpu_hours", "hours", "fleet"):
        assert plan.answer[key] == here[key], key
    stored = DayPlan.objects.exclude(pk=plan.pk).get(name=LONGER["name"]).chunks.order_by("index")
    assert [c.result for c in chunks] == [c.result for c in stored]  # every chunk's own result, too


def test_a_killed_worker_loses_no_stored_chunk(worker_factory, sender_on_redis, settings, monkeypatch):
    settings.KVP_STALL_AFTER_S = STALL_AFTER_S
    owner = get_user_model().objects.create_user("kim", password="pw-123456789")
    first = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    plan = services.dayplan_create(owner=owner, definition=LONGER)
    assert plan.num_chunks == 6

    def in_flight() -> bool:
        return DayPlanChunk.objects.filter(plan=plan, index__gte=1, status="running").exists()

    wait_for(in_flight, timeout=120, interval=0.05, what="a chunk after the first in flight", logs=[first])
    first.kill()  # SIGKILL to the whole process group: nothing acknowledged
    killed_at = time.monotonic()
    kept = {r["index"] for r in services.kept_chunks(plan, services.chunk_rows(plan))}  # not a guess's chunk
    stored = {c.index: (c.finished_at, c.result) for c in plan.chunks.filter(index__in=kept)}
    assert stored and 0 in stored
    wait_for(lambda: selectors.dayplan_progress(plan=DayPlan.objects.get(pk=plan.pk))["status"] == "stalled",
             timeout=60, interval=0.5, what="the plan to show as stalled", logs=[first])
    second = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    wait_for(lambda: DayPlan.objects.get(pk=plan.pk).is_final, timeout=120, interval=0.5,
             what="the plan to finish after the kill", logs=[first, second])
    plan.refresh_from_db()
    assert plan.status == "done", plan.error
    for index, (finished_at, result) in stored.items():  # a stored chunk was never run again
        chunk = DayPlanChunk.objects.get(plan=plan, index=index)
        assert (chunk.finished_at, chunk.attempts) == (finished_at, 1) and chunk.result == result
    assert max(plan.chunks.values_list("attempts", flat=True)) == 2  # the killed one, once more
    # The reference run is this process's alone: a live healer (every second, FAST_HEAL) sends its pending
    # chunks, which have no message, and its running one, whose heartbeat here is the default 5 s, to the worker.
    second.kill()
    here = _here(LONGER, owner, monkeypatch)
    assert plan.answer["gpu_hours"] == here["gpu_hours"] and plan.answer["hours"] == here["hours"]
    print(f"\nkill test: day plan finished {time.monotonic() - killed_at:.1f} s after its worker was killed")
