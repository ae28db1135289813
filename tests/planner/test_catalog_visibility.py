"""Every planner read of the catalog goes through its one visibility rule (``gpuprofiles.selectors.visible_profiles``):
a user sees the catalog and their own private rows, never another user's (issue 29: five planner sites read the
tables directly)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.contrib.auth.models import AnonymousUser

from planner.calibration.forms import CalibrationForm
from planner.dayplans.forms import DayPlanForm
from planner.search.definition import priced_catalog_gpus
from planner.search.forms import SearchForm
from tests.gpuprofiles.factories import make_gpu, make_model, make_user

PLANNER = Path(__file__).resolve().parents[2] / "planner"


def _direct_reads(path: Path, root: Path = PLANNER.parent) -> list[str]:
    """``GpuProfile.objects`` / ``ModelProfile.objects`` written in ``path`` (line: name)."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Attribute) and node.attr == "objects" and isinstance(node.value, ast.Name)
                and node.value.id in {"GpuProfile", "ModelProfile"}):
            hits.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {node.value.id}.objects")
    return hits


def test_no_planner_module_reads_the_catalog_tables_directly():
    modules = [p for p in PLANNER.rglob("*.py") if "migrations" not in p.parts]
    assert len(modules) > 50
    hits = [h for p in modules for h in _direct_reads(p)]
    assert not hits, "read the catalog through gpuprofiles.selectors.visible_profiles:\n" + "\n".join(hits)


def test_the_scan_finds_a_direct_read(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gpuprofiles.models import GpuProfile\nrows = GpuProfile.objects.filter(owner=None)\n")
    assert _direct_reads(bad, tmp_path) == ["bad.py:2: GpuProfile.objects"]


@pytest.fixture
def private_rows(db):
    me, other = make_user(), make_user()
    return {"me": me, "mine": (make_model(me), make_gpu(me)), "theirs": (make_model(other), make_gpu(other))}


@pytest.mark.parametrize("form_class", [DayPlanForm, CalibrationForm])
def test_forms_offer_the_catalog_and_own_rows_only(private_rows, form_class):
    form = form_class(user=private_rows["me"])
    models = {slug for slug, _ in form.fields["model"].choices}
    gpus = {slug for slug, _ in form.fields["gpu"].choices}
    my_model, my_gpu = private_rows["mine"]
    their_model, their_gpu = private_rows["theirs"]
    assert "llama-3-1-8b" in models and "h100-sxm5-80gb" in gpus
    assert my_model.slug in models and my_gpu.slug in gpus
    assert their_model.slug not in models and their_gpu.slug not in gpus


@pytest.mark.parametrize("form_class", [DayPlanForm, CalibrationForm])
def test_forms_for_an_anonymous_user_offer_the_catalog(private_rows, form_class):
    form = form_class(user=AnonymousUser())
    models = {slug for slug, _ in form.fields["model"].choices}
    assert "llama-3-1-8b" in models
    assert not models & {m.slug for m, _ in (private_rows["mine"], private_rows["theirs"])}


def test_the_search_offers_catalog_rows_only(private_rows):
    my_gpu = private_rows["mine"][1]
    my_gpu.price_per_hour = 1.0
    my_gpu.save()
    priced = priced_catalog_gpus()
    assert "h100-sxm5-80gb" in priced and my_gpu.slug not in priced
    form = SearchForm(user=private_rows["me"])
    assert {slug for slug, _ in form.fields["gpus"].choices} == set(priced)
    assert private_rows["mine"][0].slug not in {slug for slug, _ in form.fields["model"].choices}
