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
                | {"trace": "<CSV or JSONL text>", "format": "csv" | "jsonl"},
      "axes": [{"param": "num_gpu_blocks", "values": [2000, 4000]}
               | {"param": "rate", "start": 1, "stop": 16, "steps": 5, "scale": "log"}],   # one or two
      "cliff": {"param": "num_gpu_blocks", "metric": "preemptions_per_request",
                "lo": 500, "hi": 20000, "resolution": 100, "threshold": 0.02}            # mode "cliff"
    }

Without a model and a GPU the scenario is engine-only: ``engine.num_gpu_blocks``
must be given and the axes that need sizing (utilization, GPU type/count) are
refused. With them, each point's ``num_gpu_blocks`` comes from
:func:`simulator.sizing.plan` exactly as vLLM sizes its cache at start-up.

Everything here is pure apart from :func:`resolve_profile`, which reads the
catalog; the resolved specs are copied into the sweep's snapshot.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, replace
from typing import Any

from django.conf import settings

from gpuprofiles.models import GpuProfile, ModelProfile
from gpuprofiles.selectors import profile_find
from planner.api.validation import block_size_problem
from planner.errors import InputError
from planner.sweeps import disaggregated as disagg
from planner.sweeps.cliff import max_evaluations
from planner.sweeps.speculative import axis_needs, axis_problem, point_speculative
from simulator.config import ConfigError, EngineConfig
from simulator.cost_model import CostModelError, RooflineStepTime
from simulator.generators import WorkloadSpec
from simulator.routing import ClusterError, parse_routing
from simulator.sizing import plan
from simulator.specs import DeploymentSpec, GpuSpec, LayerSpec, ModelSpec, SpecError
from simulator.traces import parse_trace
from simulator.workload import WorkloadError

#: Axis parameters, what they change and their value type.
AXES: dict[str, dict[str, Any]] = {
    "num_gpu_blocks": {"kind": "engine", "type": int, "label": "KV blocks", "unit": "blocks", "cliff": True},
    "gpu_memory_utilization": {"kind": "sizing", "type": float, "label": "GPU memory utilization",
                               "unit": "fraction", "cliff": True},
    "rate": {"kind": "workload", "type": float, "label": "Request rate", "unit": "req/unit", "cliff": True},
    "block_size": {"kind": "engine", "type": int, "label": "Block size", "unit": "tokens"},
    "max_num_seqs": {"kind": "engine", "type": int, "label": "max_num_seqs", "unit": "requests"},
    "max_num_batched_tokens": {"kind": "engine", "type": int, "label": "max_num_batched_tokens",
                               "unit": "tokens"},
    "long_prefill_token_threshold": {"kind": "engine", "type": int, "label": "long_prefill_token_threshold",
                                     "unit": "tokens"},
    "enable_prefix_caching": {"kind": "engine", "type": bool, "label": "Prefix caching", "unit": ""},
    "prompt_scale": {"kind": "workload", "type": float, "label": "Prompt length scale", "unit": "x"},
    "output_scale": {"kind": "workload", "type": float, "label": "Output length scale", "unit": "x"},
    "shared_prefix_fraction": {"kind": "workload", "type": float, "label": "Shared-prefix fraction",
                               "unit": "fraction"},
    "gpu": {"kind": "sizing", "type": str, "label": "GPU type", "unit": ""},
    "tensor_parallel_size": {"kind": "sizing", "type": int, "label": "GPUs (tensor parallel)", "unit": "GPUs"},
    "cpu_tier_gib": {"kind": "tier", "type": float, "label": "CPU KV tier", "unit": "GiB"},
    "num_instances": {"kind": "cluster", "type": int, "label": "Replicas", "unit": "instances"},
    "routing": {"kind": "cluster", "type": str, "label": "Routing policy", "unit": ""},
    **disagg.AXES,  # prefill_instances, decode_instances
    "num_speculative_tokens": {"kind": "speculative", "type": int, "label": "Draft tokens per step (k)",
                               "unit": "tokens"},
    "acceptance_rate": {"kind": "speculative", "type": float, "label": "Draft acceptance rate",
                        "unit": "fraction"},
}
#: Most replicas one sweep point may simulate.
MAX_SWEEP_INSTANCES = 64
#: Axes the planner knows but cannot run yet.
LATER_AXES: dict[str, str] = {}

CLIFF_METRICS = {"preemptions_per_request": "preemptions per request", "ttft_p99_steps": "TTFT p99 (steps)"}


