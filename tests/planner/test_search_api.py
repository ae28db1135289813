"""POST /api/searches/ (issue 17): validation with fields, chunks per GPU run by the task, the public report."""

from __future__ import annotations

import csv
import io

import pytest
from rest_framework.test import APIClient

from planner import tasks
from planner.search.models import Search

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(django_user_model):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("sam", password="pw-sam-12345"))
    return c


def _body(rate=10, n=24, **extra):
    return {"model": "llama-3-1-8b",
            "workload": {"spec": {"n": n, "prompt": "normal:1024,256", "output": "normal:128,32",
                                  "arrival": {"kind": "poisson", "rate": rate, "unit": "s"}}, "seed": 0},
            "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5},
                                {"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
            "space": {"gpus": ["h100-sxm5-80gb", "l40s", "l4"], "tensor_parallel": [1], "precisions": ["bf16", "fp8"],
                      "max_replicas": 2}, **extra}


def _run_all(search_id: int) -> Search:
    s = Search.objects.get(pk=search_id)
    for index in range(s.num_chunks):  # what the workers do: the task, called with ids
        assert tasks.run_search_chunk(search_id, index) == "done"
    assert tasks.run_search_chunk(search_id, 0) == "already-done"
    return Search.objects.get(pk=search_id)


def test_search_runs_in_chunks_and_publishes_an_immutable_report(client):
    r = client.post("/api/searches/", _body(), format="json")
    assert r.status_code == 202, r.content
    out = r.json()
    assert out["status"] == "queued" and out["progress"]["candidates_total"] == 6
    assert len(out["progress"]["chunks"]) == 4  # one chunk per GPU type, then the seed check (check_seeds 3)
    s = _run_all(out["id"])
    detail = client.get(f"/api/searches/{s.pk}/").json()
    assert detail["status"] == "done" and detail["progress"]["fraction"] == 1.0
    best = detail["result"]["best"]
    assert best["status"] == "answer" and best["cost_per_hour"] > 0
    assert detail["result"]["message"].startswith("Cheapest deployment meeting TTFT p90 <= 500 ms")
    anon = APIClient()
    rep = anon.get(f"/api/searches/reports/{s.slug}/")
    assert rep.status_code == 200 and rep.json()["result"]["best"]["index"] == best["index"]
    rows = list(csv.DictReader(io.StringIO(anon.get(f"/api/searches/reports/{s.slug}/?format=csv").content.decode())))
    assert {row["status"] for row in rows} >= {"answer"}
    assert all(row["reason"] for row in rows)
    page = anon.get(f"/searches/r/{s.slug}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Cheapest deployment meeting" in html and 'id="fig-pareto"' in html
    assert anon.get(f"/searches/r/{s.slug}/download.html").status_code == 200


def test_cancel_skips_pending_chunks(client):
    out = client.post("/api/searches/", _body(), format="json").json()
    c = client.post(f"/api/searches/{out['id']}/cancel/").json()
    assert c["status"] == "cancelled"
    assert tasks.run_search_chunk(out["id"], 0) == "skipped"


@pytest.mark.parametrize("change, field", [
    ({"space": {"gpus": []}}, "space.gpus"),
    ({"space": {"gpus": ["no-such-gpu"]}}, "space.gpus[0]"),
    ({"space": {"tensor_parallel": []}}, "space.tensor_parallel"),
    ({"space": {"max_replicas": 10_000}}, "space.max_replicas"),
    ({"space": {"precisions": ["fp3"]}}, "space.precisions"),
    ({"space": {"routing": "telepathy"}}, "space.routing"),
    ({"space": {"tensor_parallel": "1,2"}}, "space.tensor_parallel"),
    ({"slo": {"targets": []}}, "slo.targets"),
    ({"slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": -1}]}}, "slo.max_s"),
    ({"slo": None}, "slo"),
    ({"model": None}, "model"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_input_is_a_400_naming_the_field(client, change, field):
    r = client.post("/api/searches/", {**_body(), **change}, format="json")
    assert r.status_code == 400, r.content
    assert field in r.json()["errors"], r.json()


def test_rate_zero_and_absurd_sizes_are_400s(client):
    r = client.post("/api/searches/", _body(rate=0), format="json")
    assert r.status_code == 400 and any(k.startswith("workload.spec") for k in r.json()["errors"])
    r = client.post("/api/searches/", _body(n=10_000_000), format="json")
    assert r.status_code == 400 and any(k.startswith("workload.spec") for k in r.json()["errors"])
    steps = _body()
    steps["workload"]["spec"]["arrival"]["unit"] = "step"
    r = client.post("/api/searches/", steps, format="json")
    assert r.status_code == 400 and "workload.spec.arrival" in r.json()["errors"]
    r = client.post("/api/searches/", [1, 2], format="json")
    assert r.status_code == 400


def test_a_search_whose_heaviest_shape_is_over_the_limits_is_a_400_stating_them(client, settings):
    """Issue 23: a search is priced before it is queued; its heaviest shape's replicas search must fit one chunk."""
    assert client.post("/api/searches/", _body(), format="json").status_code == 202
    settings.KVP_CHUNK_MAX_SECONDS = 0.01
    r = client.post("/api/searches/", _body(), format="json")
    assert r.status_code == 400, r.content
    (msg,) = r.json()["errors"]["workload"]
    assert msg.startswith("One deployment shape of this search is estimated to need about ") and \
        "(the limit is 0.0 s)" in msg and "space.max_replicas" in msg
    settings.KVP_CHUNK_MAX_SECONDS = 300
    settings.KVP_RUN_MAX_BYTES = 2**20
    r = client.post("/api/searches/", _body(), format="json")
    assert r.status_code == 400 and "of memory (the limit is 1.0 MiB)" in r.json()["errors"]["workload"][0]
    assert Search.objects.count() == 1


def test_an_slo_nobody_meets_says_so_and_names_the_closest(client):
    body = _body(rate=40, n=30)
    body["slo"] = {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.12}]}
    body["space"] = {"gpus": ["l40s"], "tensor_parallel": [1], "max_replicas": 2}
    s = _run_all(client.post("/api/searches/", body, format="json").json()["id"])
    msg = s.result["message"]
    assert s.result["best"] is None
    assert msg.startswith("No deployment in this space meets TTFT p90 <= 120 ms; the closest is 2 replica(s)")


