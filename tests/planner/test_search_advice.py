"""Advice that honours the SLO (issue 17, item 4): sweep reports and the replicas answer.

Sweep bodies are built by hand (the report body's shape: ``inputs`` + ``points`` with
``params`` and ``metrics``), so each rule is checked on the numbers that trigger it.
"""

from __future__ import annotations

import pytest

from planner.sweeps.advice import advise

WL_PLAIN = {"source": "spec", "arrival_unit": "s", "n": 100,
            "spec": {"n": 100, "arrival": {"kind": "poisson", "rate": 10.0, "unit": "s"}, "prefixes": [],
                     "turns": None}}


def _metrics(**kw):
    m = {"requests": 100, "finished": 100, "dropped_unservable": 0, "preemptions": 0, "preemptions_per_request": 0.0,
         "mean_kv_usage": 0.6, "peak_running": 40, "prefix_cache_hit_rate": 0.3, "duration_s": 11.0,
         "ttft_p90_s": 0.2, "itl_p90_s": 0.02, "ttft_p99_s": 0.3, "cost_per_hour": 4.0,
         "cost_per_m_output_tokens": 1.0, "num_gpu_blocks": 5000}
    m.update(kw)
    return m


def _body(points, slo=None, workload=WL_PLAIN, axes=("gpu",)):
    return {"inputs": {"engine": {"max_num_seqs": 256, "block_size": 16}, "workload": workload, "slo": slo,
                       "axes": [{"param": a} for a in axes]},
            "points": [{"index": i, "params": p, "metrics": m, "totals": {}} for i, (p, m) in enumerate(points)]}


def _codes(body):
    return {a.code: a for a in advise(body)}


SLO = {"ttft_s": 0.5, "percentile": "p90"}


def test_cheapest_point_is_the_cheapest_that_meets_the_target():
    cheap_but_slow = ({"gpu": "l4"}, _metrics(cost_per_m_output_tokens=0.15, cost_per_hour=0.8, ttft_p90_s=7.15))
    dearer_ok = ({"gpu": "h100-sxm5-80gb"}, _metrics(cost_per_m_output_tokens=0.9, cost_per_hour=3.78))
    dearest = ({"gpu": "h200-sxm-141gb"}, _metrics(cost_per_m_output_tokens=1.4, cost_per_hour=6.35))
    a = _codes(_body([cheap_but_slow, dearer_ok, dearest], slo=SLO))["cheapest"]
    assert a.text.startswith("Cheapest point that meets TTFT p90 ≤ 500 ms: GPU")
    assert "$0.90 per million" in a.text and "$0.15" not in a.text and a.numbers["meets"] is True
    assert "1 of 3 priced points miss" in a.text


def test_says_when_no_point_meets_the_target():
    pts = [({"gpu": g}, _metrics(cost_per_m_output_tokens=c, ttft_p90_s=2.0)) for g, c in (("l4", 0.2), ("l40s", 0.5))]
    a = _codes(_body(pts, slo=SLO))["cheapest"]
    assert a.level == "warning" and a.text.startswith("No point in this sweep meets TTFT p90 ≤ 500 ms.")
    no_slo = _codes(_body(pts))["cheapest"]
    assert "No latency target was given" in no_slo.text


def test_overload_says_by_how_much():
    # 100 requests at 10 requests/s arrive over ~10 s; finishing them took 40 s: 2.5 requests/s served
    body = _body([({"gpu": "l4"}, _metrics(duration_s=40.0, ttft_p99_s=25.0))])
    a = _codes(body)["overload"]
    assert "10 requests/s arrive but it completes about 2.5 requests/s (25%)" in a.text
    assert "queue grows without bound" in a.text and "4.0x the capacity" in a.text
    assert "overload" not in _codes(_body([({"gpu": "l4"}, _metrics(duration_s=11.0))]))


def test_no_sharing_remark_when_the_workload_shares_nothing():
    pts = [({"gpu": "l4"}, _metrics(prefix_cache_hit_rate=0.01))]
    assert "low_sharing" not in _codes(_body(pts))
    shared = {**WL_PLAIN, "spec": {**WL_PLAIN["spec"], "prefixes": [{"length": 512, "fraction": 0.5, "count": 1}]}}
    assert "low_sharing" in _codes(_body(pts, workload=shared))


@pytest.mark.parametrize("peak, raise_seqs", [(256, True), (31, False)])
def test_raise_max_num_seqs_only_when_the_cap_was_reached(peak, raise_seqs):
    a = _codes(_body([({"gpu": "l4"}, _metrics(mean_kv_usage=0.2, peak_running=peak))]))["kv_underused"]
    assert ("raise max_num_seqs" in a.text) is raise_seqs
    if not raise_seqs:
        assert "the traffic, not the max_num_seqs cap, limits concurrency (at most 31 requests" in a.text


def test_prefix_affinity_warns_when_one_instance_takes_most_of_the_load():
    lopsided = _metrics(num_instances=4, routing="prefix-affinity", request_imbalance=4.0)
    even = _metrics(num_instances=4, routing="round-robin", request_imbalance=1.0)
    a = _codes(_body([({"num_instances": 4, "routing": "prefix-affinity"}, lopsided),
                      ({"num_instances": 4, "routing": "round-robin"}, even)], axes=("num_instances", "routing")))
    assert a["affinity_imbalance"].text.startswith("With prefix-affinity routing one of 4 replicas takes 100% of")
    balanced = _metrics(num_instances=4, routing="prefix-affinity", request_imbalance=1.16)
    assert "affinity_imbalance" not in _codes(_body([({"num_instances": 4}, balanced)], axes=("num_instances",)))


@pytest.mark.django_db
def test_replicas_answer_names_the_cheapest_or_the_overload():
    from planner.sweeps.replicas import find_replicas

    base = {"model": "llama-3-1-8b", "gpu": "l4", "deployment": {"max_model_len": 4096},
            "workload": {"spec": {"n": 60, "prompt": "normal:1024,256", "output": "normal:128,32",
                                  "arrival": {"kind": "poisson", "rate": 40, "unit": "s"}}, "seed": 0},
            "slo": {"ttft_s": 0.5}}
    none = find_replicas({**base, "max_instances": 1}, owner=None)
    assert none["num_instances"] is None
    assert none["advice"][0].startswith("No replica count up to 1 meets the targets")
    assert "The offered load exceeds what 1 replicas serve: 40 requests/s arrive" in none["advice"][1]
    ok = find_replicas({**base, "gpu": "h100-sxm5-80gb", "max_instances": 4}, owner=None)
    assert ok["advice"][0].startswith(f"The cheapest deployment that meets the targets is {ok['num_instances']} replica")
