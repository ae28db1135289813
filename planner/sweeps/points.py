"""A sweep's points: one point's axis values resolved into an engine config, its workload and its meta.

``resolve_point`` applies a point's axis values to the snapshot's base (engine
knobs, deployment, GPU, CPU tier, replicas, speculation), re-sizes the KV cache
and re-times the clock where an axis changes them, and says what the figures
need beside the config (KV tokens, GPUs and their price per hour). The
snapshot's model and GPU specs are built once for all its points
(:class:`planner.sweeps.specs.PointSpecs`, which resolves each GPU of a GPU axis once too), each point's
deployment once, a DP group's clock specs carried by its group (:class:`planner.sweeps.data_parallel.Group`), and
each point's engine configuration once: the :class:`Point` carries it to the
pricing and, in the same process, to the simulation (:func:`engine_config`);
only a stored point (a worker's chunk) builds it again, from its JSON.
"""

from __future__ import annotations

import json
from typing import Any

from planner.errors import FieldErrors
from planner.sweeps import data_parallel as dpg
from planner.sweeps import disaggregated as disagg
from planner.sweeps.axes import AXES
from planner.sweeps.limits import chunk_points
from planner.sweeps.specs import (
    PointSpecs,
    built,
    deployment_spec,
    roofline_note,
    roofline_terms,
    size_deployment,
    spec_dict,
)
from planner.sweeps.speculative import point_speculative
from simulator.base import DeploymentSpec, FieldError
from simulator.engine.config import ConfigError, EngineConfig


class Point(dict):
    """A resolved point: the JSON it is stored and answered as (``index``, ``params``, ``config``, ``meta``,
    ``workload``, ...) and, not part of it, the :class:`EngineConfig` its ``config`` was written from
    (:attr:`engine`). A copy of its items, or the point read back from storage, is the JSON alone."""

    engine: EngineConfig | None = None

    @classmethod
    def of(cls, items: dict, engine: EngineConfig | None) -> Point:
        point = cls(items)
        point.engine = engine
        return point


def engine_config(point: dict) -> EngineConfig:
    """The point's engine configuration: the one it carries (a :class:`Point`), else built from its ``config``
    JSON (a stored point)."""
    engine = getattr(point, "engine", None)
    return engine if engine is not None else EngineConfig.from_dict(point["config"])


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
    return json.dumps(variant, sort_keys=True)


def resolve_point(snapshot: dict, params: dict, index: int, *, owner=None, err: FieldErrors | None = None,
                  specs: PointSpecs | None = None) -> Point | dict:
    """Turn one point's axis values into an engine config and workload variant ({} after adding a problem).

    ``meta`` carries what the figures need beside the config: KV tokens,
    GPUs per deployment and their price per hour. ``specs``: the snapshot's
    model and GPU specs (:meth:`PointSpecs.of`, built here when not given). The point is a :class:`Point`
    carrying its configuration as built here.
    """
    err = err or FieldErrors()
    specs = specs or PointSpecs.of(snapshot)
    label = ", ".join(f"{k}={v}" for k, v in params.items())
    engine = _engine_with_axes(snapshot, params)
    dep = dict(snapshot["deployment"] or {})
    for k in ("gpu_memory_utilization", "tensor_parallel_size", *dpg.AXES):
        if k in params:
            dep[k] = params[k]
    if "block_size" in params and dep:
        dep["block_size"] = params["block_size"]
    gpu, gpu_s = snapshot.get("gpu"), specs.gpu
    if "gpu" in params:  # (each GPU of the axis resolved once for all its points)
        found = None if isinstance(params["gpu"], dict) else specs.axis_gpu(params["gpu"], owner, f"point {label}",
                                                                           err)
        if found is None:
            return {}
        gpu, gpu_s = found
    model_s = specs.model
    gpu_s = gpu_s if gpu else None
    dep_s = built(deployment_spec, dep) if dep else dep
    resized = _resize(snapshot, params, engine, gpu, dep_s, label, err, specs=(model_s, gpu_s))
    if resized is None:
        return {}
    sized, note = resized
    problem = point_speculative(snapshot, params, engine, (lambda: (
        model_s, gpu_s, deployment_spec(dep_s))) if model_s is not None and gpu and dep else None)
    if problem:
        err.add(f"point {label}", problem)
        return {}
    try:
        cfg = EngineConfig.from_dict(engine)
    except ConfigError as exc:
        err.add_from(f"point {label}", exc)
        return {}
    meta = _meta(snapshot, params, cfg, gpu, dep, sized, note)
    group = _group(snapshot, params, cfg, (model_s, gpu_s, dep_s), meta.get("cluster"), label, err)
    if group is False:
        return {}
    variant = workload_for(snapshot, params)
    point = Point.of({"index": index, "params": params, "config": cfg.to_dict(), "meta": meta, "workload": variant,
                      "workload_key": workload_key(variant)}, cfg)
    if group is not None:  # a DP group (planner.sweeps.data_parallel); DP 1 with EP off: no key, as before
        meta["data_parallel"] = {k: group[k] for k in ("data_parallel_size", "enable_expert_parallel", "shape",
                                                       "lockstep")}
        point["data_parallel"] = group
    return point