def limit(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def max_points() -> int:
    return limit("KVP_SWEEP_MAX_POINTS", 400)


def max_work() -> int:
    """Cap on points x requests for one sweep."""
    return limit("KVP_SWEEP_MAX_WORK", 4_000_000)


def max_requests() -> int:
    return limit("KVP_SWEEP_MAX_REQUESTS", 100_000)


def chunk_points() -> int:
    return limit("KVP_SWEEP_CHUNK_POINTS", 16)


MAX_TRACE_CHARS = 4 * 1024 * 1024


#: Invalid definition: the planner's one input-error type (:class:`planner.errors.InputError`).
DefinitionError = InputError


class _Errors:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}
        self.not_found = False

    def add(self, field: str, message: str, *, not_found: bool = False) -> None:
        self.errors.setdefault(field, []).append(message)
        self.not_found |= not_found

    def raise_if_any(self) -> None:
        if self.errors:
            raise InputError(self.errors, not_found=self.not_found)


def _strip_prefix(message: str) -> str:
    """``"n: must be ..."`` -> ``("n", "must be ...")``-style message, kept whole for clarity."""
    return str(message)


# --------------------------------------------------------------------------- axes


def axis_values(axis: Any, where: str, err: _Errors) -> tuple[str, list] | None:
    """Validate one axis and expand it to its list of values."""
    if not isinstance(axis, dict):
        err.add(where, "must be an object with 'param' and 'values' or 'start'/'stop'/'steps'")
        return None
    param = axis.get("param")
    if not isinstance(param, str):
        err.add(f"{where}.param", f"must be the name of a sweep axis (known: {', '.join(AXES)})")
        return None
    if param in LATER_AXES:
        err.add(f"{where}.param", LATER_AXES[param])
        return None
    if param not in AXES:
        err.add(f"{where}.param", f"unknown sweep axis {param!r} (known: {', '.join(AXES)})")
        return None
    typ = AXES[param]["type"]
    unknown = sorted(set(axis) - {"param", "values", "start", "stop", "steps", "scale"})
    if unknown:
        err.add(f"{where}.{unknown[0]}", "unknown field (known: param, values, start, stop, steps, scale)")
        return None
    if "values" in axis:
        values = axis["values"]
        if not isinstance(values, list) or not values:
            err.add(f"{where}.values", "must be a non-empty list")
            return None
        if len(values) > max_points():
            err.add(f"{where}.values", f"at most {max_points():,} values")
            return None
    else:
        if typ in (bool, str):
            err.add(f"{where}.values", f"{param} takes a list of values, not a range")
            return None
        start, stop, steps = axis.get("start"), axis.get("stop"), axis.get("steps")
        scale = axis.get("scale", "linear")
        bad = False
        for k, v in (("start", start), ("stop", stop)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                err.add(f"{where}.{k}", "must be a number (or give 'values')")
                bad = True
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= max_points():
            err.add(f"{where}.steps", f"must be a whole number from 1 to {max_points():,}")
            bad = True
        if scale not in ("linear", "log"):
            err.add(f"{where}.scale", "must be 'linear' or 'log'")
            bad = True
        if bad:
            return None
        if scale == "log" and (start <= 0 or stop <= 0):
            err.add(f"{where}.start", "a log range needs start and stop > 0")
            return None
        if steps == 1:
            values = [start]
        elif scale == "log":
            a, b = math.log(start), math.log(stop)
            values = [math.exp(a + (b - a) * i / (steps - 1)) for i in range(steps)]
        else:
            values = [start + (stop - start) * i / (steps - 1) for i in range(steps)]
        if typ is int:
            values = sorted(set(int(round(v)) for v in values), reverse=stop < start)
    out = []
    for i, v in enumerate(values):
        ok = True
        if typ is bool:
            ok = isinstance(v, bool)
        elif typ is str:
            ok = isinstance(v, (str, int)) and not isinstance(v, bool)
        elif typ is int:
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v == int(v)
            v = int(v) if ok else v
        else:
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
            v = float(v) if ok else v
        if not ok:
            kind = {bool: "true or false", str: "a catalog slug or profile id", int: "a whole number",
                    float: "a number"}[typ]
            err.add(f"{where}.values[{i}]", f"must be {kind}, got {v!r}")
            return None
        out.append(v)
    if len(set(map(repr, out))) != len(out):
        err.add(f"{where}.values", "values must be distinct")
        return None
    if param == "num_instances" and max(out) > MAX_SWEEP_INSTANCES:
        err.add(f"{where}.values", f"at most {MAX_SWEEP_INSTANCES} replicas per point")
        return None
    if param == "routing":
        for i, v in enumerate(out):
            try:
                out[i] = str(parse_routing(str(v)))
            except ClusterError as exc:
                err.add(f"{where}.values[{i}]", str(exc))
                return None
    if param == "cpu_tier_gib" and (min(out) < 0 or max(out) > 100_000):
        err.add(f"{where}.values", "CPU tier sizes must be between 0 and 100,000 GiB (0 = no CPU tier)")
        return None
    if param in ("prompt_scale", "output_scale", "rate") and min(out) <= 0:
        err.add(f"{where}.values", f"{param} values must be > 0")
        return None
    if param in ("shared_prefix_fraction", "gpu_memory_utilization") and not all(0 < v <= 1 for v in out):
        if param == "gpu_memory_utilization" or not all(0 <= v <= 1 for v in out):
            err.add(f"{where}.values", f"{param} values must be fractions in (0, 1]")
            return None
    if axis_problem(param, out):
        err.add(f"{where}.values", axis_problem(param, out))
        return None
    if typ is int and param not in ("long_prefill_token_threshold", "num_speculative_tokens") and min(out) < 1:
        err.add(f"{where}.values", f"{param} values must be >= 1")
        return None
    return param, out


# --------------------------------------------------------------------------- profiles


def resolve_profile(kind: str, ref: Any, owner, where: str, err: _Errors) -> dict | None:
    """A model or GPU reference -> ``{"spec": {...}, "source": {...}}`` (copies, not references).

    ``ref`` is a catalog slug, the id of a profile the owner may read, or an inline spec object.
    """
    spec_cls = ModelSpec if kind == "model" else GpuSpec
    if isinstance(ref, dict):
        try:
            spec = spec_cls(**ref)
        except (SpecError, TypeError, ValueError) as exc:
            err.add(where, f"invalid inline {kind} spec: {exc}")
            return None
        return {"spec": _spec_dict(spec), "source": {"kind": "inline", "name": spec.name}}
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
        "spec": _spec_dict(spec),
        "source": {"kind": "catalog" if row.is_catalog else "own",
                   "id": row.pk, "slug": getattr(row, "slug", ""), "name": str(row)},
    }


