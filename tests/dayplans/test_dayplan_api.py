"""Day plans over the API (issue 36 items 3 to 5): a small plan's round trip in chunks, its answer equal to the
simulator's own chunked day, cancel keeping finished chunks, and healing a plan whose worker died."""

from __future__ import annotations

import copy
import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from planner import tasks
from planner.dayplans import services, stalls
from planner.dayplans.api import EXAMPLE_DAY_PLAN
from planner.dayplans.models import DayPlan, DayPlanChunk

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(django_user_model):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("dana", password="pw-dana-12345"))
    return c


@pytest.fixture
def sent(monkeypatch):
    """The tasks the services send (nothing reaches a broker): ``[(name, args)]``."""
    out: list = []
    monkeypatch.setattr(services.celery_app, "send_task", lambda name, args, **kw: out.append((name, args)))
    return out


def _body(**change):
    return {**copy.deepcopy(EXAMPLE_DAY_PLAN), **change}


def test_a_chunk_sends_the_next_before_it_is_stored_and_a_row_stored_before_handovers_still_starts_it(
        client, sent, django_capture_on_commit_callbacks, monkeypatch):
    with django_capture_on_commit_callbacks(execute=True):
        pid = client.post("/api/day-plans/", _body(), format="json").json()["id"]
    seen = []  # chunk 0's row while chunk 1's message is sent: not stored yet, its handover written
    services_send = services.chunk_enqueue

    def enqueue(plan_id, index):
        seen.append(DayPlanChunk.objects.values_list("status", "handover").get(plan_id=plan_id, index=index - 1))
        services_send(plan_id, index)

    monkeypatch.setattr(services, "chunk_enqueue", enqueue)
    assert tasks.run_day_plan_chunk(pid, 0) == "done"
    monkeypatch.setattr(services, "chunk_enqueue", services_send)
    assert seen[0][0] == "running" and seen[0][1] is not None
    row = DayPlanChunk.objects.get(plan_id=pid, index=0)
    assert row.handover == row.result["handover"]
    DayPlanChunk.objects.filter(pk=row.pk).update(handover=None)  # as rows stored before the field existed
    assert tasks.run_day_plan_chunk(pid, 1) == "done"


