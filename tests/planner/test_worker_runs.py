"""Issue 37: simulations, replicas searches and calibrations priced over KVP_INLINE_MAX_SECONDS run on a worker; the request
answers 202 with a job to poll, whose result is the body the synchronous answer would have had.

The chunk runs here in the test's process through the job lifecycle (``services.chunk_run``, what the worker's
task calls; tests/integration/test_worker_runs.py runs it on a real worker)."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from planner.calibration.models import CalibrationProfile
from planner.runs import services
from planner.runs.models import Run

pytestmark = pytest.mark.django_db

SIMULATION = {"engine": {"num_gpu_blocks": 2000},
              "workload": {"spec": {"n": 50, "arrival": "poisson:4"}, "seed": 0}}  # priced at about 0.05 s
REPLICAS = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
            "workload": {"spec": {"n": 60, "prompt": "const:200", "output": "const:50",
                                  "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
            "slo": {"ttft_s": 0.5, "itl_s": 0.05}, "max_instances": 2}  # about 0.01 s
PAGE = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "rate": "20", "num_requests": "60",
        "max_instances": "2"}


@pytest.fixture
def user():
    return get_user_model().objects.create_user("rue", password="pw-123456789")


@pytest.fixture
def api(user):
    c = APIClient()
    c.force_authenticate(user)
    return c


def _job(response) -> dict:
    assert response.status_code == 202, response.content
    job = response.json()
    assert set(job) >= {"id", "kind", "status", "progress", "url", "result", "error"}
    assert job["status"] == "queued" and job["result"] is None and job["progress"]["fraction"] == 0.0
    assert response["Location"] == job["url"]
    return job


@pytest.mark.parametrize(("path", "body"), [("/api/simulations/", SIMULATION), ("/api/replicas/", REPLICAS)])
def test_a_run_over_the_bound_is_a_job_whose_result_is_the_synchronous_answer(api, settings, path, body):
    settings.KVP_INLINE_MAX_SECONDS = 100
    inline = api.post(path, body, format="json")
    assert inline.status_code == 200, inline.content
    settings.KVP_INLINE_MAX_SECONDS = 0
    job = _job(api.post(path, body, format="json"))
    assert job["url"].endswith(f"/api/runs/{job['id']}/")
    assert services.chunk_run(run_id=job["id"]) == "done"
    polled = api.get(f"/api/runs/{job['id']}/")
    assert polled.status_code == 200
    done = polled.json()
    assert done["status"] == "done" and done["progress"]["fraction"] == 1.0 and done["error"] is None
    assert done["result"] == inline.json()  # the same JSON, key for key


def test_under_the_bound_the_answer_stays_synchronous(api):
    assert api.post("/api/simulations/", SIMULATION, format="json").status_code == 200
    assert not Run.objects.exists()


def test_only_the_owner_polls_a_run(api, settings):
    settings.KVP_INLINE_MAX_SECONDS = 0
    job = _job(api.post("/api/simulations/", SIMULATION, format="json"))
    other = APIClient()
    other.force_authenticate(get_user_model().objects.create_user("sly", password="pw-123456789"))
    assert other.get(f"/api/runs/{job['id']}/").status_code == 404
    token = Run.objects.get(pk=job["id"]).token
    assert APIClient().get(f"/api/runs/{job['id']}/", {"token": token}).status_code == 404  # an owned run: no token
    assert other.post(f"/api/runs/{job['id']}/cancel/").status_code == 404
    cancelled = api.post(f"/api/runs/{job['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert services.chunk_run(run_id=job["id"]) == "skipped"


def test_a_run_refused_as_too_long_for_a_request_now_runs_on_a_worker(api):
    """Priced at about 29 s: over the old 10 s limit of a run inside a request, within the 4.5 min chunk limit."""
    body = {**REPLICAS, "workload": {"spec": {"n": 2000, "prompt": "const:4000", "output": "const:1000",
                                              "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0}}
    body.pop("max_instances")
    job = _job(api.post("/api/replicas/", body, format="json"))
    assert 20 < job["progress"]["price_s"] < 60
    assert job["progress"]["eta_s"] == pytest.approx(job["progress"]["price_s"], abs=0.1)


def test_the_queue_quota_counts_runs_and_sweeps(api, settings):
    settings.KVP_INLINE_MAX_SECONDS = 0
    settings.KVP_USER_QUEUE_SECONDS = 0.06
    _job(api.post("/api/simulations/", SIMULATION, format="json"))
    second = api.post("/api/simulations/", SIMULATION, format="json")
    assert second.status_code == 429
    assert "the limit per user is" in second.json()["errors"]["non_field_errors"][0]


def test_a_failed_run_says_why(api, settings, monkeypatch):
    settings.KVP_INLINE_MAX_SECONDS = 0
    job = _job(api.post("/api/simulations/", SIMULATION, format="json"))

    def refuse(*_a, **_k):
        raise ValueError("the engine refused it")

    monkeypatch.setattr("planner.sweeps.simulation._simulate_one", refuse)
    assert services.chunk_run(run_id=job["id"]) == "failed"
    out = api.get(f"/api/runs/{job['id']}/").json()
    assert out["status"] == "failed" and out["error"] == "the engine refused it" and out["result"] is None


def test_the_replicas_page_redirects_an_anonymous_run_to_its_progress_and_then_shows_the_answer(client, settings):
    settings.KVP_INLINE_MAX_SECONDS = 100
    inline = client.get("/replicas/", PAGE)
    assert inline.status_code == 200 and inline.context["answer"]
    settings.KVP_INLINE_MAX_SECONDS = 0
    r = client.get("/replicas/", PAGE)
    assert r.status_code == 302
    run = Run.objects.get()
    assert run.owner is None and run.kind == "replicas-page"
    assert r["Location"] == f"/replicas/runs/{run.pk}/?token={run.token}"
    assert client.get(f"/replicas/runs/{run.pk}/").status_code == 404  # the token is the key
    assert client.get(f"/api/runs/{run.pk}/").status_code == 404
    waiting = client.get(r["Location"])
    html = waiting.content.decode()
    assert waiting.status_code == 200 and waiting.context["answer"] is None
    assert 'id="run-progress"' in html and f'data-status-url="/api/runs/{run.pk}/?token={run.token}"' in html
    assert "js/run_progress.js" in html and 'http-equiv="refresh"' in html
    assert client.get(f"/api/runs/{run.pk}/", {"token": run.token}).json()["status"] == "queued"
    assert services.chunk_run(run_id=run.pk) == "done"
    done = client.get(r["Location"])
    assert done.context["answer"] == inline.context["answer"]
    assert re.search(r'id="replicas-answer">', done.content.decode())
    assert 'id="run-progress"' not in done.content.decode()


def test_the_replicas_page_shows_a_failed_run_s_error(client, settings, monkeypatch):
    settings.KVP_INLINE_MAX_SECONDS = 0
    location = client.get("/replicas/", PAGE)["Location"]

    def refuse(*_a, **_k):
        raise RuntimeError("worker trouble")

    monkeypatch.setattr("planner.sweeps.replicas._search", refuse)
    assert services.chunk_run(run_id=Run.objects.get().pk) == "failed"
    html = client.get(location).content.decode()
    assert re.search(r'id="run-error">RuntimeError: worker trouble</p>', html), html


# A vLLM bench result (tests/planner/test_calibration_api.py's BENCH: Qwen2.5-7B on one H100, 6 requests/s)
BENCH = {"model_id": "Qwen/Qwen2.5-7B-Instruct", "completed": 300, "request_rate": 6.0, "mean_ttft_ms": 26.7,
         "mean_itl_ms": 7.02, "mean_e2el_ms": 1772.0, "total_input_tokens": 300 * 751,
         "total_output_tokens": 300 * 251}
CALIBRATION = {"model": "qwen2-5-7b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 1,
               "deployment": {"max_num_batched_tokens": 2048, "max_num_seqs": 128, "max_model_len": 4096},
               "text": json.dumps(BENCH)}


@pytest.fixture
def small_fit(monkeypatch):
    monkeypatch.setattr("planner.calibration.services.FIT_MAX_REQUESTS", 30)
    monkeypatch.setattr("planner.calibration.services.FIT_MAX_EVALUATIONS", 3)


def test_a_calibration_over_the_bound_is_fitted_on_a_worker_with_the_synchronous_answer(api, settings, small_fit):
    settings.KVP_INLINE_MAX_SECONDS = 100
    inline = api.post("/api/calibrations/", {**CALIBRATION, "name": "here"}, format="json")
    assert inline.status_code == 201, inline.content
    settings.KVP_INLINE_MAX_SECONDS = 0
    job = _job(api.post("/api/calibrations/", {**CALIBRATION, "name": "there"}, format="json"))
    assert job["kind"] == "calibration" and not CalibrationProfile.objects.filter(name="there").exists()
    assert services.chunk_run(run_id=job["id"]) == "done"
    done = api.get(f"/api/runs/{job['id']}/").json()
    assert done["status"] == "done"
    row = CalibrationProfile.objects.get(name="there")
    assert done["result"] == api.get(f"/api/calibrations/{row.pk}/").json()
    same = {k: v for k, v in inline.json().items() if k not in ("id", "name", "created_at")}
    assert {k: v for k, v in done["result"].items() if k not in ("id", "name", "created_at")} == same


def test_the_calibration_page_shows_a_worker_s_fit_progress_then_the_calibration(user, client, settings, small_fit):
    settings.KVP_INLINE_MAX_SECONDS = 0
    client.force_login(user)
    upload = SimpleUploadedFile("bench.json", CALIBRATION["text"].encode())
    r = client.post("/calibrations/", {"name": "lab", "model": "qwen2-5-7b", "gpu": "h100-sxm5-80gb",
                                       "tensor_parallel_size": 1, "file": upload})
    run = Run.objects.get(kind="calibration")
    assert r.status_code == 302 and r["Location"] == f"/calibrations/runs/{run.pk}/"
    waiting = client.get(r["Location"])
    html = waiting.content.decode()
    assert waiting.status_code == 200 and 'id="run-progress"' in html
    assert f'data-status-url="/api/runs/{run.pk}/"' in html and "js/run_progress.js" in html
    assert services.chunk_run(run_id=run.pk) == "done"
    done = client.get(r["Location"])
    assert done.status_code == 302 and done["Location"] == f"/calibrations/{CalibrationProfile.objects.get().pk}/"


def _docs_run_examples() -> list[dict]:
    """The JSON blocks of docs/api.md's "Long runs: 202 and a job to poll"."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Long runs: 202 and a job to poll", 1)[1].split("\n## ", 1)[0]
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", section, re.S)]


