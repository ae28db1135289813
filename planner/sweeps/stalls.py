"""Sweeps whose worker died: find their stalled chunks and send their work again.

A worker killed as a whole (its process group, or ``docker stop`` past the grace
period) leaves its chunk ``running`` with a heartbeat that stops
(:mod:`planner.heartbeat`), and the messages it had reserved unacknowledged in the
broker until the visibility timeout. :func:`chunks_heal`, called by the workers'
healer (:mod:`planner.healer`), sends that work again:

- a grid sweep: each stalled chunk goes back to ``pending`` with a new task id, and
  every pending chunk of the sweep is sent again (the dead worker may have reserved
  their messages too);
- a cliff search: its stalled round goes back to ``pending`` and the search's one
  task is sent again; it replays the stored rounds and simulates the missing one.

Attempts are counted when the work starts and checked against
:data:`planner.heartbeat.MAX_CHUNK_ATTEMPTS`. A duplicate delivery is harmless: the
work is idempotent, and work running elsewhere with a live heartbeat is skipped.
"""

from __future__ import annotations

import logging
import uuid

from config.celery import app as celery_app
from planner.heartbeat import requeue_stalled, stale_running
from planner.models import Sweep, SweepChunk
from planner.sweeps.services import CHUNK_TASK, CLIFF_TASK, _queue

logger = logging.getLogger(__name__)


def stalled_chunks(*, now=None):
    """Running chunks of unfinished sweeps whose heartbeat stopped more than ``KVP_STALL_AFTER_S`` ago."""
    unfinished = SweepChunk.objects.filter(sweep__status__in=[Sweep.Status.QUEUED, Sweep.Status.RUNNING])
    return stale_running(unfinished, now=now)


def chunks_heal() -> int:
    """Send again the work of sweeps whose worker died; returns how many tasks were sent."""
    opts = {"queue": _queue()} if _queue() else {}
    sent = 0
    for sweep_id, chunks, pending in requeue_stalled(stalled_chunks(), "sweep_id"):
        if Sweep.objects.filter(pk=sweep_id, mode=Sweep.Mode.CLIFF).exists():
            logger.warning("cliff sweep %s: round %s stalled, search sent again", sweep_id, chunks[0].index)
            celery_app.send_task(CLIFF_TASK, args=[sweep_id], task_id=f"sweep-{sweep_id}-cliff-{uuid.uuid4()}",
                                 **opts)
            sent += 1
            continue
        logger.warning("sweep %s: %d stalled chunk(s) sent again with %d pending", sweep_id, len(chunks),
                       len(pending))
        for ch in pending:
            celery_app.send_task(CHUNK_TASK, args=[sweep_id, ch.index], task_id=ch.task_id, **opts)
            sent += 1
    return sent
