"""A GPU profile's measured clock figures (issue 30): accepted and labelled, absurd ones a 400 naming the field.

Real database, real API (token auth) and the real page form; the figures reach the simulator through
``GpuProfile.to_spec``.
"""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.services import api_token_create
from gpuprofiles.models import GpuProfile

pytestmark = pytest.mark.django_db

GPU = {"name": "Lab card", "memory_gib": 44.0, "bandwidth_tbps": 0.864, "bf16_tflops": 362}


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("carol", password="correct horse battery staple")


@pytest.fixture
def api(user) -> APIClient:
    _, raw = api_token_create(user=user, name="physics test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return client


def test_a_profile_without_measurements_is_accepted_and_says_it_is_unmeasured(api):
    r = api.post("/api/gpus/", GPU, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["measured"] == {} and body["clock_physics"]["measured"] is False
    assert body["clock_physics"]["note"] == "timed from data-sheet peaks; not checked against a measurement"


def test_measured_figures_are_stored_used_and_sourced(api):
    r = api.post("/api/gpus/", {**GPU, "measured": {"bandwidth_efficiency": 0.81, "mfu": 0.58},
                                "measured_source": "vllm bench on our L40S, 2026-05"}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["clock_physics"] == {"measured": True, "note": "vllm bench on our L40S, 2026-05",
                                     "figures": {"bandwidth_efficiency": 0.81, "mfu": 0.58}, "sources": {}}
    spec = GpuProfile.objects.get(slug=body["slug"]).to_spec()
    assert spec.measured_figures == {"bandwidth_efficiency": 0.81, "mfu": 0.58}
    r = api.patch(f"/api/gpus/{body['slug']}/", {"measured": None}, format="json")
    assert r.status_code == 200 and r.json()["measured"] == {}


@pytest.mark.parametrize("measured, field", [({"mfu": 0}, "measured.mfu"), ({"mfu": 1.2}, "measured.mfu"),
                                             ({"kv_bandwidth_efficiency": -0.5}, "measured.kv_bandwidth_efficiency"),
                                             ({"warp_speed": 0.5}, "measured.warp_speed")])
def test_absurd_figures_are_a_400_naming_the_field_and_nothing_is_stored(api, measured, field):
    r = api.post("/api/gpus/", {**GPU, "measured": measured}, format="json")
    assert r.status_code == 400, r.content
    assert field in r.content.decode()
    assert not GpuProfile.objects.filter(name="Lab card").exists()


def test_nan_is_refused_before_it_reaches_the_clock(api, user):
    r = api.post("/api/gpus/", '{"name": "Lab card", "memory_gib": 44, "measured": {"mfu": NaN}}',
                 content_type="application/json")
    assert r.status_code == 400 and "NaN is not valid JSON" in r.content.decode()  # (the API's JSON parser)
    client = Client()
    client.force_login(user)
    page = client.post("/catalog/gpus/new/", {**GPU, "measured": '{"mfu": NaN}'}).content.decode()
    assert "NaN is not valid JSON" in page and not GpuProfile.objects.filter(name="Lab card").exists()


def test_a_catalog_gpu_shows_its_shipped_figures_with_their_sources():
    client = Client()
    body = client.get("/api/gpus/a100-sxm4-80gb/").json()
    phys = body["clock_physics"]
    assert phys["measured"] and "aiconfigurator" in phys["note"]
    assert 0.6 < phys["figures"]["bandwidth_efficiency"] < 0.8 and "ratio" in phys["sources"]["bandwidth_efficiency"]
    page = client.get("/catalog/gpus/a100-sxm4-80gb/").content.decode()
    assert "Step clock" in page and "bandwidth_efficiency" in page
    unmeasured = client.get("/catalog/gpus/l4/").content.decode()
    assert "timed from data-sheet peaks; not checked against a measurement" in unmeasured.lower()


def test_the_form_names_the_bad_figure_and_keeps_the_rest(user):
    client = Client()
    client.force_login(user)
    r = client.post("/catalog/gpus/new/", {**GPU, "measured": '{"mfu": 1.5}', "measured_source": "x"})
    assert r.status_code == 200
    page = r.content.decode()
    assert "measured.mfu: must be a fraction of the peak in (0, 1], got 1.5" in page
    assert 'value="Lab card"' in page and not GpuProfile.objects.filter(name="Lab card").exists()
    r = client.post("/catalog/gpus/new/", {**GPU, "measured": '{"mfu": 0.55}', "measured_source": "x"})
    assert r.status_code == 302
    assert GpuProfile.objects.get(name="Lab card").measured == {"mfu": 0.55}
