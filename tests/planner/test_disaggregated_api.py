"""Disaggregated prefill/decode through the API: ``"disaggregated"`` in /api/simulations/ and sweep axes.

Proved: a simulation with a ``disaggregated`` object answers with the xPyD run's figures (the same as
:mod:`simulator.disaggregated` on the point's engine), priced for all its instances; a sweep definition
varies ``prefill_instances`` and ``decode_instances`` as axes; bad input is a 400 naming the field.
"""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from planner.sweeps import definition as defn
from planner.sweeps import disaggregated as disagg
from planner.sweeps.runner import build_workload
from simulator.config import EngineConfig

pytestmark = pytest.mark.django_db

WORKLOAD = {"spec": {"n": 60, "prompt": "normal:1024,256", "output": "normal:64,16",
                     "arrival": {"kind": "poisson", "rate": 10, "unit": "s"}}, "seed": 1}
BASE = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "deployment": {"max_model_len": 4096},
        "workload": WORKLOAD}


@pytest.fixture
def client():
    c = APIClient()
    c.force_authenticate(get_user_model().objects.create_user("pd", password="pw-123456789"))
    return c


def test_simulation_runs_the_xpyd_deployment(client):
    body = {**BASE, "disaggregated": {"prefill_instances": 1, "decode_instances": 3, "routing": "least-loaded",
                                      "link_gbps": 25, "link_latency_s": 0.0002}}
    r = client.post("/api/simulations/", body, format="json")
    assert r.status_code == 200, r.json()
    out = r.json()
    m, meta = out["metrics"], out["meta"]
    assert m["prefill_instances"] == 1 and m["decode_instances"] == 3 and m["finished"] == 60
    assert meta["disaggregated"]["num_gpus"] == 4 and out["series"] is None
    assert meta["price_per_hour"] == pytest.approx(4 * meta["disaggregated"]["price_per_hour"] / 4)
    # the same deployment straight from the simulator
    _, snapshot, points = defn.validate(body, owner=None, single=True)
    p = points[0]
    wl = build_workload(p["workload"], None, "csv")
    res = disagg.deployment(EngineConfig.from_dict(p["config"]), p["meta"]["disaggregated"]).run(wl)
    assert m["transfer_p90_s"] == pytest.approx(res.transfer["p90_s"]) and m["transfer_p90_s"] > 0
    assert m["decode_utilisation"] == pytest.approx(res.pools["decode"]["utilisation"])
    assert m["ttft_p90_s"] == pytest.approx(res.latency.ttft.p90)


def test_sweep_definition_varies_pool_sizes():
    raw = {**BASE, "disaggregated": {"routing": "least-loaded"},
           "axes": [{"param": "prefill_instances", "values": [1, 2]}, {"param": "decode_instances", "values": [1, 3]}]}
    _, snapshot, points = defn.validate(raw, owner=None)
    got = [(p["meta"]["disaggregated"]["prefill_instances"], p["meta"]["disaggregated"]["decode_instances"])
           for p in points]
    assert got == [(1, 1), (1, 3), (2, 1), (2, 3)]
    assert [p["meta"]["disaggregated"]["num_gpus"] for p in points] == [2, 4, 3, 5]


@pytest.mark.parametrize("change,field", [
    ({"disaggregated": {"prefill_instances": 0}}, "disaggregated.prefill_instances"),
    ({"disaggregated": {"decode_instances": 65}}, "disaggregated.decode_instances"),
    ({"disaggregated": {"link_gbps": 0}}, "disaggregated.link_gbps"),
    ({"disaggregated": {"link_latency_s": -1}}, "disaggregated.link_latency_s"),
    ({"disaggregated": {"routing": "fastest"}}, "disaggregated.routing"),
    ({"disaggregated": {"pools": 2}}, "disaggregated.pools"),
    ({"disaggregated": 3}, "disaggregated"),
    ({"disaggregated": {}, "cluster": {"num_instances": 2}}, "disaggregated"),
    ({"model": None, "gpu": None, "deployment": None, "engine": {"num_gpu_blocks": 500}, "disaggregated": {}},
     "disaggregated"),
    ({"gpu": "no-such-gpu", "disaggregated": {}}, "gpu"),
])
def test_bad_input_is_400_naming_the_field(client, change, field):
    body = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    r = client.post("/api/simulations/", body, format="json")
    assert r.status_code in (400, 404), r.json()
    assert field in r.json()["errors"], r.json()


def test_a_pool_axis_needs_the_object(client):
    r = client.post("/api/sweeps/", {**BASE, "axes": [{"param": "decode_instances", "values": [1, 2]}]},
                    format="json")
    assert r.status_code == 400 and "disaggregated" in r.json()["errors"]
