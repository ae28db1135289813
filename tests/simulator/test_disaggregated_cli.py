"""``python -m simulator cluster --disaggregated FILE`` and the aggregated-vs-xPyD comparison.

Proved: the command prints the deployment's result (the same figures as the library call), sweeps the
pool sizes given as lists (prefill counts slowest), and answers bad input with one ``error:`` line
naming the option or the file's field, status 2; :func:`compare_splits` keeps the GPU count and cost
of every row, its aggregated row is :func:`simulate_cluster`'s, and its splits are
:func:`simulate_disaggregated`'s.
"""

from __future__ import annotations

import json
import math

import pytest

from simulator.cli import commands as cli
from simulator.cluster.compare import compare_splits
from simulator.cluster.disaggregated import DisaggError, DisaggregatedDeployment, KvLink, Pool, deployment_from_dict
from simulator.cluster.replicas import simulate_cluster
from simulator.engine.config import EngineConfig, StepTimeModel
from simulator.workload.generators import ArrivalProcess, WorkloadSpec, generate_workload

CFG = {"num_gpu_blocks": 600, "max_num_seqs": 32, "max_num_batched_tokens": 1024,
       "step_time_model": {"base_s": 0.004, "per_token_s": 2e-5, "per_req_s": 1e-4}}
DEPLOYMENT = {"prefill": {"config": CFG, "num_instances": 1, "routing": "least-loaded"},
              "decode": {"config": CFG, "num_instances": 2, "routing": "least-loaded"},
              "link": {"bandwidth_gbps": 25, "latency_s": 0.0002}, "kv_bytes_per_token": 131072}


@pytest.fixture()
def files(tmp_path):
    wl_path = tmp_path / "wl.json"
    assert cli.main(["workload", "--n", "80", "--arrival", "poisson-time:30", "--prompt", "normal:300,80",
                     "--output", "normal:30,10", "--out", str(wl_path)]) == 0
    dep_path = tmp_path / "dep.json"
    dep_path.write_text(json.dumps(DEPLOYMENT))
    return str(wl_path), str(dep_path)


def test_cli_prints_the_deployments_result(files, capsys):
    wl, dep = files
    assert cli.main(["cluster", "--workload", wl, "--disaggregated", dep, "--slo-ttft-s", "0.2", "--requests"]) == 0
    d = json.loads(capsys.readouterr().out)
    ref = deployment_from_dict(dict(DEPLOYMENT, slo_ttft_s=0.2)).run(cli.load_workload_file(wl))
    assert d["name"] == "1P2D" and d["totals"] == ref.totals and d["totals"]["finished"] == 80
    assert d["latency"]["ttft"]["p90"] == ref.latency.ttft.p90 and d["latency"]["slo_ttft_s"] == 0.2
    assert d["transfer"]["p90_s"] == ref.transfer["p90_s"] > 0
    assert [len(d["pools"][k]["instances"]) for k in ("prefill", "decode")] == [1, 2]
    assert len(d["requests"]["decode_instance"]) == 80


def test_cli_sweeps_pool_sizes(files, capsys):
    wl, dep = files
    assert cli.main(["cluster", "--workload", wl, "--disaggregated", dep, "--prefill-instances", "1,2",
                     "--decode-instances", "1,3"]) == 0
    pts = json.loads(capsys.readouterr().out)["points"]
    assert [p["name"] for p in pts] == ["1P1D", "1P3D", "2P1D", "2P3D"]
    assert [p["totals"]["num_gpus"] for p in pts] == [2, 4, 3, 5]


@pytest.mark.parametrize("extra,fragment", [
    (["--prefill-instances", "0"], "--prefill-instances: must be between 1 and 256"),
    (["--decode-instances", "x"], "--decode-instances 'x'"),
    (["--instances", "2"], "--instances does not go with --disaggregated"),
    (["--slo-itl-s", "-1"], "--slo-itl-s: must be > 0"),
    (["--max-memory-gib", "0.001"], "This disaggregated run is estimated to need about"),
])
def test_cli_bad_input_is_one_line(files, capsys, extra, fragment):
    wl, dep = files
    assert cli.main(["cluster", "--workload", wl, "--disaggregated", dep, *extra]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines


@pytest.mark.parametrize("change,fragment", [
    ({"link": {"bandwidth_gbps": 0}}, "--disaggregated link.bandwidth_gbps: must be > 0"),
    ({"decode": {"config": CFG, "num_instances": 0}}, "--decode-instances: must be between 1 and 256"),
    ({"prefill": {"config": dict(CFG, max_num_seqs=0)}}, "--disaggregated prefill.config.max_num_seqs"),
])
def test_cli_bad_file_names_the_field(files, capsys, tmp_path, change, fragment):
    wl, _ = files
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**DEPLOYMENT, **change}))
    assert cli.main(["cluster", "--workload", wl, "--disaggregated", str(bad)]) == 2
    err = capsys.readouterr().err
    assert fragment in err, err


def test_cli_without_config_or_deployment(files, capsys):
    wl, _ = files
    assert cli.main(["cluster", "--workload", wl, "--instances", "2"]) == 2
    assert "--config" in capsys.readouterr().err