def _spec_dict(spec) -> dict:
    d = spec.to_dict() if hasattr(spec, "to_dict") else asdict(spec)
    if "layers" in d:
        d["layers"] = [dict(x) if isinstance(x, dict) else asdict(x) for x in d["layers"]]
    return d


def model_spec(d: dict):
    d = dict(d)
    d["layers"] = tuple(LayerSpec(**x) if isinstance(x, dict) else x for x in d.get("layers") or ())
    return ModelSpec(**d)


def gpu_spec(d: dict):
    return GpuSpec(**d)


def deployment_spec(d: dict):
    return DeploymentSpec(**d)


# --------------------------------------------------------------------------- workload


def _workload(raw: Any, err: _Errors) -> dict | None:
    """Normalize the workload part: a generator spec with a seed, or a trace text."""
    if not isinstance(raw, dict):
        err.add("workload", "must be an object with 'spec' (a generated workload) or 'trace' (file text)")
        return None
    unknown = sorted(set(raw) - {"spec", "seed", "trace", "format"})
    if unknown:
        err.add(f"workload.{unknown[0]}", "unknown field (known: spec, seed, trace, format)")
        return None
    if "trace" in raw:
        text, fmt = raw.get("trace"), raw.get("format", "csv")
        if not isinstance(text, str) or not text.strip():
            err.add("workload.trace", "must be the text of a CSV or JSONL trace")
            return None
        if len(text) > MAX_TRACE_CHARS:
            err.add("workload.trace", f"trace too large: at most {MAX_TRACE_CHARS // 2**20} MiB")
            return None
        if fmt not in ("csv", "jsonl"):
            err.add("workload.format", "must be 'csv' or 'jsonl'")
            return None
        try:
            wl = parse_trace(text, fmt=fmt, name="trace")
        except (WorkloadError, ValueError) as exc:
            err.add("workload.trace", str(exc))
            return None
        return {"source": "trace", "format": fmt, "trace": text, "n": wl.n, "arrival_unit": wl.arrival_unit}
    spec_raw = raw.get("spec", {})
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        err.add("workload.seed", "must be a whole number >= 0")
        return None
    try:
        spec = WorkloadSpec.from_dict(spec_raw)
    except (WorkloadError, ValueError, TypeError) as exc:
        msg = str(exc)
        field, sep, rest = msg.partition(": ")
        if sep and " " not in field:
            err.add(f"workload.spec.{field}", rest)
        else:
            err.add("workload.spec", msg)
        return None
    if spec.n > max_requests():
        err.add("workload.spec.n", f"at most {max_requests():,} requests per sweep workload, got {spec.n:,}")
        return None
    return {"source": "spec", "spec": spec.to_dict(), "seed": seed, "n": spec.n,
            "arrival_unit": spec.arrival.unit}


