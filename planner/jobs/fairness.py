"""Fair sharing of the workers between owners: a chunk's broker priority grows with the owner's work ahead of it.

Every chunk of every job kind goes to one Celery queue. Sent in plain order, a user's 400-chunk sweep would
hold the workers for hours before another user's one-chunk search ran. So each chunk is sent with a priority
(:func:`priority_at`) from its *depth*: how many chunks of the same owner, in every kind, are pending or running
before it (the owner's other jobs first, then this job's earlier chunks). The first chunks of anyone's work go
first; the tail of a big job waits behind everyone's heads. A small job of another user therefore waits behind
the chunks now running and at most :data:`HEAD_CHUNKS` of each other owner's, never behind their hours.

On Redis (kombu's priority lists, steps 0, 3, 6 and 9, 0 first; :mod:`planner.broker_messages` reads them all)
the priority orders delivery; the embedded filesystem broker ignores it and runs in sending order. Healing
(:mod:`planner.jobs.healing`) sends lost chunks again at the first step: they have waited already.
"""

from __future__ import annotations

import functools

#: Depth (chunks of the same owner ahead) below which a chunk gets each priority step.
DEPTH_STEPS = ((2, 0), (8, 3), (32, 6))
#: The step of a chunk with 32 or more of its owner's chunks ahead.
LAST_STEP = 9
#: Chunks of each owner that go at the first step.
HEAD_CHUNKS = DEPTH_STEPS[0][0]


def priority_at(depth: int) -> int:
    """The broker priority (0 first .. 9 last) of a chunk with ``depth`` of its owner's chunks ahead of it."""
    for below, step in DEPTH_STEPS:
        if depth < below:
            return step
    return LAST_STEP


def owner_backlog(owner_id: int | None, *, exclude: tuple[type, int] | None = None) -> int:
    """Chunks of ``owner_id`` pending or running in every job kind (``exclude``: ``(job model, job id)`` not
    counted). An anonymous owner (None) has no backlog: its runs are small and bounded by their price."""
    if owner_id is None:
        return 0
    total = 0
    for chunk_model, parent, job_model in chunk_models():
        chunks = chunk_model.objects.filter(status__in=("pending", "running"), **{f"{parent}__owner_id": owner_id})
        if exclude is not None and exclude[0] is job_model:
            chunks = chunks.exclude(**{f"{parent}_id": exclude[1]})
        total += chunks.count()
    return total


#: The fields every chunk model of the lifecycle has (:class:`planner.jobs.lifecycle.ChunkedJob`).
CHUNK_FIELDS = {"index", "status", "task_id", "heartbeat_at", "attempts"}


@functools.cache
def chunk_models() -> tuple[tuple[type, str, type], ...]:
    """``(chunk model, its foreign key to the job, job model)`` of every job kind installed, found in Django's
    app registry by the chunk fields (so a kind counts whether or not its module was imported here); read once:
    the registry does not change after start-up."""
    from django.apps import apps

    out = []
    for model in apps.get_models():
        names = {f.name for f in model._meta.get_fields()}
        if not CHUNK_FIELDS <= names:
            continue
        for field in model._meta.get_fields():
            related = getattr(field, "related_model", None)
            if field.many_to_one and related is not None and "owner" in {f.name for f in related._meta.get_fields()}:
                out.append((model, field.name, related))
                break
    return tuple(out)


def priorities(job_model: type, job_id: int, owner_id: int | None, count: int) -> list[int]:
    """The priorities of ``count`` chunks of one job sent now, in order: after the owner's other work."""
    ahead = owner_backlog(owner_id, exclude=(job_model, job_id))
    return [priority_at(ahead + i) for i in range(count)]
