"""``python -m simulator day``: a day of traffic against an autoscaling policy, priced (docs/autoscaling.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import commands as cli

AZURE = str(Path(__file__).resolve().parents[1] / "data" / "traces" / "azure_conv_2023_head1500.csv")


@pytest.fixture
def config(tmp_path) -> str:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 64,
                                "max_num_batched_tokens": 2048, "max_model_len": 16_384,
                                "step_time_model": {"base_s": 0.012, "per_token_s": 2.1e-05, "per_req_s": 1e-4}}))
    return str(path)


def run(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_a_day_on_a_public_trace_prints_the_answer_the_pods_and_the_fleet(capsys, config):
    code, out, err = run(capsys, "day", "--workload", AZURE, "--config", config, "--trace-speedup", "3",
                         "--policy", '{"kind": "hpa", "metric": "running", "target": 16, "max_replicas": 4}',
                         "--cold-start-s", "30", "--gpus-per-replica", "2", "--price-per-gpu-hour", "3",
                         "--slo-ttft-s", "1", "--slo-tpot-s", "0.05")
    assert code == 0, err
    ans, fleet = out["answer"], out["fleet"]
    assert out["trace"]["format"] == "azure" and ans["requests"] == out["trace"]["requests"]
    assert ans["replicas_started"] == len(out["pods"]) >= 2  # it scaled up
    assert ans["cost"] == pytest.approx(ans["gpu_hours"] * 3)
    assert max(r + s for r, s in zip(fleet["ready"], fleet["starting"], strict=True)) == ans["peak_replicas"] <= 4
    assert len(fleet["time_s"]) == len(fleet["desired"]) >= 6 and fleet["time_s"][0] == 15.0


def test_an_oracle_gets_the_workload_s_own_rates_and_a_lead_of_cold_start_plus_sync(capsys, config):
    code, out, err = run(capsys, "day", "--workload", AZURE, "--config", config, "--weights-gib", "15",
                         "--cold-start", '{"compile_s": 0}',
                         "--policy", '{"kind": "oracle", "capacity_per_replica": 2, "period_s": 60}')
    assert code == 0, err
    # 25 s container + 15 GiB at 1 GiB/s + no compile + 20 s graphs
    assert out["cold_start_s"] == pytest.approx(60.0)
    assert out["policy"]["lead_s"] == pytest.approx(75.0) and len(out["policy"]["rates"]) >= 5


def test_in_chunks_the_answer_is_the_one_run_s_within_two_percent(capsys, config):
    argv = ["day", "--workload", AZURE, "--config", config, "--trace-speedup", "3", "--cold-start-s", "30",
            "--policy", '{"kind": "hpa", "metric": "running", "target": 16, "max_replicas": 4}']
    code, whole, err = run(capsys, *argv)
    assert code == 0, err
    code, chunked, err = run(capsys, *argv, "--chunk-s", "45", "--overlap-s", "15")
    assert code == 0, err
    assert chunked["chunks"] == {"chunk_s": 45.0, "overlap_s": 15.0} and whole["chunks"] is None
    assert chunked["answer"]["gpu_hours"] == pytest.approx(whole["answer"]["gpu_hours"], rel=0.02)
    assert chunked["answer"]["requests"] == whole["answer"]["requests"]


def test_chunks_on_two_processes_give_the_answer_of_chunks_one_after_another(capsys, config):
    argv = ["day", "--workload", AZURE, "--config", config, "--trace-speedup", "3", "--cold-start-s", "30",
            "--policy", '{"kind": "hpa", "metric": "running", "target": 16, "max_replicas": 4}',
            "--chunk-s", "45", "--overlap-s", "15"]
    code, one, err = run(capsys, *argv)
    assert code == 0, err
    code, two, err = run(capsys, *argv, "--processes", "2")
    assert code == 0, err
    assert two["chunks"]["processes"] == 2 and "chains_met_at" in two["chunks"]
    assert (two["answer"], two["pods"], two["fleet"]) == (one["answer"], one["pods"], one["fleet"])


@pytest.mark.parametrize(("argv", "words"), [
    (["--policy", '{"kind": "fixed"}', "--processes", "2"], "--processes: needs --chunk-s"),
    (["--policy", '{"kind": "fixed"}', "--chunk-s", "300", "--processes", "0"], "processes: must be a whole number"),
    (["--policy", '{"kind": "hpa", "min_replicas": 4, "max_replicas": 2}'], "policy.max_replicas: 2 is below"),
    (["--policy", '{"kind": "autoscale"}'], "policy.kind: must be one of"),
    (["--policy", "{not json"], "--policy: invalid JSON"),
    (["--policy", '{"kind": "fixed"}', "--cold-start-s", "-5"], "cold_start_s: must be 0 to 86,400"),
    (["--policy", '{"kind": "fixed"}', "--cold-start", '{"warmup_s": 3}'], "cold_start.warmup_s: unknown field"),
    (["--policy", '{"kind": "fixed"}', "--price-per-gpu-hour", "0"], "price_per_gpu_hour: must be a number > 0"),
    (["--policy", '{"kind": "fixed"}', "--chunk-s", "50"], "chunk_s: must be a whole number of the policy's syncs"),
])
def test_bad_input_is_one_line_and_exit_status_2(capsys, config, argv, words):
    code, out, err = run(capsys, "day", "--workload", AZURE, "--config", config, *argv)
    assert code == 2 and out is None
    assert err.startswith("error: ") and words in err and err.count("\n") == 1
