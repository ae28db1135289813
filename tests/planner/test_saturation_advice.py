"""Sweep advice never recommends the cheapest point per token where the deployment is saturated (issue 33 item 8:
it named the point with TTFT p99 25.8 s and flat throughput); saturation is read from the points themselves.

The numbers are those of a request-rate sweep this planner ran (Llama 3.1 8B on one H100 SXM5 80GB, its
roofline clock, 300 requests of about 2,000 prompt and 256 output tokens, Poisson arrivals, seed 0), rounded.
"""

from __future__ import annotations

from planner.sweeps.advice import advise, cheapest_advice
from planner.sweeps.saturation import detect_saturation, saturated_indices

#: rate (requests/s) -> duration_s, throughput_tok_s, ttft_p50_s, ttft_p99_s, peak_waiting, cost_per_m_output_tokens
MEASURED = {2: (146.07, 525.1, 0.0595, 0.1214, 0, 2.00), 8: (38.62, 1986.4, 0.0702, 0.1751, 0, 0.53),
            32: (27.05, 2836.2, 2.483, 12.93, 105, 0.370), 128: (26.95, 2845.8, 5.926, 19.57, 244, 0.369)}


def _body(measured=MEASURED, slo=None) -> dict:
    points = []
    for i, (rate, (dur, tput, p50, p99, waiting, cost)) in enumerate(measured.items()):
        points.append({"index": i, "params": {"rate": float(rate)}, "totals": {}, "metrics": {
            "requests": 300, "finished": 300, "duration_s": dur, "throughput_tok_s": tput, "ttft_p50_s": p50,
            "ttft_p99_s": p99, "itl_p90_s": 0.02, "ttft_p90_s": p99 * 0.8, "peak_waiting": waiting,
            "peak_running": 46, "mean_kv_usage": 0.3, "preemptions_per_request": 0.0,
            "cost_per_m_output_tokens": cost, "cost_per_hour": 3.78}})
    inputs = {"engine": {"max_num_seqs": 1024, "enable_prefix_caching": True, "block_size": 16},
              "workload": {"source": "spec", "arrival_unit": "s",
                           "spec": {"arrival": {"kind": "poisson", "rate": 4.0, "unit": "s"}}},
              "axes": [{"param": "rate", "values": [float(r) for r in measured]}]}
    if slo:
        inputs["slo"] = slo
    return {"inputs": inputs, "points": points}


def test_the_saturated_rates_are_found_from_the_points():
    sat = detect_saturation(_body())
    assert saturated_indices(sat) == {2, 3}
    first = sat["points"][0]["why"]
    assert "throughput went from 1,986 to 2,836 tokens/s" in first[0] and "12.9 s" in first[0]
    assert any("of the 32 requests/s offered are served" in w for w in first)
    assert sat["capacity"] == [{"below": 8.0, "above": 32.0, "params": {}}]


def test_the_cheapest_point_is_never_a_saturated_one():
    body = _body()
    got = {a.code: a for a in advise(body)}
    cheapest = got["cheapest"]
    assert "Request rate 8 requests/s at $0.53" in cheapest.text, cheapest.text
    assert "Request rate 128 requests/s looks cheaper ($0.37" in cheapest.text
    assert "saturated there, so it is not recommended" in cheapest.text
    saturated = got["saturated"]
    assert saturated.level == "warning"
    assert "saturated at request rates of 32 and 128 requests/s" in saturated.text
    assert "capacity lies between 8 and 32 requests/s" in saturated.text
    # without the saturation, the old advice would have named rate 128 (what the issue saw)
    assert "Request rate 128" in cheapest_advice(body["points"], None, "s").text.split(" at $")[0]


def test_with_latency_targets_only_points_that_keep_up_and_meet_them_count():
    body = _body(slo={"ttft_s": 30.0, "percentile": "p90"})  # loose enough that even the saturated rates meet it
    text = {a.code: a for a in advise(body)}["cheapest"].text
    assert text.startswith("Cheapest point that meets TTFT p90 ≤ 30,000 ms: Request rate 8 requests/s"), text


def test_every_point_saturated_recommends_none():
    body = _body({32: MEASURED[32], 128: MEASURED[128]})
    body["points"][0]["metrics"]["peak_waiting"] = 105
    cheapest = {a.code: a for a in advise(body)}["cheapest"]
    assert cheapest.level == "warning" and "no cheapest point is recommended" in cheapest.text


def test_a_deployment_that_keeps_up_is_not_called_saturated():
    calm = {2: MEASURED[2], 8: MEASURED[8], 16: (19.5, 3900.0, 0.075, 0.19, 2, 0.27)}
    body = _body(calm)
    assert detect_saturation(body)["points"] == []
    got = {a.code: a for a in advise(body)}
    assert "saturated" not in got and "Request rate 16 requests/s at $0.27" in got["cheapest"].text
