"""Day plans whose worker died: their stalled chunk is sent again, and a plan left between two chunks goes on.

A day's chunks run one after another, so two things can stop a plan when a worker dies:

* the chunk it was running: the row is ``running`` and its heartbeat (:mod:`planner.jobs.heartbeat`) stopped;
  it goes back to ``pending`` with a new task id and is sent again (:func:`planner.jobs.heal_stalled`, the job
  lifecycle's healing, with :meth:`planner.dayplans.services.DayPlans.resend`);
* the step after a stored chunk (the worker died after the commit, before the next chunk's message or the
  answer was sent): no chunk is running, the plan is unfinished and its last stored chunk finished more than
  ``KVP_STALL_AFTER_S`` ago; the pending chunks that can run (or, with every chunk kept, the answer) are sent
  again.

And a message the broker lost (:func:`lost_messages`, the healer's :class:`planner.healer.LostMessages`): the
chunks of a plan that should have a message (pending and ready, :func:`planner.dayplans.services.ready_pending`:
chunk 0, the speculative chain's first chunk, each chunk whose predecessor told its handover) or, with every
chunk kept and no answer, the answer task; when the broker holds no message for one at two checks in a row, it
is sent again. The other pending chunks have no message by design (each is sent when the one before tells its
handover), so they are never called lost.

Chunks are idempotent (a stored chunk is never run twice, :func:`planner.dayplans.services.chunk_run`), so a
duplicate message is harmless.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.utils import timezone

from planner.broker_messages import send_task
from planner.dayplans.models import DayPlan
from planner.dayplans.services import (
    ANSWER_TASK,
    CHUNK_TASK,
    DAY_PLANS,
    answer_enqueue,
    chunk_rows,
    kept_chunks,
    ready_pending,
)
from planner.jobs import UNFINISHED, heal_stalled, send_now, stall_after_s


def _orphaned(now) -> int:
    """Send again the next step of plans that stopped between two chunks (module docstring)."""
    cutoff = now - timezone.timedelta(seconds=stall_after_s())
    sent = 0
    for plan in DayPlan.objects.filter(status=DayPlan.Status.RUNNING).exclude(chunks__status="running"):
        rows = chunk_rows(plan)
        done = [r for r in rows if r["status"] == "done"]
        last = max(done, key=lambda r: r["index"])["finished_at"] if done else None  # the furthest chunk's
        if last is None or last > cutoff:
            continue
        ready = ready_pending(plan, rows)
        for index in ready:
            send_now(CHUNK_TASK, [plan.pk, index], task_id=plan.chunks.get(index=index).task_id)
        sent += len(ready)
        if not ready and plan.answer is None and len(kept_chunks(plan, rows)) == plan.num_chunks:
            answer_enqueue(plan.pk)
            sent += 1
    return sent


def chunks_heal(*, now=None) -> int:
    """Send again the stalled chunks of day plans and the next step of plans left between chunks; how many."""
    now = now or timezone.now()
    return heal_stalled(DAY_PLANS, send=send_now, now=now) + _orphaned(now)


def lost_messages(live: set[tuple[str, tuple]]) -> dict[tuple, Callable[[], None]]:
    """The step of each unfinished plan that should have a message in the broker and has none among ``live``
    (module docstring): ``{key: send it again}``."""
    out: dict[tuple, Callable[[], None]] = {}
    for plan in DayPlan.objects.filter(status__in=UNFINISHED):
        rows = chunk_rows(plan)
        ready = ready_pending(plan, rows)
        if not ready and any(r["status"] == "running" for r in rows):
            continue  # a running chunk: its heartbeat tells (chunks_heal)
        for index in ready:
            if (CHUNK_TASK, (plan.pk, index)) not in live:
                task_id = plan.chunks.get(index=index).task_id
                out[("dayplan-chunk", plan.pk, index)] = partial(send_task, CHUNK_TASK, [plan.pk, index],
                                                                 task_id=task_id)
        if not ready and rows and plan.answer is None and len(kept_chunks(plan, rows)) == plan.num_chunks \
                and (ANSWER_TASK, (plan.pk,)) not in live:
            out[("dayplan-answer", plan.pk)] = partial(answer_enqueue, plan.pk)
    return out


__all__ = ["ANSWER_TASK", "chunks_heal", "lost_messages"]
