"""Sweep definitions: validate what a user asks for and resolve it into points.

A definition (JSON, from the form or ``POST /api/sweeps/``)::

    {
      "name": "Llama 8B on H100, KV cliff",
      "mode": "grid",                               # or "cliff"
      "model": "llama-3-1-8b" | 12 | {ModelSpec fields} | null,
      "gpu": "h100-sxm" | 7 | {GpuSpec fields} | null,
      "deployment": {DeploymentSpec fields},        # tp, pp, block_size, gpu_memory_utilization, ...
      "engine": {EngineConfig fields},              # num_gpu_blocks is sized from model+GPU when omitted
      "workload": {"spec": {WorkloadSpec fields}, "seed": 0}
                | {"trace": "<trace text>", "format": "auto" | "csv" | "jsonl" | "mooncake" | "azure"
                   | "burstgpt" | "vllm-bench", "options": {"window": [0, 600], "speedup": 2, ...}},
      "axes": [{"param": "num_gpu_blocks", "values": [2000, 4000]}
               | {"param": "rate", "start": 1, "stop": 16, "steps": 5, "scale": "log"}],   # one or two
      "cliff": {"param": "num_gpu_blocks", "metric": "preemptions_per_request",
                "lo": 500, "hi": 20000, "resolution": 100, "threshold": 0.02}            # mode "cliff"
    }

Without a model and a GPU the scenario is engine-only: ``engine.num_gpu_blocks``
must be given and the axes that need sizing (utilization, GPU type/count) are
refused. With them, each point's ``num_gpu_blocks`` comes from
:func:`simulator.sizing.closed_form.plan` exactly as vLLM sizes its cache at start-up.

The parts live by topic: :mod:`planner.sweeps.axes` (what may vary),
:mod:`planner.sweeps.sections` (workload, cliff, cluster, SLO, calibration),
:mod:`planner.sweeps.specs` (profiles, sizing, clock) and
:mod:`planner.sweeps.points` (one point resolved); :func:`validate` here puts
them together in the order a user reads a definition.
"""

from __future__ import annotations

import itertools
from dataclasses import fields, replace
from typing import Any

from planner.api.validation import block_size_problem
from planner.errors import FieldErrors, InputError
from planner.sampling_words import timed_path
from planner.sweeps import disaggregated as disagg
from planner.sweeps.axes import AXES, axis_values
from planner.sweeps.limits import max_points, max_work
from planner.sweeps.points import resolve_point
from planner.sweeps.sections import (
    cliff_budget,
    parse_calibration,
    parse_cliff,
    parse_cluster,
    parse_slo,
    parse_workload,
)
from planner.sweeps.specs import (
    PointSpecs,
    clock_coefficients,
    deployment_spec,
    parse_sampling,
    resolve_profile,
    roofline_note,
    roofline_terms,
    size_deployment,
)
from planner.sweeps.speculative import axis_needs
from simulator.base import DeploymentSpec
from simulator.engine.config import ConfigError, EngineConfig
from simulator.sizing import default_async_scheduling

#: Invalid definition: the planner's one input-error type (:class:`planner.errors.InputError`).
DefinitionError = InputError
#: The fields a definition may have.
#: A definition's deployment knobs (DeploymentSpec's fields; ``sampling`` is the clock's).
DEPLOYMENT_FIELDS = tuple(f.name for f in fields(DeploymentSpec))
KNOWN_FIELDS = {"name", "mode", "model", "gpu", "deployment", "engine", "workload", "axes", "cliff", "cluster", "slo",
                "calibration", "disaggregated"}


def validate(raw: Any, *, owner, single: bool = False) -> tuple[dict, dict, list[dict]]:
    """Validate a definition and resolve it.

    ``single=True`` validates one simulation (``/api/simulations/``): no axes, one point.

    Returns
    -------
    definition : dict
        Normalized definition (what the user asked for).
    snapshot : dict
        Resolved inputs: ``model``, ``gpu`` (spec copies and their source), ``deployment``,
        ``engine`` (base EngineConfig dict), ``sizing`` (base sizing result or None),
        ``workload``, ``axes`` (param + values), ``cliff``.
    points : list of dict
        ``{"index", "params", "config", "meta", "workload_key"}`` for a grid (empty for a cliff).

    Raises
    ------
    DefinitionError
        With messages per field.
    """
    err = FieldErrors()
    # Every problem at once: each part is checked whatever the others' problems, and a later check runs as
    # far as the parts it needs are sound (no KV sizing without the model and the GPU, no axis needs without
    # the workload); only the points themselves wait for everything.
    name, mode = _name_and_mode(raw, err)
    parts = _parts(raw, owner, err)
    axes, cliff = _axes_or_cliff(raw, mode, single, err) if mode else ([], None)
    _check_axis_needs(axes, cliff, parts, err)
    if parts["sized"] and (parts["model"] is None or parts["gpu"] is None):
        err.raise_if_any()  # a model or GPU refused: nothing to size
    specs = PointSpecs.of(parts)  # the model and GPU as specs, once for the definition and all its points
    snapshot = _snapshot(parts, specs, axes, cliff, owner, err)
    err.raise_if_any()
    definition = {k: raw[k] for k in KNOWN_FIELDS if k in raw and k != "workload"}
    definition["name"] = name
    definition["mode"] = mode
    workload = parts["workload"]
    definition["workload"] = {k: v for k, v in (raw.get("workload") or {}).items() if k != "trace"}
    if workload["source"] == "trace":
        definition["workload"]["trace"] = f"<{workload['n']} requests, {len(workload['trace']):,} characters>"
    if mode == "grid":
        return definition, snapshot, _grid_points(snapshot, specs, axes, owner, err)
    _check_cliff_ends(snapshot, specs, cliff, owner, err)
    return definition, snapshot, []