def test_a_plan_runs_chunk_after_chunk_and_answers_as_the_simulator_does(client, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post("/api/day-plans/", _body(), format="json")
    assert r.status_code == 202, r.content
    out = r.json()
    assert out["status"] == "queued" and out["progress"]["chunks_total"] == 3 and out["progress"]["chunks_done"] == 0
    assert sent == [(services.CHUNK_TASK, [out["id"], 0])]  # only the first chunk: the others need its handover
    pid = out["id"]
    assert tasks.run_day_plan_chunk(pid, 1) == "waiting"
    for index in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            assert tasks.run_day_plan_chunk(pid, index) == "done"
        if index < 2:
            assert sent[-1] == (services.CHUNK_TASK, [pid, index + 1])  # the next chunk, once this one is stored
            mid = client.get(f"/api/day-plans/{pid}/").json()
            assert mid["status"] == "running" and mid["progress"]["chunks_done"] == index + 1
            assert mid["progress"]["hours_done"] == pytest.approx(300 * (index + 1) / 3600, abs=1e-3)
    assert tasks.run_day_plan_chunk(pid, 0) == "already-done"  # a second delivery changes nothing
    detail = client.get(f"/api/day-plans/{pid}/").json()
    assert detail["status"] == "done" and detail["progress"]["fraction"] == 1.0
    ans = detail["answer"]

    from simulator.day import answer_day, build_policy, simulate_day_in_chunks
    from simulator.engine import EngineConfig

    plan = DayPlan.objects.get(pk=pid)
    wl, _, _ = services.build_inputs(plan.snapshot)
    body = _body()
    policy = build_policy(body["policy"], wl.arrival, 45.0)
    res = simulate_day_in_chunks(wl, EngineConfig.from_dict(body["engine"]), policy, chunk_s=300, overlap_s=120,
                                 cold_start_s=45.0)
    want = answer_day(res, gpus_per_replica=1, price_per_gpu_hour=2.0, slo_ttft_s=2, slo_tpot_s=0.05)
    assert ans["gpu_hours"] == pytest.approx(want.gpu_hours) and ans["cost"] == pytest.approx(want.cost)
    assert ans["attainment"] == pytest.approx(want.attainment) and ans["requests"] == 3000
    assert ans["peak_replicas"] == want.peak_replicas > 1 and ans["partial"] is False
    assert ans["fixed_peak_gpu_hours"] == pytest.approx(want.fixed_peak_gpu_hours)
    assert len(ans["fleet"]["time_s"]) == len(res.samples) and max(ans["fleet"]["ready"]) == want.peak_replicas
    assert detail["words"][0].startswith(f"{want.gpu_hours:,.3g} GPU-hours (${want.cost:,.2f}) against")
    assert "met TTFT <= 2 s and TPOT <= 50 ms" in detail["words"][1]
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/day-plans/{pid}/export/?format=csv").content.decode())))
    assert [int(r["hour"]) for r in rows] == [h["hour"] for h in ans["hours"]]
    assert float(rows[0]["gpu_hours"]) == pytest.approx(ans["hours"][0]["gpu_hours"])
    exported = json.loads(client.get(f"/api/day-plans/{pid}/export/?format=json").content)
    assert exported["answer"]["gpu_hours"] == ans["gpu_hours"] and exported["inputs"]["cold_start_s"] == 45.0
    assert client.get(f"/api/day-plans/{pid}/export/?format=xml").json()["errors"]["format"]
    assert [p["id"] for p in client.get("/api/day-plans/").json()] == [pid]


def test_cancel_keeps_the_finished_chunks_and_answers_their_hours(client, sent, django_capture_on_commit_callbacks):
    pid = client.post("/api/day-plans/", _body(), format="json").json()["id"]
    assert tasks.run_day_plan_chunk(pid, 0) == "done"
    with django_capture_on_commit_callbacks(execute=True):
        c = client.post(f"/api/day-plans/{pid}/cancel/", {}, format="json").json()
    assert c["status"] == "cancelled" and c["progress"]["chunks_done"] == 1
    assert (services.ANSWER_TASK, [pid]) in sent
    assert tasks.run_day_plan_chunk(pid, 1) == "skipped"
    assert tasks.answer_day_plan(pid) == "answered"
    assert tasks.answer_day_plan(pid) == "unchanged"
    ans = client.get(f"/api/day-plans/{pid}/").json()["answer"]
    assert ans["partial"] is True and ans["chunks_done"] == 1
    chunk0 = DayPlanChunk.objects.get(plan_id=pid, index=0).result
    assert ans["requests"] == len(chunk0["request_index"]) > 0  # the first 300 s only
    assert max(ans["fleet"]["time_s"]) <= 300
    assert client.post(f"/api/day-plans/{pid}/cancel/", {"now": 1}, format="json").status_code == 400


def test_another_user_sees_no_plan(client, django_user_model):
    pid = client.post("/api/day-plans/", _body(), format="json").json()["id"]
    other = APIClient()
    other.force_authenticate(django_user_model.objects.create_user("eve", password="pw-eve-123456"))
    assert other.get(f"/api/day-plans/{pid}/").status_code == 404
    assert other.post(f"/api/day-plans/{pid}/cancel/", {}, format="json").status_code == 404
    assert other.get(f"/api/day-plans/{pid}/export/?format=json").status_code == 404
    assert APIClient().get("/api/day-plans/").status_code in (401, 403)


def test_a_dead_worker_loses_no_stored_chunk(client, sent):
    """The chunk a worker died in is sent again by the healer; a stored chunk is never run again, and a plan
    left between two chunks (its worker died after the commit) goes on with the next one."""
    pid = client.post("/api/day-plans/", _body(), format="json").json()["id"]
    assert tasks.run_day_plan_chunk(pid, 0) == "done"
    stored = DayPlanChunk.objects.get(plan_id=pid, index=0).result
    long_ago = timezone.now() - timedelta(minutes=10)
    DayPlanChunk.objects.filter(plan_id=pid, index=1).update(status="running", heartbeat_at=long_ago,
                                                             started_at=long_ago, attempts=1)
    sent.clear()
    assert stalls.chunks_heal() == 1 and sent == [(services.CHUNK_TASK, [pid, 1])]
    assert DayPlanChunk.objects.get(plan_id=pid, index=1).status == "pending"
    assert tasks.run_day_plan_chunk(pid, 1) == "done"
    assert DayPlanChunk.objects.get(plan_id=pid, index=0).result == stored  # untouched
    DayPlanChunk.objects.filter(plan_id=pid, index=1).update(finished_at=long_ago)  # chunk 2 was never sent
    sent.clear()
    assert stalls.chunks_heal() == 1 and sent == [(services.CHUNK_TASK, [pid, 2])]
    assert tasks.run_day_plan_chunk(pid, 2) == "done"
    assert DayPlan.objects.get(pk=pid).status == "done"
    sent.clear()
    assert stalls.chunks_heal() == 0 and sent == []


def test_the_schema_example_is_the_documented_file():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "day_plan_api.json"
    assert json.loads(path.read_text()) == EXAMPLE_DAY_PLAN


def test_a_plan_whose_worker_died_before_answering_is_answered(client, sent, monkeypatch):
    """Every chunk stored, the answer never written (the worker died between the two): the healer sends it."""
    pid = client.post("/api/day-plans/", _body(), format="json").json()["id"]
    with monkeypatch.context() as m:
        m.setattr(services, "plan_answer", lambda plan_id: "died")  # the worker dies before answering
        for index in range(3):
            assert tasks.run_day_plan_chunk(pid, index) == "done"
    assert DayPlan.objects.get(pk=pid).status == "running"
    DayPlanChunk.objects.filter(plan_id=pid).update(finished_at=timezone.now() - timedelta(minutes=10))
    sent.clear()
    assert stalls.chunks_heal() == 1 and sent == [(services.ANSWER_TASK, [pid])]
    assert tasks.answer_day_plan(pid) == "answered"
    assert DayPlan.objects.get(pk=pid).status == "done"
