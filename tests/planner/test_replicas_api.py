"""POST /api/replicas/: the fewest replicas meeting latency targets at a request rate (issue 8)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

LLAMA_H100 = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}


@pytest.fixture
def client(django_user_model):
    c = APIClient()
    c.force_authenticate(django_user_model.objects.create_user("rita", password="pw-rita-12345"))
    return c


def _body(rate, n=240, **extra):
    return {**LLAMA_H100,
            "workload": {"spec": {"n": n, "prompt": {"kind": "normal", "mean": 2000, "std": 400},
                                  "output": {"kind": "normal", "mean": 300, "std": 60},
                                  "arrival": {"kind": "poisson", "rate": rate, "unit": "s"}}, "seed": 0},
            "slo": {"ttft_s": 0.5, "itl_s": 0.05}, "max_instances": 16, **extra}


def test_replicas_grow_with_the_rate_and_the_answer_is_checked_against_one_fewer(client):
    low = client.post("/api/replicas/", _body(5), format="json")
    high = client.post("/api/replicas/", _body(40), format="json")
    assert low.status_code == 200 and high.status_code == 200, (low.content, high.content)
    a, b = low.json(), high.json()
    assert a["clock"] == "cost_model"  # the roofline of Llama 3.1 8B on H100
    assert a["num_instances"] is not None and b["num_instances"] is not None
    assert b["num_instances"] > a["num_instances"]
    tried = {t["num_instances"]: t for t in b["trials"]}
    n = b["num_instances"]
    assert tried[n]["meets"] and tried[n]["ttft_s"] <= 0.5 and tried[n]["itl_s"] <= 0.05
    assert n == 1 or not tried[n - 1]["meets"]
    assert b["gpus_per_replica"] == 1 and b["num_gpu_blocks"] > 20_000


@pytest.mark.parametrize("change, field", [
    ({"slo": None}, "slo"),
    ({"slo": {"ttft_s": 0}}, "slo.ttft_s"),
    ({"max_instances": 0}, "max_instances"),
    ({"max_instances": 1000}, "max_instances"),
    ({"cluster": {"routing": "telepathy"}}, "cluster.routing"),
])
def test_bad_input_names_the_field(client, change, field):
    r = client.post("/api/replicas/", {**_body(5), **change}, format="json")
    assert r.status_code == 400
    assert field in r.json()["errors"], r.json()


def test_arrivals_in_steps_are_refused_with_a_reason(client):
    body = _body(5)
    body["workload"]["spec"]["arrival"] = {"kind": "poisson", "rate": 0.5, "unit": "step"}
    r = client.post("/api/replicas/", body, format="json")
    assert r.status_code == 400 and "seconds" in r.json()["errors"]["workload.spec.arrival"][0]


def test_too_many_requests_are_refused(client):
    r = client.post("/api/replicas/", _body(5, n=5000), format="json")
    assert r.status_code == 400 and "2,000" in r.json()["errors"]["workload.spec.n"][0]


def test_signed_out_gets_401_or_403():
    r = APIClient().post("/api/replicas/", _body(5), format="json")
    assert r.status_code in (401, 403)
