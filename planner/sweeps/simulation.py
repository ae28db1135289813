"""One simulation of one definition (``POST /api/simulations/``): validated and priced here, run in the web
request when its price is within ``KVP_INLINE_MAX_SECONDS`` (in a child process under the wall clock,
:mod:`planner.sweeps.bounded`), else on a worker (:mod:`planner.runs`); :func:`answer` shapes the same body
either way.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from planner.sampling_words import sampling_answer
from planner.sweeps import definition as defn
from planner.sweeps import pricing
from planner.sweeps.runner import simulate_points, workload_of


def simulation_max_requests() -> int:
    return int(getattr(settings, "KVP_SIMULATION_MAX_REQUESTS", 5_000))


def prepare(data: Any, *, owner) -> dict:
    """Validate ``data`` and price it: ``{"snapshot", "point", "price"}``; raises
    :class:`planner.sweeps.definition.DefinitionError` (field messages)."""
    _, snapshot, points = defn.validate(data, owner=owner, single=True)
    n = snapshot["workload"]["n"]
    cap = simulation_max_requests()
    if n > cap:
        raise defn.DefinitionError({"workload": [
            f"{n:,} requests is more than the {cap:,} one simulation allows; create a sweep at /api/sweeps/ "
            "(it runs on workers, with progress)"]})
    return {"snapshot": snapshot, "point": points[0], "price": pricing.point_prices(snapshot, [points[0]])[0]}


def _simulate_one(point: dict, wl_base: dict, progress=None) -> dict:
    """One point's simulation (in a child process of the web request, or on a worker)."""
    wl = workload_of(point["workload"], wl_base)
    return simulate_points(wl, [point], record_steps=True, progress=progress)[0]


def answer(prepared: dict, *, inline: bool, progress=None) -> dict:
    """Run the prepared simulation and shape the answer: ``inline`` in a child process under the wall clock
    (:func:`planner.sweeps.bounded.run_bounded`), else here (a worker). Raises ``DefinitionError`` for input
    the engine refuses, :class:`simulator.batch.OverBudget` past the wall clock (about the input as a whole)."""
    from planner.sweeps.bounded import run_bounded
    from simulator.batch import OverBudget

    snapshot, p = prepared["snapshot"], prepared["point"]
    try:
        if inline:
            result = run_bounded(_simulate_one, p, snapshot["workload"], what="This simulation", field=None)
        else:
            result = _simulate_one(p, snapshot["workload"], progress)
    except OverBudget:  # the one input error, answered as such by every door
        raise
    except (ValueError, TypeError) as exc:  # ConfigError / WorkloadError: input the engine refuses
        raise defn.DefinitionError({"non_field_errors": [str(exc)]}) from None
    return {"metrics": result["metrics"], "totals": result["totals"], "series": result["series"],
            "config": p["config"], "meta": p["meta"], **sampling_answer(snapshot),
            **({"data_parallel": result["data_parallel"]} if "data_parallel" in result else {})}
