"""A report's findings (cliff, operating point, replicas, saturation, headline) are computed once, when the
report is made, and stored with it (issue 29 item 5: one report's cliff was detected three times); a report
made before they were stored still opens, its findings computed from its snapshot then and stored.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from planner.models import Report
from planner.sweeps import advice, findings, services

pytestmark = pytest.mark.django_db

#: A KV-blocks grid with a preemption cliff inside it (the same shape as tests/planner/test_reports.py's).
DEF = {"engine": {"num_gpu_blocks": 600, "max_num_seqs": 16},
       "workload": {"spec": {"n": 20, "prompt": "normal:100,20", "output": "normal:30,5"}, "seed": 1},
       "axes": [{"param": "num_gpu_blocks", "values": [40, 80, 160, 320, 600]}]}


@pytest.fixture
def owner():
    return get_user_model().objects.create(username="finder")


@pytest.fixture
def counted(monkeypatch):
    """How many times each finding's function runs (wrapped where the findings and the advice call it)."""
    calls = {"detect_cliff": 0, "operating_point": 0, "replicas_for_rate": 0, "detect_saturation": 0}
    for module in (findings, advice):
        for name in calls:
            real = getattr(module, name, None)
            if real is None:
                continue

            def wrapped(*args, _real=real, _name=name, **kwargs):
                calls[_name] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(module, name, wrapped)
    return calls


def _report(owner, monkeypatch) -> Report:
    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    sweep = services.sweep_create(owner=owner, definition=DEF)
    for chunk in sweep.chunks.all():
        services.chunk_run(sweep_id=sweep.pk, index=chunk.index)
    return Report.objects.get(sweep=sweep)


def test_each_finding_is_computed_once_and_stored(owner, monkeypatch, counted):
    report = _report(owner, monkeypatch)
    assert counted == {"detect_cliff": 1, "operating_point": 1, "replicas_for_rate": 1, "detect_saturation": 1}
    stored = Report.objects.get(pk=report.pk).findings
    assert stored["version"] == findings.FINDINGS_VERSION
    assert stored["cliff"]["param"] == "num_gpu_blocks" and stored["cliff"]["x"] in (80, 160, 320, 600)
    assert stored["headline"]["text"].startswith("Below about")
    assert stored["operating_point"] in {p["index"] for p in report.snapshot["points"]}
    # the page, the downloads and the figures read them: nothing is detected again
    client = Client()
    page = client.get(f"/reports/{report.slug}/").content.decode()
    assert stored["headline"]["text"] in page
    for fmt in ("csv", "json", "html"):
        assert client.get(f"/reports/{report.slug}/download.{fmt}").status_code == 200
    assert counted == {"detect_cliff": 1, "operating_point": 1, "replicas_for_rate": 1, "detect_saturation": 1}
    doc = json.loads(client.get(f"/reports/{report.slug}/download.json").content)
    assert doc["findings"] == stored


def test_a_report_made_before_findings_were_stored_still_opens(owner, monkeypatch):
    report = _report(owner, monkeypatch)
    page_then = Client().get(f"/reports/{report.slug}/").content.decode()
    headline = report.findings["headline"]["text"]
    Report.objects.filter(pk=report.pk).update(findings=None, figures=None)  # as a report of an older version
    response = Client().get(f"/reports/{report.slug}/")
    assert response.status_code == 200
    assert headline in response.content.decode() and headline in page_then
    again = Report.objects.get(pk=report.pk)
    assert again.findings == report.findings, "computed from the snapshot by the same functions, then stored"
    assert again.figures is not None


def test_a_grid_without_a_cliff_looks_for_it_once(owner, monkeypatch, counted):
    # every point has room for all 16 sequences: no preemptions, no cliff (its headline says so)
    monkeypatch.setitem(DEF, "axes", [{"param": "num_gpu_blocks", "values": [320, 600]}])
    report = _report(owner, monkeypatch)
    stored = Report.objects.get(pk=report.pk).findings
    assert stored["cliff"] is None and stored["headline"]["text"]
    assert counted["detect_cliff"] == 1  # (the headline's sentence looked for it a second time)
