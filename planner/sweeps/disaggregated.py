"""Disaggregated prefill/decode in a simulation or sweep definition (``docs/disaggregated_serving.md``).

A definition may carry ``"disaggregated": {"prefill_instances": 1, "decode_instances": 3,
"routing": "least-loaded", "link_gbps": 50, "link_latency_s": 0.0001}``: every point then runs as an
xPyD deployment of the point's engine (both pools the same GPU and TP) instead of one engine or
replicas; sweeps may vary ``prefill_instances`` and ``decode_instances`` as axes. This module
validates that object (each bad field named), builds a point's
:class:`simulator.cluster.disaggregated.DisaggregatedDeployment` and shapes its result for the sweep
metrics. No ORM.
"""

from __future__ import annotations

import math
from typing import Any

from config.strict_input import unknown_field_errors
from planner.errors import FieldErrors, field_and_message
from simulator.cluster import ClusterError, parse_routing
from simulator.engine import EngineConfig

#: Most instances in one pool of a point.
MAX_POOL_INSTANCES = 64
FIELDS = ("prefill_instances", "decode_instances", "routing", "link_gbps", "link_latency_s", "prefill_gpu",
          "prefill_tensor_parallel_size")
DEFAULTS = {"prefill_instances": 1, "decode_instances": 1, "routing": "round-robin", "link_gbps": 50.0,
            "link_latency_s": 1e-4, "prefill_gpu": None, "prefill_tensor_parallel_size": None}
#: Sweep axes this object adds (``planner.sweeps.axes.AXES``).
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
    bad = unknown_field_errors(raw, FIELDS, prefix="disaggregated")
    for field, messages in bad.items():
        add(field, messages[0])
    out = {**DEFAULTS, **raw}
    ok = not bad
    for k in ("prefill_instances", "decode_instances"):
        if not _count(out[k]):
            add(f"disaggregated.{k}", f"must be a whole number of instances from 1 to {MAX_POOL_INSTANCES}")
            ok = False
    try:
        out["routing"] = str(parse_routing(str(out["routing"])))
    except ClusterError as exc:
        add("disaggregated.routing", field_and_message(exc)[1])  # (its field: routing)
        ok = False
    if not _number(out["link_gbps"], 0.0, 1e5, positive=True):
        add("disaggregated.link_gbps", "must be a bandwidth in GB/s above 0 and at most 100,000 (one 400 Gb/s NIC "
                                       "is 50 GB/s)")
        ok = False
    if not _number(out["link_latency_s"], 0.0, 10.0, positive=False):
        add("disaggregated.link_latency_s", "must be a number of seconds from 0 to 10")
        ok = False
    tp = out["prefill_tensor_parallel_size"]
    if tp is not None and not (not isinstance(tp, bool) and isinstance(tp, int) and 1 <= tp <= 64):
        add("disaggregated.prefill_tensor_parallel_size", "must be a whole number of GPUs from 1 to 64")
        ok = False
    g = out["prefill_gpu"]
    if g is not None and (isinstance(g, bool) or not isinstance(g, (str, int, dict)) or g == ""):
        add("disaggregated.prefill_gpu", "must be a catalog GPU slug, the id of your GPU profile, or an inline spec")
        ok = False
    if not ok:
        return None
    return {k: (float(out[k]) if k.startswith("link_") else out[k]) for k in FIELDS}


class _OneField(FieldErrors):
    """An error sink that files every message under one field (the sizing of the prefill pool reports
    ``tensor_parallel_size: ...`` of the deployment it builds; the user gave ``prefill_tensor_parallel_size``)."""

    def __init__(self, add, field: str) -> None:
        super().__init__()
        self._add, self.field = add, field

    def add(self, _field: str, message: str, **_kw) -> None:
        self._add(self.field, message)
        self.errors.setdefault(self.field, []).append(message)


def own_prefill(dis: dict | None) -> bool:
    """Whether the prefill pool has a GPU type or TP of its own."""
    return bool(dis) and (dis.get("prefill_gpu") is not None or dis.get("prefill_tensor_parallel_size") is not None)


