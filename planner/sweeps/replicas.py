"""How many replicas for this traffic: the smallest instance count meeting latency SLOs (issue 8).

Input is a one-simulation definition (model + GPU or engine, a generated
workload with arrivals in seconds) plus ``slo`` and optionally ``cluster``
(routing, router delay) and ``max_instances``; the answer comes from
:func:`simulator.cluster.smallest_replicas` on the sized engine (its roofline
clock when the definition names a model and a GPU). No ORM beyond the
catalog lookups of :func:`planner.sweeps.definition.validate`. The search runs in the
web request: it is priced first (refused over ``KVP_SYNC_MAX_SECONDS`` or
``KVP_RUN_MAX_BYTES``, :mod:`planner.sweeps.pricing`) and then runs in a child
process stopped after ``KVP_SYNC_HARD_SECONDS`` (:mod:`planner.sweeps.bounded`).
"""

from __future__ import annotations

from typing import Any

from planner.sweeps import definition as defn
from planner.sweeps import pricing
from planner.sweeps.bounded import run_bounded
from simulator.budget import OverBudget, WorkloadSize

#: Most instances the search may try, and most requests it may simulate per try.
MAX_REPLICAS = 64
MAX_REPLICA_REQUESTS = 2_000


def _search(wl, config, slo: dict, cl: dict, max_n: int):
    """The search itself (runs in a child process: :func:`planner.sweeps.bounded.run_bounded`)."""
    from simulator.cluster import smallest_replicas

    return smallest_replicas(wl, config, slo_ttft_s=slo.get("ttft_s"), slo_itl_s=slo.get("itl_s"),
                             routing=cl["routing"], router_delay_s=cl["router_delay_s"], max_instances=max_n,
                             percentile=slo.get("percentile", "p90"))


def find_replicas(raw: Any, *, owner) -> dict:
    """Validate and answer; raises :class:`planner.sweeps.definition.DefinitionError` with field messages."""
    from planner.sweeps.runner import build_workload
    from simulator.config import EngineConfig
    from simulator.routing import ClusterError

    if not isinstance(raw, dict):
        raise defn.DefinitionError({"non_field_errors": ["must be a JSON object"]})
    data = dict(raw)
    max_n = data.pop("max_instances", 16)
    if isinstance(max_n, bool) or not isinstance(max_n, int) or not 1 <= max_n <= MAX_REPLICAS:
        raise defn.DefinitionError({"max_instances": [f"must be a whole number from 1 to {MAX_REPLICAS}"]})
    if data.get("slo") is None:
        raise defn.DefinitionError({"slo": ["give the latency targets: {\"ttft_s\": ..., \"itl_s\": ...}"]})
    cluster = data.pop("cluster", None)
    _, snapshot, points = defn.validate({**data, **({"cluster": cluster} if cluster else {})}, owner=owner,
                                        single=True)
    wl_base = snapshot["workload"]
    if wl_base["arrival_unit"] != "s":
        raise defn.DefinitionError({"workload.spec.arrival": [
            "give arrivals in seconds (e.g. {\"kind\": \"poisson\", \"rate\": 20, \"unit\": \"s\"}): "
            "latency targets are in seconds"]})
    if wl_base["n"] > MAX_REPLICA_REQUESTS:
        raise defn.DefinitionError({"workload.spec.n": [
            f"at most {MAX_REPLICA_REQUESTS:,} requests (each replica count tried simulates them all)"]})
    p = points[0]
    slo = snapshot["slo"]
    cl = snapshot.get("cluster") or {"routing": "round-robin", "router_delay_s": 0.0}
    wl = build_workload(p["workload"], wl_base.get("trace"), wl_base.get("format", "csv"))
    config = EngineConfig.from_dict(p["config"])
    try:
        pricing.check_replicas(WorkloadSize.of(wl), config, max_n)
        found = run_bounded(_search, wl, config, slo, cl, max_n, what=f"This replicas search (up to {max_n} "
                                                                    "instances)")
    except ClusterError as exc:
        raise defn.DefinitionError({"non_field_errors": [str(exc)]}) from None
    except OverBudget as exc:
        raise defn.DefinitionError({exc.field: [str(exc)]}) from None
    sizing = snapshot.get("sizing") or {}
    price = p["meta"].get("price_per_hour")
    return {
        **found.to_dict(),
        "requests": wl.n,
        "rate_per_s": (snapshot["workload"].get("spec") or {}).get("arrival", {}).get("rate"),
        "num_gpu_blocks": p["meta"]["num_gpu_blocks"],
        "gpus_per_replica": sizing.get("num_gpus") or p["meta"].get("num_gpus"),
        "cost_per_hour": (price * found.num_instances) if (price and found.num_instances) else None,
        "clock": "cost_model" if config.cost_model is not None else "step_time_model",
    }