def _group(snapshot: dict, params: dict, cfg: EngineConfig, specs: tuple, cluster: dict | None, label: str,
           err: FieldErrors):
    """The point's DP group (:func:`planner.sweeps.data_parallel.point_group`), None for a single engine, False
    after adding why the point's group cannot run (the deployment's field named when one of its axes set it)."""
    model_s, gpu_s, dep_s = specs
    if not isinstance(dep_s, DeploymentSpec) or not dpg.active(dep_s):
        return None
    axis = next((k for k in (*dpg.AXES, "routing") if k in params), None)
    where = f"point {label}" if axis else None
    try:
        group = dpg.point_group(model_s, gpu_s, dep_s, snapshot.get("coefficients"), spec_dict)
    except FieldError as exc:
        err.add(where or f"deployment.{exc.field}", exc.message)
        return False
    problem = dpg.group_problem(group, cluster=cluster, disaggregated=bool(snapshot.get("disaggregated")),
                                speculative=cfg.speculative is not None,
                                arrival_unit=(snapshot.get("workload") or {}).get("arrival_unit"))
    if problem:
        err.add(where or problem[0], problem[1])
        return False
    return group


def _engine_with_axes(snapshot: dict, params: dict) -> dict:
    """The base engine config with the point's engine-knob and CPU-tier axes applied."""
    engine = dict(snapshot["engine"])
    for k, v in params.items():
        if AXES[k]["kind"] == "engine":
            engine[k] = v
    if "cpu_tier_gib" in params:
        base_tier = dict(snapshot["engine"].get("cpu_tier") or {})
        base_tier.pop("num_blocks", None)
        engine["cpu_tier"] = {**base_tier, "size_gib": params["cpu_tier_gib"]} if params["cpu_tier_gib"] > 0 else None
    return engine


def _resize(snapshot: dict, params: dict, engine: dict, gpu: dict | None, dep, label: str,
            err: FieldErrors, *, specs: tuple) -> tuple[dict | None, str | None] | None:
    """Re-size the KV cache and re-time the clock in ``engine`` where the point's axes change them.

    ``dep``: the point's deployment as a spec (its dict where refused, or empty); ``specs``: its model and GPU
    as specs. Returns ``(sizing or None, clock note or None)``, or None when the point's deployment does not start.
    """
    model_s, gpu_s = specs
    note = snapshot.get("clock_note")
    explicit = snapshot.get("engine_explicit", [])
    if snapshot.get("model") and gpu and "num_gpu_blocks" not in params:
        sized = None
        resizes = any(AXES[k]["kind"] == "sizing" for k in params) or "block_size" in params
        if resizes and "num_gpu_blocks" not in explicit:
            sized = size_deployment(model_s, gpu_s, dep, f"point {label}", err)
            if sized is None:
                return None
            engine["num_gpu_blocks"] = sized["num_gpu_blocks"]
            engine["kv_bytes_per_block"] = int(sized["bytes_per_block_per_gpu"])
        if ("gpu" in params or "tensor_parallel_size" in params) and "cost_model" not in explicit \
                and "step_time_model" not in explicit:
            coefficients = snapshot.get("coefficients")
            engine["cost_model"] = roofline_terms(model_s, gpu_s, dep, coefficients)
            if engine["cost_model"] is None:
                note = roofline_note(model_s, gpu_s, dep, coefficients)
        return sized, note
    if "block_size" in params and not dep and "num_gpu_blocks" not in params:
        # Engine-only: keep the KV cache's token capacity constant when the block size changes.
        base = snapshot["engine"]
        tokens = (base["num_gpu_blocks"] - 1) * base["block_size"]
        engine["num_gpu_blocks"] = max(2, tokens // int(params["block_size"]) + 1)
    return None, note


def _meta(snapshot: dict, params: dict, cfg: EngineConfig, gpu: dict | None, dep: dict, sized: dict | None,
          note: str | None) -> dict:
    """KV tokens, GPUs, GPU name and price per hour of a point (replicas and pools counted), and its clock note."""
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
    if note and cfg.cost_model is None:
        meta["clock_note"] = note
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
    return meta


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
                           "points": [{k: p[k] for k in ("index", "params", "config", "meta", "data_parallel")
                                       if k in p} for p in part]})
    return chunks
