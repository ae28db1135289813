"""/api/sweeps/: create, list, status with progress, cancel, results; owner only; JSON errors."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework import status
from rest_framework.test import APIClient

from planner.sweeps import services

pytestmark = pytest.mark.django_db

DEF = {"engine": {"num_gpu_blocks": 600, "max_num_seqs": 16},
       "workload": {"spec": {"n": 20, "prompt": "normal:100,20", "output": "normal:30,5"}, "seed": 1},
       "axes": [{"param": "num_gpu_blocks", "values": [60, 200, 600]}]}


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-123456789")


@pytest.fixture
def client(alice):
    c = APIClient()
    c.force_authenticate(alice)
    return c


def test_create_returns_202_with_progress(client):
    r = client.post("/api/sweeps/", DEF, format="json")
    assert r.status_code == status.HTTP_202_ACCEPTED, r.json()
    body = r.json()
    assert body["status"] == "queued" and body["progress"]["points_total"] == 3
    assert body["url"].endswith(f"/api/sweeps/{body['id']}/") and body["report_url"] is None


@pytest.mark.parametrize("payload,field", [
    ({**DEF, "axes": []}, "axes"),
    ({**DEF, "engine": {"num_gpu_blocks": "many"}}, "engine.num_gpu_blocks"),
    ({**DEF, "workload": {"spec": {"n": 0}}}, "workload.spec.n"),
    ({**DEF, "surprise": 1}, "surprise"),
    ([1, 2, 3], "non_field_errors"),
])
def test_bad_definitions_are_400_with_field_messages(client, payload, field):
    r = client.post("/api/sweeps/", payload, format="json")
    assert r.status_code == 400
    assert field in r.json()["errors"], r.json()


def test_writes_need_sign_in_and_sweeps_are_owner_only(client, alice):
    anon = APIClient()
    assert anon.post("/api/sweeps/", DEF, format="json").status_code in (401, 403)
    assert anon.get("/api/sweeps/").status_code in (401, 403)
    sweep = services.sweep_create(owner=alice, definition=DEF)
    bob = get_user_model().objects.create_user("bob", password="pw-123456789")
    other = APIClient()
    other.force_authenticate(bob)
    for url in (f"/api/sweeps/{sweep.pk}/", f"/api/sweeps/{sweep.pk}/results/"):
        assert other.get(url).status_code == 403
    assert other.post(f"/api/sweeps/{sweep.pk}/cancel/").status_code == 403
    assert client.get("/api/sweeps/999999/").status_code == 404
    assert other.get("/api/sweeps/").json()["results"] == []


def test_status_results_and_cancel(client, alice):
    sweep = services.sweep_create(owner=alice, definition=DEF)
    services.chunk_run(sweep_id=sweep.pk, index=0)
    r = client.get(f"/api/sweeps/{sweep.pk}/").json()
    assert r["status"] == "done" and r["progress"]["points_done"] == 3 and r["progress"]["fraction"] == 1.0
    assert r["report_url"] and "/reports/" in r["report_url"]
    res = client.get(f"/api/sweeps/{sweep.pk}/results/").json()
    assert [p["params"]["num_gpu_blocks"] for p in res["points"]] == [60, 200, 600]
    assert "series" not in res["points"][0]
    assert client.get(f"/api/sweeps/{sweep.pk}/results/?series=1").json()["points"][0]["series"]["kv_usage"]
    second = services.sweep_create(owner=alice, definition=DEF)
    r = client.post(f"/api/sweeps/{second.pk}/cancel/")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    listing = client.get("/api/sweeps/").json()
    assert [s["id"] for s in listing["results"]] == [second.pk, sweep.pk]
