"""Disaggregated prefill/decode through the API: ``"disaggregated"`` in /api/simulations/ and sweep axes.

Proved: a simulation with a ``disaggregated`` object answers with the xPyD run's figures (the same as
:mod:`simulator.cluster.disaggregated` on the point's engine), priced for all its instances; a sweep definition
varies ``prefill_instances`` and ``decode_instances`` as axes; bad input is a 400 naming the field.
"""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from planner.sweeps import definition as defn
from planner.sweeps import disaggregated as disagg
from planner.sweeps.runner import build_workload
from simulator.engine.config import EngineConfig

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


SWEEP_FORM = {"name": "pools", "mode": "grid", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
              "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9, "block_size": 16,
              "enable_prefix_caching": "on", "n": 20, "prompt": "normal:1024,128", "output": "normal:30,5",
              "arrival": "poisson:5", "arrival_unit": "s", "seed": 0, "axis1_param": "prefill_instances",
              "axis1_values": "1, 2", "axis2_param": "decode_instances", "axis2_values": "1, 3",
              "cluster_routing": "least-loaded", "axis1_scale": "linear", "cliff_metric": "preemptions_per_request",
              "cliff_param": "num_gpu_blocks"}


def test_sweep_form_varies_the_pools(client):
    from django.test import Client

    from planner.models import Sweep

    c = Client()
    c.force_login(get_user_model().objects.create_user("pdform", password="pw-123456789"))
    r = c.post("/sweeps/new/", SWEEP_FORM)
    assert r.status_code == 302, r.content.decode()[:3000]
    snap = Sweep.objects.get().snapshot
    assert snap["disaggregated"]["routing"] == "least-loaded" and snap["cluster"] is None
    assert [a["param"] for a in snap["axes"]] == ["prefill_instances", "decode_instances"]
    r = c.post("/sweeps/new/", {**SWEEP_FORM, "cluster_instances": "2"})
    assert r.status_code == 200 and "not both" in r.content.decode()


def test_a_pool_size_sweep_runs_to_a_report():
    from planner.models import Sweep
    from planner.sweeps import services

    owner = get_user_model().objects.create_user("pdrun", password="pw-123456789")
    raw = {**BASE, "workload": {**WORKLOAD, "spec": {**WORKLOAD["spec"], "n": 30}},
           "disaggregated": {"routing": "least-loaded", "link_gbps": 25},
           "axes": [{"param": "decode_instances", "values": [1, 2]}]}
    sweep = services.sweep_create(owner=owner, definition=raw)
    for chunk in sweep.chunks.order_by("index"):
        services.chunk_run(sweep_id=sweep.pk, index=chunk.index)
    sweep = Sweep.objects.get(pk=sweep.pk)
    assert sweep.status == "done", sweep.error
    report = services.report_create(sweep=sweep)
    points = sorted(report.snapshot["points"], key=lambda p: p["index"])
    assert [p["metrics"]["decode_instances"] for p in points] == [1, 2]
    assert all(p["metrics"]["finished"] == 30 and p["metrics"]["transfer_p90_s"] > 0 for p in points)
    r = APIClient().get(f"/reports/{report.slug}/")
    assert r.status_code == 200
    assert APIClient().get(f"/api/reports/{report.slug}/?format=csv").status_code == 200


def test_a_prefill_pool_of_another_gpu_and_tp(client):
    """Heterogeneous pools: prefill on two H200s (TP 2), decode on one H100 each. The prefill pool is sized
    and clocked for its own GPU, and the point's GPUs and price count both pools."""
    body = {**BASE, "disaggregated": {"prefill_instances": 1, "decode_instances": 2, "routing": "least-loaded",
                                      "prefill_gpu": "h200-sxm-141gb", "prefill_tensor_parallel_size": 2}}
    _, snapshot, points = defn.validate(body, owner=None, single=True)
    meta = points[0]["meta"]
    dis = meta["disaggregated"]
    pre, dec = dis["prefill_engine"], points[0]["config"]
    assert pre["num_gpu_blocks"] > dec["num_gpu_blocks"]  # 2 x 141 GB against 80 GB
    assert pre["cost_model"] != dec["cost_model"]
    assert dis["num_gpus"] == 2 * 1 + 1 * 2 and dis["prefill_label"].startswith("2x H200")
    assert meta["price_per_hour"] == pytest.approx(dis["prefill_price_per_instance"] + 2 * (
        dis["price_per_hour"] - dis["prefill_price_per_instance"]) / 2)
    r = client.post("/api/simulations/", body, format="json")
    assert r.status_code == 200, r.json()
    m = r.json()["metrics"]
    wl = build_workload(points[0]["workload"], None, "csv")
    res = disagg.deployment(EngineConfig.from_dict(dec), dis, pre).run(wl)
    assert res.deployment.prefill.config.num_gpu_blocks == pre["num_gpu_blocks"]
    assert m["prefill_ttft_p90_s"] == pytest.approx(res.prefill_ttft["p90_s"])
    same = disagg.deployment(EngineConfig.from_dict(dec), dis).run(wl)
    assert res.prefill_ttft["p90_s"] != same.prefill_ttft["p90_s"]  # the prefill GPU's own clock


@pytest.mark.parametrize("change,field", [
    ({"prefill_gpu": "no-such-gpu"}, "disaggregated.prefill_gpu"),
    ({"prefill_gpu": True}, "disaggregated.prefill_gpu"),
    ({"prefill_tensor_parallel_size": 0}, "disaggregated.prefill_tensor_parallel_size"),
    ({"prefill_tensor_parallel_size": 3}, "disaggregated.prefill_tensor_parallel_size"),
])
def test_bad_prefill_pool_is_400_naming_the_field(client, change, field):
    r = client.post("/api/simulations/", {**BASE, "disaggregated": change}, format="json")
    assert r.status_code in (400, 404), r.json()
    assert field in r.json()["errors"], r.json()