def test_other_users_cannot_see_a_running_search(client, django_user_model):
    out = client.post("/api/searches/", _body(), format="json").json()
    other = APIClient()
    other.force_authenticate(django_user_model.objects.create_user("eve", password="pw-eve-12345"))
    assert other.get(f"/api/searches/{out['id']}/").status_code == 404
    assert APIClient().get(f"/api/searches/{out['id']}/").status_code in (401, 403)


def test_manage_py_search_inline_prints_the_answer_and_the_report(django_user_model, tmp_path, capsys):
    from django.core.management import call_command

    django_user_model.objects.create_user("mo", password="pw-mo-12345")
    path = tmp_path / "search.json"
    import json

    path.write_text(json.dumps(_body()))
    call_command("search", str(path), "--user", "mo", "--inline", "--csv", str(tmp_path / "out.csv"))
    out = capsys.readouterr().out
    assert out.startswith("Cheapest deployment meeting TTFT p90 <= 500 ms")
    assert "report: /searches/r/" in out
    assert (tmp_path / "out.csv").read_text().startswith("candidate,status,")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**_body(), "space": {"gpus": []}}))
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="invalid"):
        call_command("search", str(bad), "--user", "mo")


def test_search_pages_form_progress_and_errors(client, django_user_model):
    from django.test import Client

    web = Client()
    web.force_login(django_user_model.objects.create_user("pat", password="pw-pat-12345"))
    page = web.get("/searches/")
    assert page.status_code == 200 and 'name="ttft_ms"' in page.content.decode()
    form = {"model": "llama-3-1-8b", "gpus": ["l40s", "l4"], "rate": "10", "duration_s": "3", "prompt_mean": "1024",
            "prompt_std": "256", "output_mean": "128", "output_std": "32", "ttft_pct": "p90", "itl_pct": "p90",
            "e2e_pct": "p90", "tensor_parallel": "1", "precisions": ["bf16"], "max_num_seqs": "256",
            "max_replicas": "2"}
    no_target = web.post("/searches/", form)
    assert no_target.status_code == 200 and "Give at least one latency target" in no_target.content.decode()
    bad_tp = web.post("/searches/", {**form, "ttft_ms": "500", "tensor_parallel": "two"})
    assert bad_tp.status_code == 200 and "whole numbers separated by commas" in bad_tp.content.decode()
    ok = web.post("/searches/", {**form, "ttft_ms": "500"})
    assert ok.status_code == 302
    detail = web.get(ok["Location"])
    assert detail.status_code == 200 and "deployment shapes settled" in detail.content.decode()
    search = Search.objects.get(owner__username="pat")
    assert search.snapshot["slo"]["targets"] == [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]
    _run_all(search.pk)
    assert web.get(ok["Location"])["Location"] == f"/searches/r/{search.slug}/"


