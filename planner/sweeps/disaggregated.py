"""Disaggregated prefill/decode in a simulation or sweep definition (``docs/disaggregated_serving.md``).

A definition may carry ``"disaggregated": {"prefill_instances": 1, "decode_instances": 3,
"routing": "least-loaded", "link_gbps": 50, "link_latency_s": 0.0001}``: every point then runs as an
xPyD deployment of the point's engine (both pools the same GPU and TP) instead of one engine or
replicas; sweeps may vary ``prefill_instances`` and ``decode_instances`` as axes. This module
validates that object (each bad field named), builds a point's
:class:`simulator.disaggregated.DisaggregatedDeployment` and shapes its result for the sweep
metrics. No ORM.
"""

from __future__ import annotations

import math
from typing import Any

from simulator.config import EngineConfig
from simulator.routing import ClusterError, parse_routing

#: Most instances in one pool of a point.
MAX_POOL_INSTANCES = 64
FIELDS = ("prefill_instances", "decode_instances", "routing", "link_gbps", "link_latency_s")
DEFAULTS = {"prefill_instances": 1, "decode_instances": 1, "routing": "round-robin", "link_gbps": 50.0,
            "link_latency_s": 1e-4}
#: Sweep axes this object adds (``planner.sweeps.definition.AXES``).
AXES = {
    "prefill_instances": {"kind": "disaggregated", "type": int, "label": "Prefill instances", "unit": "instances"},
    "decode_instances": {"kind": "disaggregated", "type": int, "label": "Decode instances", "unit": "instances"},
}
#: The extra sweep metrics of a disaggregated point (seconds, fractions, counts).
METRICS = ("transfer_mean_s", "transfer_p90_s", "prefill_ttft_p90_s", "prefill_utilisation", "decode_utilisation",
           "prefill_queueing_p90_s", "decode_queueing_p90_s", "prefill_preemptions", "decode_preemptions",
           "prefill_peak_kv_usage", "decode_peak_kv_usage")
EXAMPLE = {"prefill_instances": 1, "decode_instances": 3, "routing": "least-loaded", "link_gbps": 50,
           "link_latency_s": 0.0001}


def _count(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and 1 <= v <= MAX_POOL_INSTANCES


def _number(v: Any, lo: float, hi: float, *, positive: bool) -> bool:
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi
    return ok and (v > 0 or not positive)


def parse(raw: Any, add) -> dict | None:
    """The ``disaggregated`` object with defaults filled in, or None; ``add(field, message)`` per problem."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        add("disaggregated", "must be an object with prefill_instances, decode_instances, routing, link_gbps, "
                             "link_latency_s")
        return None
    bad = sorted(set(raw) - set(FIELDS))
    for k in bad:
        add(f"disaggregated.{k}", f"unknown field (known: {', '.join(FIELDS)})")
    out = {**DEFAULTS, **raw}
    ok = not bad
    for k in ("prefill_instances", "decode_instances"):
        if not _count(out[k]):
            add(f"disaggregated.{k}", f"must be a whole number of instances from 1 to {MAX_POOL_INSTANCES}")
            ok = False
    try:
        out["routing"] = str(parse_routing(str(out["routing"])))
    except ClusterError as exc:
        add("disaggregated.routing", str(exc).removeprefix("routing: "))
        ok = False
    if not _number(out["link_gbps"], 0.0, 1e5, positive=True):
        add("disaggregated.link_gbps", "must be a bandwidth in GB/s above 0 and at most 100,000 (one 400 Gb/s NIC "
                                       "is 50 GB/s)")
        ok = False
    if not _number(out["link_latency_s"], 0.0, 10.0, positive=False):
        add("disaggregated.link_latency_s", "must be a number of seconds from 0 to 10")
        ok = False
    if not ok:
        return None
    return {k: (float(out[k]) if k.startswith("link_") else out[k]) for k in FIELDS}


def check_definition(dis: dict | None, *, cluster: dict | None, engine: dict, arrival_unit: str | None,
                     axis_params: list[str], add) -> None:
    """What a definition must have around a ``disaggregated`` object (or around its axes)."""
    if dis is None:
        for p in axis_params:
            if p in AXES:
                add("disaggregated", f"a {p} axis needs a 'disaggregated' object (the deployment it varies)")
        return
    if cluster is not None:
        add("disaggregated", "give 'cluster' (replicas) or 'disaggregated' (prefill and decode pools), not both")
    if arrival_unit is not None and arrival_unit != "s":
        add("disaggregated", "needs arrivals in seconds (the KV transfer takes seconds)")
    if not engine.get("kv_bytes_per_block"):
        add("disaggregated", "needs a model and a GPU (or engine.kv_bytes_per_block): the KV bytes a transfer "
                             "moves")
    if engine.get("enable_prefix_caching") is False:
        add("disaggregated", "needs prefix caching on (the transferred KV enters the decode instances' cache)")


def point_meta(dis: dict, params: dict, price_per_instance: float | None, gpus_per_instance: int | None) -> dict:
    """A point's deployment: the base object with its axis values; its price and GPU count."""
    out = dict(dis)
    for k in AXES:
        if k in params:
            out[k] = params[k]
    n = out["prefill_instances"] + out["decode_instances"]
    out["price_per_hour"] = price_per_instance * n if price_per_instance else None
    out["num_gpus"] = gpus_per_instance * n if gpus_per_instance else None
    out["gpus_per_instance"] = gpus_per_instance or 1
    return out


def deployment(cfg: EngineConfig, dis: dict):
    """The point's :class:`DisaggregatedDeployment` (both pools ``cfg``)."""
    from simulator.disaggregated import DisaggregatedDeployment, KvLink, Pool

    g = int(dis.get("gpus_per_instance") or 1)
    return DisaggregatedDeployment(Pool(cfg, dis["prefill_instances"], dis["routing"], g),
                                   Pool(cfg, dis["decode_instances"], dis["routing"], g),
                                   KvLink(dis["link_gbps"], dis["link_latency_s"]))


def as_point_result(res):
    """A :class:`DisaggregatedResult` shaped like a SimResult (the client's requests) for the sweep metrics.

    Totals: the decode pool's, with preemptions and drops of both pools, the whole run's duration, and
    the transfer and per-pool figures the metrics add (:func:`extra_metrics`).
    """
    from simulator.results import SimResult

    totals = dict(res.decode.totals)
    for k in ("preemptions", "dropped_unservable", "finished", "unfinished", "duration_s"):
        totals[k] = res.totals[k]
    totals.update(extra_metrics(res))
    return SimResult(totals=totals, requests=res.decode.requests, steps=None, arrival_unit="s")


def extra_metrics(res) -> dict[str, Any]:
    """Transfer time and per-pool figures of one disaggregated run (flat, JSON numbers)."""
    pre, dec = res.pools["prefill"], res.pools["decode"]
    out = {"transfer_mean_s": res.transfer["mean_s"], "transfer_p90_s": res.transfer["p90_s"],
           "prefill_ttft_p90_s": res.prefill_ttft["p90_s"]}
    for name, pool in (("prefill", pre), ("decode", dec)):
        out[f"{name}_utilisation"] = pool["utilisation"]
        out[f"{name}_queueing_p90_s"] = pool["queueing_p90_s"]
        out[f"{name}_preemptions"] = pool["preemptions"]
        out[f"{name}_peak_kv_usage"] = pool["peak_kv_usage"]
    return out