# --------------------------------------------------------------------------- the whole definition


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
    err = _Errors()
    if not isinstance(raw, dict):
        raise DefinitionError({"non_field_errors": ["the sweep definition must be a JSON object"]})
    known = {"name", "mode", "model", "gpu", "deployment", "engine", "workload", "axes", "cliff", "cluster", "slo",
             "calibration", "disaggregated"}
    for k in sorted(set(raw) - known):
        err.add(k, f"unknown field (known: {', '.join(sorted(known))})")
    name = raw.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        err.add("name", "must be text of at most 200 characters")
        name = ""
    mode = raw.get("mode", "grid")
    if not isinstance(mode, str) or mode not in ("grid", "cliff"):
        err.add("mode", "must be 'grid' or 'cliff'")
    err.raise_if_any()

    model = gpu = None
    if raw.get("model") is not None:
        model = resolve_profile("model", raw["model"], owner, "model", err)
    if raw.get("gpu") is not None:
        gpu = resolve_profile("gpu", raw["gpu"], owner, "gpu", err)
    if (raw.get("model") is None) != (raw.get("gpu") is None):
        err.add("gpu" if raw.get("gpu") is None else "model", "give both a model and a GPU, or neither")
    coefficients = _calibration(raw.get("calibration"), owner, err)

    deployment = raw.get("deployment") or {}
    if not isinstance(deployment, dict):
        err.add("deployment", "must be an object of deployment knobs")
        deployment = {}
    engine_raw = raw.get("engine") or {}
    if not isinstance(engine_raw, dict):
        err.add("engine", "must be an object of engine knobs")
        engine_raw = {}
    for where, knobs in (("engine", engine_raw), ("deployment", deployment)):
        if "block_size" in knobs and block_size_problem(knobs["block_size"]):
            err.add(f"{where}.block_size", block_size_problem(knobs["block_size"]))
    workload = _workload(raw.get("workload", {}), err)
    cluster = _cluster(raw.get("cluster"), err)
    dis = disagg.parse(raw.get("disaggregated"), err.add)
    slo = _slo(raw.get("slo"), err)

    axes_raw = raw.get("axes", [])
    axes: list[dict] = []
    cliff = None
    if single:
        if "axes" in raw or "cliff" in raw or mode != "grid":
            err.add("axes", "one simulation takes no axes; create a sweep at /api/sweeps/ to vary parameters")
    elif mode == "grid":
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
    else:
        cliff = _cliff(raw.get("cliff"), err)
        if axes_raw:
            err.add("axes", "mode 'cliff' takes 'cliff', not 'axes'")
    err.raise_if_any()

    has_sizing = model is not None and gpu is not None
    for i, a in enumerate(axes + ([{"param": cliff["param"]}] if cliff else [])):
        where = f"axes[{i}].param" if not cliff else "cliff.param"
        if AXES[a["param"]]["kind"] == "sizing" and not has_sizing:
            err.add(where, f"{a['param']} needs a model and a GPU (sizing decides the KV blocks)")
        if a["param"] == "rate" and workload and workload["source"] == "spec" and \
                workload["spec"]["arrival"]["kind"] not in ("poisson", "gamma"):
            err.add(where, "a rate axis needs Poisson or gamma arrivals in the workload")
        if a["param"] == "rate" and workload and workload["source"] == "trace":
            err.add(where, "a rate axis needs a generated workload (a trace has fixed arrival times)")
        if a["param"] == "shared_prefix_fraction" and workload and (
                workload["source"] != "spec" or len(workload["spec"]["prefixes"]) != 1):
            err.add(where, "a shared-prefix axis needs a generated workload with exactly one prefix group")
        if a["param"] == "cpu_tier_gib" and not has_sizing and "kv_bytes_per_block" not in engine_raw:
            err.add(where, "a CPU tier in GiB needs a model and a GPU (or engine.kv_bytes_per_block)")
        if a["param"] == "cpu_tier_gib" and engine_raw.get("enable_prefix_caching") is False:
            err.add(where, "a CPU tier keeps cached prefixes: it needs prefix caching on")
        if AXES[a["param"]]["kind"] == "speculative" and axis_needs(a["param"], engine_raw):
            err.add(where, axis_needs(a["param"], engine_raw))
    if not has_sizing and "num_gpu_blocks" not in engine_raw and not any(
            a["param"] == "num_gpu_blocks" for a in axes) and not (cliff and cliff["param"] == "num_gpu_blocks"):
        err.add("engine.num_gpu_blocks", "required without a model and a GPU (or sweep it as an axis)")
    err.raise_if_any()

    # Base deployment and engine.
    dep_fields = {}
    sizing = None
    if has_sizing:
        try:
            dep = deployment_spec(deployment)
        except (ValueError, TypeError) as exc:
            _add_prefixed(err, "deployment", exc)
            err.raise_if_any()
        dep_fields = dep.to_dict()
        if "block_size" in engine_raw and "block_size" not in deployment:
            dep = replace(dep, block_size=engine_raw["block_size"]) if isinstance(engine_raw["block_size"], int) \
                else dep
            dep_fields = dep.to_dict()
        sizing = _size(model["spec"], gpu["spec"], dep_fields, "deployment", err)
        err.raise_if_any()
    elif deployment:
        err.add("deployment", "deployment knobs need a model and a GPU; use 'engine' for engine-only sweeps")
        err.raise_if_any()
    base_engine = dict(engine_raw)
    clock_note = None
    if sizing is not None:
        base_engine.setdefault("num_gpu_blocks", sizing["num_gpu_blocks"])
        base_engine.setdefault("block_size", sizing["block_size"])
        base_engine.setdefault("max_num_seqs", sizing["max_num_seqs"])
        base_engine.setdefault("max_num_batched_tokens", sizing["max_num_batched_tokens"])
        base_engine.setdefault("kv_bytes_per_block", int(sizing["bytes_per_block_per_gpu"]))
        if "cost_model" not in engine_raw and "step_time_model" not in engine_raw:
            terms = roofline_terms(model["spec"], gpu["spec"], dep_fields, coefficients)
            if terms is not None:
                base_engine["cost_model"] = terms
            else:
                clock_note = roofline_note(model["spec"], gpu["spec"], dep_fields, coefficients)
    base_engine.setdefault("num_gpu_blocks", 2 if not has_sizing else base_engine.get("num_gpu_blocks"))
    try:
        engine = EngineConfig.from_dict(base_engine)
    except ConfigError as exc:
        _add_prefixed(err, "engine", exc)
        err.raise_if_any()
    disagg.check_definition(dis, cluster=cluster, engine=engine.to_dict(), arrival_unit=workload.get("arrival_unit"),
                            axis_params=[a["param"] for a in axes] + ([cliff["param"]] if cliff else []), add=err.add)
    err.raise_if_any()
    if dis:
        dis = disagg.with_prefill_engine(
            dis, model=model, gpu=gpu, deployment=dep_fields, engine=engine.to_dict(), explicit=sorted(engine_raw),
            resolve=lambda ref, where: resolve_profile("gpu", ref, owner, where, err),
            size=lambda m, g, d, sink: _size(m, g, d, "disaggregated", sink),
            roofline=lambda m, g, d: roofline_terms(m, g, d, coefficients), add=err.add)
        err.raise_if_any()

    snapshot = {
        "model": model,
        "gpu": gpu,
        "deployment": dep_fields or None,
        "engine": engine.to_dict(),
        "engine_explicit": sorted(engine_raw),
        "sizing": sizing,
        "workload": workload,
        "axes": axes,
        "cliff": cliff,
        "cluster": cluster,
        "disaggregated": dis,
        "slo": slo,
        "clock_note": clock_note,
        "coefficients": coefficients,
    }
    definition = {k: raw[k] for k in known if k in raw and k != "workload"}
    definition["name"] = name
    definition["mode"] = mode
    definition["workload"] = {k: v for k, v in (raw.get("workload") or {}).items() if k != "trace"}
    if workload["source"] == "trace":
        definition["workload"]["trace"] = f"<{workload['n']} requests, {len(workload['trace']):,} characters>"

    points: list[dict] = []
    if mode == "grid":
        combos = list(itertools.product(*[a["values"] for a in axes])) if axes else [()]
        n_req = workload["n"]
        if len(combos) > max_points():
            err.add("axes", f"{len(combos):,} points is more than the cap of {max_points():,} points per sweep")
        elif len(combos) * n_req > max_work():
            err.add("axes", f"{len(combos):,} points x {n_req:,} requests = {len(combos) * n_req:,} is more than "
                            f"the cap of {max_work():,} (points x requests); use fewer points or requests")
        err.raise_if_any()
        for idx, combo in enumerate(combos):
            params = {a["param"]: v for a, v in zip(axes, combo)}
            points.append(resolve_point(snapshot, params, idx, owner=owner, err=err))
        err.raise_if_any()
    else:
        n_req = workload["n"]
        budget = cliff_budget(cliff)
        if budget * n_req > max_work():
            err.add("cliff", f"up to {budget} simulations x {n_req:,} requests is more than the cap of "
                             f"{max_work():,} (points x requests); use fewer requests or a coarser resolution")
        for x in (cliff["lo"], cliff["hi"]):
            resolve_point(snapshot, {cliff["param"]: x}, 0, owner=owner, err=err)
        err.raise_if_any()
    return definition, snapshot, points


