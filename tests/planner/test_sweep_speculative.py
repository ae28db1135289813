"""Sweeps over speculative decoding: the num_speculative_tokens and acceptance_rate axes."""

import pytest

from planner.sweeps import definition as defn
from planner.sweeps.runner import build_workload, simulate_points

SPEC = {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}
BASE = {"engine": {"num_gpu_blocks": 2000, "speculative": SPEC},
        "workload": {"spec": {"n": 40, "prompt": "const:100", "output": "const:60"}, "seed": 1}}


def errors_of(raw):
    with pytest.raises(defn.DefinitionError) as exc:
        defn.validate(raw, owner=None)
    return exc.value.errors


def run(raw):
    _, snap, pts = defn.validate(raw, owner=None)
    return snap, simulate_points(build_workload(pts[0]["workload"]), pts, record_steps=False)


def test_k_axis_engine_only():
    snap, res = run({**BASE, "axes": [{"param": "num_speculative_tokens", "values": [0, 1, 3]}]})
    assert [r["params"]["num_speculative_tokens"] for r in res] == [0, 1, 3]
    assert "spec_acceptance_rate" not in res[0]["metrics"]
    steps = [r["metrics"]["num_steps"] for r in res]
    assert steps[0] > steps[1] > steps[2]
    assert res[2]["metrics"]["spec_mean_acceptance_length"] == pytest.approx(1 + 0.7 + 0.49 + 0.343, abs=0.1)
    assert res[2]["metrics"]["output_tokens_per_step"] > res[0]["metrics"]["throughput_tok_per_step"]


def test_acceptance_axis_replaces_the_base_model():
    raw = {**BASE, "engine": {"num_gpu_blocks": 2000,
                              "speculative": {"method": "ngram", "num_speculative_tokens": 2,
                                              "position_acceptance_rates": [0.5, 0.2]}},
           "axes": [{"param": "acceptance_rate", "values": [0.0, 1.0]}]}
    _, res = run(raw)
    assert [r["metrics"]["spec_acceptance_rate"] for r in res] == [0.0, 1.0]


def test_llama_8b_h100_head_memory_and_clock(db):
    raw = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "deployment": {"max_model_len": 8192},
           "engine": {"speculative": SPEC},
           "workload": {"spec": {"n": 30, "prompt": "const:200", "output": "const:50",
                                 "arrival": {"kind": "poisson", "rate": 5, "unit": "s"}},
                        "seed": 1},
           "axes": [{"param": "num_speculative_tokens", "values": [0, 3]}]}
    _, snap, pts = defn.validate(raw, owner=None)
    off, on = pts
    assert off["config"]["num_gpu_blocks"] == snap["sizing"]["num_gpu_blocks"]
    assert on["config"]["num_gpu_blocks"] < off["config"]["num_gpu_blocks"]
    assert on["config"]["kv_bytes_per_block"] == off["config"]["kv_bytes_per_block"] + 16 * 4096
    assert on["config"]["speculative"]["draft_cost_model"]["tok_s"] > 0
    res = simulate_points(build_workload(on["workload"]), pts, record_steps=False)
    assert res[1]["metrics"]["itl_p50_s"] < res[0]["metrics"]["itl_p50_s"]


@pytest.mark.parametrize("axis, base, field, words", [
    ({"param": "num_speculative_tokens", "values": [0, 99]}, SPEC, "axes[0].values", "from 0 to 16"),
    ({"param": "acceptance_rate", "values": [0.5, 1.5]}, SPEC, "axes[0].values", "[0, 1]"),
    ({"param": "acceptance_rate", "values": [0.5, 0.6]}, None, "axes[0].param", "needs engine.speculative"),
    ({"param": "num_speculative_tokens", "values": [1, 2]}, {"method": "eagle"}, "axes[0].param",
     "acceptance model"),
])
def test_bad_axes_name_the_field(axis, base, field, words):
    engine = {"num_gpu_blocks": 2000, **({"speculative": base} if base else {})}
    errs = errors_of({**BASE, "engine": engine, "axes": [axis]})
    assert words in errs[field][0], errs


def test_bad_base_speculative_names_the_field():
    errs = errors_of({**BASE, "engine": {"num_gpu_blocks": 2000, "speculative": {**SPEC, "acceptance_rate": 2}},
                      "axes": [{"param": "max_num_seqs", "values": [4, 8]}]})
    assert "engine.speculative.acceptance_rate" in errs, errs


def test_the_schema_example_is_a_valid_definition(db):
    from planner.api.sweeps import EXAMPLE_SPECULATIVE_DEFINITION

    _, _, pts = defn.validate(EXAMPLE_SPECULATIVE_DEFINITION, owner=None)
    assert len(pts) == 15
    assert {p["config"]["speculative"]["acceptance_rate"] for p in pts} == {0.5, 0.7, 0.9}


def _logged_in_client():
    from django.contrib.auth import get_user_model
    from django.test import Client

    c = Client()
    c.force_login(get_user_model().objects.create_user("spec", password="pw-123456789"))
    return c


def test_sweep_form_sweeps_k_over_a_base_drafter(db):
    from planner.models import Sweep
    from tests.planner.test_sweep_pages import FORM

    client = _logged_in_client()
    r = client.post("/sweeps/new/", {**FORM, "speculative_method": "eagle", "num_speculative_tokens": "3",
                                     "acceptance_rate": "0.7", "axis1_param": "num_speculative_tokens",
                                     "axis1_values": "0, 2, 4"})
    assert r.status_code == 302, r.content.decode()[:3000]
    snap = Sweep.objects.get().snapshot
    assert snap["engine"]["speculative"]["acceptance_rate"] == 0.7
    assert snap["axes"] == [{"param": "num_speculative_tokens", "values": [0, 2, 4]}]


@pytest.mark.parametrize("change, field, text", [
    ({"speculative_method": "eagle", "num_speculative_tokens": "3"}, "acceptance_rate", "Required"),
    ({"speculative_method": "eagle", "num_speculative_tokens": "3", "acceptance_rate": "1.5"}, "acceptance_rate",
     "less than or equal to 1"),
    ({"axis1_param": "acceptance_rate", "axis1_values": "0.5, 0.9"}, "axis1_values", "needs engine.speculative"),
])
def test_sweep_form_speculative_errors_at_their_field(db, change, field, text):
    import re

    from tests.planner.test_sweep_pages import FORM

    r = _logged_in_client().post("/sweeps/new/", {**FORM, **change})
    assert r.status_code == 200
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error"[^>]*>(.*?)</ul>', r.content.decode(), re.S)
    assert m and text in m.group(1), (field, r.context["form"].errors)
