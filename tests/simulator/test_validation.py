"""`python -m simulator validate`: the clock against the 13 real vLLM runs of the training split.

The medians are pinned on a reduced run (300 requests per experiment, each stage keeping its rate: enough
for every prompt of the set to be sent several times, so the prefix cache is warm as in the real runs; at 40
requests every prompt was still cold), so a change of the clock that makes them worse fails here.
Full-length figures: docs/cost-model.md.
"""

import json

import pytest

from simulator.calibration.validation import build_run, load_experiments, medians, trace_csv, validate
from simulator.cli.commands import main

# median MAPE (%) of `validate(max_requests=300)` with the default coefficients (measured when pinned: the sampler's
# GPU time per run's generation_config path, the routed experts streamed at the dense rate 0.84, serving 7 ms; TTFT
# reads higher here than at 2,000 requests (4.3 %), where the serving time was fitted; before the sampler 9.08 / 3.06 /
# 2.92 / 5.10 (the TP = 1 runs' ITL -15 % signed); before the per-layer time 8.47 / 6.28 / 5.72 / 6.31; the clock of
# b2ad247, before async scheduling's overlap and lag, gave 14.51 / 6.43 / 7.83 / 5.99). Re-pinned with the measured
# GPU physics (issue 30: the four Llama-4-Scout FP8 runs now compute at the H100's measured fp8 GEMM rate and pay the
# fused-MoE fixed time): 8.89 / 2.76 / 3.13 / 1.87 -> 8.89 / 2.53 / 3.13 / 2.24 (the p90 of run 21 moves 2.1 -> 3.0 %).
PINNED_300 = {"ttft_mean": 8.89, "itl_mean": 2.53, "e2e_mean": 3.13, "e2e_p90": 2.24}


@pytest.fixture(scope="module")
def scores_300():
    return validate(max_requests=300)


def test_the_training_split_holds_13_runs_with_measurements_and_blis_errors():
    exps = load_experiments()
    assert len(exps) == 13 and len({e["name"] for e in exps}) == 13
    assert all(e["gpu"]["interconnect_gbps"] for e in exps)
    assert all(set(e["blis_mape"]) == {"blis-evolved", "blis-roofline"} for e in exps)
    assert not any("iter36" in json.dumps(e) for e in exps)


def test_medians_of_the_reduced_run_are_no_worse_than_pinned(scores_300):
    got = medians(scores_300)
    for metric, pinned in PINNED_300.items():
        assert got[metric] <= pinned + 0.3, f"{metric}: {got[metric]:.2f} % > pinned {pinned} %"


def test_ttft_is_no_longer_systematically_short(scores_300):
    # before the serving time and the operator-group clock, TTFT was about half the measured value in 13 of 13;
    # the one left short is Llama-4-Scout reasoning-lite, a CPU-offload run (the offload connector is not modelled)
    short = [s for s in scores_300 if s.predicted["ttft_mean"] < 0.6 * s.measured["ttft_mean"]]
    assert len(short) <= 1
    signed = sorted((s.predicted["ttft_mean"] - s.measured["ttft_mean"]) / s.measured["ttft_mean"] for s in scores_300)
    assert abs(signed[len(signed) // 2]) < 0.10  # the median run is neither short nor long by more than 10 %


def test_the_tp1_runs_are_no_longer_short(scores_300):
    # Qwen2.5-7B and Llama 2 sample with top-k / top-p (their generation_config), a sort of every request's logits
    # each step that the clock did not charge: the five TP = 1 runs' median signed ITL was -15 % before the sampler
    tp1 = [(s.predicted["itl_mean"] - s.measured["itl_mean"]) / s.measured["itl_mean"] for s in scores_300 if s.tp == 1]
    assert len(tp1) == 5 and sorted(tp1)[2] > -0.08


def test_max_num_batched_tokens_changes_latency():
    # a smaller token budget splits prompts over more steps: each extra step pays its weights read and CPU
    # time again, so TTFT grows, and the decode steps riding with the chunks change ITL (a real run measured
    # 13 % more ITL at 1,024 than at 8,192; this clock moves ITL by well under 1 % here: docs/cost-model.md)
    from simulator.batch.runner import simulate

    exp = next(e for e in load_experiments() if e["exp_id"] == 63)
    lat = {}
    for mbt in (256, 8192):
        wl, cfg = build_run({**exp, "max_num_batched_tokens": mbt}, max_requests=150)
        lat[mbt] = simulate(wl, [cfg])[0].latency().to_dict()
    assert lat[256]["ttft"]["mean"] > 1.03 * lat[8192]["ttft"]["mean"]
    assert lat[256]["tpot"]["mean"] != lat[8192]["tpot"]["mean"]


def test_trace_keeps_stage_rates_and_prompt_set():
    exp = next(e for e in load_experiments() if e["workload"]["name"] == "general-lite")
    rows = trace_csv(exp["workload"], max_requests=100).splitlines()[1:]
    assert 95 <= len(rows) <= 105
    prompts = {r.split(",")[3] for r in rows}
    assert len(prompts) == 45  # 9 system prompts x 5 users, sent round-robin


def test_cli_prints_the_table_with_blis(capsys):
    assert main(["validate", "--max-requests", "13"]) == 0
    out = capsys.readouterr().out
    assert "median MAPE" in out and "blis-evolved (same runs)" in out
    assert out.count("H100") == 0 and len(out.splitlines()) == 1 + 13 + 1 + 1 + 3
    assert main(["validate", "--max-requests", "5"]) == 2
