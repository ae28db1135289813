"""Sweeps whose worker died: find their stalled chunks and send their work again.

The healing itself is the job lifecycle's (:mod:`planner.jobs.healing`); what is a sweep's own is what it sends
(:meth:`planner.sweeps.services.Sweeps.resend`):

- a grid sweep: each stalled chunk goes back to ``pending`` with a new task id, and
  every pending chunk of the sweep is sent again (the dead worker may have reserved
  their messages too);
- a cliff search: its stalled round goes back to ``pending`` and the search's one
  task is sent again; it replays the stored rounds and simulates the missing one.

Work whose message was lost (the broker lost its keys: nothing is running it, nothing will deliver it) is
found by :func:`lost_messages`, for the healer to send again: a pending chunk of a grid sweep with no
message for it in the broker, a cliff search with no message for its task and no round active.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial

from django.db.models import Q
from django.utils import timezone

from planner.broker_messages import send_task
from planner.jobs import heal_stalled, lost_pending, stall_after_s
from planner.models import Sweep, SweepChunk
from planner.sweeps.services import CLIFF_TASK, SWEEPS


def chunks_heal() -> int:
    """Send again the work of sweeps whose worker died; returns how many tasks were sent."""
    return heal_stalled(SWEEPS, send=send_task)


def lost_messages(live: set[tuple[str, tuple]], *, now=None) -> dict[tuple, Callable[[], None]]:
    """Work of unfinished sweeps whose message is not among ``live`` (:func:`planner.broker_messages.live_tasks`):
    ``{key: send it again}``. A grid sweep's pending chunk; a cliff search whose task has no message and none of
    whose rounds is running with a heartbeat or started or finished within ``KVP_STALL_AFTER_S`` (a cliff task
    between two rounds is active, and on the filesystem broker its message is not in the queue then)."""
    unfinished = Sweep.objects.filter(status__in=[Sweep.Status.QUEUED, Sweep.Status.RUNNING])
    out = lost_pending(SWEEPS, live, send=send_task, key="sweep-chunk", jobs=unfinished.filter(mode=Sweep.Mode.GRID))
    cutoff = (now or timezone.now()) - timezone.timedelta(seconds=stall_after_s())
    active = Q(heartbeat_at__gte=cutoff) | Q(started_at__gte=cutoff) | Q(finished_at__gte=cutoff)
    for sweep_id in unfinished.filter(mode=Sweep.Mode.CLIFF, created_at__lt=cutoff).values_list("pk", flat=True):
        if (CLIFF_TASK, (sweep_id,)) in live or SweepChunk.objects.filter(active, sweep_id=sweep_id).exists():
            continue
        out[("sweep-cliff", sweep_id)] = partial(send_task, CLIFF_TASK, [sweep_id],
                                                 task_id=f"sweep-{sweep_id}-cliff-{uuid.uuid4()}")
    return out
