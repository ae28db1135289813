"""/api/simulations/: one synchronous capped simulation; too large -> 400 pointing to sweeps."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    c = APIClient()
    c.force_authenticate(get_user_model().objects.create_user("sim", password="pw-123456789"))
    return c


def test_small_simulation_answers_with_metrics_and_series(client):
    r = client.post("/api/simulations/", {"engine": {"num_gpu_blocks": 300},
                                          "workload": {"spec": {"n": 30, "arrival": "poisson:2"}, "seed": 2}},
                    format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["metrics"]["requests"] == 30 and body["metrics"]["finished"] == 30
    assert body["totals"]["num_steps"] > 0 and body["config"]["num_gpu_blocks"] == 300
    assert len(body["series"]["kv_usage"]) <= 120


def test_too_large_points_to_sweeps(client, settings):
    settings.KVP_SIMULATION_MAX_REQUESTS = 100
    r = client.post("/api/simulations/", {"engine": {"num_gpu_blocks": 300}, "workload": {"spec": {"n": 101}}},
                    format="json")
    assert r.status_code == 400
    msg = r.json()["errors"]["workload"][0]
    assert "/api/sweeps/" in msg and "100" in msg


@pytest.mark.parametrize("payload", [
    {}, {"engine": {"num_gpu_blocks": 1}, "workload": {"spec": {"n": 5}}}, "text",
    {"engine": {"num_gpu_blocks": 100}, "workload": {"trace": "garbage,,\n1", "format": "csv"}},
    {"engine": {"num_gpu_blocks": 100}, "workload": {"spec": {"n": 5}}, "axes": [{"param": "rate"}]},
])
def test_bad_input_is_400_never_500(client, payload):
    r = client.post("/api/simulations/", payload, format="json")
    assert r.status_code == 400 and "errors" in r.json()


def test_sign_in_required():
    assert APIClient().post("/api/simulations/", {}, format="json").status_code in (401, 403)