def _calibration(ref, owner, err: _Errors) -> dict | None:
    """The roofline coefficients of the owner's calibration ``ref`` (``planner.calibration``), or None."""
    if ref is None:
        return None
    from planner.calibration.services import coefficients_for

    coefficients = coefficients_for(owner, ref)
    if coefficients is None:
        err.add("calibration", f"no calibration {ref!r} among yours (see /api/calibrations/)")
    return coefficients


def roofline_terms(model_d: dict, gpu_d: dict, dep_d: dict, coefficients: dict | None = None) -> dict | None:
    """The roofline step-time coefficients of a model on a GPU (a JSON ``cost_model`` object), or None.

    With a model and a GPU a sweep's clock is the roofline (docs/cost-model.md)
    unless the engine gives ``cost_model`` or ``step_time_model`` itself. A GPU
    profile without HBM bandwidth or TFLOPS has no roofline: the point keeps the
    linear ``step_time_model`` (``metrics.clock`` says which one a point used).
    """
    try:
        terms = RooflineStepTime.from_specs(model_spec(model_d), gpu_spec(gpu_d), coefficients=coefficients,
                                            deployment=deployment_spec(dep_d)).terms
    except (CostModelError, ValueError, TypeError):
        return None
    return {"kind": "terms", **terms.to_dict()}


