"""Reads for day plans: one plan (owner only), the owner's list, and a plan's progress."""

from __future__ import annotations

from django.http import Http404
from django.utils import timezone

from planner import jobs
from planner.dayplans.models import DayPlan


def dayplan_get(*, plan_id: int, user) -> DayPlan:
    """The owner's plan, or 404 (another user's plan is not revealed)."""
    plan = DayPlan.objects.filter(pk=plan_id, owner_id=getattr(user, "pk", None)).first()
    if plan is None:
        raise Http404("No such day plan.")
    return plan


def dayplan_list(*, owner):
    return DayPlan.objects.filter(owner=owner).only("id", "name", "status", "created_at", "started_at",
                                                    "finished_at", "num_chunks", "span_s", "error")


def dayplan_progress(*, plan: DayPlan) -> dict:
    """``{status, chunks_done, chunks_ahead, chunks_total, fraction, hours_done, hours_total, elapsed_s, eta_s,
    chunks, error}``.

    ``chunks_done`` counts the chunks kept (done and started from their predecessor's handover, all the way from
    chunk 0: :func:`planner.dayplans.services.kept_chunks`), so it never goes down; ``chunks_ahead`` the second
    chain's done chunks not kept yet (one started from a wrong guess is run again). ``hours_done`` are the hours of
    traffic the kept chunks cover (each chunk's span, the last one's to the
    last arrival); ``fraction`` is ``chunks_done / chunks_total`` (chunks of one plan are of one length), 1
    only once the plan is done and answered. ``eta_s`` is the time left at the mean time of a stored chunk,
    None before one is stored, once final, or while a chunk is stalled (status ``stalled``: its worker
    stopped, the chunk is being sent again)."""
    from planner.dayplans.services import kept_chunks

    chunks = list(plan.chunks.values("index", "status", "start_s", "end_s", "heartbeat_at", "started_at",
                                     "finished_at", "attempts", "started_from", "handover"))
    stalled = jobs.stalled_count(plan, chunks) > 0
    done = [c for c in chunks if c["status"] == "done"]
    kept = kept_chunks(plan, chunks)  # never taken back: the counts never go down
    span = max(plan.span_s, 0.0)
    hours = sum(max(0.0, min(span if c["end_s"] is None else c["end_s"], span) - c["start_s"]) for c in kept) / 3600
    total = max(1, plan.num_chunks)
    fraction = 1.0 if plan.status == DayPlan.Status.DONE else min(0.99, len(kept) / total)
    end = plan.finished_at or timezone.now()
    elapsed = (end - plan.started_at).total_seconds() if plan.started_at else None
    eta = None
    if not plan.is_final and not stalled and elapsed is not None and done:
        eta = elapsed / len(done) * (total - len(done))
    return {"status": "stalled" if stalled else plan.status, "chunks_done": len(kept),
            "chunks_ahead": len(done) - len(kept), "chunks_total": plan.num_chunks,
            "fraction": round(fraction, 4), "hours_done": round(hours, 3), "hours_total": round(span / 3600, 3),
            "elapsed_s": elapsed, "eta_s": None if eta is None else round(eta, 1),
            "chunks": [{"index": c["index"], "status": c["status"], "start_s": c["start_s"], "end_s": c["end_s"],
                        "attempts": c["attempts"]} for c in chunks],
            "error": plan.error or None}
