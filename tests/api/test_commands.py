"""``manage.py plan`` and ``manage.py sweep``: the API's services without HTTP."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from planner.models import Report, Sweep

pytestmark = pytest.mark.django_db

PLAN = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "max_model_len": 131072}
SWEEP = {
    "name": "cli sweep",
    "model": "llama-3-1-8b",
    "gpu": "h100-sxm5-80gb",
    "workload": {
        "spec": {
            "n": 40,
            "prompt": "normal:512,128",
            "output": "normal:64,16",
            "arrival": {"kind": "poisson", "rate": 4, "unit": "step"},
        },
        "seed": 0,
    },
    "axes": [{"param": "num_gpu_blocks", "values": [300, 3000]}],
}


def run(*args, stdin: str | None = None, monkeypatch=None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_plan_answers_exactly_what_the_api_answers():
    out, _ = run("plan", "--model", "llama-3-1-8b", "--gpu", "h100-sxm5-80gb", "--max-model-len", "131072")
    api = APIClient().post("/api/plan/", PLAN, format="json")
    assert api.status_code == 200
    assert json.loads(out) == api.json()


def test_plan_reads_a_json_body_and_options_override_it(tmp_path):
    body = tmp_path / "plan.json"
    body.write_text(json.dumps({**PLAN, "tensor_parallel_size": 1}))
    out, _ = run("plan", "--json", str(body), "--tp", "2")
    answer = json.loads(out)
    assert answer["tensor_parallel_size"] == 2 and answer["kv_cache_tokens"] > 0


def test_plan_summary_is_one_line():
    out, _ = run("plan", "--model", "llama-3-1-8b", "--gpu", "h100-sxm5-80gb", "--summary")
    assert out.count("\n") <= 1 and "tokens of KV cache" in out


def test_plan_bad_input_prints_the_error_shape_and_fails():
    err = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("plan", "--model", "no-such-model", "--gpu", "h100-sxm5-80gb", stdout=io.StringIO(), stderr=err)
    assert info.value.returncode == 1
    assert "model" in json.loads(err.getvalue())["errors"]


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("planner")


def test_sweep_create_inline_runs_to_a_report_and_csv(owner, tmp_path):
    definition = tmp_path / "sweep.json"
    definition.write_text(json.dumps(SWEEP))
    csv = tmp_path / "out.csv"
    out, err = run("sweep", "create", str(definition), "--user", "planner", "--inline", "--csv", str(csv))
    sweep = Sweep.objects.get(pk=int(out.strip()))
    assert sweep.status == Sweep.Status.DONE and sweep.owner == owner and sweep.points_done == 2
    report = Report.objects.get(sweep=sweep)
    assert f"/reports/{report.slug}/" in err and "2/2 points" in err
    assert csv.read_text().startswith("point,num_gpu_blocks,")


def test_sweep_create_without_inline_leaves_it_to_the_workers(owner, monkeypatch):
    out, _ = run("sweep", "create", "-", "--user", "planner", stdin=json.dumps(SWEEP), monkeypatch=monkeypatch)
    sweep = Sweep.objects.get(pk=int(out.strip()))
    assert sweep.status == Sweep.Status.QUEUED and sweep.chunks.count() >= 1


def test_sweep_status_and_cancel(owner, monkeypatch):
    out, _ = run("sweep", "create", "-", "--user", "planner", stdin=json.dumps(SWEEP), monkeypatch=monkeypatch)
    sweep_id = out.strip()
    status, _ = run("sweep", "status", sweep_id)
    assert json.loads(status)["progress"]["points_total"] == 2
    out, _ = run("sweep", "cancel", sweep_id)
    assert "cancelled" in out
    assert Sweep.objects.get(pk=int(sweep_id)).status == Sweep.Status.CANCELLED


def test_sweep_bad_definition_prints_the_error_shape(owner, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({**SWEEP, "model": "nope"})))
    with pytest.raises(CommandError):
        call_command("sweep", "create", "-", "--user", "planner", stdout=io.StringIO(), stderr=err)
    assert "model" in json.loads(err.getvalue())["errors"]
    assert not Sweep.objects.exists()


def test_sweep_for_an_unknown_user_or_sweep_fails_clearly(owner):
    with pytest.raises(CommandError, match="no user"):
        call_command("sweep", "create", "x.json", "--user", "nobody", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="no sweep 999"):
        call_command("sweep", "status", "999", stdout=io.StringIO())


def test_sweep_csv_before_the_report_exists_fails_clearly(owner, monkeypatch):
    out, _ = run("sweep", "create", "-", "--user", "planner", stdin=json.dumps(SWEEP), monkeypatch=monkeypatch)
    with pytest.raises(CommandError, match="no report yet"):
        call_command("sweep", "csv", out.strip(), stdout=io.StringIO())
