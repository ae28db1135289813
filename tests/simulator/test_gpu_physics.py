"""Per-GPU clock physics (issue 30): measured figures with their sources, and a label where there are none.

The shipped table (``simulator/data/gpu_physics.json``) comes from NVIDIA AIConfigurator's operator database
(``tools/aic/derive_gpu_physics.py``); the cross-check table (``simulator/data/aic_steps.json``) from its vLLM
backend (``tools/aic/aic_steps.py``). Both are files of the repository, read here as users get them.
"""

import json
import math

import pytest

from simulator.base import DeploymentSpec, GpuSpec, SpecError
from simulator.calibration.crosscheck import CASES, clock_case_steps, cross_check, summary
from simulator.clock import UNMEASURED_NOTE, RooflineStepTime, gpu_physics, measured_gpu_names
from simulator.clock.cost_model import RooflineCoefficients
from simulator.clock.physics import GPU_PHYSICS
from simulator.sizing import parse_hf_config

H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)
A100 = GpuSpec(name="A100 SXM4 80GB", memory_gib=79.15, bandwidth_tbps=2.039, bf16_tflops=312, interconnect_gbps=600)
NEW = GpuSpec(name="My accelerator", memory_gib=79.15, bandwidth_tbps=2.039, bf16_tflops=312, interconnect_gbps=600)
LLAMA_8B = parse_hf_config({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                            "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
                           name="meta-llama/Llama-3.1-8B-Instruct")


def test_every_shipped_figure_is_in_range_and_has_a_source():
    data = json.loads(GPU_PHYSICS.read_text())
    assert {"H100 SXM5 80GB", "H200 SXM 141GB", "A100 SXM4 80GB", "L40S"} <= set(data["gpus"])
    for name, entry in data["gpus"].items():
        rows = [entry["coefficients"], *entry["by_tp"].values()]
        for row in rows:
            for key, fig in row.items():
                assert fig["source"], (name, key)
                v = fig["value"]
                assert math.isfinite(v) and v >= 0, (name, key, v)
                if key.endswith("efficiency") or key.endswith("mfu"):
                    assert 0 < v <= 1, (name, key, v)
        GpuSpec(name=name, memory_gib=40, measured={k: f["value"] for k, f in entry["coefficients"].items()})


def test_the_h100_keeps_its_calibrated_coefficients():
    # the training runs were fitted on H100: its shipped physics must not move the figures they were fitted at
    got = gpu_physics(H100, 4).coefficients
    defaults = RooflineCoefficients()
    for key in ("mfu", "bandwidth_efficiency", "kv_bandwidth_efficiency", "attention_efficiency", "layer_overhead_s",
                "allreduce_latency_s", "interconnect_efficiency", "nccl_allreduce_latency_s", "expert_bandwidth_efficiency"):
        assert got.get(key, getattr(defaults, key)) == getattr(defaults, key), key


def test_a100_decode_is_timed_at_its_measured_bandwidth_not_the_h100s():
    measured = RooflineStepTime.from_specs(LLAMA_8B, A100)
    borrowed = RooflineStepTime.from_specs(LLAMA_8B, NEW)  # same peaks, no measurement
    assert measured.coefficients.bandwidth_efficiency < 0.8 < borrowed.coefficients.bandwidth_efficiency
    assert measured.decode_step_time(1, 1024) > 1.1 * borrowed.decode_step_time(1, 1024)
    assert "A100 SXM4 80GB" in measured.physics_note and "aiconfigurator" in measured.physics_note
    assert borrowed.physics_note == UNMEASURED_NOTE == "timed from data-sheet peaks; not checked against a measurement"


def test_a_gpu_is_found_by_its_other_names_and_its_sampler_proxy_is_said():
    for name in ("A100-80GB", "nvidia a100-sxm4-80gb"):
        phys = gpu_physics(GpuSpec(name=name, memory_gib=79, bandwidth_tbps=2.039, bf16_tflops=312))
        assert phys.measured and phys.coefficients["sampler_scale"] > 1
        assert "sampler_scale" in phys.unmeasured and "not measured there" in phys.note
    assert "L40S" in measured_gpu_names()


def test_a_profiles_own_measurement_wins_and_is_labelled_with_its_source():
    own = GpuSpec(name="A100 SXM4 80GB", memory_gib=79, bandwidth_tbps=2.039, bf16_tflops=312,
                  measured={"bandwidth_efficiency": 0.5}, measured_source="our nsys profile, 2026-03")
    clock = RooflineStepTime.from_specs(LLAMA_8B, own)
    assert clock.coefficients.bandwidth_efficiency == 0.5
    assert clock.physics_note == "our nsys profile, 2026-03"
    # explicit coefficients still win over the GPU's
    assert RooflineStepTime.from_specs(LLAMA_8B, own, coefficients={"bandwidth_efficiency": 0.9}
                                       ).coefficients.bandwidth_efficiency == 0.9


@pytest.mark.parametrize("bad, words", [({"mfu": 0}, "measured.mfu"), ({"mfu": 1.5}, "measured.mfu"),
                                        ({"kv_bandwidth_efficiency": float("nan")}, "measured.kv_bandwidth_efficiency"),
                                        ({"layer_overhead_s": -1e-6}, "measured.layer_overhead_s"),
                                        ({"sampler_scale": 0}, "measured.sampler_scale"),
                                        ({"flops": 0.5}, "measured.flops: unknown"), ("fast", "measured:")])
def test_absurd_measurements_are_refused_naming_the_field(bad, words):
    with pytest.raises(SpecError, match=words.replace(".", r"\.")):
        GpuSpec(name="X", memory_gib=40, measured=bad)


def test_a_gpu_without_measurements_writes_as_before():
    assert "measured" not in NEW.to_dict()
    assert GpuSpec(**A100.to_dict()) == A100
    own = GpuSpec(name="X", memory_gib=40, measured={"mfu": 0.6}, measured_source="bench")
    assert GpuSpec(**own.to_dict()) == own and own.to_dict()["measured"] == {"mfu": 0.6}


def test_fp8_gemms_run_at_the_measured_fp8_rate_not_twice_bf16():
    fp8 = parse_hf_config({**{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                              "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
                           "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}, name="x")
    bf16 = RooflineStepTime.from_specs(LLAMA_8B, H100).prefill_time(8192)
    q = RooflineStepTime.from_specs(fp8, H100).prefill_time(8192)
    unmeasured = RooflineStepTime.from_specs(fp8, GpuSpec(**{**H100.to_dict(), "name": "H100 clone"})).prefill_time(8192)
    assert 1.15 < bf16 / q < 1.6 < bf16 / unmeasured  # the data-sheet ratio alone says ~1.9


def test_mla_decode_attention_is_timed_on_the_absorbed_path():
    ds = parse_hf_config(json.loads((GPU_PHYSICS.parent / "crosscheck_models.json").read_text())
                         ["models"]["DeepSeek-V3"]["config"], name="DeepSeek-V3")
    clock = RooflineStepTime.from_specs(ds, H100, deployment=DeploymentSpec(tensor_parallel_size=8))
    per_token = clock.terms.dec_attn_s
    flops = 61 * (2 * 16 * (512 + 64) + 2 * 16 * 512)  # 128 heads / TP 8, per context token
    assert per_token >= flops / (989e12 * clock.coefficients.mla_attention_efficiency) * 0.999
    assert clock.terms.gpu_fixed_s > 61 * clock.coefficients.layer_overhead_s  # + the MLA and MoE fixed times


def test_the_cross_check_runs_on_the_shipped_table_and_holds_the_dense_goals():
    source, rows, skipped = cross_check(live=False)
    assert "shipped" in source and not skipped
    assert {r.case for r in rows} == set(CASES)
    s = summary(rows)
    for gpu in ("H100", "H200", "A100"):
        assert s[f"dense {gpu} bf16"][0] <= 10.0
    for gpu in ("H100", "H200"):
        assert s[f"dense {gpu} fp8"][0] <= 10.0
    assert s["DeepSeek-V3 H100 fp8-block"][0] < 30.0


def test_the_clock_side_of_the_cross_check_leaves_the_sampler_out():
    case = next(c for c in CASES if c.model == "Llama 3.1 8B" and c.gpu == "H100" and c.tp == 1 and c.precision == "bf16")
    steps = clock_case_steps(case)
    full = RooflineStepTime.from_specs(LLAMA_8B, H100)
    assert steps["decode b1 c1024"] < full.decode_step_time(1, 1025) * 1e3 - 0.3  # 0.4 ms sampler, 0.5 ms CPU


def test_vllms_default_scheduler_follows_the_version_rules_and_sync_is_one_option_away():
    from simulator.cluster.compare import engine_config_for
    from simulator.search import SearchSpace
    from simulator.search.evaluate import prepare_candidate
    from simulator.search.space import Slo, SloTarget
    from simulator.sizing import default_async_scheduling
    from simulator.workload import WorkloadSpec, generate_workload

    assert default_async_scheduling(None) and default_async_scheduling("0.14.0") and default_async_scheduling("0.15.1")
    assert not default_async_scheduling("0.13.2") and not default_async_scheduling(None, False)
    wl = generate_workload(WorkloadSpec.from_dict({"n": 10, "prompt": "uniform:16,64", "output": "uniform:4,8",
                                                   "arrival": {"kind": "poisson", "rate": 5, "unit": "s"}}), seed=0)
    slo = Slo((SloTarget("ttft", "p90", 10.0),))
    priced = GpuSpec(**{**H100.to_dict(), "price_per_hour": 3.0})
    for chosen, want in ((None, True), (False, False)):
        space = SearchSpace((priced,), tensor_parallel=(1,), async_scheduling=chosen)
        cfg = prepare_candidate(0, space.candidates()[0], LLAMA_8B, space, 4096, wl, slo).config
        assert cfg.async_scheduling is want
    assert engine_config_for(LLAMA_8B, H100, max_model_len=4096)[0].async_scheduling
    with pytest.raises(ValueError, match="space.async_scheduling"):
        SearchSpace((priced,), async_scheduling="yes")