def _name_and_mode(raw: Any, err: FieldErrors) -> tuple[str, str]:
    """The definition's name and mode (None when refused), after refusing a non-object and unknown fields."""
    if not isinstance(raw, dict):
        raise DefinitionError({"non_field_errors": ["the sweep definition must be a JSON object"]})
    err.unknown(raw, sorted(KNOWN_FIELDS))
    name = raw.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        err.add("name", "must be text of at most 200 characters")
        name = ""
    mode = raw.get("mode", "grid")
    if not isinstance(mode, str) or mode not in ("grid", "cliff"):
        err.add("mode", "must be 'grid' or 'cliff'")
        mode = None
    return name, mode


def _parts(raw: dict, owner, err: FieldErrors) -> dict:
    """Model, GPU, calibration, deployment and engine knobs, workload, cluster, disaggregation and SLO."""
    model = gpu = None
    if raw.get("model") is not None:
        model = resolve_profile("model", raw["model"], owner, "model", err)
    if raw.get("gpu") is not None:
        gpu = resolve_profile("gpu", raw["gpu"], owner, "gpu", err)
    if (raw.get("model") is None) != (raw.get("gpu") is None):
        err.add("gpu" if raw.get("gpu") is None else "model", "give both a model and a GPU, or neither")
    deployment = raw.get("deployment") or {}
    if not isinstance(deployment, dict):
        err.add("deployment", "must be an object of deployment knobs")
        deployment = {}
    err.unknown(deployment, [*DEPLOYMENT_FIELDS, "sampling"], "deployment")
    sampling = parse_sampling(deployment.get("sampling"), "deployment.sampling", err)
    calibration, fitted = parse_calibration(raw.get("calibration"), owner, err) or (None, ())
    coefficients = clock_coefficients(sampling, calibration, fitted)
    engine_raw = raw.get("engine") or {}
    if not isinstance(engine_raw, dict):
        err.add("engine", "must be an object of engine knobs")
        engine_raw = {}
    for where, knobs in (("engine", engine_raw), ("deployment", deployment)):
        if "block_size" in knobs and block_size_problem(knobs["block_size"]):
            err.add(f"{where}.block_size", block_size_problem(knobs["block_size"]))
    return {"model": model, "gpu": gpu, "sized": raw.get("model") is not None and raw.get("gpu") is not None,
            "coefficients": coefficients, "sampling": sampling, "fitted": fitted,
            "deployment": deployment,
            "engine_raw": engine_raw, "workload": parse_workload(raw.get("workload", {}), err),
            "cluster": parse_cluster(raw.get("cluster"), err),
            "disaggregated": disagg.parse(raw.get("disaggregated"), err.add), "slo": parse_slo(raw.get("slo"), err)}


def _axes_or_cliff(raw: dict, mode: str, single: bool, err: FieldErrors) -> tuple[list[dict], dict | None]:
    """A grid's one or two axes, or a cliff search (or neither, for one simulation)."""
    axes_raw = raw.get("axes", [])
    axes: list[dict] = []
    if single:
        if "axes" in raw or "cliff" in raw or mode != "grid":
            err.add("axes", "one simulation takes no axes; create a sweep at /api/sweeps/ to vary parameters")
        return axes, None
    if mode == "cliff":
        cliff = parse_cliff(raw.get("cliff"), err)
        if axes_raw:
            err.add("axes", "mode 'cliff' takes 'cliff', not 'axes'")
        return axes, cliff
    if not isinstance(axes_raw, list) or not 1 <= len(axes_raw) <= 2:
        err.add("axes", "give one or two sweep axes")
    else:
        for i, a in enumerate(axes_raw):
            got = axis_values(a, f"axes[{i}]", err)
            if got and got[0] == "block_size" and any(block_size_problem(v) for v in got[1]):
                err.add(f"axes[{i}].values", next(block_size_problem(v) for v in got[1] if block_size_problem(v)))
            elif got:
                axes.append({"param": got[0], "values": got[1]})
        if len(axes) == 2 and axes[0]["param"] == axes[1]["param"]:
            err.add("axes[1].param", "the two axes must sweep different parameters")
    if raw.get("cliff") is not None:
        err.add("cliff", "only for mode 'cliff'")
    return axes, None


