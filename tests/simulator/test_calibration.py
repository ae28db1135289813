"""Calibration from a user's measurements: the three file formats, bad files, and a bounded scipy fit."""

import json

import pytest

from simulator.base.specs import DeploymentSpec
from simulator.batch.budget import fit_simulations
from simulator.calibration.fit import (
    CalibrationError,
    Measurement,
    fit,
    parse_measurement,
    parse_prometheus,
    parse_request_csv,
    parse_vllm_bench,
    price_fit,
)
from simulator.calibration.validation import _specs, load_experiments

BENCH = {"model_id": "Qwen/Qwen2.5-7B-Instruct", "completed": 200, "request_rate": 4.0, "mean_ttft_ms": 30.0,
         "mean_itl_ms": 7.0, "mean_e2el_ms": 1780.0, "total_input_tokens": 200 * 750, "total_output_tokens": 200 * 250}

PROM = """# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 90.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 3.0
vllm:time_to_first_token_seconds_count{model_name="m"} 100.0
vllm:inter_token_latency_seconds_sum{model_name="m"} 175.0
vllm:inter_token_latency_seconds_count{model_name="m"} 24900.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 178.0
vllm:e2e_request_latency_seconds_count{model_name="m"} 100.0
vllm:prompt_tokens_total{model_name="m"} 75000.0
vllm:generation_tokens_total{model_name="m"} 25000.0
"""


def test_vllm_bench_json_gives_the_run_wide_means():
    m = parse_measurement(json.dumps(BENCH))
    assert m.source == "vllm-bench" and m.model == "Qwen/Qwen2.5-7B-Instruct"
    assert (m.mean_ttft_s, m.mean_itl_s, m.mean_e2e_s) == pytest.approx((0.030, 0.007, 1.78))
    assert m.mean_prompt_tokens == 750 and m.mean_output_tokens == 250 and m.request_rate == 4.0


def test_prometheus_scrape_gives_the_histogram_means():
    m = parse_measurement(PROM)
    assert m.source == "prometheus" and m.requests == 100
    assert m.mean_ttft_s == pytest.approx(0.03) and m.mean_itl_s == pytest.approx(175 / 24900)
    assert m.mean_prompt_tokens == 750


def test_request_csv_gives_rows_and_means():
    text = "arrival_time,prompt_tokens,output_tokens,ttft_ms,e2e_ms\n1.5,100,11,20,120\n0.5,200,21,40,240\n"
    m = parse_measurement(text)
    assert m.source == "csv" and m.requests == 2
    assert list(m.rows["arrival_time"]) == [0.0, 1.0]  # sorted, from 0
    assert m.mean_ttft_s == pytest.approx(0.030) and m.mean_itl_s == pytest.approx(0.010)


@pytest.mark.parametrize("text,match", [
    ("arrival_time,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,100,10,0.1,1\n1,abc,10,0.1,1\n",
     "row 3, prompt_tokens: must be a number"),
    ("arrival_time,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,100,10,0.1,99999\n", "row 2, e2e_s: .* outside"),
    ("arrival_time,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,100,10,0.5,0.1\n", "row 2, e2e: shorter"),
    ("arrival_time,prompt_tokens,output_tokens,ttft_s,e2e_s\n", "no request rows"),
    ("arrival_time,prompt_tokens,ttft_s,e2e_s\n0,1,1,1\n", "column output_tokens: missing"),
])
def test_bad_csv_names_row_and_field(text, match):
    with pytest.raises(CalibrationError, match=match):
        parse_request_csv(text)


def test_bad_bench_json_and_mixed_scrape_are_refused():
    with pytest.raises(CalibrationError, match="mean_e2el_ms: missing"):
        parse_vllm_bench(json.dumps({k: v for k, v in BENCH.items() if k != "mean_e2el_ms"}))
    with pytest.raises(CalibrationError, match="mean_ttft_ms: .* outside"):
        parse_vllm_bench(json.dumps({**BENCH, "mean_ttft_ms": -3}))
    with pytest.raises(CalibrationError, match="model_name: the scrape mixes models"):
        parse_prometheus(PROM + 'vllm:prompt_tokens_total{model_name="other"} 5\n')
    with pytest.raises(CalibrationError, match="not JSON"):
        parse_vllm_bench("{nope")


