"""Day plan definitions: validate what a user asks for, every problem at once, and resolve it.

A definition (JSON, from the form or ``POST /api/day-plans/``; docs/autoscaling.md "In the planner")::

    {
      "name": "Llama 70B on H100 over a day",
      "model": "llama-3-1-70b", "gpu": "h100-sxm5-80gb",          # or "engine": {EngineConfig fields}
      "deployment": {"tensor_parallel_size": 4, "gpu_memory_utilization": 0.9, ...},
      "workload": {"spec": {"n": 200000, "arrival": "hourly:R0,...,R23", ...}, "seed": 0}
                | {"trace": "<text>", "format": "auto" | "azure" | ..., "options": {...}},
      "policy": {"kind": "hpa", "metric": "running", "target": 32, "max_replicas": 8},
      "cold_start": {"seconds": 110} | {"weights_gib": 35, "compile_s": 8, ...},   # default: from the weights
      "routing": "least-loaded" | "round-robin",
      "gpus_per_replica": 4,                 # default: the deployment's TP x PP (1 engine-only)
      "price_per_gpu_hour": 3.0,             # default: the catalog GPU's price
      "slo": {"ttft_s": 2, "tpot_s": 0.05},
      "chunk_s": 3600, "overlap_s": 300,
      "speculate": true                      # a second chain of chunks from the middle (services.py)
    }

The model, GPU, deployment, engine and workload parts are a one-simulation definition and are checked by
:func:`planner.sweeps.definition.validate` (``single=True``) exactly as the replicas search checks them
(:func:`planner.sweeps.replicas.check_replicas`), with the day's own cap on requests instead of a sweep's;
the policy by :func:`simulator.day.build_policy`, the cold start by :class:`simulator.autoscale.ColdStart`,
the chunks by :func:`simulator.day.chunk_plans`, and the busiest chunk's engine memory by the simulator's
own check. No ORM beyond the catalog lookups.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from django.conf import settings

from planner.errors import FieldErrors, InputError, field_and_message
from planner.sweeps import definition as defn

#: The fields a day plan definition may have.
SIMULATION_FIELDS = ("model", "gpu", "deployment", "engine", "workload")
KNOWN_FIELDS = ("name", *SIMULATION_FIELDS, "policy", "cold_start", "routing", "gpus_per_replica",
                "price_per_gpu_hour", "slo", "chunk_s", "overlap_s", "speculate")
COLD_START_PARTS = ("container_s", "storage_gib_per_s", "compile_s", "graph_capture_s")
#: Weights per GPU assumed for the cold start of an engine-only plan (an 8B model in bf16), GiB.
DEFAULT_WEIGHTS_GIB = 15.0
DEFAULT_CHUNK_S = 3600.0
#: Most chunks one plan may have (a week in hourly chunks is 168).
MAX_CHUNKS = 200
#: Price assumed when none is given and the GPU has none in the catalog, USD per GPU-hour.
ASSUMED_PRICE = 1.0
#: Requests the one-simulation check validates a larger generated workload with (its count is checked here).
SMALL_N = 1000


def max_requests() -> int:
    """Most requests one day plan may replay (``KVP_DAY_MAX_REQUESTS``, 2,000,000 by default), at most the
    workload generator's own limit (:data:`simulator.workload.requests.MAX_GENERATED_REQUESTS`); a trace holds
    at most its readers' 1,000,000. Issue 36's day at 20 requests/s (1.84 million) fits: each worker holds the
    whole day's workload and one chunk (bench/bench_day_celery.py measured the peak per worker)."""
    from simulator.workload.requests import MAX_GENERATED_REQUESTS

    return min(int(getattr(settings, "KVP_DAY_MAX_REQUESTS", MAX_GENERATED_REQUESTS)), MAX_GENERATED_REQUESTS)


