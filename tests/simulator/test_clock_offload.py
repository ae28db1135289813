"""CPU KV offload in the step clock: every filled KV block is copied to host memory one layer's K or V at a time,
each copy paying a fixed latency (measured on one H100: tests/data/latency/h100_sampler_offload_times.json), so an
offloading deployment's steps grow with the tokens they write (docs/cost-model.md, "CPU KV offload")."""

import json
from pathlib import Path

import pytest

from simulator.base.specs import DeploymentSpec, GpuSpec
from simulator.calibration.validation import build_run, load_experiments
from simulator.clock.cost_model import CostModelError, RooflineCoefficients, RooflineStepTime
from simulator.sizing.hf_config import parse_hf_config

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, interconnect_gbps=900)
MEASURED = json.loads((DATA / "latency" / "h100_sampler_offload_times.json").read_text())


def _llama8b():
    return parse_hf_config(json.loads((DATA / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json")
                                      .read_text()))


def test_a_copy_per_block_layer_and_k_or_v_costs_a_fixed_latency_whatever_its_size():
    rows = [r for r in MEASURED["offload"] if "copies" in r]
    assert {r["bytes_per_copy"] for r in rows} == {16384, 32768, 131072}
    for r in rows:
        assert 10.0 <= r["us_per_copy"] <= 20.0, r
    co = RooflineCoefficients()
    assert min(r["us_per_copy"] for r in rows) * 1e-6 <= co.kv_offload_copy_s <= 1.2 * min(
        r["us_per_copy"] for r in rows) * 1e-6
    link = [r["gbps"] for r in MEASURED["offload"] if "gbps" in r]
    assert co.host_link_gbps == pytest.approx(sum(link) / len(link), rel=0.05)


def test_offloading_adds_the_copies_of_the_tokens_written_to_every_step():
    model, dep = _llama8b(), DeploymentSpec(block_size=16)
    plain = RooflineStepTime.from_specs(model, H100, deployment=dep)
    off = RooflineStepTime.from_specs(model, H100, deployment=dep, cpu_offload=True)
    co = plain.coefficients
    per_token = 2 * 32 * co.kv_offload_copy_s / 16 + plain.kv_bytes_per_token_full / (co.host_link_gbps * 1e9)
    for decodes in (1, 16, 64):
        extra = off.decode_step_time(decodes, 1024) - plain.decode_step_time(decodes, 1024)
        assert extra == pytest.approx(decodes * per_token, rel=1e-9)
    # 64 decodes: 64 tokens = 4 blocks x 32 layers x (K, V) = 256 copies, about 3.3 ms at 13 us
    assert 3.0e-3 < 64 * per_token < 3.8e-3


def test_host_link_must_be_positive():
    with pytest.raises(CostModelError, match="host_link_gbps"):
        RooflineCoefficients(host_link_gbps=0)


def test_validation_offloads_where_the_run_did():
    exps = {e["exp_id"]: e for e in load_experiments()}
    assert sorted(i for i, e in exps.items() if e["cpu_offload"]) == [48, 66, 67]
    _, with_off = build_run(exps[66], max_requests=20)
    _, without = build_run({**exps[66], "cpu_offload": False}, max_requests=20)
    assert with_off.cost_model.kv_write_s > without.cost_model.kv_write_s