def test_compare_splits_keeps_gpus_and_cost():
    wl = generate_workload(WorkloadSpec(n=150, prompt="normal:500,100", output="normal:40,10",
                                        arrival=ArrivalProcess("poisson", rate=25, unit="s")), 2)
    cfg = EngineConfig(num_gpu_blocks=800, max_num_seqs=32, max_num_batched_tokens=1024,
                       step_time_model=StepTimeModel(base_s=0.004, per_token_s=2e-5, per_req_s=1e-4))
    rows = compare_splits(wl, cfg, instances=4, kv_bytes_per_token=65536, cost_per_hour=2.0,
                          link=KvLink(math.inf, 0.0))
    assert [r.name for r in rows] == ["aggregated x4", "1P3D", "2P2D", "3P1D"]
    assert {r.num_gpus for r in rows} == {4} and {r.cost_per_hour for r in rows} == {8.0}
    agg = simulate_cluster(wl, cfg, 4, routing="least-loaded")
    assert rows[0].ttft_p90_s == agg.latency.ttft.p90 and rows[0].finished == agg.totals["finished"] == 150
    two = DisaggregatedDeployment(Pool(cfg, 2, "least-loaded"), Pool(cfg, 2, "least-loaded"), KvLink(math.inf, 0.0),
                                  kv_bytes_per_token=65536).run(wl)
    assert rows[2].ttft_p90_s == two.latency.ttft.p90 and rows[2].itl_p90_s == two.latency.itl.p90
    # prefill and decode no longer share a step: the decode pool has none of the long gaps of aggregated steps
    # that also carry a prefill (every token gap: the p90 is a plain decode step in both, the p99 is not)
    one = DisaggregatedDeployment(Pool(cfg, 1, "least-loaded"), Pool(cfg, 3, "least-loaded"), KvLink(math.inf, 0.0),
                                  kv_bytes_per_token=65536).run(wl)
    assert rows[1].itl_p90_s == one.latency.itl.p90 <= rows[0].itl_p90_s
    assert one.latency.itl.p99 < 0.5 * agg.latency.itl.p99 and one.latency.itl.mean < agg.latency.itl.mean
    with pytest.raises(DisaggError, match="^splits:"):
        compare_splits(wl, cfg, instances=4, kv_bytes_per_token=65536, splits=[4])


def test_the_worked_example_claims_hold():
    """docs/disaggregated_serving.md's worked example (Llama 3.1 8B on four H100s, 20 requests/s, prompts
    normal(2048, 512), outputs normal(256, 64), 600 requests, seed 0): at equal GPUs and cost, aggregated
    replicas have the lowest TTFT p90, 1P3D the lowest ITL p90 but more than four times the aggregated TTFT;
    a third prefill GPU (3P1D) leaves TTFT p90 within 10 % of 2P2D's either side (154 against 149 ms on the
    sampler clock): it shortens the prefill side (arrival to handoff) but the single decode instance, which
    has the highest ITL, admits later and takes longer steps; every deployment serves every request."""
    import json as _json
    from pathlib import Path

    from simulator.base.specs import GpuSpec
    from simulator.cluster.compare import engine_config_for
    from simulator.sizing.hf_config import parse_hf_config

    root = Path(__file__).resolve().parents[2]
    model = parse_hf_config(_json.loads(
        (root / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text()))
    h100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989,
                   fp8_tflops=1979, interconnect_gbps=900, price_per_hour=3.78)
    wl = generate_workload(WorkloadSpec(n=600, prompt="normal:2048,512", output="normal:256,64",
                                        arrival=ArrivalProcess("poisson", rate=20.0, unit="s")), 0)
    cfg, kvbpt = engine_config_for(model, h100, max_model_len=4096)
    assert cfg.num_gpu_blocks == 28057 and kvbpt == 131072  # 28,073 before the rotary cache (32 MiB) was counted
    agg, p1, p2, p3 = compare_splits(wl, cfg, instances=4, kv_bytes_per_token=kvbpt, cost_per_hour=3.78,
                                     link=KvLink(50.0, 1e-4))
    assert all(r.cost_per_hour == pytest.approx(15.12) for r in (agg, p1, p2, p3))
    assert all(r.finished == 600 for r in (agg, p1, p2, p3))
    assert agg.ttft_p90_s < p2.ttft_p90_s < p1.ttft_p90_s and p1.ttft_p90_s > 4 * agg.ttft_p90_s
    assert p1.itl_p90_s < agg.itl_p90_s < p3.itl_p90_s
    assert 0.9 * p2.ttft_p90_s <= p3.ttft_p90_s <= 1.1 * p2.ttft_p90_s
    assert p1.prefill_utilisation > 1.8 * p2.prefill_utilisation
    # why: the third prefill GPU shortens the prefill side, the single decode instance lengthens the rest
    two, three = (DisaggregatedDeployment(Pool(cfg, x, "least-loaded"), Pool(cfg, 4 - x, "least-loaded"),
                                          KvLink(50.0, 1e-4), kv_bytes_per_token=int(kvbpt)).run(wl) for x in (2, 3))
    assert three.prefill_ttft["p90_s"] < two.prefill_ttft["p90_s"]
    assert three.pools["decode"]["queueing_p90_s"] > two.pools["decode"]["queueing_p90_s"]
    assert three.latency.itl.p50 > 1.5 * two.latency.itl.p50
