"""Latency metrics: hand-computed small cases, unfinished requests, goodput, ragged ITLs."""

import math

import numpy as np
import pytest

from simulator.engine.metrics import MetricsError, Percentiles, request_latencies, summarize_latency

NAN = float("nan")

# three requests; the third never finished
ARRIVAL = [0.0, 1.0, 2.0]
SCHEDULED = [0.5, 1.0, 3.0]
FIRST_TOKEN = [1.0, 1.2, NAN]
FINISH = [2.0, 1.6, NAN]
OUTPUT = [5, 3, 0]
PROMPT = [100, 10, 50]


def test_per_request_latencies_by_hand():
    lat = request_latencies(arrival_time=ARRIVAL, first_token_time=FIRST_TOKEN, finish_time=FINISH,
                            num_output_tokens=OUTPUT, first_scheduled_time=SCHEDULED)
    assert lat.completed.tolist() == [True, True, False]
    np.testing.assert_allclose(lat.ttft[:2], [1.0, 0.2])
    np.testing.assert_allclose(lat.e2e[:2], [2.0, 0.6])
    np.testing.assert_allclose(lat.tpot[:2], [1.0 / 4, 0.4 / 2])  # (finish - first) / (out - 1)
    np.testing.assert_allclose(lat.queueing[:2], [0.5, 0.0])
    assert all(math.isnan(x[2]) for x in (lat.ttft, lat.tpot, lat.e2e, lat.queueing))


def test_summary_by_hand():
    s = summarize_latency(arrival_time=ARRIVAL, first_token_time=FIRST_TOKEN, finish_time=FINISH,
                          num_output_tokens=OUTPUT, num_prompt_tokens=PROMPT, first_scheduled_time=SCHEDULED)
    assert (s.num_requests, s.num_completed, s.num_unfinished) == (3, 2, 1)
    assert s.duration_s == pytest.approx(2.0)  # first arrival 0.0 to last finish 2.0
    assert s.ttft.count == 2 and s.ttft.mean == pytest.approx(0.6) and s.ttft.p50 == pytest.approx(0.6)
    assert s.ttft.p90 == pytest.approx(0.2 + 0.9 * 0.8) and s.ttft.max == pytest.approx(1.0)
    assert s.e2e.mean == pytest.approx(1.3)
    assert s.queueing.mean == pytest.approx(0.25)
    # ITL over tokens without per-token data: 4 gaps of 0.25 and 2 of 0.2
    assert s.itl.count == 6 and s.itl.mean == pytest.approx((4 * 0.25 + 2 * 0.2) / 6)
    assert s.tpot.count == 2 and s.tpot.mean == pytest.approx(0.225)
    assert s.output_tokens == 8 and s.total_tokens == 118
    assert s.output_tokens_per_s == pytest.approx(4.0)
    assert s.total_tokens_per_s == pytest.approx(59.0)
    assert s.request_throughput == pytest.approx(1.0)
    # no SLO: every completed request counts
    assert s.num_meeting_slo == 2 and s.goodput_requests_per_s == pytest.approx(1.0)


def test_goodput_needs_both_thresholds():
    kw = dict(arrival_time=ARRIVAL, first_token_time=FIRST_TOKEN, finish_time=FINISH, num_output_tokens=OUTPUT)
    s = summarize_latency(**kw, slo_ttft_s=0.5)  # only request 2 (TTFT 0.2)
    assert s.num_meeting_slo == 1 and s.goodput_tokens_per_s == pytest.approx(3 / 2.0)
    s = summarize_latency(**kw, slo_itl_s=0.22)  # only request 2 (TPOT 0.2)
    assert s.num_meeting_slo == 1
    s = summarize_latency(**kw, slo_ttft_s=0.5, slo_itl_s=0.1)  # nobody
    assert s.num_meeting_slo == 0 and s.goodput_requests_per_s == 0.0
    s = summarize_latency(**kw, slo_ttft_s=2.0, slo_itl_s=0.3)
    assert s.num_meeting_slo == 2 and s.goodput_tokens_per_s == pytest.approx(8 / 2.0)


