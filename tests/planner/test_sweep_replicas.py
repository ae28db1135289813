"""Sweeps over replicas and routing (issue 8) and the "replicas for this rate" answer."""

from __future__ import annotations

import pytest

from planner.sweeps import definition as defn
from planner.sweeps.advice import advise, replicas_for_rate
from planner.sweeps.points import plan_chunks
from planner.sweeps.runner import build_workload, simulate_points

# One engine: 3,000 blocks, a linear clock of 10 ms + 20 us per token; Poisson arrivals in seconds.
BASE = {
    "engine": {"num_gpu_blocks": 3000, "step_time_model": {"base_s": 0.01, "per_token_s": 2e-5}},
    "workload": {"spec": {"n": 200, "prompt": {"kind": "constant", "value": 300},
                          "output": {"kind": "constant", "value": 60},
                          "arrival": {"kind": "poisson", "rate": 12.0, "unit": "s"}}, "seed": 2},
}


def errors_of(raw):
    with pytest.raises(defn.DefinitionError) as exc:
        defn.validate(raw, owner=None)
    return exc.value.errors


def _run(raw):
    _, snapshot, points = defn.validate(raw, owner=None)
    results = []
    for chunk in plan_chunks(points):
        results += simulate_points(build_workload(chunk["workload"]), chunk["points"], record_steps=False)
    return {"inputs": snapshot, "points": sorted(results, key=lambda p: p["index"])}


def test_replica_and_routing_axes_are_validated():
    errs = errors_of({**BASE, "axes": [{"param": "routing", "values": ["round-robin", "nearest"]}]})
    assert "nearest" in errs["axes[0].values[1]"][0]
    errs = errors_of({**BASE, "axes": [{"param": "num_instances", "values": [1, 100]}]})
    assert "at most 64" in errs["axes[0].values"][0]
    errs = errors_of({**BASE, "cluster": {"num_instances": 0}, "axes": [{"param": "max_num_seqs", "values": [8]}]})
    assert "cluster.num_instances" in errs
    errs = errors_of({**BASE, "slo": {"ttft_s": -1}, "axes": [{"param": "num_instances", "values": [1]}]})
    assert "slo.ttft_s" in errs


def test_more_replicas_cut_latency_and_the_advice_names_the_fewest_meeting_the_slo():
    raw = {**BASE, "slo": {"ttft_s": 0.25, "itl_s": 0.05},
           "axes": [{"param": "num_instances", "values": [1, 2, 4]}]}
    body = _run(raw)
    m = [p["metrics"] for p in body["points"]]
    assert [x["num_instances"] for x in m] == [1, 2, 4]
    assert m[0]["ttft_p90_s"] > m[1]["ttft_p90_s"] > m[2]["ttft_p90_s"]
    assert all(x["finished"] == 200 for x in m)
    assert m[2]["request_imbalance"] == pytest.approx(1.0)  # round-robin: 50 each
    rep = replicas_for_rate(body)
    assert len(rep) == 1
    want = next(x["num_instances"] for x in m if x["ttft_p90_s"] <= 0.25 and x["itl_p90_s"] <= 0.05)
    assert rep[0]["num_instances"] == want
    assert any(a.code == "replicas" and f"{want} replica" in a.text for a in advise(body))


def test_replicas_per_rate_in_a_two_axis_sweep():
    raw = {**BASE, "slo": {"ttft_s": 0.25},
           "axes": [{"param": "rate", "values": [4.0, 16.0]}, {"param": "num_instances", "values": [1, 2, 3]}]}
    body = _run(raw)
    rep = {r["group"]: r["num_instances"] for r in replicas_for_rate(body)}
    assert set(rep) == {4.0, 16.0}
    assert rep[4.0] is not None and rep[16.0] is not None and rep[4.0] <= rep[16.0]


def test_routing_axis_compares_policies_on_the_same_replicas():
    spec = dict(BASE["workload"]["spec"])
    spec["prefixes"] = [{"length": 512, "fraction": 1.0, "count": 16}]
    raw = {**BASE, "workload": {"spec": spec, "seed": 2}, "cluster": {"num_instances": 4},
           "axes": [{"param": "routing", "values": ["round-robin", "prefix-affinity"]}]}
    body = _run(raw)
    rr, aff = (p["metrics"] for p in body["points"])
    assert rr["routing"] == "round-robin" and aff["routing"] == "prefix-affinity"
    assert aff["prefix_cache_hit_rate"] > rr["prefix_cache_hit_rate"]
