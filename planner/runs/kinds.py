"""What each kind of run does on a worker: the same validation and simulation as the web request's, run here
without the request's wall clock, returning exactly the body the request would have answered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _simulation(definition: Any, *, owner, progress) -> dict:
    from planner.sweeps import simulation

    return simulation.answer(simulation.prepare(definition, owner=owner), inline=False, progress=progress)


def _replicas(definition: Any, *, owner, progress) -> dict:
    from planner.sweeps.replicas import answer_replicas, check_replicas

    return answer_replicas(check_replicas(definition, owner=owner), inline=False)


def _replicas_page(definition: dict, *, owner, progress) -> dict:
    """The replicas page's answer and, when its form asks, the xPyD comparison."""
    from planner.sweeps import disaggregated_compare

    found = _replicas(definition["request"], owner=owner, progress=progress)
    dis = definition.get("disaggregated")
    rows = None
    if dis:
        rows = disaggregated_compare.rows_of(disaggregated_compare.prepare(definition["request"], dis, owner=owner,
                                                                           inline=False))
    return {"found": found, "disaggregated": rows}


def _calibration(definition: dict, *, owner, progress) -> dict:
    from planner.calibration.services import fit_on_worker

    return fit_on_worker(definition, owner=owner)


KINDS: dict[str, Callable[..., dict]] = {
    "simulation": _simulation, "replicas": _replicas, "replicas-page": _replicas_page, "calibration": _calibration}


def run_kind(kind: str, definition: Any, *, owner, progress) -> dict:
    """Run a stored run of ``kind`` (``progress``: the chunk's :class:`planner.jobs.Watch`)."""
    return KINDS[kind](definition, owner=owner, progress=progress)