def test_search_page_takes_a_shared_prefix_pp_kv_dtype_and_router(client, django_user_model):
    """The page offers what the API takes (issue 17 item 1): prefix sharing, PP degrees, KV cache dtype,
    the router policy; they reach the search's snapshot."""
    from django.test import Client

    from planner.search.definition import build_space, build_workload

    web = Client()
    web.force_login(django_user_model.objects.create_user("kim", password="pw-kim-12345"))
    page = web.get("/searches/").content.decode()
    assert all(f'name="{f}"' in page for f in ("prefix_tokens", "pipeline_parallel", "kv_cache_dtypes", "routing"))
    form = {"model": "llama-3-1-8b", "gpus": ["l40s"], "rate": "10", "duration_s": "4", "prompt_mean": "1024",
            "prompt_std": "256", "output_mean": "128", "output_std": "32", "ttft_ms": "500", "ttft_pct": "p90",
            "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1", "pipeline_parallel": "1",
            "precisions": ["bf16"], "kv_cache_dtypes": ["fp8"], "max_num_seqs": "256", "max_replicas": "2",
            "routing": "least-loaded", "prefix_tokens": "300", "prefix_pct": "50"}
    bad_pp = web.post("/searches/", {**form, "pipeline_parallel": "one"})
    assert bad_pp.status_code == 200 and "whole numbers separated by commas" in bad_pp.content.decode()
    assert web.post("/searches/", form).status_code == 302
    search = Search.objects.get(owner__username="kim")
    space = build_space(search.snapshot)
    assert space.kv_cache_dtypes == ("fp8",) and space.routing == "least-loaded" and space.pipeline_parallel == (1,)
    assert space.sampling is None  # the select left at its default: the model's own path
    wl = build_workload(search.snapshot)
    assert wl.n == 40 and int((wl.prefix_id >= 0).sum()) == 20 and int(wl.prompt_len.min()) > 300


def test_a_user_past_the_search_quota_gets_a_429_in_words_and_others_are_not_held(client, settings,
                                                                                   django_user_model):
    settings.KVP_USER_MAX_SEARCHES = 2
    for _ in range(2):
        assert client.post("/api/searches/", _body(), format="json").status_code == 202
    r = client.post("/api/searches/", _body(), format="json")
    assert r.status_code == 429, r.content
    assert r.json()["errors"]["non_field_errors"] == [
        "You have 2 deployment searches queued or running; the limit per user is 2. "
        "Wait for one to finish or cancel it."]
    other = APIClient()
    other.force_authenticate(django_user_model.objects.create_user("kim", password="pw-kim-12345"))
    assert other.post("/api/searches/", _body(), format="json").status_code == 202
    Search.objects.filter(owner__username="sam").update(status=Search.Status.CANCELLED)
    assert client.post("/api/searches/", _body(), format="json").status_code == 202


def test_search_page_takes_the_requests_sampler_path(client, django_user_model):
    """The page's Sampling select reaches the search's space (``space.sampling``); a value that is no path is an
    error on that field and no search is made."""
    from django.test import Client

    from planner.search.definition import build_space

    web = Client()
    web.force_login(django_user_model.objects.create_user("sampling-pat", password="pw-sam-12345"))
    assert 'name="sampling"' in web.get("/searches/").content.decode()
    form = {"model": "llama-3-1-8b", "gpus": ["l40s"], "rate": "10", "duration_s": "3", "prompt_mean": "1024",
            "prompt_std": "256", "output_mean": "128", "output_std": "32", "ttft_ms": "500", "ttft_pct": "p90",
            "itl_pct": "p90", "e2e_pct": "p90", "tensor_parallel": "1", "precisions": ["bf16"], "max_num_seqs": "256",
            "max_replicas": "2"}
    bad = web.post("/searches/", {**form, "sampling": "beam"})
    assert bad.status_code == 200 and "beam is not a sampler path" in bad.content.decode()
    assert not Search.objects.filter(owner__username="sampling-pat").exists()
    assert web.post("/searches/", {**form, "sampling": "greedy"}).status_code == 302
    assert build_space(Search.objects.get(owner__username="sampling-pat").snapshot).sampling == "greedy"


@pytest.mark.parametrize("prompt, max_model_len, field, words", [
    ("const:200000", None, "workload", "Llama 3.1 8B's 131,072 positions"),
    ("const:4000", 4096, "space.max_model_len", "4,128 tokens, prompt + output) is longer than max_model_len"),
    ("const:1000", 200_000, "space.max_model_len", "200,000 tokens is beyond Llama 3.1 8B's 131,072 positions"),
])
def test_requests_longer_than_the_context_are_refused_by_the_rule_replicas_and_sizing_share(
        client, prompt, max_model_len, field, words):
    body = _body()
    body["workload"]["spec"]["prompt"] = prompt
    body["workload"]["spec"]["output"] = "const:128"
    if max_model_len:
        body["space"]["max_model_len"] = max_model_len
    r = client.post("/api/searches/", body, format="json")
    assert r.status_code == 400, r.content
    assert any(words in m for m in r.json()["errors"][field]), r.json()
