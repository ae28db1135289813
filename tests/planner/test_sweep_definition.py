"""Sweep definitions: validation with messages per field, ranges, caps, points."""

import pytest

from planner.sweeps import definition as defn
from planner.sweeps.points import plan_chunks

BASE = {"engine": {"num_gpu_blocks": 1000}, "workload": {"spec": {"n": 50}, "seed": 1}}


def errors_of(raw, **kw):
    with pytest.raises(defn.DefinitionError) as exc:
        defn.validate(raw, owner=None, **kw)
    return exc.value.errors


def test_linear_and_log_ranges_expand_to_the_stated_number_of_points():
    _, snap, pts = defn.validate({**BASE, "axes": [{"param": "rate", "start": 1, "stop": 16, "steps": 5,
                                                    "scale": "log"}],
                                  "workload": {"spec": {"n": 50, "arrival": "poisson:2"}}}, owner=None)
    assert [round(v, 6) for v in snap["axes"][0]["values"]] == [1, 2, 4, 8, 16]
    _, snap, pts = defn.validate({**BASE, "axes": [{"param": "num_gpu_blocks", "start": 100, "stop": 500,
                                                    "steps": 5}]}, owner=None)
    assert snap["axes"][0]["values"] == [100, 200, 300, 400, 500]
    assert [p["config"]["num_gpu_blocks"] for p in pts] == [100, 200, 300, 400, 500]


def test_two_axes_make_a_grid_and_chunks_group_points_by_workload():
    _, _, pts = defn.validate({**BASE, "workload": {"spec": {"n": 50, "arrival": "poisson:2"}},
                               "axes": [{"param": "rate", "values": [1, 2]},
                                        {"param": "num_gpu_blocks", "values": [300, 600, 900]}]}, owner=None)
    assert len(pts) == 6
    chunks = plan_chunks(pts, size=2)
    # 2 workloads (one per rate) x ceil(3 / 2) chunks; each chunk shares one workload
    assert len(chunks) == 4
    for c in chunks:
        assert len({p["params"]["rate"] for p in c["points"]}) == 1


def test_field_errors_name_the_field():
    errs = errors_of({"engine": {}, "workload": {"spec": {"n": -1}}, "axes": [{"param": "bogus", "values": [1]}]})
    assert "workload.spec.n" in errs
    assert "unknown sweep axis" in errs["axes[0].param"][0]


def test_engine_only_sweep_needs_kv_blocks():
    errs = errors_of({"workload": {"spec": {"n": 5}}, "axes": [{"param": "max_num_seqs", "values": [4, 8]}]})
    assert "engine.num_gpu_blocks" in errs


def test_sizing_axes_need_a_model_and_gpu():
    errs = errors_of({**BASE, "axes": [{"param": "gpu_memory_utilization", "values": [0.8, 0.9]}]})
    assert "needs a model and a GPU" in errs["axes[0].param"][0]


def test_cpu_tier_axis_needs_bytes_per_block_without_a_model():
    errs = errors_of({**BASE, "axes": [{"param": "cpu_tier_gib", "values": [8, 16]}]})
    assert "kv_bytes_per_block" in errs["axes[0].param"][0]
    errs = errors_of({**BASE, "axes": [{"param": "cpu_tier_gib", "values": [-1, 16]}]})
    assert "0 = no CPU tier" in errs["axes[0].values"][0]


def test_size_cap_is_stated_in_the_message(settings):
    settings.KVP_SWEEP_MAX_WORK = 1000  # 20 points x 50 requests = 1,000 is allowed exactly
    defn.validate({**BASE, "axes": [{"param": "num_gpu_blocks", "values": list(range(100, 2100, 100))}]}, owner=None)
    settings.KVP_SWEEP_MAX_WORK = 999
    msg = errors_of({**BASE, "axes": [{"param": "num_gpu_blocks", "values": list(range(100, 2100, 100))}]})["axes"][0]
    assert "1,000" in msg and "999" in msg and "points x requests" in msg


@pytest.mark.parametrize("axis,field", [
    ({"param": "num_gpu_blocks", "values": []}, "axes[0].values"),
    ({"param": "num_gpu_blocks", "values": [1.5]}, "axes[0].values[0]"),
    ({"param": "num_gpu_blocks", "start": 1, "stop": 2}, "axes[0].steps"),
    ({"param": "rate", "start": 0, "stop": 2, "steps": 3, "scale": "log"}, "axes[0].start"),
    ({"param": "enable_prefix_caching", "values": ["yes"]}, "axes[0].values[0]"),
    ({"param": "num_gpu_blocks", "values": [5, 5]}, "axes[0].values"),
    ("not an object", "axes[0]"),
])
def test_bad_axes(axis, field):
    assert field in errors_of({**BASE, "axes": [axis]})


