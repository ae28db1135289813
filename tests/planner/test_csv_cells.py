"""CSV downloads neutralise formula cells and keep numbers (issue 37 item 6; planner/csv_cells.py)."""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from planner.csv_cells import safe_cell
from planner.sweeps import exports

ROOT = Path(__file__).resolve().parents[2]
EVIL = '=HYPERLINK("http://example.com/x", "click")'


@pytest.mark.parametrize("text", [EVIL, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)", "\t=1", "\r=1", "-", "="])
def test_formula_text_gets_a_quote(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-0.5, -3, 0, 1e-9, "-1.5", "+3", "-2.5e-05", ".5", "H100", "", None, "a=b"])
def test_numbers_and_plain_text_are_left_alone(value):
    assert safe_cell(value) == value


def test_no_other_module_writes_csv():
    """Every CSV writer of the service is planner.csv_cells.csv_writer: no other module calls csv.writer or
    csv.DictWriter (a new download that did would be caught here)."""
    offenders = []
    for package in ("accounts", "config", "gpuprofiles", "planner"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "csv_cells.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "csv" \
                        and node.attr in ("writer", "DictWriter"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_sweep_report_csv():
    body = {"points": [{"index": 0, "params": {"routing": EVIL}, "metrics": {"delta_s": -0.25, "label": "-x"}}]}
    rows = list(csv.reader(io.StringIO(exports.to_csv(body))))
    assert rows[1] == ["0", "'" + EVIL, "delta_s", "-0.25", "s"]
    assert rows[2][-2] == "'-x"


@pytest.mark.django_db
def test_search_report_csv_with_a_gpu_named_like_a_formula(django_user_model):
    """The issue's case: a GPU profile named =HYPERLINK(...) in a search report's CSV."""
    from gpuprofiles import services as gpu_services
    from gpuprofiles.models import GpuProfile
    from planner import tasks
    from planner.search.models import Search

    user = django_user_model.objects.create_user("mallory", password="pw-mallory-123")
    copy = gpu_services.profile_copy(profile=GpuProfile.objects.get(slug="l4"), owner=user)
    GpuProfile.objects.filter(pk=copy.pk).update(name=EVIL)
    client = APIClient()
    client.force_authenticate(user)
    r = client.post("/api/searches/", {
        "model": "llama-3-1-8b",
        "workload": {"spec": {"n": 16, "prompt": "normal:256,64", "output": "normal:32,8",
                              "arrival": {"kind": "poisson", "rate": 2, "unit": "s"}}, "seed": 0},
        "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 5}]},
        "space": {"gpus": [copy.slug], "tensor_parallel": [1], "max_replicas": 1}}, format="json")
    assert r.status_code == 202, r.content
    search = Search.objects.get(pk=r.json()["id"])
    for index in range(search.num_chunks):
        tasks.run_search_chunk(search.pk, index)
    search.refresh_from_db()
    text = APIClient().get(f"/api/searches/reports/{search.slug}/?format=csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and {row["gpu"] for row in rows} == {"'" + EVIL}