def max_hours() -> float:
    """Longest span of traffic one plan may cover, hours (``KVP_DAY_MAX_HOURS``)."""
    return float(getattr(settings, "KVP_DAY_MAX_HOURS", 48))


def _number(err: FieldErrors, raw: dict, name: str, default, lo: float, hi: float, *, whole: bool = False,
            lo_open: bool = False, unit: str = ""):
    v = raw.get(name, default)
    if v is None:
        return None
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi \
        and not (lo_open and v == lo) and not (whole and v != int(v))
    if not ok:
        kind = "a whole number" if whole else "a number"
        err.add(name, f"must be {kind}{unit} {'>' if lo_open else '>='} {lo:g} and at most {hi:,g}, got {v!r}")
        return None
    return int(v) if whole else float(v)


def _slo(raw: Any, err: FieldErrors) -> dict:
    """``{"ttft_s", "tpot_s"}`` (each optional): the targets attainment counts."""
    if raw is None:
        return {"ttft_s": None, "tpot_s": None}
    if not isinstance(raw, dict):
        err.add("slo", "must be an object with ttft_s and/or tpot_s (seconds)")
        return {"ttft_s": None, "tpot_s": None}
    err.unknown(raw, ["ttft_s", "tpot_s"], "slo")
    out = {}
    for k in ("ttft_s", "tpot_s"):
        v = raw.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                              or not 0 < v <= 3600):
            err.add(f"slo.{k}", f"must be a number of seconds > 0 and at most 3,600, got {v!r}")
            v = None
        out[k] = None if v is None else float(v)
    return out


def _cold_start(raw: Any, weights_gib: float, err: FieldErrors) -> tuple[float, dict | None]:
    """Seconds from asking for a replica to its first request, and its parts (None when given as seconds)."""
    from simulator.autoscale import ColdStart
    from simulator.base import ConfigError

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        err.add("cold_start", 'must be an object: {"seconds": 110} or {"weights_gib": 35, "compile_s": 8, ...}')
        return 135.0, None
    err.unknown(raw, ["seconds", "weights_gib", *COLD_START_PARTS], "cold_start")
    if "seconds" in raw:
        others = sorted(set(raw) & {"weights_gib", *COLD_START_PARTS})
        if others:
            err.add("cold_start", f"give either seconds or the parts ({', '.join(others)}), not both")
        s = raw["seconds"]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or not 0 <= s <= 86_400:
            err.add("cold_start.seconds", f"must be a number of seconds from 0 to 86,400, got {s!r}")
            return 135.0, None
        return float(s), None
    w = raw.get("weights_gib", weights_gib)
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or not 0 <= w <= 10_000:
        err.add("cold_start.weights_gib", f"must be a number of GiB from 0 to 10,000, got {w!r}")
        w = weights_gib
    try:
        parts = ColdStart.from_dict({k: raw[k] for k in COLD_START_PARTS if k in raw})
    except ConfigError as exc:
        field, message = field_and_message(exc)
        err.add(field or "cold_start", message)
        parts = ColdStart()
    return parts.seconds(float(w)), {**parts.breakdown(float(w)), "weights_gib": float(w)}


def _weights_gib(snapshot: dict | None) -> tuple[float, str]:
    """Weights one GPU reads at start (from the model and deployment when the plan has them), GiB."""
    if not snapshot or not snapshot.get("model") or not snapshot.get("deployment"):
        return DEFAULT_WEIGHTS_GIB, "assumed (an 8B model in bf16: give cold_start.weights_gib)"
    from planner.sweeps.specs import deployment_spec, model_spec
    from simulator.sizing.weights import weights_bytes_per_gpu

    dep = {k: v for k, v in snapshot["deployment"].items() if k != "sampling"}
    gib = weights_bytes_per_gpu(model_spec(snapshot["model"]["spec"]), deployment_spec(dep)) / 2**30
    return round(gib, 3), "the model's weights per GPU"


