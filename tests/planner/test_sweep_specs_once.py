"""A sweep point's walk down into the simulator builds each spec from the snapshot's JSON once.

The snapshot keeps the model, GPU and deployment as JSON (it is stored); the definition turns the model and the
GPU back into specs once for all its points (``planner.sweeps.specs.PointSpecs``) and each point's deployment
once, then sizes it, clocks it and checks its speculative head with those objects. Before, each of those steps
rebuilt all three from their dicts: a 4-point tensor-parallel sweep built 11 model, 11 GPU and 12 deployment specs.
"""

import math
from collections import Counter

import pytest

from planner.sweeps import definition as defn
from simulator.base import DeploymentSpec, GpuSpec, ModelSpec

WL = {"spec": {"n": 20, "arrival": {"kind": "poisson", "rate": 5.0, "unit": "s"}}, "seed": 1}
BASE = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "workload": WL}


@pytest.fixture
def built(monkeypatch):
    """How many specs of each kind are built from a JSON dict (a spec passed to ``from_dict`` is not counted)."""
    counts = Counter()
    for cls in (ModelSpec, GpuSpec, DeploymentSpec):
        original = cls.from_dict.__func__

        def counted(c, data, _original=original):
            if isinstance(data, dict):
                counts[c.__name__] += 1
            return _original(c, data)

        monkeypatch.setattr(cls, "from_dict", classmethod(counted))
    return counts


@pytest.mark.django_db
@pytest.mark.parametrize("axes,engine", [
    ([{"param": "tensor_parallel_size", "values": [1, 2, 4, 8]}], {}),  # re-sized and re-clocked at each point
    ([{"param": "gpu_memory_utilization", "values": [0.8, 0.85, 0.9, 0.95]}], {}),  # re-sized
    ([{"param": "num_speculative_tokens", "values": [1, 2, 3, 4]}],  # sized with the EAGLE head at each point
     {"speculative": {"method": "eagle", "acceptance_rate": 0.7}}),
])
def test_model_and_gpu_built_once_per_definition_deployment_once_per_point(built, axes, engine):
    _, snapshot, points = defn.validate({**BASE, "axes": axes, "engine": engine}, owner=None)
    assert len(points) == 4 and all(p["config"]["num_gpu_blocks"] > 0 for p in points)
    # the base deployment once (the definition's) + once per point
    assert built == {"ModelSpec": 1, "GpuSpec": 1, "DeploymentSpec": 1 + len(points)}


def _walk(monkeypatch, *classes) -> Counter:
    """How many times each of ``classes`` is built from a JSON dict (``Name.from_dict``, a dict given) and written
    to one (``Name.to_dict``)."""
    counts = Counter()
    for cls in classes:
        original_from, original_to = cls.from_dict.__func__, cls.to_dict

        def counted_from(c, data, _original=original_from):
            if isinstance(data, dict):
                counts[f"{c.__name__}.from_dict"] += 1
            return _original(c, data)

        def counted_to(self, _original=original_to, _name=cls.__name__):
            counts[f"{_name}.to_dict"] += 1
            return _original(self)

        monkeypatch.setattr(cls, "from_dict", classmethod(counted_from))
        monkeypatch.setattr(cls, "to_dict", counted_to)
    return counts


@pytest.fixture
def engine_walk(monkeypatch):
    """How many times an engine configuration is built from a dict and written back to one."""
    from simulator.engine import EngineConfig

    return _walk(monkeypatch, EngineConfig)


@pytest.mark.django_db
def test_a_grid_points_engine_config_is_built_once_and_written_once_until_a_worker_reads_it(engine_walk):
    """The walk of a sweep's points: definition -> snapshot -> points -> prices -> chunks (stored as JSON) ->
    the worker's simulation -> results. Each point's configuration is built once and written once (the JSON its
    chunk stores) on the web side; the worker builds it once from that JSON."""
    import json

    from planner.sweeps import services
    from planner.sweeps.runner import simulate_points, workload_of

    axes = [{"param": "tensor_parallel_size", "values": [1, 2, 4, 8]}]
    _, snapshot, points = defn.validate({**BASE, "axes": axes}, owner=None)
    chunks, _ = services._priced_plan(snapshot, points, "grid", owner=None)
    # the snapshot's base configuration once (built, written), then each point's once
    assert engine_walk == {"EngineConfig.from_dict": 1 + len(points), "EngineConfig.to_dict": 1 + len(points)}
    engine_walk.clear()
    stored = json.loads(json.dumps(chunks))  # what a worker reads from the chunk rows
    results = [r for c in stored for r in simulate_points(workload_of(c["workload"], snapshot["workload"]),
                                                          c["points"], record_steps=False)]
    assert len(results) == len(points) and all(r["metrics"]["finished"] == 20 for r in results)
    assert engine_walk == {"EngineConfig.from_dict": len(points)}  # once per point, from the stored JSON


@pytest.mark.django_db
def test_one_simulation_builds_its_engine_config_once_per_point(engine_walk):
    """``POST /api/simulations/``'s walk in one process (validated, priced, simulated, answered): the point's
    configuration is built once and its JSON written once (the answer's ``config``)."""
    from planner.sweeps import simulation

    answer = simulation.answer(simulation.prepare(BASE, owner=None), inline=False)
    assert answer["metrics"]["finished"] == 20 and answer["config"]["num_gpu_blocks"] > 0
    assert engine_walk == {"EngineConfig.from_dict": 2, "EngineConfig.to_dict": 2}  # the snapshot's base and the point's, each once


