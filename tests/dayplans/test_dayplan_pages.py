"""The day plan pages without a browser: the form refuses every bad field at once, a valid one starts the plan,
and the detail page shows the progress, then the answer in words, both charts, the hours and the downloads."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from planner.dayplans import services
from planner.dayplans.models import DayPlan

pytestmark = pytest.mark.django_db

C_ENGINE = json.dumps({"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 128, "max_num_batched_tokens": 2048,
                       "enable_prefix_caching": True, "enable_chunked_prefill": True,
                       "step_time_model": {"base_s": 0.012, "per_token_s": 2.1e-05, "per_req_s": 0.0001}})


@pytest.fixture
def client(django_user_model):
    c = Client()
    c.force_login(django_user_model.objects.create_user("pat", password="pw-pat-123456"))
    return c


def _form(**change):
    data = {"name": "", "model": "", "gpu": "", "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
            "gpu_memory_utilization": 0.9, "engine": C_ENGINE, "hourly_rates": "1800", "prompt_mean": 256,
            "prompt_std": 64, "output_mean": 128, "output_std": 32, "trace": "", "trace_format": "auto",
            "policy": '{"kind": "hpa", "metric": "running", "target": 8, "max_replicas": 4}', "cold_start_s": 45,
            "weights_gib": "", "routing": "least-loaded", "gpus_per_replica": "", "price_per_gpu_hour": 2,
            "ttft_s": 2, "tpot_ms": 50, "chunk_s": 1800, "overlap_s": 300}
    return {**data, **change}


def test_the_form_shows_every_problem_at_once(client):
    r = client.post("/plans/day/", _form(policy='{"kind": "hpa", "min_replicas": 5, "max_replicas": 2}',
                                         hourly_rates="a,b", chunk_s=1801, cold_start_s=-4, price_per_gpu_hour=""))
    assert r.status_code == 200
    html = r.content.decode()
    form = r.context["form"]
    assert {"policy", "hourly_rates", "cold_start_s"} <= set(form.errors), form.errors
    assert "below min_replicas" in " ".join(form.errors["policy"])
    assert "chunk_s" in form.errors and "whole number of the policy" in " ".join(form.errors["chunk_s"])
    assert "Fields to fix" in html and not DayPlan.objects.exists()


def test_a_plan_from_the_form_runs_and_its_page_answers(client, monkeypatch):
    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    page = client.get("/plans/day/")
    assert page.status_code == 200 and 'aria-current="page">Day plans' in page.content.decode()
    assert 'href="/plans/day/"' in client.get("/replicas/").content.decode()
    r = client.post("/plans/day/", _form())
    assert r.status_code == 302, r.context["form"].errors if r.context else r
    plan = DayPlan.objects.get()
    assert r["Location"] == f"/plans/day/{plan.pk}/" and plan.num_chunks == 2
    assert plan.snapshot["day"]["requests"] == 1800 and plan.snapshot["day"]["price_per_gpu_hour"] == 2
    queued = client.get(r["Location"]).content.decode()
    assert 'role="progressbar"' in queued and "0</span> of 2 chunks simulated" in queued
    assert "Cancel the day plan" in queued and 'id="dayplan-answer"' not in queued
    services.dayplan_run_here(plan=plan)
    html = client.get(r["Location"]).content.decode()
    plan.refresh_from_db()
    assert plan.status == "done"
    assert "GPU-hours ($" in html and "fixed at the peak of" in html and "met TTFT &lt;= 2 s and TPOT &lt;= 50 ms" in html
    assert 'id="fig-fleet"' in html and 'id="fig-hours"' in html and "Time (hours from the start)" in html
    assert "Router queue (requests)" in html and "SLO attainment (%)" in html
    assert f"/plans/day/{plan.pk}/download.csv" in html
    csv = client.get(f"/plans/day/{plan.pk}/download.csv")
    assert csv.status_code == 200 and csv.content.decode().startswith("hour,requests,attainment")
    assert json.loads(client.get(f"/plans/day/{plan.pk}/download.json").content)["answer"]["requests"] == 1800
    assert client.get(f"/plans/day/{plan.pk}/download.xml").status_code == 404


def test_cancel_from_the_page(client, monkeypatch):
    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    client.post("/plans/day/", _form())
    plan = DayPlan.objects.get()
    assert services.chunk_run(plan_id=plan.pk, index=0) == "done"
    r = client.post(f"/plans/day/{plan.pk}/cancel/")
    assert r.status_code == 302
    plan.refresh_from_db()
    assert plan.status == "cancelled"
    html = client.get(f"/plans/day/{plan.pk}/").content.decode()
    assert "Cancel the day plan" not in html and "being answered by a worker" in html
    assert services.plan_answer(plan_id=plan.pk) == "answered"  # what the answer task does
    html = client.get(f"/plans/day/{plan.pk}/").content.decode()
    assert "The finished hours (cancelled after 1 of 2 chunks)" in html and 'id="fig-fleet"' in html
