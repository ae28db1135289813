"""No silent fallback: every catalog model x GPU x TP that fits is timed by the roofline clock.

Before, ``GpuProfile.to_spec()`` dropped the interconnect and every TP > 1 deployment fell back to the
25 ms-a-step linear model without a word. A GPU without an NVLink figure talks over PCIe.
"""

import math
from dataclasses import replace

from gpuprofiles.models import GpuProfile, ModelProfile
from planner.sweeps.specs import roofline_note, roofline_terms
from simulator.base.specs import DeploymentSpec
from simulator.clock.cost_model import RooflineStepTime
from simulator.sizing.closed_form import check_parallelism, plan


def test_every_catalog_gpu_has_a_gpu_to_gpu_bandwidth(db):
    gpus = list(GpuProfile.objects.filter(is_catalog=True))
    assert len(gpus) >= 20
    for g in gpus:
        assert g.to_spec().interconnect_gbps, g.slug
    h100 = next(g for g in gpus if g.name == "H100 SXM5 80GB").to_spec()
    l40s = next(g for g in gpus if g.name == "L40S").to_spec()
    assert h100.interconnect_gbps == 900 and l40s.interconnect_gbps == 64  # NVLink4; PCIe Gen4 x16 both ways


def test_every_catalog_model_gpu_and_tp_that_fits_gets_a_roofline_clock(db):
    # layers spelled out once per model (the same specs; spares rebuilding them in every sizing call)
    models = [replace(s, layers=s.layer_specs) for s in (m.to_spec() for m in ModelProfile.objects.filter(is_catalog=True))]
    gpus = [g.to_spec() for g in GpuProfile.objects.filter(is_catalog=True)]
    timed = 0
    for model in models:
        for gpu in gpus:
            if not (gpu.bandwidth_tbps and (gpu.bf16_tflops or gpu.fp8_tflops)):
                continue
            for tp in (1, 2, 4, 8):
                try:
                    check_parallelism(model, tp)
                except ValueError:
                    continue
                dep = DeploymentSpec(tensor_parallel_size=tp, max_model_len=4096)
                if not plan(model, gpu, dep).fits:
                    continue
                clock = RooflineStepTime.from_specs(model, gpu, deployment=dep)
                t = clock.terms.time(0, 0, 8, 8000, 8)
                assert math.isfinite(t) and 0 < t < 10, (model.name, gpu.name, tp)
                if tp > 1:
                    assert clock.terms.comm_fixed_s > 0, (model.name, gpu.name, tp)
                timed += 1
    assert timed > 300


def test_a_gpu_without_a_link_at_tp_2_is_told_why_it_has_no_roofline():
    model = {"name": "m", "num_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "num_kv_heads": 4,
             "head_dim": 64, "vocab_size": 1000, "intermediate_size": 512, "num_parameters": 3_000_000}
    gpu = {"name": "lab card", "memory_gib": 24.0, "bandwidth_tbps": 1.0, "bf16_tflops": 100.0}
    dep = DeploymentSpec(tensor_parallel_size=2).to_dict()
    assert roofline_terms(model, gpu, dep) is None
    note = roofline_note(model, gpu, dep)
    assert "interconnect_gbps" in note and "linear step_time_model" in note
    # at TP 1 it has a roofline, but nothing measured on this card: the note says so (issue 30)
    assert roofline_note(model, gpu, DeploymentSpec().to_dict()) == (
        "lab card: timed from data-sheet peaks; not checked against a measurement")
    measured = {**gpu, "measured": {"bandwidth_efficiency": 0.7}, "measured_source": "our bench"}
    assert roofline_note(model, measured, DeploymentSpec().to_dict()) is None
