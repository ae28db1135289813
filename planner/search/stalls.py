"""Deployment searches whose worker died: their stalled chunks are sent again.

The same healing as a grid sweep's, the job lifecycle's (:mod:`planner.jobs.healing`): a running search
chunk whose heartbeat (:mod:`planner.jobs.heartbeat`) stopped goes back to ``pending`` with a new task id,
and every pending chunk of its search is sent again, since the dead worker may have reserved their messages.
Chunks are idempotent and a chunk running elsewhere with a live heartbeat is skipped, so a duplicate delivery
is harmless. A pending chunk whose message the broker lost is found by :func:`lost_messages`, for the healer
to send again.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.broker_messages import send_task
from planner.jobs import heal_stalled, lost_pending
from planner.search.services import SEARCHES


def chunks_heal() -> int:
    """Send again the chunks of searches whose worker died, with their pending chunks; returns how many."""
    return heal_stalled(SEARCHES, send=send_task)


def lost_messages(live: set[tuple[str, tuple]]) -> dict[tuple, Callable[[], None]]:
    """Pending chunks of unfinished searches whose message is not among ``live``: ``{key: send it again}``."""
    return lost_pending(SEARCHES, live, send=send_task, key="search-chunk")