def with_prefill_engine(dis: dict, *, model: dict | None, gpu: dict | None, deployment: dict, engine: dict,
                        explicit: list[str], resolve, size, roofline, add) -> dict:
    """``dis`` with the prefill pool's own engine when it names a GPU or TP of its own (else as it is).

    The prefill engine is the base engine re-sized for that GPU and TP (vLLM's start-up rule) with its
    roofline clock unless the engine gives its own. ``resolve(ref, where)``, ``size(model, gpu, dep,
    sink)`` (errors to ``sink.add``) and ``roofline(model, gpu, dep)`` are the definition's; ``add(field,
    message)`` reports.
    """
    if not own_prefill(dis):
        return dis
    where = "disaggregated.prefill_tensor_parallel_size" if dis.get("prefill_tensor_parallel_size") is not None \
        else "disaggregated.prefill_gpu"
    if model is None or gpu is None:
        add(where, "a prefill pool of its own needs a model and a GPU (sizing decides its KV blocks)")
        return dis
    g = gpu if dis.get("prefill_gpu") is None else resolve(dis["prefill_gpu"], "disaggregated.prefill_gpu")
    if g is None:
        return dis
    dep = {**deployment, "tensor_parallel_size": dis.get("prefill_tensor_parallel_size")
           or deployment.get("tensor_parallel_size", 1)}
    sized = size(model["spec"], g["spec"], dep, _OneField(add, where))
    if sized is None:
        return dis
    eng = {**engine, "num_gpu_blocks": sized["num_gpu_blocks"], "kv_bytes_per_block": int(sized["bytes_per_block_per_gpu"])}
    if "cost_model" not in explicit and "step_time_model" not in explicit:
        eng["cost_model"] = roofline(model["spec"], g["spec"], dep)
        if eng["cost_model"] is None:
            eng.pop("cost_model")
    n = int(sized["num_gpus"])
    price = g["spec"].get("price_per_hour")
    return {**dis, "prefill_engine": eng, "prefill_gpus_per_instance": n,
            "prefill_price_per_instance": price * n if price else None,
            "prefill_label": f"{n}x {g['spec'].get('name')}"}


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
    if own_prefill(dis) and any(p not in AXES and p not in ("rate", "prompt_scale", "output_scale",
                                                               "shared_prefix_fraction") for p in axis_params):
        add("disaggregated.prefill_gpu", "a prefill pool with its own GPU or TP takes only pool-size and "
                                         "workload axes (the other axes would change one pool only)")


def point_meta(dis: dict, params: dict, price_per_instance: float | None, gpus_per_instance: int | None) -> dict:
    """A point's deployment: the base object with its axis values; its price and GPU count (both pools)."""
    out = dict(dis)
    for k in AXES:
        if k in params:
            out[k] = params[k]
    p, d = out["prefill_instances"], out["decode_instances"]
    own = "prefill_engine" in dis
    pre_price = dis.get("prefill_price_per_instance") if own else price_per_instance
    pre_gpus = dis.get("prefill_gpus_per_instance") if own else gpus_per_instance
    out["price_per_hour"] = pre_price * p + price_per_instance * d if pre_price and price_per_instance else None
    out["num_gpus"] = pre_gpus * p + gpus_per_instance * d if pre_gpus and gpus_per_instance else None
    out["gpus_per_instance"] = gpus_per_instance or 1
    out["prefill_gpus_per_instance"] = pre_gpus or 1
    return out


def deployment(cfg: EngineConfig, dis: dict, prefill_engine: dict | None = None):
    """The point's :class:`DisaggregatedDeployment`: the decode pool ``cfg``, the prefill pool its own
    engine (``prefill_engine``, from :func:`with_prefill_engine`) or ``cfg``."""
    from simulator.cluster import DisaggregatedDeployment, KvLink, Pool

    g = int(dis.get("gpus_per_instance") or 1)
    pre = EngineConfig.from_dict(prefill_engine) if prefill_engine else cfg
    return DisaggregatedDeployment(Pool(pre, dis["prefill_instances"], dis["routing"],
                                        int(dis.get("prefill_gpus_per_instance") or g)),
                                   Pool(cfg, dis["decode_instances"], dis["routing"], g),
                                   KvLink(dis["link_gbps"], dis["link_latency_s"]))


def as_point_result(res):
    """A :class:`DisaggregatedResult` shaped like a SimResult (the client's requests) for the sweep metrics.

    Totals: the decode pool's, with preemptions and drops of both pools, the whole run's duration, and
    the transfer and per-pool figures the metrics add (:func:`extra_metrics`).
    """
    from simulator.engine import SimResult

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
