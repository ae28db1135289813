"""Day plans whose worker died: their stalled chunk is sent again, and a plan left between two chunks goes on.

A day's chunks run one after another, so two things can stop a plan when a worker dies:

* the chunk it was running: the row is ``running`` and its heartbeat (:mod:`planner.jobs.heartbeat`) stopped;
  it goes back to ``pending`` with a new task id and is sent again (:func:`planner.jobs.heal_stalled`, the job
  lifecycle's healing, with :meth:`planner.dayplans.services.DayPlans.resend`);
* the step after a stored chunk (the worker died after the commit, before the next chunk's message or the
  answer was sent): no chunk is running, the plan is unfinished and its last stored chunk finished more than
  ``KVP_STALL_AFTER_S`` ago; the next pending chunk (or, with every chunk stored, the answer) is sent again.

And a message the broker lost (:func:`lost_messages`, the healer's :class:`planner.healer.LostMessages`): the one
chunk of a plan that should have a message (the first not done, pending, every chunk before it done: the first
chunk of a queued plan included) or, with every chunk done and no answer, the answer task; when the broker holds
no message for it at two checks in a row, it is sent again. The chunks after it have no message by design (each
is sent when the one before is stored), so they are never called lost.

Chunks are idempotent (a stored chunk is never run twice, :func:`planner.dayplans.services.chunk_run`), so a
duplicate message is harmless.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.utils import timezone

from planner.broker_messages import send_task
from planner.dayplans.models import DayPlan
from planner.dayplans.services import ANSWER_TASK, CHUNK_TASK, DAY_PLANS, answer_enqueue
from planner.jobs import UNFINISHED, heal_stalled, send_now, stall_after_s


def _orphaned(now) -> int:
    """Send again the next step of plans that stopped between two chunks (module docstring)."""
    cutoff = now - timezone.timedelta(seconds=stall_after_s())
    sent = 0
    for plan in DayPlan.objects.filter(status=DayPlan.Status.RUNNING).exclude(chunks__status="running"):
        done = plan.chunks.filter(status="done").order_by("-index").first()
        if done is None or done.finished_at is None or done.finished_at > cutoff:
            continue
        nxt = plan.chunks.filter(index=done.index + 1, status="pending").first()
        if nxt is not None:
            send_now(CHUNK_TASK, [plan.pk, nxt.index], task_id=nxt.task_id)
            sent += 1
        elif done.index == plan.num_chunks - 1 and plan.answer is None:
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
    for plan in DayPlan.objects.filter(status__in=UNFINISHED).prefetch_related("chunks"):
        chunks = sorted(plan.chunks.all(), key=lambda c: c.index)
        if any(c.status == "running" for c in chunks):
            continue  # a running chunk: its heartbeat tells (chunks_heal)
        nxt = next((c for c in chunks if c.status != "done"), None)
        if nxt is not None:
            if nxt.status == "pending" and (CHUNK_TASK, (plan.pk, nxt.index)) not in live:
                out[("dayplan-chunk", plan.pk, nxt.index)] = partial(send_task, CHUNK_TASK, [plan.pk, nxt.index],
                                                                     task_id=nxt.task_id)
        elif chunks and plan.answer is None and (ANSWER_TASK, (plan.pk,)) not in live:
            out[("dayplan-answer", plan.pk)] = partial(answer_enqueue, plan.pk)
    return out


__all__ = ["ANSWER_TASK", "chunks_heal", "lost_messages"]
