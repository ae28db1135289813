"""A calibration is chosen from the forms that time a deployment (issue 33 item 8: before, only a JSON hint
named it): the replicas, sweep and search forms list the signed-in user's calibrations in a "Calibration"
select, the choice reaches the definition and the answer says which clock timed it; with none, the forms link
to /calibrations/ instead. (Sizing has no clock: it needs none.)
"""

from __future__ import annotations

import re
from dataclasses import asdict

import pytest
from playwright.sync_api import expect

from simulator.clock.cost_model import RooflineCoefficients

#: A calibration that found prefill far slower than the default clock (MFU 0.08 against the default's).
SLOW_PREFILL = {**asdict(RooflineCoefficients()), "mfu": 0.08}


@pytest.fixture
def calibration(user, catalog):
    from gpuprofiles.models import GpuProfile, ModelProfile
    from planner.calibration.models import CalibrationProfile

    return CalibrationProfile.objects.create(
        owner=user, name="lab H100", model=ModelProfile.objects.get(slug="llama-3-1-8b", owner=None),
        gpu=GpuProfile.objects.get(slug="h100-sxm5-80gb", owner=None), source_format="csv",
        coefficients=SLOW_PREFILL, fit={"fitted": {"mfu": 0.08}})


REPLICAS = "/replicas/?model=llama-3-1-8b&gpu=h100-sxm5-80gb&tensor_parallel_size=1&rate=8&num_requests=60" \
           "&ttft_ms=2000&itl_ms=100&max_instances=4"


def _first_ttft(page) -> float:
    return float(page.locator("table.points tbody tr").first.locator("td").first.inner_text().replace(",", ""))


def test_replicas_form_uses_the_chosen_calibration(signed_in_page, calibration):
    page = signed_in_page
    page.goto(REPLICAS)
    default_ttft = _first_ttft(page)
    select = page.get_by_label("Calibration")
    expect(select.locator("option")).to_have_text(["None: the model's own roofline clock",
                                                   "lab H100 — Llama 3.1 8B on 1× H100 SXM5 80GB"])
    select.select_option(label="lab H100 — Llama 3.1 8B on 1× H100 SXM5 80GB")
    page.get_by_role("button", name="Find replicas").click()
    expect(page).to_have_url(re.compile(rf"calibration={calibration.pk}"))
    expect(page.locator("#replicas-calibration")).to_have_text("lab H100")
    assert _first_ttft(page) > default_ttft, "the calibration's slower prefill times the answer"
    expect(page.get_by_label("Calibration")).to_have_value(str(calibration.pk))  # kept in the form


def test_sweep_form_puts_the_calibration_in_the_definition(signed_in_page, calibration, monkeypatch):
    from planner.models import Sweep
    from planner.sweeps import services

    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    page = signed_in_page
    page.goto("/sweeps/new/")
    page.get_by_label("Model").select_option(value="llama-3-1-8b")
    page.get_by_label("GPU", exact=True).select_option(value="h100-sxm5-80gb")
    page.get_by_label("Calibration").select_option(value=str(calibration.pk))
    page.get_by_role("button", name="Start sweep").click()
    expect(page).to_have_url(re.compile(r"/sweeps/\d+/$"))
    sweep = Sweep.objects.get()
    assert sweep.definition["calibration"] == calibration.pk
    assert sweep.snapshot["coefficients"]["mfu"] == 0.08


def test_search_form_times_the_calibrated_gpu_with_it(signed_in_page, calibration, monkeypatch):
    from planner.models import Search
    from planner.search import services

    monkeypatch.setattr(services, "search_enqueue", lambda search_id: None)
    page = signed_in_page
    page.goto("/searches/")
    page.get_by_label("Calibration").select_option(value=str(calibration.pk))
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"/searches/\d+/$"))
    snapshot = Search.objects.get().snapshot
    assert snapshot["calibration"]["name"] == "lab H100" and snapshot["calibration"]["gpu"] == "H100 SXM5 80GB"


def test_without_a_calibration_the_forms_link_to_making_one(signed_in_page):
    page = signed_in_page
    for path in ("/replicas/", "/sweeps/new/", "/searches/"):
        page.goto(path)
        expect(page.get_by_label("Calibration")).to_have_count(0)
        expect(page.locator("#no-calibration").get_by_role("link")).to_have_attribute("href", "/calibrations/")
