"""A deployment search takes one of the user's calibrations (``"calibration": id``, the search form's select):
its coefficients time the shapes on the GPU it was fitted on, the other GPUs keep the defaults; a calibration
fitted on a GPU the search does not consider is refused at the field."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from django.contrib.auth import get_user_model

from gpuprofiles.models import GpuProfile, ModelProfile
from planner.calibration.models import CalibrationProfile
from planner.search import definition
from planner.sweeps.definition import DefinitionError
from simulator.clock.cost_model import RooflineCoefficients
from tests.search_definitions import two_gpu_search

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return get_user_model().objects.create(username="calibrated")


def _calibration(owner, gpu_slug: str) -> CalibrationProfile:
    return CalibrationProfile.objects.create(
        owner=owner, name=f"on {gpu_slug}", model=ModelProfile.objects.get(slug="llama-3-1-8b", owner=None),
        gpu=GpuProfile.objects.get(slug=gpu_slug, owner=None), source_format="csv",
        coefficients={**asdict(RooflineCoefficients()), "mfu": 0.08}, fit={"fitted": {"mfu": 0.08}})


def test_the_calibration_times_the_shapes_on_its_gpu_only(owner):
    cal = _calibration(owner, "h100-sxm5-80gb")
    norm, snapshot, _ = definition.validate({**two_gpu_search(), "calibration": cal.pk}, owner=owner)
    assert norm["calibration"] == cal.pk and snapshot["calibration"]["gpu"] == "H100 SXM5 80GB"
    space = definition.build_space(snapshot)
    h100, l40s = space.gpus
    assert space.coefficients_for(h100)["mfu"] == 0.08
    assert space.coefficients_for(l40s) is None, "the other GPU keeps the model's own clock"


def test_a_calibration_on_a_gpu_the_search_leaves_out_is_refused(owner):
    cal = _calibration(owner, "a100-sxm4-80gb")
    with pytest.raises(DefinitionError) as exc:
        definition.validate({**two_gpu_search(), "calibration": cal.pk}, owner=owner)
    assert "fitted on A100" in exc.value.errors["calibration"][0]
    with pytest.raises(DefinitionError) as exc:
        definition.validate({**two_gpu_search(), "calibration": 999_999}, owner=owner)
    assert "no calibration 999999 among yours" in exc.value.errors["calibration"][0]