def _check_axis_needs(axes: list[dict], cliff: dict | None, parts: dict, err: FieldErrors) -> None:
    """Each varied parameter has what it needs (sizing, Poisson arrivals, one prefix group, prefix caching...)."""
    has_sizing = parts["sized"]  # (a model or GPU refused has its own error: no "needs a model" here)
    workload, engine_raw = parts["workload"], parts["engine_raw"]
    if workload is None:  # refused: its own error says so; what the axes need from it waits
        workload = {"source": None, "spec": {"arrival": {"kind": None}, "prefixes": []}}
    generated = workload["source"] == "spec"
    for i, a in enumerate(axes + ([{"param": cliff["param"]}] if cliff else [])):
        where = f"axes[{i}].param" if not cliff else "cliff.param"
        param = a["param"]
        if AXES[param]["kind"] == "sizing" and not has_sizing:
            err.add(where, f"{param} needs a model and a GPU (sizing decides the KV blocks)")
        if workload["source"] is None and AXES[param]["kind"] == "workload":
            continue
        if param == "rate" and generated and workload["spec"]["arrival"]["kind"] not in ("poisson", "gamma"):
            err.add(where, "a rate axis needs Poisson or gamma arrivals in the workload")
        if param == "rate" and not generated:
            err.add(where, "a rate axis needs a generated workload (a trace has fixed arrival times)")
        if param == "shared_prefix_fraction" and (not generated or len(workload["spec"]["prefixes"]) != 1):
            err.add(where, "a shared-prefix axis needs a generated workload with exactly one prefix group")
        if param == "cpu_tier_gib" and not has_sizing and "kv_bytes_per_block" not in engine_raw:
            err.add(where, "a CPU tier in GiB needs a model and a GPU (or engine.kv_bytes_per_block)")
        if param == "cpu_tier_gib" and engine_raw.get("enable_prefix_caching") is False:
            err.add(where, "a CPU tier keeps cached prefixes: it needs prefix caching on")
        if AXES[param]["kind"] == "speculative" and axis_needs(param, engine_raw):
            err.add(where, axis_needs(param, engine_raw))
    varied = [a["param"] for a in axes] + ([cliff["param"]] if cliff else [])
    if not has_sizing and "num_gpu_blocks" not in engine_raw and "num_gpu_blocks" not in varied:
        err.add("engine.num_gpu_blocks", "required without a model and a GPU (or sweep it as an axis)")


def _snapshot(parts: dict, specs: PointSpecs, axes: list[dict], cliff: dict | None, owner, err: FieldErrors) -> dict:
    """The resolved inputs every point starts from: specs, sizing, base engine (with its clock), workload..."""
    model, gpu, coefficients, engine_raw = parts["model"], parts["gpu"], parts["coefficients"], parts["engine_raw"]
    dep, dep_fields, sizing = _base_deployment(parts, specs, err)
    base_engine = dict(engine_raw)
    clock_note = sampling = sampling_source = None
    if sizing is not None:
        for k in ("num_gpu_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens"):
            base_engine.setdefault(k, sizing[k])
        base_engine.setdefault("kv_bytes_per_block", int(sizing["bytes_per_block_per_gpu"]))
        # vLLM's default scheduler for the deployment's version (async since 0.14); engine.async_scheduling false
        # times the synchronous one
        base_engine.setdefault("async_scheduling", default_async_scheduling((dep_fields or {}).get("vllm_version")))
        if "cost_model" not in engine_raw and "step_time_model" not in engine_raw:
            sampling, sampling_source = timed_path(parts["sampling"], model["spec"].get("sampling"), parts["fitted"])
            terms = roofline_terms(specs.model, specs.gpu, dep, coefficients)
            if terms is not None:
                base_engine["cost_model"] = terms
            clock_note = roofline_note(specs.model, specs.gpu, dep, coefficients)  # (also: unmeasured GPU)
    base_engine.setdefault("num_gpu_blocks", 2 if sizing is None else base_engine.get("num_gpu_blocks"))
    try:
        engine = EngineConfig.from_dict(base_engine)
    except ConfigError as exc:
        err.add_from("engine", exc)
        err.raise_if_any()
    engine_d = engine.to_dict()
    dis = _disaggregated(parts, axes, cliff, dep_fields, engine_d, owner, err)
    return {
        "model": model,
        "gpu": gpu,
        "deployment": dep_fields or None,
        "engine": engine_d,
        "engine_explicit": sorted(engine_raw),
        "sizing": sizing,
        "workload": parts["workload"],
        "axes": axes,
        "cliff": cliff,
        "cluster": parts["cluster"],
        "disaggregated": dis,
        "slo": parts["slo"],
        "clock_note": clock_note,
        "coefficients": coefficients,
        "sampling": sampling,
        "sampling_source": sampling_source,
    }