def roofline_note(model_d: dict, gpu_d: dict, dep_d: dict, coefficients: dict | None = None) -> str | None:
    """Why :func:`roofline_terms` gives no clock (shown to the user as ``clock_note``), or None."""
    from simulator.cost_model import CostModelError, RooflineStepTime

    try:
        RooflineStepTime.from_specs(model_spec(model_d), gpu_spec(gpu_d), coefficients=coefficients,
                                    deployment=deployment_spec(dep_d))
    except (CostModelError, ValueError, TypeError) as exc:
        return (f"no roofline clock for this model on this GPU ({exc}); steps are timed by the linear "
                "step_time_model instead")
    return None


def _add_prefixed(err: _Errors, prefix: str, exc: Exception) -> None:
    msg = str(exc)
    field, sep, rest = msg.partition(": ")
    if sep and " " not in field:
        err.add(f"{prefix}.{field}", rest)
    else:
        err.add(prefix, msg)


def _size(model_d: dict, gpu_d: dict, dep_d: dict, where: str, err: _Errors) -> dict | None:
    try:
        res = plan(model_spec(model_d), gpu_spec(gpu_d), deployment_spec(dep_d))
    except (ValueError, TypeError) as exc:
        _add_prefixed(err, where, exc)
        return None
    if not res.fits or res.num_gpu_blocks < 2:
        err.add(where, f"this deployment does not start: {res.reason}")
        return None
    d = res.to_dict()
    return {k: d[k] for k in ("num_gpu_blocks", "kv_cache_tokens", "block_size", "max_num_seqs",
                              "max_num_batched_tokens", "max_model_len", "min_blocks_unservable",
                              "bytes_per_block_per_gpu", "num_gpus", "max_concurrency", "reason")}


def _cliff(raw: Any, err: _Errors) -> dict | None:
    if not isinstance(raw, dict):
        err.add("cliff", "must be an object with param, lo, hi, resolution")
        return None
    known = {"param", "metric", "lo", "hi", "resolution", "threshold"}
    for k in sorted(set(raw) - known):
        err.add(f"cliff.{k}", f"unknown field (known: {', '.join(sorted(known))})")
    param = raw.get("param", "num_gpu_blocks")
    if not isinstance(param, str) or param not in AXES or not AXES[param].get("cliff"):
        err.add("cliff.param", "must be num_gpu_blocks, gpu_memory_utilization or rate")
        return None
    metric = raw.get("metric", "preemptions_per_request")
    if not isinstance(metric, str) or metric not in CLIFF_METRICS:
        err.add("cliff.metric", f"must be one of {', '.join(CLIFF_METRICS)}")
    vals = {}
    for k in ("lo", "hi", "resolution"):
        v = raw.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            err.add(f"cliff.{k}", "must be a number > 0")
        vals[k] = v
    threshold = raw.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not math.isfinite(threshold) or threshold <= 0):
        err.add("cliff.threshold", "must be a number > 0")
    if err.errors:
        return None
    if vals["lo"] >= vals["hi"]:
        err.add("cliff.hi", "must be greater than lo")
        return None
    if vals["resolution"] >= vals["hi"] - vals["lo"]:
        err.add("cliff.resolution", "must be smaller than hi - lo")
        return None
    if param == "gpu_memory_utilization" and vals["hi"] > 1:
        err.add("cliff.hi", "utilization is a fraction <= 1")
        return None
    if param == "num_gpu_blocks":
        vals = {k: int(round(v)) if k != "resolution" else max(1, int(round(v))) for k, v in vals.items()}
        if vals["lo"] < 2:
            err.add("cliff.lo", "at least 2 blocks")
            return None
    if threshold is None:
        threshold = 0.02 if metric == "preemptions_per_request" else 2.0
    return {"param": param, "metric": metric, "threshold": float(threshold), **vals}


