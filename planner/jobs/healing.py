"""Healing, once for every kind of chunked job: chunks whose worker died, and pending chunks whose message was lost.

A worker killed as a whole (its process group, or ``docker stop`` past the grace period) leaves its chunk
``running`` with a heartbeat that stops (:mod:`planner.jobs.heartbeat`), and the messages it had reserved
unacknowledged in the broker until the visibility timeout. :func:`heal_stalled`, called by the workers' healer
(:mod:`planner.healer`) for each kind, puts such chunks back to ``pending`` with a new task id under a row lock
and lets the kind send its work again (:meth:`planner.jobs.ChunkedJob.resend`: by default every pending chunk of
the job). Attempts are counted when a chunk is claimed and checked against
:data:`planner.jobs.heartbeat.MAX_CHUNK_ATTEMPTS` there.

:func:`lost_pending` finds the pending chunks of unfinished jobs with no message in the broker (it lost its
keys: nothing is running them, nothing will deliver them), for the healer to send again at its second check.
A duplicate delivery is harmless: chunks are idempotent, and one running elsewhere with a live heartbeat is
skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from functools import partial

from django.db import models, transaction

from planner.jobs.heartbeat import stale_running
from planner.jobs.lifecycle import UNFINISHED, ChunkedJob


def requeue_stalled(stalled: models.QuerySet, parent: str) -> Iterator[tuple[int, list, list]]:
    """Put the ``stalled`` chunks back to ``pending`` with new task ids, one job (``parent``: the foreign key's
    column, ``sweep_id``, ``search_id``, ``plan_id``) at a time, under a row lock.

    Yields ``(job id, chunks put back, every pending chunk of that job)``; jobs whose chunks another healer put
    back meanwhile are skipped. The caller sends the tasks.
    """
    for parent_id in set(stalled.values_list(parent, flat=True)):
        with transaction.atomic():
            chunks = list(stalled.select_for_update().filter(**{parent: parent_id}))
            for ch in chunks:
                ch.status, ch.task_id = "pending", str(uuid.uuid4())
                ch.save(update_fields=["status", "task_id"])
            pending = list(stalled.model.objects.filter(**{parent: parent_id, "status": "pending"}))
        if chunks:
            yield parent_id, chunks, pending


def stalled_chunks(kind: ChunkedJob, *, now=None) -> models.QuerySet:
    """Running chunks of ``kind``'s unfinished jobs whose heartbeat stopped more than ``KVP_STALL_AFTER_S`` ago."""
    return stale_running(kind.chunks.filter(**{f"{kind.parent}__status__in": UNFINISHED}), now=now)


def heal_stalled(kind: ChunkedJob, *, send, now=None) -> int:
    """Put ``kind``'s stalled chunks back to pending and send their work again with ``send(name, args, *,
    task_id)`` (:meth:`ChunkedJob.resend`); returns how many tasks were sent."""
    sent = 0
    for job_id, chunks, pending in requeue_stalled(stalled_chunks(kind, now=now), f"{kind.parent}_id"):
        sent += kind.resend(job_id, chunks, pending, send)
    return sent


def lost_pending(kind: ChunkedJob, live: set[tuple[str, tuple]], *, send, key: str,
                 jobs: models.QuerySet | None = None) -> dict[tuple, Callable[[], None]]:
    """Pending chunks of ``kind``'s unfinished jobs (of ``jobs``, when given) whose message is not among ``live``
    (:func:`planner.broker_messages.live_tasks`): ``{(key, job id, index): send it again}``."""
    jobs = kind.job_model.objects.filter(status__in=UNFINISHED) if jobs is None else jobs
    parent_id = f"{kind.parent}_id"
    pending = kind.chunks.filter(**{f"{kind.parent}__in": jobs}, status="pending").only(parent_id, "index", "task_id")
    out: dict[tuple, Callable[[], None]] = {}
    for ch in pending:
        args = [getattr(ch, parent_id), ch.index]
        if (kind.chunk_task, tuple(args)) not in live:
            out[(key, *args)] = partial(send, kind.chunk_task, args, task_id=ch.task_id)
    return out