def test_non_object_definition_is_a_non_field_error():
    assert "non_field_errors" in errors_of(["a", "list"])


def test_single_simulation_refuses_axes():
    errs = errors_of({**BASE, "axes": [{"param": "num_gpu_blocks", "values": [5]}]}, single=True)
    assert "/api/sweeps/" in errs["axes"][0]
    _, _, pts = defn.validate(BASE, owner=None, single=True)
    assert len(pts) == 1 and pts[0]["params"] == {}


def test_block_size_axis_keeps_kv_tokens_in_an_engine_only_sweep():
    _, _, pts = defn.validate({**BASE, "axes": [{"param": "block_size", "values": [16, 32]}]}, owner=None)
    toks = [(p["config"]["num_gpu_blocks"] - 1) * p["config"]["block_size"] for p in pts]
    assert toks[0] == 999 * 16 and toks[0] - 32 < toks[1] <= toks[0]  # whole blocks of 32 tokens


@pytest.mark.django_db
def test_catalog_model_and_gpu_size_each_point_and_carry_the_price():
    from gpuprofiles.models import GpuProfile, ModelProfile

    model = ModelProfile.objects.get(name="Llama 3.1 8B")
    gpu = GpuProfile.objects.filter(name__startswith="H100 SXM").first()
    _, snap, pts = defn.validate({"model": model.slug, "gpu": gpu.slug, "workload": {"spec": {"n": 20}},
                                  "axes": [{"param": "gpu_memory_utilization", "values": [0.5, 0.9]}]}, owner=None)
    assert snap["model"]["source"]["slug"] == model.slug and snap["model"]["spec"]["num_layers"] == 32
    assert pts[0]["config"]["num_gpu_blocks"] < pts[1]["config"]["num_gpu_blocks"]
    assert pts[1]["config"]["num_gpu_blocks"] == snap["sizing"]["num_gpu_blocks"]
    if gpu.price_per_hour:
        assert pts[0]["meta"]["price_per_hour"] == pytest.approx(gpu.price_per_hour)


@pytest.mark.django_db
def test_unknown_profile_is_a_field_error():
    errs = errors_of({"model": "no-such-model", "gpu": "no-such-gpu", "workload": {"spec": {"n": 5}},
                      "axes": [{"param": "max_num_seqs", "values": [4]}]})
    assert "model" in errs and "gpu" in errs


@pytest.mark.parametrize("raw,field", [
    ({**BASE, "axes": [{"param": [], "values": [1]}]}, "axes[0].param"),
    ({**BASE, "mode": "cliff", "cliff": {"param": []}}, "cliff.param"),
    ({**BASE, "mode": ["grid"]}, "mode"),
])
def test_unhashable_names_are_field_errors_not_crashes(raw, field):
    assert field in errors_of(raw)


@pytest.mark.django_db
def test_every_problem_of_a_definition_comes_back_at_once():
    """Issue 33 item 5: a bad mode, workload, routing, block size, axis and a TP that does not divide the
    heads, all in one answer (each used to wait for the ones before it to be fixed)."""
    errors = errors_of({"name": 5, "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
                        "deployment": {"tensor_parallel_size": 3}, "engine": {"block_size": 7},
                        "workload": {"spec": {"n": 50, "prompt": "normal:512"}},
                        "cluster": {"routing": "telepathy"},
                        "axes": [{"param": "num_gpu_blocks", "values": [100, 100]}]})
    assert {"name", "engine.block_size", "workload.spec.prompt", "cluster.routing", "axes[0].values",
            "deployment.tensor_parallel_size"} <= set(errors), errors
    assert "does not divide num_attention_heads 32" in " ".join(errors["deployment.tensor_parallel_size"])
    # a model nobody has is refused, without "needs a model and a GPU" about the axes that size
    errors = errors_of({"model": "no-such-model", "gpu": "h100-sxm5-80gb", "workload": {"spec": {"n": 50}},
                        "mode": "maybe", "axes": [{"param": "gpu_memory_utilization", "values": [0.8, 0.9]}]})
    assert set(errors) == {"model", "mode"}, errors
