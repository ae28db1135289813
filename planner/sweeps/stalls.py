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

Work whose message was lost (the broker lost its keys: nothing is running it, nothing will deliver it) is
found by :func:`lost_messages`, for the healer to send again: a pending chunk of a grid sweep with no
message for it in the broker, a cliff search with no message for its task and no round active.

Attempts are counted when the work starts and checked against
:data:`planner.heartbeat.MAX_CHUNK_ATTEMPTS`. A duplicate delivery is harmless: the
work is idempotent, and work running elsewhere with a live heartbeat is skipped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from functools import partial

from django.db.models import Q
from django.utils import timezone

from planner.broker_messages import send_task
from planner.heartbeat import requeue_stalled, stale_running, stall_after_s
from planner.models import Sweep, SweepChunk
from planner.sweeps.services import CHUNK_TASK, CLIFF_TASK

logger = logging.getLogger(__name__)


def stalled_chunks(*, now=None):
    """Running chunks of unfinished sweeps whose heartbeat stopped more than ``KVP_STALL_AFTER_S`` ago."""
    unfinished = SweepChunk.objects.filter(sweep__status__in=[Sweep.Status.QUEUED, Sweep.Status.RUNNING])
    return stale_running(unfinished, now=now)


def chunks_heal() -> int:
    """Send again the work of sweeps whose worker died; returns how many tasks were sent."""
    sent = 0
    for sweep_id, chunks, pending in requeue_stalled(stalled_chunks(), "sweep_id"):
        if Sweep.objects.filter(pk=sweep_id, mode=Sweep.Mode.CLIFF).exists():
            logger.warning("cliff sweep %s: round %s stalled, search sent again", sweep_id, chunks[0].index)
            send_task(CLIFF_TASK, [sweep_id], task_id=f"sweep-{sweep_id}-cliff-{uuid.uuid4()}")
            sent += 1
            continue
        logger.warning("sweep %s: %d stalled chunk(s) sent again with %d pending", sweep_id, len(chunks),
                       len(pending))
        for ch in pending:
            send_task(CHUNK_TASK, [sweep_id, ch.index], task_id=ch.task_id)
            sent += 1
    return sent


def lost_messages(live: set[tuple[str, tuple]], *, now=None) -> dict[tuple, Callable[[], None]]:
    """Work of unfinished sweeps whose message is not among ``live`` (:func:`planner.broker_messages.live_tasks`):
    ``{key: send it again}``. A grid sweep's pending chunk; a cliff search whose task has no message and none of
    whose rounds is running with a heartbeat or started or finished within ``KVP_STALL_AFTER_S`` (a cliff task
    between two rounds is active, and on the filesystem broker its message is not in the queue then)."""
    unfinished = Sweep.objects.filter(status__in=[Sweep.Status.QUEUED, Sweep.Status.RUNNING])
    out: dict[tuple, Callable[[], None]] = {}
    pending = SweepChunk.objects.filter(sweep__in=unfinished.filter(mode=Sweep.Mode.GRID),
                                        status=SweepChunk.Status.PENDING).only("sweep_id", "index", "task_id")
    for ch in pending:
        if (CHUNK_TASK, (ch.sweep_id, ch.index)) not in live:
            out[("sweep-chunk", ch.sweep_id, ch.index)] = partial(send_task, CHUNK_TASK, [ch.sweep_id, ch.index],
                                                                  task_id=ch.task_id)
    cutoff = (now or timezone.now()) - timezone.timedelta(seconds=stall_after_s())
    active = Q(heartbeat_at__gte=cutoff) | Q(started_at__gte=cutoff) | Q(finished_at__gte=cutoff)
    for sweep_id in unfinished.filter(mode=Sweep.Mode.CLIFF, created_at__lt=cutoff).values_list("pk", flat=True):
        if (CLIFF_TASK, (sweep_id,)) in live or SweepChunk.objects.filter(active, sweep_id=sweep_id).exists():
            continue
        out[("sweep-cliff", sweep_id)] = partial(send_task, CLIFF_TASK, [sweep_id],
                                                 task_id=f"sweep-{sweep_id}-cliff-{uuid.uuid4()}")
    return out
