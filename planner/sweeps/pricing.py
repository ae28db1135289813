"""Price simulations, sweep chunks and replicas searches before they run (``simulator.batch.budget``).

Every entry point that simulates asks here first: ``/api/simulations/`` (runs in
the web process), ``/api/sweeps/`` and the sweep form (chunks run on workers),
``/api/replicas/`` and ``/replicas/``, ``/api/calibrations/`` and ``/calibrations/``
(a fit: many simulations in the web process). A run over a limit is refused with
:class:`simulator.batch.budget.OverBudget`, whose message states the limit and the
estimate: the one input error at the field to make smaller, answered as a 400 by the API's one mapping and
attached to a page's form by ``config.form_errors.attach_errors`` (no caller converts it).

Limits (settings, each overridable from the environment in ``config/settings.py``):

- ``KVP_RUN_MAX_BYTES``: estimated memory of one simulation call (a synchronous
  run, one sweep chunk, one replicas trial).
- ``KVP_INLINE_MAX_SECONDS``: estimated time up to which ``/api/simulations/``, ``/api/replicas/``,
  ``/replicas/`` and the calibrations run inside the web request; dearer ones run on a worker as one chunk
  (:mod:`planner.runs`), under the chunk limit.
- ``KVP_SYNC_MAX_SECONDS``: estimated time of a run made inside a web request with no worker alternative
  (:func:`check_sync`).
- ``KVP_CHUNK_MAX_SECONDS``: estimated time of one sweep chunk (below the
  chunk's soft time limit); bigger chunks are split, a bigger point is refused.
- ``KVP_USER_QUEUE_SECONDS``: estimated time of one user's queued and running work.

No ORM here: snapshots and points (plain dicts) in, prices out. The limits themselves, and the check of a
calibration (which imports nothing of the sweeps), are in :mod:`planner.sweeps.limits`.
"""

from __future__ import annotations

from planner.sweeps.limits import (
    check_calibration,
    chunk_max_seconds,
    run_max_bytes,
    sync_max_seconds,
)
from planner.sweeps.points import engine_config, resolve_point
from planner.sweeps.runner import workload_of
from planner.sweeps.sections import cliff_budget
from planner.sweeps.specs import PointSpecs
from simulator.batch import OverBudget, Price, WorkloadSize, budget
from simulator.engine import EngineConfig

__all__ = ["OverBudget", "Price", "point_prices", "check_sync", "split_chunks", "check_points",
           "check_calibration", "check_worker_run", "chunk_max_seconds", "run_max_bytes", "sync_max_seconds"]


def _sizes(snapshot: dict, points: list[dict]) -> dict[str, WorkloadSize]:
    """The size of each workload variant (built once per variant, scales applied as bounds)."""
    base = snapshot["workload"]
    unscaled: dict[str, WorkloadSize] = {}
    out: dict[str, WorkloadSize] = {}
    for p in points:
        variant = p["workload"]
        key = p.get("workload_key") or repr(sorted(variant.items()))
        if key in out:
            continue
        plain = {**variant, "prompt_scale": 1.0, "output_scale": 1.0}
        plain_key = repr(sorted((k, repr(v)) for k, v in plain.items()))
        if plain_key not in unscaled:
            unscaled[plain_key] = WorkloadSize.of(workload_of(plain, base))
        out[key] = unscaled[plain_key].scaled(float(variant.get("prompt_scale", 1.0)),
                                              float(variant.get("output_scale", 1.0)))
    return out


def point_prices(snapshot: dict, points: list[dict]) -> list[Price]:
    """One :class:`Price` per point (``{"config", "meta", "workload"[, "workload_key"]}``; a
    :class:`~planner.sweeps.points.Point`'s own configuration is priced as it is)."""
    sizes = _sizes(snapshot, points)
    prices = []
    for p in points:
        key = p.get("workload_key") or repr(sorted(p["workload"].items()))
        meta = p.get("meta") or {}
        dis = meta.get("disaggregated")
        n = dis["prefill_instances"] + dis["decode_instances"] if dis else (meta.get("cluster") or {}).get(
            "num_instances", 1) * (meta.get("data_parallel") or {}).get("data_parallel_size", 1)  # DP: each rank
        prices.append(budget.price_run(sizes[key], engine_config(p), instances=int(n)))
    return prices