def test_the_docs_202_and_poll_examples_are_what_the_api_answers(api):
    """docs/api.md's example: the same replicas search (priced at 28.7268 s), the same fields in the 202 and the
    poll."""
    queued, done = _docs_run_examples()
    body = {**REPLICAS, "workload": {"spec": {"n": 2000, "prompt": "const:4000", "output": "const:1000",
                                              "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0}}
    body.pop("max_instances")
    job = _job(api.post("/api/replicas/", body, format="json"))
    assert job["progress"]["price_s"] == queued["progress"]["price_s"] == done["progress"]["price_s"]
    assert set(job) == set(queued) == set(done) and set(job["progress"]) == set(queued["progress"])
    assert job["progress"] == {**queued["progress"]}
    assert (queued["status"], done["status"], done["progress"]["fraction"]) == ("queued", "done", 1.0)


def test_a_run_whose_worker_died_is_sent_again_and_shows_as_stalled(api, settings, monkeypatch):
    """The job lifecycle's healing (planner/runs/stalls.py): a running chunk whose heartbeat stopped goes back
    to pending with a new task id and is sent again; until then the poll says ``stalled``."""
    from datetime import timedelta

    from django.utils import timezone

    from planner.runs import stalls
    from planner.runs.models import RunChunk

    settings.KVP_INLINE_MAX_SECONDS = 0
    settings.KVP_STALL_AFTER_S = 15
    job = _job(api.post("/api/simulations/", SIMULATION, format="json"))
    long_ago = timezone.now() - timedelta(seconds=60)
    RunChunk.objects.filter(run_id=job["id"]).update(status="running", attempts=1, heartbeat_at=long_ago,
                                                     started_at=long_ago)
    Run.objects.filter(pk=job["id"]).update(status="running", started_at=long_ago)
    assert api.get(f"/api/runs/{job['id']}/").json()["progress"]["status"] == "stalled"
    old_task = RunChunk.objects.get(run_id=job["id"]).task_id
    sent = []
    monkeypatch.setattr(stalls, "send_task", lambda name, args, *, task_id: sent.append((name, args, task_id)))
    assert stalls.chunks_heal() == 1
    chunk = RunChunk.objects.get(run_id=job["id"])
    assert chunk.status == "pending" and chunk.task_id != old_task
    assert sent == [("planner.run_worker_run", [job["id"], 0], chunk.task_id)]
    assert services.chunk_run(run_id=job["id"]) == "done"
    assert api.get(f"/api/runs/{job['id']}/").json()["progress"]["attempts"] == 2


def test_the_replicas_page_s_xpyd_comparison_runs_on_the_worker_too(user, client, settings):
    """Signed in this time: the run page needs no token; the comparison rows equal the inline page's."""
    client.force_login(user)
    query = {**PAGE, "rate": "10", "prefill_instances": "1", "decode_instances": "2", "link_gbps": "25"}
    settings.KVP_INLINE_MAX_SECONDS = 100
    inline = client.get("/replicas/", query)
    assert inline.status_code == 200 and inline.context["disaggregated"]
    settings.KVP_INLINE_MAX_SECONDS = 0
    r = client.get("/replicas/", query)
    run = Run.objects.get()
    assert run.owner == user and r["Location"] == f"/replicas/runs/{run.pk}/"
    assert run.definition["disaggregated"]["decode_instances"] == 2
    assert services.chunk_run(run_id=run.pk) == "done"
    done = client.get(r["Location"])
    assert done.context["disaggregated"] == inline.context["disaggregated"]
    assert done.context["answer"] == inline.context["answer"]