def _simulation(raw: dict, owner, err: FieldErrors) -> tuple[dict | None, dict | None]:
    """The one-simulation part (model, GPU, deployment, engine, workload) as the replicas search checks it:
    ``(snapshot, point)``, or ``(None, None)`` with the problems in ``err``."""
    sim = {k: raw[k] for k in SIMULATION_FIELDS if k in raw}
    n = too_many = None
    spec = (sim.get("workload") or {}).get("spec") if isinstance(sim.get("workload"), dict) else None
    if isinstance(spec, dict) and isinstance(spec.get("n"), int) and not isinstance(spec.get("n"), bool) \
            and spec["n"] > SMALL_N:
        # a day has more requests than a sweep's workload: the sweep's own cap is not this plan's
        n = spec["n"]
        too_many = n > max_requests()
        if too_many:
            err.add("workload.spec.n", f"at most {max_requests():,} requests per day plan, got {n:,} "
                                       "(KVP_DAY_MAX_REQUESTS)")
        sim["workload"] = {**sim["workload"], "spec": {**spec, "n": SMALL_N}}
    try:
        _, snapshot, points = defn.validate(sim, owner=owner, single=True)
    except InputError as exc:
        for field, messages in exc.errors.items():
            for message in messages:
                err.add(field, message, not_found=exc.not_found)
        return None, None
    if too_many:
        return None, None
    if n is not None:
        snapshot["workload"]["spec"]["n"] = snapshot["workload"]["n"] = n
    if snapshot["workload"]["arrival_unit"] != "s":
        err.add("workload.spec.arrival", 'a day needs arrivals in seconds (e.g. "hourly:R0,...,R23" in requests '
                                         'per hour, or {"kind": "poisson", "rate": 20, "unit": "s"})')
        return None, None
    return snapshot, points[0]


def _price(raw: dict, snapshot: dict | None, err: FieldErrors) -> tuple[float, str]:
    gpu_price = (((snapshot or {}).get("gpu") or {}).get("spec") or {}).get("price_per_hour")
    if "price_per_gpu_hour" in raw:
        return _number(err, raw, "price_per_gpu_hour", None, 0, 10_000, lo_open=True) or ASSUMED_PRICE, "given"
    if gpu_price:
        return float(gpu_price), "the catalog's price of the GPU"
    return ASSUMED_PRICE, "assumed ($1 per GPU-hour: give price_per_gpu_hour)"


def validate(raw: Any, *, owner) -> tuple[dict, dict]:
    """Validate a day plan and resolve it: ``(definition, snapshot)``; raises :class:`InputError` (400, or
    404 for a profile the user may not see) with every problem at once."""
    if not isinstance(raw, dict):
        raise InputError({"non_field_errors": ["the day plan definition must be a JSON object"]})
    err = FieldErrors()
    err.unknown(raw, KNOWN_FIELDS)
    name = raw.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        err.add("name", "must be text of at most 200 characters")
    snapshot, point = _simulation(raw, owner, err)
    wl = _workload(snapshot, point, raw, owner, err)
    day = _day_part(raw, snapshot, wl, err)
    err.raise_if_any()
    _check_chunks(day, wl, point, err)
    err.raise_if_any()
    definition = {k: raw[k] for k in KNOWN_FIELDS if k in raw and k != "workload"}
    definition["workload"] = {k: v for k, v in raw["workload"].items() if k != "trace"}
    if snapshot["workload"]["source"] == "trace":
        definition["workload"]["trace"] = (f"<{snapshot['workload']['n']} requests, "
                                           f"{len(snapshot['workload']['trace']):,} characters>")
    return definition, {**snapshot, "point": point, "day": day}


