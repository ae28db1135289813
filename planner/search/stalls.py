"""Deployment searches whose worker died: their stalled chunks are sent again.

The same healing as a grid sweep's (:mod:`planner.sweeps.stalls`): a running search
chunk whose heartbeat (:mod:`planner.heartbeat`) stopped goes back to ``pending`` with
a new task id, and every pending chunk of its search is sent again, since the dead
worker may have reserved their messages. Chunks are idempotent and a chunk running
elsewhere with a live heartbeat is skipped, so a duplicate delivery is harmless.
"""

from __future__ import annotations

import logging

from config.celery import app as celery_app
from planner.heartbeat import requeue_stalled, stale_running
from planner.search.models import Search, SearchChunk
from planner.search.services import CHUNK_TASK
from planner.sweeps.services import _queue

logger = logging.getLogger(__name__)


def stalled_chunks(*, now=None):
    """Running chunks of unfinished searches whose heartbeat stopped more than ``KVP_STALL_AFTER_S`` ago."""
    unfinished = SearchChunk.objects.filter(search__status__in=[Search.Status.QUEUED, Search.Status.RUNNING])
    return stale_running(unfinished, now=now)


def chunks_heal() -> int:
    """Send again the chunks of searches whose worker died, with their pending chunks; returns how many."""
    opts = {"queue": _queue()} if _queue() else {}
    sent = 0
    for search_id, chunks, pending in requeue_stalled(stalled_chunks(), "search_id"):
        logger.warning("search %s: %d stalled chunk(s) sent again with %d pending", search_id, len(chunks),
                       len(pending))
        for ch in pending:
            celery_app.send_task(CHUNK_TASK, args=[search_id, ch.index], task_id=ch.task_id, **opts)
            sent += 1
    return sent
