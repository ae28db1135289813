"""Across the real endpoints: writes need a signed-in user, and another user's objects answer 403.

Complements each feature's own tests with one view over the whole API, read from the schema
so that a new write endpoint is covered the day it appears.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from rest_framework import status
from rest_framework.test import APIClient

from planner.accounts.services import api_token_create
from planner.models import Report, SweepChunk
from planner.sweeps import services

pytestmark = pytest.mark.django_db

#: Operations that compute without storing anything, so anonymous clients may call them.
PUBLIC_COMPUTATIONS = {("post", "/api/plan/")}
GPU = {"name": "My H100 (MIG 3g.40gb)", "vendor": "NVIDIA", "memory_gib": 39.5, "bandwidth_tbps": 1.675}
SWEEP = {
    "model": "llama-3-1-8b",
    "gpu": "h100-sxm5-80gb",
    "workload": {
        "spec": {
            "n": 30,
            "prompt": "normal:256,64",
            "output": "normal:32,8",
            "arrival": {"kind": "poisson", "rate": 4, "unit": "step"},
        },
        "seed": 0,
    },
    "axes": [{"param": "num_gpu_blocks", "values": [500, 2000]}],
}


def client_for(user) -> APIClient:
    _, raw = api_token_create(user=user, name="ownership test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return client


@pytest.fixture
def alice(user):
    return client_for(user)


@pytest.fixture
def bob(other_user):
    return client_for(other_user)


def write_operations():
    schema = Client().get("/api/schema/?format=json").json()
    for path, item in schema["paths"].items():
        for method in item:
            if method in {"post", "put", "patch", "delete"} and (method, path) not in PUBLIC_COMPUTATIONS:
                yield method, path


def test_every_write_refuses_anonymous_clients(anon_client):
    operations = list(write_operations())
    assert operations, "the schema lists no write operation"
    for method, path in operations:
        url = re.sub(r"\{[^}]+\}", "1", path)
        response = getattr(anon_client, method)(url, {}, format="json")
        assert response.status_code in (401, 403), f"{method.upper()} {path}: {response.status_code}"
        assert "errors" in response.json()


def test_another_users_gpu_profile_is_403(alice, bob):
    created = alice.post("/api/gpus/", GPU, format="json")
    assert created.status_code == status.HTTP_201_CREATED, created.content
    url = f"/api/gpus/{created.json()['slug']}/"
    assert bob.patch(url, {"price_per_hour": 0.01}, format="json").status_code == status.HTTP_403_FORBIDDEN
    assert bob.delete(url).status_code == status.HTTP_403_FORBIDDEN
    assert alice.patch(url, {"price_per_hour": 2.5}, format="json").status_code == status.HTTP_200_OK


@pytest.fixture
def finished_sweep(alice):
    response = alice.post("/api/sweeps/", SWEEP, format="json")
    assert response.status_code == status.HTTP_202_ACCEPTED, response.content
    sweep_id = response.json()["id"]
    for chunk in SweepChunk.objects.filter(sweep_id=sweep_id):
        services.chunk_run(sweep_id=sweep_id, index=chunk.index)
    return sweep_id


def test_another_users_sweep_is_403(alice, bob, finished_sweep):
    base = f"/api/sweeps/{finished_sweep}/"
    assert alice.get(base).status_code == status.HTTP_200_OK
    for response in (bob.get(base), bob.get(base + "results/"), bob.post(base + "cancel/")):
        assert response.status_code == status.HTTP_403_FORBIDDEN
        assert set(response.json()) == {"errors"}
    assert bob.get("/api/sweeps/").json()["results"] == []


def test_reports_are_public_to_read_and_only_their_owner_deletes(alice, bob, anon_client, finished_sweep):
    slug = Report.objects.get(sweep_id=finished_sweep).slug
    assert anon_client.get(f"/api/reports/{slug}/").status_code == status.HTTP_200_OK
    csv = anon_client.get(f"/api/reports/{slug}/?format=csv")
    assert csv.status_code == status.HTTP_200_OK and csv["Content-Type"].startswith("text/csv")
    assert bob.delete(f"/api/reports/{slug}/").status_code == status.HTTP_403_FORBIDDEN
    assert anon_client.delete(f"/api/reports/{slug}/").status_code in (401, 403)
    assert alice.delete(f"/api/reports/{slug}/").status_code == status.HTTP_204_NO_CONTENT
