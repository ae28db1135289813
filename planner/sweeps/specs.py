"""The model, GPU and deployment of a sweep: catalog references resolved into spec copies, sized, and clocked.

:func:`resolve_profile` is the one place here that reads the catalog; the
resolved specs are JSON dicts copied into the sweep's snapshot (it is stored).
:class:`PointSpecs` turns them back into the simulator's specs once per
definition (model, GPU) and once per point (its deployment, its GPU where an
axis changes it); the other functions take those specs (or, from the few
callers that hold only the JSON, the dicts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpuprofiles.models import GpuProfile, ModelProfile
from gpuprofiles.selectors import profile_find
from planner.errors import FieldErrors
from planner.sweeps.data_parallel import rank_deployment
from simulator.base import SAMPLER_FIELDS, DeploymentSpec, GpuSpec, ModelSpec, SpecError, unknown_field
from simulator.clock.cost_model import (
    SAMPLER_PATHS,
    CostModelError,
    RooflineStepTime,
    sampling_coefficients,
)
from simulator.sizing import plan

#: What a sweep keeps of a sizing result.
SIZING_FIELDS = ("num_gpu_blocks", "kv_cache_tokens", "block_size", "max_num_seqs", "max_num_batched_tokens",
                 "max_model_len", "min_blocks_unservable", "bytes_per_block_per_gpu", "num_gpus", "max_concurrency",
                 "reason")


def resolve_profile(kind: str, ref: Any, owner, where: str, err: FieldErrors) -> dict | None:
    """A model or GPU reference -> ``{"spec": {...}, "source": {...}}`` (copies, not references).

    ``ref`` is a catalog slug, the id of a profile the owner may read, or an inline spec object.
    """
    found = resolve_profile_spec(kind, ref, owner, where, err)
    return None if found is None else found[0]


def resolve_profile_spec(kind: str, ref: Any, owner, where: str, err: FieldErrors) -> tuple[dict, Any] | None:
    """:func:`resolve_profile`'s JSON and the spec it was written from (``(json, spec)``), or None after adding
    the problem to ``err``."""
    spec_cls = ModelSpec if kind == "model" else GpuSpec
    if isinstance(ref, dict):
        bad = unknown_field(spec_cls, ref)
        if bad:
            err.add(f"{where}.{bad[0]}", bad[1])
            return None
        try:
            spec = spec_cls(**ref)
        except (SpecError, TypeError, ValueError) as exc:
            err.add(where, f"invalid inline {kind} spec: {exc}")
            return None
        return {"spec": spec_dict(spec), "source": {"kind": "inline", "name": spec.name}}, spec
    if isinstance(ref, bool) or not isinstance(ref, (str, int)) or (isinstance(ref, str) and not ref.strip()):
        err.add(where, f"must be a catalog slug, the id of one of your {kind} profiles, or an inline spec")
        return None
    row = profile_find(ModelProfile if kind == "model" else GpuProfile, ref=ref, user=owner)
    if row is None:
        err.add(where, f"no {kind} profile {ref!r} in the catalog or your profiles", not_found=True)
        return None
    try:
        spec = row.to_spec()
    except Exception as exc:  # noqa: BLE001 - a broken profile is a user error here
        err.add(where, f"profile {ref!r} cannot be used: {exc}")
        return None
    return {
        "spec": spec_dict(spec),
        "source": {"kind": "catalog" if row.is_catalog else "own",
                   "id": row.pk, "slug": getattr(row, "slug", ""), "name": str(row),
                   **({"hf_id": row.hf_id} if getattr(row, "hf_id", "") else {})},
    }, spec


@dataclass(frozen=True)
class PointSpecs:
    """A snapshot's model and GPU as specs, built from its JSON once and shared by its points, and the GPUs of
    its GPU axis, each resolved once (:meth:`axis_gpu`).

    ``model`` / ``gpu`` are None where the snapshot has none (an engine-only sweep).
    """

    model: ModelSpec | None
    gpu: GpuSpec | None
    #: The GPU axis's profiles resolved so far, by reference: ``(json, spec)``.
    axis_gpus: dict = field(default_factory=dict, compare=False, repr=False)

    def axis_gpu(self, ref: Any, owner, where: str, err: FieldErrors) -> tuple[dict, GpuSpec] | None:
        """A GPU axis value's ``({"spec", "source"}, GpuSpec)``, looked up and written once for all the points
        that share it (read only by them); None after adding the problem at ``where`` (asked again by the next
        point, which adds it at its own)."""
        key = (type(ref).__name__, ref)
        if key not in self.axis_gpus:
            found = resolve_profile_spec("gpu", ref, owner, where, err)
            if found is None:
                return None
            self.axis_gpus[key] = found
        return self.axis_gpus[key]

    @classmethod
    def of(cls, snapshot: dict) -> PointSpecs:
        model, gpu = snapshot.get("model"), snapshot.get("gpu")
        return cls(built(model_spec, model["spec"]) if model else None, built(gpu_spec, gpu["spec"]) if gpu else None)


def built(make, d):
    """``make(d)``: the spec of a JSON dict, or ``d`` itself when it is refused, so that the function it is passed
    to refuses it in its own words (:func:`size_deployment` names the field, :func:`roofline_terms` gives None)."""
    try:
        return make(d)
    except (ValueError, TypeError):
        return d


def spec_dict(spec) -> dict:
    d = spec.to_dict() if hasattr(spec, "to_dict") else asdict(spec)
    if "layers" in d:
        d["layers"] = [dict(x) if isinstance(x, dict) else asdict(x) for x in d["layers"]]
    return d


def model_spec(d: dict | ModelSpec) -> ModelSpec:
    return ModelSpec.from_dict(d)


def gpu_spec(d: dict | GpuSpec) -> GpuSpec:
    return GpuSpec.from_dict(d)


def deployment_spec(d: dict | DeploymentSpec) -> DeploymentSpec:
    """The deployment's spec (TP x PP x DP, EP on or off); a :class:`FieldError` on the key it has no field for.
    A spec is returned as it is (it was checked when built). A DP group's points run through
    :mod:`planner.sweeps.data_parallel`."""
    if isinstance(d, DeploymentSpec):
        return d
    return DeploymentSpec.from_dict(d)


def size_deployment(model_d, gpu_d, dep_d, where: str, err: FieldErrors) -> dict | None:
    """What vLLM would size at start-up (:data:`SIZING_FIELDS`), or None when the deployment does not start.

    ``model_d``, ``gpu_d`` and ``dep_d`` are specs or their JSON dicts (as :func:`roofline_terms`'s and
    :func:`roofline_note`'s)."""
    try:
        res = plan(model_spec(model_d), gpu_spec(gpu_d), deployment_spec(dep_d))
    except (ValueError, TypeError) as exc:
        err.add_from(where, exc)
        return None
    if not res.fits or res.num_gpu_blocks < 2:
        err.add(where, f"this deployment does not start: {res.reason}")
        return None
    d = res.to_dict()
    return {k: d[k] for k in SIZING_FIELDS}


def parse_sampling(value: Any, where: str, err: FieldErrors) -> str | None:
    """The sampler path chosen by ``value``; None (absent or null) = none chosen, each model's own path
    (``ModelSpec.sampling``, its generation_config.json). An unknown one is an error at ``where``."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in SAMPLER_PATHS:
        err.add(where, f"must be one of {', '.join(SAMPLER_PATHS)}, got {value!r}")
        return None
    return value


def clock_coefficients(sampling: str | None, calibration: dict | None, fitted=()) -> dict | None:
    """The roofline coefficients of a chosen sampler path and a calibration's (None: every default).

    How they combine: the calibration's sampler terms that its fit moved (``fitted``: the names) win;
    the others come from the chosen path, or, with none chosen (``sampling`` None), from the model's own
    (left out here, so :meth:`RooflineStepTime.from_specs` applies ``model.sampling``). Every other
    coefficient is the calibration's. No path and no calibration gives None, the model's own clock.
    """
    fitted = set(fitted)
    if sampling is None:
        if calibration is None:
            return None
        return {k: v for k, v in calibration.items() if k not in SAMPLER_FIELDS or k in fitted}
    path = {k: v for k, v in sampling_coefficients(sampling).items() if k not in fitted}
    return {**(calibration or {}), **path}


def roofline_terms(model_d, gpu_d, dep_d, coefficients: dict | None = None) -> dict | None:
    """The roofline step-time coefficients of a model on a GPU (a JSON ``cost_model`` object), or None.

    With a model and a GPU a sweep's clock is the roofline (docs/cost-model.md)
    unless the engine gives ``cost_model`` or ``step_time_model`` itself. Under a DP group's deployment it is one
    rank's clock (DP 1, EP off: :func:`planner.sweeps.data_parallel.rank_deployment`). A GPU
    profile without HBM bandwidth or TFLOPS has no roofline: the point keeps the
    linear ``step_time_model`` (``metrics.clock`` says which one a point used).
    """
    try:
        terms = RooflineStepTime.from_specs(model_spec(model_d), gpu_spec(gpu_d), coefficients=coefficients,
                                            deployment=rank_deployment(deployment_spec(dep_d))).terms
    except (CostModelError, ValueError, TypeError):
        return None
    return {"kind": "terms", **terms.to_dict()}


def roofline_note(model_d, gpu_d, dep_d, coefficients: dict | None = None) -> str | None:
    """What the user must know about the clock (shown as ``clock_note``), or None: why :func:`roofline_terms`
    gives none, or that the GPU's efficiencies were never measured (issue 30: "timed from data-sheet peaks; not
    checked against a measurement")."""
    try:
        clock = RooflineStepTime.from_specs(model_spec(model_d), gpu_spec(gpu_d), coefficients=coefficients,
                                            deployment=rank_deployment(deployment_spec(dep_d)))
    except (CostModelError, ValueError, TypeError) as exc:
        return (f"no roofline clock for this model on this GPU ({exc}); steps are timed by the linear "
                "step_time_model instead")
    if clock.physics is not None and not clock.physics.measured:
        return f"{clock.gpu.name}: {clock.physics_note}"
    return None