def _cluster(raw: Any, err: _Errors) -> dict | None:
    """``{"num_instances": 1, "routing": "round-robin", "router_delay_s": 0}``: replicas behind a router."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        err.add("cluster", "must be an object with num_instances, routing, router_delay_s")
        return None
    for k in sorted(set(raw) - {"num_instances", "routing", "router_delay_s"}):
        err.add(f"cluster.{k}", "unknown field (known: num_instances, routing, router_delay_s)")
    n = raw.get("num_instances", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SWEEP_INSTANCES:
        err.add("cluster.num_instances", f"must be a whole number from 1 to {MAX_SWEEP_INSTANCES}")
    routing = raw.get("routing", "round-robin")
    try:
        routing = str(parse_routing(str(routing)))
    except ClusterError as exc:
        err.add("cluster.routing", str(exc))
    delay = raw.get("router_delay_s", 0.0)
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay) \
            or not 0 <= delay <= 3600:
        err.add("cluster.router_delay_s", "must be a number of seconds from 0 to 3,600")
    if err.errors:
        return None
    return {"num_instances": n, "routing": routing, "router_delay_s": float(delay)}


def _slo(raw: Any, err: _Errors) -> dict | None:
    """``{"ttft_s": 0.5, "itl_s": 0.05, "percentile": "p90"}``: latency targets for the replicas answer."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        err.add("slo", "must be an object with ttft_s and/or itl_s (seconds)")
        return None
    for k in sorted(set(raw) - {"ttft_s", "itl_s", "percentile"}):
        err.add(f"slo.{k}", "unknown field (known: ttft_s, itl_s, percentile)")
    out: dict[str, Any] = {}
    for k in ("ttft_s", "itl_s"):
        v = raw.get(k)
        if v is None:
            out[k] = None
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 3600:
            err.add(f"slo.{k}", "must be a number of seconds > 0 (at most 3,600)")
        else:
            out[k] = float(v)
    if not err.errors and out.get("ttft_s") is None and out.get("itl_s") is None:
        err.add("slo", "give ttft_s, itl_s or both")
    pct = raw.get("percentile", "p90")
    if pct not in ("p50", "p90", "p99"):
        err.add("slo.percentile", "must be p50, p90 or p99")
    out["percentile"] = pct
    return None if err.errors else out


def cliff_budget(cliff: dict) -> int:
    """Most simulations the cliff finder may run (see planner.sweeps.cliff)."""
    return max_evaluations(cliff["lo"], cliff["hi"], cliff["resolution"])


# --------------------------------------------------------------------------- points


def workload_for(snapshot: dict, params: dict) -> dict:
    """The workload variant of a point: the base plus workload-axis changes (a JSON dict)."""
    base = snapshot["workload"]
    variant: dict[str, Any] = {"source": base["source"]}
    if base["source"] == "spec":
        spec = dict(base["spec"])
        if "rate" in params:
            spec["arrival"] = {**spec["arrival"], "rate": float(params["rate"])}
        if "shared_prefix_fraction" in params:
            spec["prefixes"] = [{**spec["prefixes"][0], "fraction": float(params["shared_prefix_fraction"])}]
        variant.update(spec=spec, seed=base["seed"])
    variant["prompt_scale"] = float(params.get("prompt_scale", 1.0))
    variant["output_scale"] = float(params.get("output_scale", 1.0))
    return variant


def workload_key(variant: dict) -> str:
    import json

    return json.dumps(variant, sort_keys=True)


