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


def _long(prompt, output=300, **deployment):
    body = _body(5, n=40)
    body["workload"]["spec"]["prompt"] = {"kind": "normal", "mean": prompt, "std": 0}
    body["workload"]["spec"]["output"] = {"kind": "normal", "mean": output, "std": 0}
    if deployment:
        body["deployment"] = deployment
    return body


def test_a_prompt_longer_than_the_model_is_refused_at_the_prompt_naming_the_limit(client):
    r = client.post("/api/replicas/", _long(200_000), format="json")
    assert r.status_code == 400, r.content
    (msg,) = r.json()["errors"]["workload.spec.prompt"]
    assert "200,300 tokens, prompt + output" in msg and "Llama 3.1 8B's 131,072 positions" in msg, msg


def test_prompt_plus_output_longer_than_max_model_len_is_refused_at_max_model_len(client):
    r = client.post("/api/replicas/", _long(4000, 200, max_model_len=4096), format="json")
    assert r.status_code == 400, r.content
    (msg,) = r.json()["errors"]["deployment.max_model_len"]
    assert "4,200 tokens" in msg and "max_model_len (4,096 tokens)" in msg, msg
    assert client.post("/api/replicas/", _long(3800, 200, max_model_len=4096), format="json").status_code == 200


def test_max_model_len_beyond_the_models_positions_is_refused_as_sizing_refuses_it(client):
    r = client.post("/api/replicas/", _long(1000, max_model_len=200_000), format="json")
    assert r.status_code == 400, r.content
    sized = client.post("/api/plan/", {**LLAMA_H100, "max_model_len": 200_000}, format="json")
    assert sized.status_code == 400
    # one rule, one message, whichever door
    assert r.json()["errors"]["deployment.max_model_len"] == sized.json()["errors"]["max_model_len"]