def check_sync(snapshot: dict, point: dict, *, what: str = "This simulation") -> Price:
    """Refuse a run made inside a web request when over the memory or the synchronous time limit."""
    price = point_prices(snapshot, [point])[0]
    budget.check(price, max_bytes=run_max_bytes(), max_seconds=sync_max_seconds(), what=what,
                 advice="use fewer or shorter requests, or create a sweep at /api/sweeps/ (it runs on workers)",
                 field="workload")
    return price


def check_points(snapshot: dict, points: list[dict], prices: list[Price]) -> None:
    """Refuse a sweep with a point that alone is over the memory or the chunk time limit."""
    for p, price in zip(points, prices):
        label = ", ".join(f"{k}={v}" for k, v in p.get("params", {}).items()) or "the point"
        budget.check(price, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                     what=f"Sweep point {label}", field="workload",
                     advice="use fewer or shorter requests, or fewer KV blocks")


def split_chunks(chunks: list[dict], prices_by_index: dict[int, Price]) -> list[dict]:
    """Split chunks whose points together are over a limit (each point alone is within them).

    Each point gets its estimated seconds as ``cost_s``: the progress estimate weighs the points by it
    (:func:`planner.sweeps.selectors.sweep_progress`).
    """
    for chunk in chunks:
        for p in chunk["points"]:
            p["cost_s"] = round(prices_by_index[p["index"]].seconds, 4)
    out = []
    max_bytes, max_s = run_max_bytes(), chunk_max_seconds()
    for chunk in chunks:
        part: list[dict] = []
        total = Price()
        for p in chunk["points"]:
            price = prices_by_index[p["index"]]
            after = total + price
            if part and (after.memory_bytes > max_bytes or after.seconds > max_s):
                out.append({"workload": chunk["workload"], "points": part})
                part, total = [], Price()
                after = price
            part.append(p)
            total = after
        if part:
            out.append({"workload": chunk["workload"], "points": part})
    return out


def check_replicas(size: WorkloadSize, config: EngineConfig, max_instances: int, engines_per_replica: int = 1) -> Price:
    """Refuse a replicas search over the memory limit or the chunk time limit (past ``KVP_INLINE_MAX_SECONDS``
    it runs on a worker, as one chunk: :mod:`planner.runs`). ``engines_per_replica``: a DP group's ranks."""
    price = budget.price_replicas_search(size, config, max_instances * engines_per_replica)
    budget.check(price, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(),
                 what=f"This replicas search (up to {max_instances} instances)", field="workload",
                 advice="use fewer or shorter requests, a lower max_instances, or a sweep over num_instances "
                        "at /api/sweeps/ (its points run in parallel)")
    return price


def check_worker_run(price: Price, *, what: str, advice: str, field: str = "workload") -> Price:
    """Refuse a run handed to a worker as one chunk (:mod:`planner.runs`) over the memory or the chunk time limit."""
    budget.check(price, max_bytes=run_max_bytes(), max_seconds=chunk_max_seconds(), what=what, advice=advice,
                 field=field)
    return price


def check_cliff(snapshot: dict, *, owner) -> Price:
    """Price a cliff search (one worker task: every round one after another) at its most evaluations.

    Each evaluation is priced as the dearer of the range's two ends; the search's
    time must fit one chunk's limit, each round's memory the run limit.
    """
    c = snapshot["cliff"]
    specs = PointSpecs.of(snapshot)
    ends = [resolve_point(snapshot, {c["param"]: x}, i, owner=owner, specs=specs)
            for i, x in enumerate((c["lo"], c["hi"]))]
    dearest = max(point_prices(snapshot, ends), key=lambda p: (p.seconds, p.memory_bytes))
    evaluations = cliff_budget(c)
    total = Price(dearest.memory_bytes, dearest.seconds * evaluations)
    budget.check(Price(dearest.memory_bytes * 3, total.seconds), max_bytes=run_max_bytes(),
                 max_seconds=chunk_max_seconds(), what=f"This cliff search (up to {evaluations} simulations)",
                 field="cliff", advice="use fewer or shorter requests or a coarser resolution")
    return total
