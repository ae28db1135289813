"""The replicas page's comparison: an xPyD deployment against as many aggregated replicas (same GPUs).

:func:`compare` takes a one-simulation definition (the replicas page's request) and a
``disaggregated`` object (:mod:`planner.sweeps.disaggregated`), simulates the definition as
``prefill + decode`` aggregated replicas and as the xPyD deployment, each priced first like any
synchronous simulation, and returns one row of figures per deployment.
"""

from __future__ import annotations

from typing import Any

from planner.sweeps import definition as defn
from planner.sweeps import pricing
from planner.sweeps.runner import simulate_points, workload_of

#: Row figures copied from a point's metrics.
FIGURES = ("finished", "ttft_p50_s", "ttft_p90_s", "itl_p90_s", "e2e_p99_s", "throughput_tok_s", "transfer_p90_s",
           "prefill_utilisation", "decode_utilisation", "decode_peak_kv_usage", "decode_queueing_p90_s")


def _prepare(definition: dict, *, owner, what: str, inline: bool) -> tuple[dict, dict, pricing.Price]:
    _, snapshot, points = defn.validate(definition, owner=owner, single=True)
    p = points[0]
    if inline:
        price = pricing.check_sync(snapshot, p, what=what)
    else:
        price = pricing.check_worker_run(pricing.point_prices(snapshot, [p])[0], what=what,
                                         advice="use fewer or shorter requests")
    return snapshot, p, price


def prepare(base: dict, dis: dict, *, owner, inline: bool = True) -> list[tuple[str, int, dict, dict, pricing.Price]]:
    """The two simulations, validated and priced (``inline``: against the synchronous limit, else the chunk
    limit): ``[(name, instances, snapshot, point, price)]``."""
    base = {k: v for k, v in base.items() if k not in ("cluster", "max_instances", "disaggregated")}
    n = dis["prefill_instances"] + dis["decode_instances"]
    routing = dis.get("routing", "round-robin")
    runs = (
        (f"aggregated ×{n}", {**base, "cluster": {"num_instances": n, "routing": routing}},
         f"This simulation of {n} replicas"),
        (f"{dis['prefill_instances']}P{dis['decode_instances']}D", {**base, "disaggregated": dis},
         "This disaggregated simulation"),
    )
    return [(name, n, *_prepare(d, owner=owner, what=what, inline=inline)) for name, d, what in runs]


def rows_of(prepared: list[tuple[str, int, dict, dict, pricing.Price]]) -> list[dict[str, Any]]:
    """Simulate what :func:`prepare` returned: one row per deployment."""
    rows = []
    for name, n, snapshot, p, _price in prepared:
        res = simulate_points(workload_of(p["workload"], snapshot["workload"]), [p], record_steps=False)[0]
        meta, m = res["meta"], res["metrics"]
        gpus = (meta.get("disaggregated") or {}).get("num_gpus") or (meta.get("num_gpus") or 1) * n
        rows.append({"name": name, "gpus": gpus, "price_per_hour": meta.get("price_per_hour"),
                     **{k: m.get(k) for k in FIGURES}})
    return rows


def compare(base: dict, dis: dict, *, owner) -> list[dict[str, Any]]:
    """``[aggregated row, xPyD row]``: name, GPUs, price per hour and :data:`FIGURES` (None where absent).

    Raises :class:`planner.sweeps.definition.DefinitionError` (field messages) on bad input or a run
    over the synchronous limits.
    """
    return rows_of(prepare(base, dis, owner=owner))
