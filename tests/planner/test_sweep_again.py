"""A cancelled sweep's "Edit and run again": the form filled with its definition (issue 33 item 6)."""

from __future__ import annotations

import pytest

from planner.sweeps.forms import SweepForm

pytestmark = pytest.mark.django_db


def _bound(values: dict) -> SweepForm:
    """The form as a browser sends it: what the page shows (``values`` over the fields' initial values)."""
    shown = {name: f.initial for name, f in SweepForm().fields.items() if name not in ("model", "gpu")}
    shown.update(values)
    data = {k: ("on" if v is True else v) for k, v in shown.items() if v is not False and v is not None}
    form = SweepForm(data)
    assert form.is_valid(), form.errors
    return form


def test_the_forms_definition_comes_back_as_the_same_form():
    base = {"name": "again", "mode": "grid", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
            "tensor_parallel_size": 1, "gpu_memory_utilization": 0.85, "block_size": 16, "max_num_seqs": 64,
            "enable_prefix_caching": True, "n": 200, "prompt": "normal:512,128", "output": "uniform:64,128",
            "arrival": "gamma:3,2", "arrival_unit": "s", "seed": 4, "prefix_length": 300, "prefix_fraction": 0.5,
            "axis1_param": "rate", "axis1_values": "1, 2, 4", "axis2_param": "routing",
            "axis2_values": "round-robin weighted:prefix-affinity:3,queue-depth:1", "cluster_instances": 2,
            "slo_ttft_ms": 500, "slo_percentile": "p99", "cliff_param": "num_gpu_blocks"}
    definition = _bound(base).to_definition()
    again = _bound(SweepForm.initial_from(definition)).to_definition()
    assert again == definition


def test_an_api_definition_is_written_in_the_forms_words():
    initial = SweepForm.initial_from({
        "name": "api", "engine": {"num_gpu_blocks": 900},
        "workload": {"spec": {"n": 50, "prompt": {"kind": "normal", "mean": 300, "std": 30},
                              "arrival": {"kind": "poisson", "rate": 2.5, "unit": "step"}}, "seed": 1},
        "axes": [{"param": "num_gpu_blocks", "start": 100, "stop": 500, "steps": 5, "scale": "log"}]})
    assert initial["model"] == "" and initial["gpu"] == ""  # engine only
    assert initial["prompt"].startswith("normal:300,30") and initial["arrival"] == "poisson:2.5"
    assert initial["arrival_unit"] == "step" and initial["num_gpu_blocks"] == 900
    assert (initial["axis1_values"], initial["axis1_start"], initial["axis1_steps"], initial["axis1_scale"]) == (
        "", 100, 5, "log")