@pytest.mark.django_db
@pytest.mark.parametrize("axes,engine", [
    ([{"param": "tensor_parallel_size", "values": [1, 2]}, {"param": "cpu_tier_gib", "values": [0, 16]}], {}),
    ([{"param": "num_speculative_tokens", "values": [1, 3]}], {"speculative": {"method": "eagle",
                                                                                "acceptance_rate": 0.7}}),
    ([{"param": "gpu", "values": ["h100-sxm5-80gb", "a100-sxm4-80gb"]}], {"max_num_seqs": 64}),
])
def test_the_configuration_a_point_carries_is_the_one_its_stored_json_gives(axes, engine):
    """A point priced and simulated in the web process uses the configuration it carries; a worker builds it from
    the chunk's JSON. Both are the same configuration, so a point's result does not depend on where it runs."""
    from planner.sweeps.points import engine_config
    from simulator.engine import EngineConfig

    _, _, points = defn.validate({**BASE, "axes": axes, "engine": engine}, owner=None)
    assert len(points) == math.prod(len(a["values"]) for a in axes)
    for p in points:
        assert engine_config(p) is p.engine
        assert EngineConfig.from_dict(p["config"]) == p.engine
        assert engine_config(dict(p)) == p.engine and engine_config(dict(p)) is not p.engine  # a copy: built again


@pytest.fixture
def spec_walk(monkeypatch):
    """How many model, GPU and deployment specs are built from a JSON dict and written to one, by kind."""
    return _walk(monkeypatch, ModelSpec, GpuSpec, DeploymentSpec)


@pytest.mark.django_db
def test_a_gpu_axis_resolves_each_gpu_once_per_definition(spec_walk):
    """Each point of a GPU axis looked its GPU up, wrote the spec to JSON and built it again from that JSON
    (spec -> dict -> spec per point): 2 GPUs x 3 TPs built 7 GPU specs from dicts and wrote 7 (the base's once,
    each point's once). Each GPU of the axis is resolved once now, its points share the spec: 1 built (the
    base's) and 3 written (the base's and each axis GPU's); the deployments stay one per point."""
    from planner.errors import FieldErrors
    from planner.sweeps.specs import PointSpecs

    gpus = ["h100-sxm5-80gb", "a100-sxm4-80gb"]
    axes = [{"param": "gpu", "values": gpus}, {"param": "tensor_parallel_size", "values": [1, 2, 4]}]
    _, snapshot, points = defn.validate({**BASE, "axes": axes}, owner=None)
    assert len(points) == 6 and {p["meta"]["gpu_name"] for p in points} == {"H100 SXM5 80GB", "A100 SXM4 80GB"}
    assert spec_walk == {"ModelSpec.from_dict": 1, "ModelSpec.to_dict": 1, "GpuSpec.from_dict": 1,
                         "GpuSpec.to_dict": 1 + len(gpus), "DeploymentSpec.from_dict": 1 + len(points),
                         "DeploymentSpec.to_dict": 1}
    # the spec a point shares is the one its JSON gives (what each point built before), so results do not change
    specs = PointSpecs.of(snapshot)
    for ref in gpus:
        resolved, spec = specs.axis_gpu(ref, None, "gpu", FieldErrors())
        assert GpuSpec.from_dict(resolved["spec"]) == spec and specs.axis_gpu(ref, None, "gpu", FieldErrors())[1] is spec


DP = {"model": "qwen3-30b-a3b", "gpu": "h100-sxm5-80gb",
      "workload": {"spec": {"n": 30, "prompt": "normal:256,64", "output": "normal:16,4",
                            "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 1}}


@pytest.mark.django_db
def test_a_dp_groups_clock_specs_are_written_once_and_not_built_again_in_the_same_process(spec_walk):
    """A lockstep DP group keeps its DP / EP clock's model, GPU and deployment as JSON (a worker builds them from
    the stored chunk); the process that resolved the point built them again from that JSON twice (the
    definition's check of the clock, then the run). For 2 DP points: validated, 3 model, 3 GPU and 5 deployment
    specs built from dicts -> 1, 1 and 3 (the base's, and each point's deployment); simulated in the same
    process, 2 of each -> none. A worker still builds each stored group's 3 once, and gets the same results."""
    import json

    from planner.sweeps.data_parallel import clock_specs
    from planner.sweeps.runner import simulate_points, workload_of

    _, snapshot, points = defn.validate({**DP, "axes": [{"param": "data_parallel_size", "values": [2, 4]}]},
                                        owner=None)
    assert len(points) == 2 and all(p["data_parallel"]["lockstep"] for p in points)
    assert spec_walk == {"ModelSpec.from_dict": 1, "GpuSpec.from_dict": 1, "DeploymentSpec.from_dict": 1 + 2,
                         "ModelSpec.to_dict": 1 + 2, "GpuSpec.to_dict": 1 + 2, "DeploymentSpec.to_dict": 1 + 2}
    spec_walk.clear()
    here = [simulate_points(workload_of(p["workload"], snapshot["workload"]), [p], record_steps=False)[0]
            for p in points]
    assert spec_walk == {}
    stored = json.loads(json.dumps([dict(p) for p in points]))  # a worker's chunk
    assert [clock_specs(p["data_parallel"]) for p in stored] == [p["data_parallel"].specs for p in points]
    spec_walk.clear()
    there = [simulate_points(workload_of(p["workload"], snapshot["workload"]), [p], record_steps=False)[0]
             for p in stored]
    assert spec_walk == {"ModelSpec.from_dict": 2, "GpuSpec.from_dict": 2, "DeploymentSpec.from_dict": 2}
    assert all(r["metrics"]["finished"] == 30 for r in here)
    assert json.dumps(here, sort_keys=True) == json.dumps(there, sort_keys=True)