def resolve_point(snapshot: dict, params: dict, index: int, *, owner=None, err: _Errors | None = None) -> dict:
    """Turn one point's axis values into an engine config and workload variant.

    ``meta`` carries what the figures need beside the config: KV tokens,
    GPUs per deployment and their price per hour.
    """
    err = err or _Errors()
    engine = dict(snapshot["engine"])
    gpu = snapshot.get("gpu")
    dep = dict(snapshot["deployment"] or {})
    label = ", ".join(f"{k}={v}" for k, v in params.items())
    sized = None
    point_note = snapshot.get("clock_note")
    for k, v in params.items():
        if AXES[k]["kind"] == "engine":
            engine[k] = v
    if "cpu_tier_gib" in params:
        base_tier = dict(snapshot["engine"].get("cpu_tier") or {})
        base_tier.pop("num_blocks", None)
        engine["cpu_tier"] = {**base_tier, "size_gib": params["cpu_tier_gib"]} if params["cpu_tier_gib"] > 0 else None
    if "gpu" in params:
        g = resolve_profile("gpu", params["gpu"], owner, f"point {label}", err) if not isinstance(
            params["gpu"], dict) else None
        if g is None:
            return {}
        gpu = g
    if "gpu_memory_utilization" in params:
        dep["gpu_memory_utilization"] = params["gpu_memory_utilization"]
    if "tensor_parallel_size" in params:
        dep["tensor_parallel_size"] = params["tensor_parallel_size"]
    if "block_size" in params and dep:
        dep["block_size"] = params["block_size"]
    if snapshot.get("model") and gpu and "num_gpu_blocks" not in params:
        needs = any(AXES[k]["kind"] == "sizing" for k in params) or "block_size" in params
        if needs and "num_gpu_blocks" not in snapshot.get("engine_explicit", []):
            sized = _size(snapshot["model"]["spec"], gpu["spec"], dep, f"point {label}", err)
            if sized is None:
                return {}
            engine["num_gpu_blocks"] = sized["num_gpu_blocks"]
            engine["kv_bytes_per_block"] = int(sized["bytes_per_block_per_gpu"])
        if ("gpu" in params or "tensor_parallel_size" in params) and "cost_model" not in snapshot.get(
                "engine_explicit", []) and "step_time_model" not in snapshot.get("engine_explicit", []):
            coefficients = snapshot.get("coefficients")
            engine["cost_model"] = roofline_terms(snapshot["model"]["spec"], gpu["spec"], dep, coefficients)
            if engine["cost_model"] is None:
                point_note = roofline_note(snapshot["model"]["spec"], gpu["spec"], dep, coefficients)
    elif "block_size" in params and not dep and "num_gpu_blocks" not in params:
        # Engine-only: keep the KV cache's token capacity constant when the block size changes.
        base = snapshot["engine"]
        tokens = (base["num_gpu_blocks"] - 1) * base["block_size"]
        engine["num_gpu_blocks"] = max(2, tokens // int(params["block_size"]) + 1)
    model_d = (snapshot.get("model") or {}).get("spec")
    problem = point_speculative(snapshot, params, engine, (lambda: (
        model_spec(model_d), gpu_spec(gpu["spec"]), deployment_spec(dep))) if model_d and gpu and dep else None)
    if problem:
        err.add(f"point {label}", problem)
        return {}
    try:
        cfg = EngineConfig.from_dict(engine)
    except ConfigError as exc:
        err.add(f"point {label}", str(exc))
        return {}
    gpu_spec_d = (gpu or {}).get("spec") or {}
    num_gpus = (sized or snapshot.get("sizing") or {}).get("num_gpus") or (
        dep.get("tensor_parallel_size", 1) * dep.get("pipeline_parallel_size", 1) if dep else None)
    price = gpu_spec_d.get("price_per_hour")
    meta = {
        "num_gpu_blocks": cfg.num_gpu_blocks,
        "kv_cache_tokens": (cfg.num_gpu_blocks - 1) * cfg.block_size,
        "num_gpus": num_gpus,
        "gpu_name": gpu_spec_d.get("name"),
        "price_per_hour": (price * num_gpus) if (price and num_gpus) else None,
    }
    if point_note and cfg.cost_model is None:
        meta["clock_note"] = point_note
    base_cluster = snapshot.get("cluster")
    if base_cluster or "num_instances" in params or "routing" in params:
        cl = dict(base_cluster or {"num_instances": 1, "routing": "round-robin", "router_delay_s": 0.0})
        for k in ("num_instances", "routing"):
            if k in params:
                cl[k] = params[k]
        meta["cluster"] = cl
        if meta["price_per_hour"]:
            meta["price_per_hour"] *= cl["num_instances"]
    if snapshot.get("disaggregated"):
        meta["disaggregated"] = disagg.point_meta(snapshot["disaggregated"], params, meta["price_per_hour"], num_gpus)
        meta["price_per_hour"] = meta["disaggregated"]["price_per_hour"]
    variant = workload_for(snapshot, params)
    return {"index": index, "params": params, "config": cfg.to_dict(), "meta": meta, "workload": variant,
            "workload_key": workload_key(variant)}


def plan_chunks(points: list[dict], size: int | None = None) -> list[dict]:
    """Group points by workload variant, then split into chunks of at most ``size`` points."""
    size = size or chunk_points()
    groups: dict[str, list[dict]] = {}
    for p in points:
        groups.setdefault(p["workload_key"], []).append(p)
    chunks = []
    for pts in groups.values():
        for i in range(0, len(pts), size):
            part = pts[i:i + size]
            chunks.append({"workload": part[0]["workload"],
                           "points": [{k: p[k] for k in ("index", "params", "config", "meta")} for p in part]})
    return chunks
