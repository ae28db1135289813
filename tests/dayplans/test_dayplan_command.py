"""``manage.py dayplan``: the day plan services without HTTP (create --inline, status, csv, cancel, bad input)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from planner.dayplans import services
from planner.dayplans.api import EXAMPLE_DAY_PLAN
from planner.dayplans.models import DayPlan

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("ops", password="pw-ops-123456")


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_inline_runs_every_chunk_and_writes_the_hours(owner, tmp_path, monkeypatch):
    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    body = tmp_path / "day.json"
    body.write_text(json.dumps(EXAMPLE_DAY_PLAN))
    out, err = run("dayplan", "create", str(body), "--user", "ops", "--inline", "--csv", str(tmp_path / "h.csv"),
                   "--json", str(tmp_path / "p.json"))
    plan = DayPlan.objects.get(pk=int(out.strip()))
    assert plan.status == "done" and "3/3 chunks" in err and "GPU-hours ($" in err
    rows = (tmp_path / "h.csv").read_text().splitlines()
    assert rows[0].startswith("hour,requests") and len(rows) == 1 + len(plan.answer["hours"])
    assert json.loads((tmp_path / "p.json").read_text())["answer"]["gpu_hours"] == plan.answer["gpu_hours"]
    status = json.loads(run("dayplan", "status", str(plan.pk))[0])
    assert status["progress"]["chunks_done"] == 3 and status["status"] == "done"
    assert run("dayplan", "csv", str(plan.pk))[0].splitlines() == rows


def test_bad_definition_and_cancel(owner, tmp_path, monkeypatch):
    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**EXAMPLE_DAY_PLAN, "policy": {"kind": "fixed", "replicas": 0}}))
    err = io.StringIO()
    with pytest.raises(CommandError, match="bad day plan definition"):
        call_command("dayplan", "create", str(bad), "--user", "ops", stderr=err, stdout=io.StringIO())
    assert "policy.replicas" in json.loads(err.getvalue())["errors"]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(EXAMPLE_DAY_PLAN))
    pid = run("dayplan", "create", str(good), "--user", "ops")[0].strip()
    with pytest.raises(CommandError, match="no answer yet"):
        run("dayplan", "csv", pid)
    assert services.chunk_run(plan_id=int(pid), index=0) == "done"
    assert run("dayplan", "cancel", pid)[0].strip() == f"day plan {pid}: cancelled"
    plan = DayPlan.objects.get(pk=int(pid))
    assert plan.answer["partial"] is True and plan.answer["chunks_done"] == 1  # the finished chunk's hours
    assert run("dayplan", "csv", pid)[0].startswith("hour,requests")
    with pytest.raises(CommandError, match="no user named"):
        run("dayplan", "create", str(good), "--user", "nobody")
