"""Runs handed to the workers whose worker died, or whose message was lost: sent again, by the job lifecycle's
healing (:mod:`planner.jobs.healing`), like a search's chunks. A run is one idempotent chunk, so a duplicate
delivery is harmless."""

from __future__ import annotations

from collections.abc import Callable

from planner.broker_messages import send_task
from planner.jobs import heal_stalled, lost_pending
from planner.runs.services import RUNS


def chunks_heal() -> int:
    """Send again the runs whose worker died; returns how many."""
    return heal_stalled(RUNS, send=send_task)


def lost_messages(live: set[tuple[str, tuple]]) -> dict[tuple, Callable[[], None]]:
    """Pending runs whose message is not among ``live``: ``{key: send it again}``."""
    return lost_pending(RUNS, live, send=send_task, key="run")