def _workload(snapshot: dict | None, point: dict | None, raw: dict, owner, err: FieldErrors):
    """The plan's workload (built as every sweep builds one), its span capped; None when refused."""
    if snapshot is None:
        return None
    from planner.sweeps.points import workload_for
    from planner.sweeps.replicas import check_context
    from planner.sweeps.runner import workload_of

    point["workload"] = workload_for(snapshot, {})
    wl = workload_of(point["workload"], snapshot["workload"])
    if wl.n == 0:
        err.add("workload", "the workload has no request")
        return None
    if wl.n > max_requests():
        err.add("workload", f"{wl.n:,} requests: at most {max_requests():,} per day plan (KVP_DAY_MAX_REQUESTS)")
        return None
    span_h = float(np.max(wl.arrival)) / 3600
    if span_h > max_hours():
        err.add("workload", f"the traffic spans {span_h:,.1f} hours; at most {max_hours():g} hours per day plan "
                            "(KVP_DAY_MAX_HOURS): use a window of the trace or fewer hourly rates")
        return None
    try:
        check_context({k: raw.get(k) for k in ("deployment", "engine")}, snapshot, wl)
    except InputError as exc:
        for field, messages in exc.errors.items():
            for message in messages:
                err.add(field, message)
        return None
    return wl


def _day_part(raw: dict, snapshot: dict | None, wl, err: FieldErrors) -> dict:
    """Policy, cold start, routing, GPUs and price, SLO and chunks (checked whatever the rest's problems)."""
    from simulator.base import ConfigError
    from simulator.day import ROUTINGS, build_policy, chunk_plans, default_overlap_s

    weights, weights_source = _weights_gib(snapshot)
    cold_s, cold_parts = _cold_start(raw.get("cold_start"), weights, err)
    routing = raw.get("routing", "least-loaded")
    if routing not in ROUTINGS:
        err.add("routing", f"must be one of {', '.join(ROUTINGS)}, got {routing!r}")
    dep = (snapshot or {}).get("deployment") or {}
    gpus_default = (dep.get("tensor_parallel_size", 1) * dep.get("pipeline_parallel_size", 1)) if dep else 1
    gpus = _number(err, raw, "gpus_per_replica", gpus_default, 1, 64, whole=True)
    price, price_source = _price(raw, snapshot, err)
    policy_raw, policy = raw.get("policy"), None
    if policy_raw is None:
        err.add("policy", 'give the autoscaling policy, e.g. {"kind": "hpa", "metric": "running", "target": 32, '
                          '"max_replicas": 8} (kinds fixed, scheduled, hpa, oracle)')
    elif not isinstance(policy_raw, dict):
        err.add("policy", "must be a JSON object with a kind: fixed, scheduled, hpa or oracle")
    else:
        try:
            policy = build_policy(dict(policy_raw), np.asarray(wl.arrival) if wl is not None else np.zeros(0), cold_s)
        except ConfigError as exc:
            field, message = field_and_message(exc)
            err.add(field if field and field.startswith("policy") else "policy", message)
        else:
            _check_most_replicas(policy, err)
    chunk_s = _number(err, raw, "chunk_s", DEFAULT_CHUNK_S, 0, 7 * 86_400, lo_open=True, unit=" of seconds")
    overlap_s = _number(err, raw, "overlap_s", None, 0, 86_400, unit=" of seconds")
    if "overlap_s" not in raw and policy is not None:  # the simulator's own default for this policy
        overlap_s = default_overlap_s(policy)
    if chunk_s is not None and overlap_s is not None:  # their own rules now, the traffic's later
        sync = policy.sync_s if policy is not None else (policy_raw or {}).get("sync_s", 15.0) \
            if isinstance(policy_raw, dict) else 15.0
        try:
            chunk_plans(0.0, chunk_s, overlap_s, float(sync) if isinstance(sync, (int, float)) else 15.0)
        except ConfigError as exc:
            field, message = field_and_message(exc)
            err.add(field if field in ("chunk_s", "overlap_s") else "chunk_s", message)
    speculate = raw.get("speculate", True)
    if not isinstance(speculate, bool):
        err.add("speculate", f"must be true or false, got {speculate!r}")
    return {"speculate": speculate is not False, "policy": policy_raw, "policy_resolved": policy.to_dict() if policy is not None else None,
            "sync_s": float(policy.sync_s) if policy is not None else None,
            "cold_start_s": cold_s, "cold_start": cold_parts, "weights_source": weights_source,
            "routing": routing, "gpus_per_replica": gpus, "price_per_gpu_hour": price, "price_source": price_source,
            "slo": _slo(raw.get("slo"), err), "chunk_s": chunk_s, "overlap_s": overlap_s}


