"""Deployment searches whose worker died: their stalled chunks are sent again.

The same healing as a grid sweep's (:mod:`planner.sweeps.stalls`): a running search
chunk whose heartbeat (:mod:`planner.heartbeat`) stopped goes back to ``pending`` with
a new task id, and every pending chunk of its search is sent again, since the dead
worker may have reserved their messages. Chunks are idempotent and a chunk running
elsewhere with a live heartbeat is skipped, so a duplicate delivery is harmless. A pending chunk whose
message the broker lost is found by :func:`lost_messages`, for the healer to send again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from planner.broker_messages import send_task
from planner.heartbeat import requeue_stalled, stale_running
from planner.search.models import Search, SearchChunk
from planner.search.services import CHUNK_TASK

logger = logging.getLogger(__name__)


def stalled_chunks(*, now=None):
    """Running chunks of unfinished searches whose heartbeat stopped more than ``KVP_STALL_AFTER_S`` ago."""
    unfinished = SearchChunk.objects.filter(search__status__in=[Search.Status.QUEUED, Search.Status.RUNNING])
    return stale_running(unfinished, now=now)


def chunks_heal() -> int:
    """Send again the chunks of searches whose worker died, with their pending chunks; returns how many."""
    sent = 0
    for search_id, chunks, pending in requeue_stalled(stalled_chunks(), "search_id"):
        logger.warning("search %s: %d stalled chunk(s) sent again with %d pending", search_id, len(chunks),
                       len(pending))
        for ch in pending:
            send_task(CHUNK_TASK, [search_id, ch.index], task_id=ch.task_id)
            sent += 1
    return sent


def lost_messages(live: set[tuple[str, tuple]]) -> dict[tuple, Callable[[], None]]:
    """Pending chunks of unfinished searches whose message is not among ``live``: ``{key: send it again}``."""
    pending = SearchChunk.objects.filter(search__status__in=[Search.Status.QUEUED, Search.Status.RUNNING],
                                         status="pending").only("search_id", "index", "task_id")
    return {("search-chunk", ch.search_id, ch.index): partial(send_task, CHUNK_TASK, [ch.search_id, ch.index],
                                                               task_id=ch.task_id)
            for ch in pending if (CHUNK_TASK, (ch.search_id, ch.index)) not in live}