def test_ragged_itls_give_the_exact_distribution():
    itl = [0.1, 0.1, 0.1, 0.7, 0.2, 0.2, 9.0]  # last gap belongs to the unfinished request
    offs = [0, 4, 6, 7]
    s = summarize_latency(arrival_time=ARRIVAL, first_token_time=FIRST_TOKEN, finish_time=FINISH,
                          num_output_tokens=OUTPUT, itl_values=itl, itl_offsets=offs)
    assert s.itl.count == 6
    assert s.itl.mean == pytest.approx(1.4 / 6)
    assert s.itl.max == pytest.approx(0.7)
    assert s.itl.p50 == pytest.approx(0.15)


def test_one_token_answers_have_no_itl_and_meet_any_itl_slo():
    s = summarize_latency(arrival_time=[0.0], first_token_time=[0.1], finish_time=[0.1], num_output_tokens=[1],
                          slo_itl_s=0.001)
    assert s.tpot.count == 0 and math.isnan(s.tpot.mean) and s.itl.count == 0
    assert s.num_meeting_slo == 1


def test_nothing_finished_is_all_nan_and_json_ready():
    s = summarize_latency(arrival_time=[0.0, 1.0], first_token_time=[NAN, NAN], finish_time=[NAN, NAN],
                          num_output_tokens=[0, 0])
    assert s.num_completed == 0 and s.num_unfinished == 2
    d = s.to_dict()
    assert d["ttft"]["mean"] is None and d["ttft"]["count"] == 0 and d["output_tokens_per_s"] is None
    import json

    json.dumps(d)


def test_to_dict_round_numbers():
    s = summarize_latency(arrival_time=ARRIVAL, first_token_time=FIRST_TOKEN, finish_time=FINISH,
                          num_output_tokens=OUTPUT, duration_s=4.0)
    d = s.to_dict()
    assert d["output_tokens_per_s"] == pytest.approx(2.0) and d["slo_ttft_s"] is None
    assert set(d["e2e"]) == {"count", "mean", "p50", "p90", "p99", "max"}


def test_vectorized_matches_a_scalar_reference():
    rng = np.random.default_rng(3)
    n = 500
    arr = np.sort(rng.uniform(0, 100, n))
    ft = arr + rng.exponential(0.5, n)
    out = rng.integers(1, 200, n)
    fin = ft + (out - 1) * rng.uniform(0.01, 0.05, n)
    fin[rng.random(n) < 0.1] = np.nan
    s = summarize_latency(arrival_time=arr, first_token_time=ft, finish_time=fin, num_output_tokens=out,
                          slo_ttft_s=0.5, slo_itl_s=0.03)
    done = [i for i in range(n) if not math.isnan(fin[i])]
    ttfts = [ft[i] - arr[i] for i in done]
    assert s.ttft.mean == pytest.approx(sum(ttfts) / len(ttfts))
    assert s.ttft.p99 == pytest.approx(float(np.percentile(ttfts, 99)))
    good = [i for i in done if ft[i] - arr[i] <= 0.5 and (out[i] < 2 or (fin[i] - ft[i]) / (out[i] - 1) <= 0.03)]
    assert s.num_meeting_slo == len(good)
    assert s.num_unfinished == n - len(done)


def test_errors_name_the_field():
    with pytest.raises(MetricsError, match="finish_time"):
        summarize_latency(arrival_time=[0, 1], first_token_time=[1, 2], finish_time=[3], num_output_tokens=[1, 1])
    with pytest.raises(MetricsError, match="first_token_time"):
        summarize_latency(arrival_time=[5.0], first_token_time=[1.0], finish_time=[6.0], num_output_tokens=[2])
    with pytest.raises(MetricsError, match="itl_offsets"):
        summarize_latency(arrival_time=[0.0], first_token_time=[1.0], finish_time=[2.0], num_output_tokens=[2],
                          itl_values=[1.0], itl_offsets=[0, 2])
    with pytest.raises(MetricsError, match="slo_ttft_s"):
        summarize_latency(arrival_time=[0.0], first_token_time=[1.0], finish_time=[2.0], num_output_tokens=[2],
                          slo_ttft_s=-1)


def test_percentiles_of_empty():
    p = Percentiles.of(np.array([np.nan]))
    assert p.count == 0 and math.isnan(p.p99)
