"""A sweep point's walk down into the simulator builds each spec from the snapshot's JSON once.

The snapshot keeps the model, GPU and deployment as JSON (it is stored); the definition turns the model and the
GPU back into specs once for all its points (``planner.sweeps.specs.PointSpecs``) and each point's deployment
once, then sizes it, clocks it and checks its speculative head with those objects. Before, each of those steps
rebuilt all three from their dicts: a 4-point tensor-parallel sweep built 11 model, 11 GPU and 12 deployment specs.
"""

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


@pytest.mark.django_db
def test_a_gpu_axis_builds_each_points_gpu_once(built):
    axes = [{"param": "gpu", "values": ["h100-sxm5-80gb", "a100-sxm4-80gb"]},
            {"param": "tensor_parallel_size", "values": [1, 2]}]
    _, _, points = defn.validate({**BASE, "axes": axes}, owner=None)
    assert {p["meta"]["gpu_name"] for p in points} == {"H100 SXM5 80GB", "A100 SXM4 80GB"}
    assert built == {"ModelSpec": 1, "GpuSpec": 1 + len(points), "DeploymentSpec": 1 + len(points)}