def _base_deployment(parts: dict, specs: PointSpecs, err: FieldErrors) -> tuple[DeploymentSpec | None, dict, dict | None]:
    """The base deployment's spec and fields and what vLLM sizes for it (``(None, {}, None)`` for an engine-only
    scenario)."""
    deployment, engine_raw = parts["deployment"], parts["engine_raw"]
    if parts["model"] is None or parts["gpu"] is None:
        if deployment:
            err.add("deployment", "deployment knobs need a model and a GPU; use 'engine' for engine-only sweeps")
            err.raise_if_any()
        return None, {}, None
    try:
        dep = deployment_spec({k: v for k, v in deployment.items() if k != "sampling"})  # sampling: the clock's
    except (ValueError, TypeError) as exc:
        err.add_from("deployment", exc)
        err.raise_if_any()
    if "block_size" in engine_raw and "block_size" not in deployment and not block_size_problem(engine_raw["block_size"]):
        dep = replace(dep, block_size=engine_raw["block_size"])
    dep_fields = dep.to_dict()
    sizing = size_deployment(specs.model, specs.gpu, dep, "deployment", err)
    err.raise_if_any()
    return dep, dep_fields, sizing


def _disaggregated(parts: dict, axes: list[dict], cliff: dict | None, dep_fields: dict, engine: dict, owner,
                   err: FieldErrors) -> dict | None:
    """The ``disaggregated`` part checked against the rest, with its prefill pool's engine resolved."""
    dis = parts["disaggregated"]
    disagg.check_definition(dis, cluster=parts["cluster"], engine=engine,
                            arrival_unit=(parts["workload"] or {}).get("arrival_unit"),
                            axis_params=[a["param"] for a in axes] + ([cliff["param"]] if cliff else []), add=err.add)
    err.raise_if_any()
    if not dis:
        return dis
    coefficients = parts["coefficients"]
    dis = disagg.with_prefill_engine(
        dis, model=parts["model"], gpu=parts["gpu"], deployment=dep_fields, engine=engine,
        explicit=sorted(parts["engine_raw"]),
        resolve=lambda ref, where: resolve_profile("gpu", ref, owner, where, err),
        size=lambda m, g, d, sink: size_deployment(m, g, d, "disaggregated", sink),
        roofline=lambda m, g, d: roofline_terms(m, g, d, coefficients), add=err.add)
    err.raise_if_any()
    return dis


def _grid_points(snapshot: dict, specs: PointSpecs, axes: list[dict], owner, err: FieldErrors) -> list[dict]:
    """Every combination of the axes' values, resolved (after checking the point and work caps)."""
    combos = list(itertools.product(*[a["values"] for a in axes])) if axes else [()]
    n_req = snapshot["workload"]["n"]
    if len(combos) > max_points():
        err.add("axes", f"{len(combos):,} points is more than the cap of {max_points():,} points per sweep")
    elif len(combos) * n_req > max_work():
        err.add("axes", f"{len(combos):,} points x {n_req:,} requests = {len(combos) * n_req:,} is more than "
                        f"the cap of {max_work():,} (points x requests); use fewer points or requests")
    err.raise_if_any()
    points = []
    for idx, combo in enumerate(combos):
        params = {a["param"]: v for a, v in zip(axes, combo)}
        points.append(resolve_point(snapshot, params, idx, owner=owner, err=err, specs=specs))
    err.raise_if_any()
    return points


def _check_cliff_ends(snapshot: dict, specs: PointSpecs, cliff: dict, owner, err: FieldErrors) -> None:
    """A cliff search fits the work cap at its most simulations, and both ends of its range resolve."""
    n_req = snapshot["workload"]["n"]
    budget = cliff_budget(cliff)
    if budget * n_req > max_work():
        err.add("cliff", f"up to {budget} simulations x {n_req:,} requests is more than the cap of "
                         f"{max_work():,} (points x requests); use fewer requests or a coarser resolution")
    for x in (cliff["lo"], cliff["hi"]):
        resolve_point(snapshot, {cliff["param"]: x}, 0, owner=owner, err=err, specs=specs)
    err.raise_if_any()