def _qwen():
    exp = next(e for e in load_experiments() if e["exp_id"] == 64)
    return _specs(exp)


def test_fit_recovers_the_coefficients_a_simulated_measurement_was_made_with():
    from simulator.calibration.fit import _predict, replay_workload
    from simulator.clock.cost_model import RooflineCoefficients
    from simulator.sizing.closed_form import plan

    model, gpu = _qwen()
    dep = DeploymentSpec(max_num_batched_tokens=2048, max_num_seqs=128, max_model_len=4096)
    truth = {**RooflineCoefficients().to_dict(), "bandwidth_efficiency": 0.6, "serve_request_s": 0.02}
    probe = Measurement("csv", None, 60, 750, 60, 1.0, 0.01, 2.0, request_rate=3.0)
    wl = replay_workload(probe, max_requests=60)
    size = plan(model, gpu, dep)
    engine = {"num_gpu_blocks": int(size.num_gpu_blocks), "block_size": 16, "max_num_seqs": 128,
              "max_num_batched_tokens": 2048, "enable_prefix_caching": True, "enable_chunked_prefill": True}
    made = _predict(wl, engine, model, gpu, dep, truth)
    meas = Measurement("csv", None, 60, 750, 60, made["ttft_s"], made["itl_s"], made["e2e_s"], request_rate=3.0)
    res = fit(meas, model, gpu, dep, fit_params=("bandwidth_efficiency", "serve_request_s"), max_requests=60,
              max_evaluations=15)
    assert res.fitted["bandwidth_efficiency"] == pytest.approx(0.6, rel=0.05)
    assert res.fitted["serve_request_s"] == pytest.approx(0.02, rel=0.15)
    assert max(abs(v) for v in res.error_pct.values()) < 2.0
    assert max(abs(v) for v in res.error_before_pct.values()) > 5.0
    again = fit(meas, model, gpu, dep, fit_params=("bandwidth_efficiency", "serve_request_s"), max_requests=60,
                max_evaluations=15)
    assert again.fitted == res.fitted  # reproducible
    assert res.evaluations + 2 <= fit_simulations(2, 15)  # the simulations the price counts bound the fit's


def test_a_fit_is_priced_by_its_replayed_load_and_its_most_simulations():
    """Issue 37: the price a calibration is refused by, before any simulation runs."""
    model, gpu = _qwen()
    dep = DeploymentSpec(max_num_batched_tokens=2048, max_num_seqs=128, max_model_len=4096)
    meas = parse_measurement(json.dumps(BENCH))  # 200 requests of 750 + 250 tokens at 4/s
    base = price_fit(meas, model, gpu, dep, max_requests=200, max_evaluations=20)
    assert fit_simulations(3, 20) == 82
    assert base.seconds == pytest.approx(price_fit(meas, model, gpu, dep, max_requests=200,
                                                   max_evaluations=10).seconds * 82 / 42)
    fewer = price_fit(meas, model, gpu, dep, max_requests=50, max_evaluations=20)  # only 50 replayed
    longer = price_fit(parse_measurement(json.dumps({**BENCH, "total_output_tokens": 200 * 2500})), model, gpu, dep,
                       max_requests=200, max_evaluations=20)
    assert fewer.seconds < base.seconds / 2 < base.seconds * 5 < longer.seconds
    assert base.memory_bytes == price_fit(meas, model, gpu, dep, max_requests=200, max_evaluations=5).memory_bytes
    with pytest.raises(CalibrationError, match="request_rate"):  # refused as the fit would be
        price_fit(parse_measurement(PROM), model, gpu, dep)


def test_fit_refuses_unknown_parameters_and_a_scrape_without_rate():
    model, gpu = _qwen()
    meas = parse_measurement(PROM)
    with pytest.raises(CalibrationError, match="'speed' cannot be fitted"):
        fit(meas, model, gpu, DeploymentSpec(), fit_params=("speed",))
    with pytest.raises(CalibrationError, match="request_rate"):
        fit(meas, model, gpu, DeploymentSpec(max_model_len=4096))