def _check_most_replicas(policy, err: FieldErrors) -> None:
    """The most replicas the policy can ask for, within the fleet's :data:`simulator.day.MAX_PODS` alive at once."""
    from simulator.day import MAX_PODS

    kind = policy.kind
    if kind == "fixed":
        most, where = policy.replicas, "policy.replicas"
    elif kind == "scheduled":
        most, where = max(policy.replicas), "policy.replicas"
    elif kind == "hpa":
        most, where = policy.max_replicas, "policy.max_replicas"
    else:  # the oracle: what its peak rate needs, within its bounds
        most = policy.need(0.0, len(policy.rates) * policy.period_s)
        where = "policy.max_replicas"
    if most > MAX_PODS:
        err.add(where, f"the policy can ask for {most:,} replicas; a day plan simulates at most {MAX_PODS} alive at "
                       "once (starting, ready and draining)" + (
                           ": raise capacity_per_replica or set max_replicas" if kind == "oracle" else ""))


def _check_chunks(day: dict, wl, point: dict, err: FieldErrors) -> None:
    """The chunks (whole numbers of the policy's syncs, at most :data:`MAX_CHUNKS`), and the busiest chunk's
    engine state within the simulator's memory limit; writes ``plans``, ``requests`` and ``span_s`` to ``day``."""
    from simulator.base import ConfigError
    from simulator.day import build_policy, chunk_plans
    from simulator.day.chunks import speculation_point, sub_workload
    from simulator.day.fleet_day import check_day_input
    from simulator.engine import EngineConfig

    arrival = np.asarray(wl.arrival)
    last = float(arrival.max())
    try:
        plans = chunk_plans(last, day["chunk_s"], day["overlap_s"], day["sync_s"])
    except ConfigError as exc:
        field, message = field_and_message(exc)
        err.add(field if field in ("chunk_s", "overlap_s") else "chunk_s", message)
        return
    if len(plans) > MAX_CHUNKS:
        err.add("chunk_s", f"{len(plans):,} chunks of {day['chunk_s']:g} s: at most {MAX_CHUNKS} per plan; use "
                           "longer chunks")
        return
    counts = [int(((arrival >= p.lo_s) & (arrival < p.hi_s)).sum()) for p in plans]
    busiest = plans[int(np.argmax(counts))]
    sub, _ = sub_workload(wl, busiest.lo_s, busiest.hi_s)
    policy = build_policy(dict(day["policy"]), arrival, day["cold_start_s"])
    try:
        check_day_input(sub, EngineConfig.from_dict(point["config"]), policy, day["cold_start_s"], day["routing"])
    except ConfigError as exc:
        err.add("chunk_s", f"the busiest chunk ({busiest.index}, {max(counts):,} requests with its overlaps): "
                           f"{field_and_message(exc)[1]}; use shorter chunks")
        return
    day["plans"] = [{"index": p.index, "start_s": p.start_s, "end_s": None if math.isinf(p.end_s) else p.end_s}
                    for p in plans]
    day["requests"] = int(wl.n)
    day["span_s"] = last
    day["chunk_requests"] = counts
    day["speculate_at"] = speculation_point(len(plans)) if day.pop("speculate") else None


__all__ = ["KNOWN_FIELDS", "MAX_CHUNKS", "max_hours", "max_requests", "validate"]
