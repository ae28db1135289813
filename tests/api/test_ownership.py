"""Across the real endpoints: writes need a signed-in user; another user's sweeps answer 403 and another
user's private profiles 404, whether read, copied or planned with (plan, sweep, simulation, replicas).

Complements each feature's own tests with one view over the whole API, read from the schema
so that a new write endpoint is covered the day it appears.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework import status
from rest_framework.test import APIClient

from accounts.services import api_token_create
from gpuprofiles.models import GpuProfile, ModelProfile
from planner.models import Report, Sweep, SweepChunk
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


def test_another_users_gpu_profile_is_404(alice, bob):
    created = alice.post("/api/gpus/", GPU, format="json")
    assert created.status_code == status.HTTP_201_CREATED, created.content
    url = f"/api/gpus/{created.json()['slug']}/"
    assert bob.get(url).status_code == status.HTTP_404_NOT_FOUND
    assert bob.patch(url, {"price_per_hour": 0.01}, format="json").status_code == status.HTTP_404_NOT_FOUND
    assert bob.delete(url).status_code == status.HTTP_404_NOT_FOUND
    assert alice.patch(url, {"price_per_hour": 2.5}, format="json").status_code == status.HTTP_200_OK


@pytest.mark.parametrize("kind", ["gpus", "models"])
def test_copying_another_users_private_profile_is_404(alice, bob, kind):
    source = "h100-sxm5-80gb" if kind == "gpus" else "llama-3-1-8b"
    private = alice.post(f"/api/{kind}/{source}/copy/").json()["slug"]
    response = bob.post(f"/api/{kind}/{private}/copy/")
    assert response.status_code == status.HTTP_404_NOT_FOUND
    assert response.json() == bob.post(f"/api/{kind}/no-such-{kind}/copy/").json()
    assert bob.get(f"/api/{kind}/?scope=mine").json()["results"] == []
    assert alice.post(f"/api/{kind}/{private}/copy/").status_code == status.HTTP_201_CREATED


@pytest.fixture
def alices_private(alice) -> dict:
    """Slugs and ids of Alice's private copies of the catalog's Llama 3.1 8B and H100 SXM."""
    model = alice.post("/api/models/llama-3-1-8b/copy/").json()
    gpu = alice.post("/api/gpus/h100-sxm5-80gb/copy/").json()
    return {"model": model["slug"], "gpu": gpu["slug"],
            "model_id": ModelProfile.objects.get(slug=model["slug"]).pk,
            "gpu_id": GpuProfile.objects.get(slug=gpu["slug"]).pk}


def derived_requests(refs: dict) -> dict:
    """Each operation that derives from a model and a GPU, given ``refs`` as the model and the GPU."""
    workload = {"spec": {"n": 20, "prompt": "normal:256,64", "output": "normal:32,8",
                         "arrival": {"kind": "poisson", "rate": 4, "unit": "s"}}, "seed": 0}
    return {
        "/api/plan/": {**refs, "max_model_len": 4096},
        "/api/sweeps/": {**SWEEP, **refs},
        "/api/simulations/": {**refs, "workload": workload},
        "/api/replicas/": {**refs, "workload": workload, "slo": {"ttft_s": 0.5, "itl_s": 0.05},
                           "max_instances": 2},
    }


@pytest.mark.parametrize("field", ["model", "gpu"])
def test_planning_with_another_users_private_profile_is_404_like_an_unknown_slug(alice, bob, alices_private,
                                                                                   field):
    catalog = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}
    hers = derived_requests({**catalog, field: alices_private[field]})
    unknown = derived_requests({**catalog, field: "no-such-profile"})
    for url, body in hers.items():
        response = bob.post(url, body, format="json")
        assert response.status_code == status.HTTP_404_NOT_FOUND, (url, response.content)
        messages = response.json()["errors"][field]
        assert alices_private[field] in messages[0] and "your profiles" in messages[0]
        missing = bob.post(url, unknown[url], format="json")
        assert missing.status_code == status.HTTP_404_NOT_FOUND
        assert list(missing.json()["errors"]) == list(response.json()["errors"])
    # The owner plans with it; sweeps also take a profile id, and another user's id is just as unknown.
    assert alice.post("/api/plan/", hers["/api/plan/"], format="json").status_code == status.HTTP_200_OK
    by_id = bob.post("/api/sweeps/", {**SWEEP, field: alices_private[f"{field}_id"]}, format="json")
    assert by_id.status_code == status.HTTP_404_NOT_FOUND and field in by_id.json()["errors"]
    assert not Sweep.objects.filter(owner__username="bob").exists()


def test_a_sweep_axis_over_another_users_gpu_is_404(bob, alices_private):
    body = {**SWEEP, "axes": [{"param": "gpu", "values": ["h100-sxm5-80gb", alices_private["gpu"]]}]}
    response = bob.post("/api/sweeps/", body, format="json")
    assert response.status_code == status.HTTP_404_NOT_FOUND, response.content
    assert any(alices_private["gpu"] in m for msgs in response.json()["errors"].values() for m in msgs)


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


def test_management_commands_resolve_only_the_users_own_private_profiles(alices_private, user, other_user,
                                                                         tmp_path):
    def plan(username: str) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        call_command("plan", "--model", alices_private["model"], "--gpu", "h100-sxm5-80gb", "--user", username,
                     "--summary", stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    assert "tokens of KV cache" in plan(user.username)[0]
    with pytest.raises(CommandError) as refused:
        plan(other_user.username)
    assert refused.value.returncode == 1
    definition = tmp_path / "sweep.json"
    definition.write_text(json.dumps({**SWEEP, "gpu": alices_private["gpu"]}))
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("sweep", "create", str(definition), "--user", other_user.username, stdout=io.StringIO(),
                     stderr=err)
    assert alices_private["gpu"] in json.loads(err.getvalue())["errors"]["gpu"][0]
    assert not Sweep.objects.exists()
