"""Reads for runs handed to the workers: one run (its owner, or whoever holds an anonymous run's token), and
its progress and answer as the API and the pages show them."""

from __future__ import annotations

import secrets

from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from planner import jobs
from planner.runs.models import Run


def run_get(*, run_id: int, user, token: str | None) -> Run:
    """The run, for its signed-in owner, or (a run made without signing in) for the holder of its token; else 404
    (another caller's run is not revealed)."""
    run = Run.objects.filter(pk=run_id).first()
    if run is not None:
        if run.owner_id is not None and run.owner_id == getattr(user, "pk", None):
            return run
        if run.owner_id is None and token and secrets.compare_digest(str(token), run.token):
            return run
    raise Http404("No such run.")


def status_path(run: Run) -> str:
    """The API path a client polls (an anonymous run's carries its token)."""
    path = reverse("api-run-detail", kwargs={"run_id": run.pk})
    return path if run.owner_id is not None else f"{path}?token={run.token}"


def run_progress(run: Run) -> dict:
    """``{status, fraction, elapsed_s, eta_s, price_s, attempts, error}``.

    ``fraction`` is the chunk's own progress where its simulation reports one (a simulation), else the time
    it ran against its price (a replicas search, a fit), at most 0.95 until it is done; ``eta_s`` the price
    less the time it ran (None once final or while stalled: status ``stalled``, its worker stopped and it is
    being sent again)."""
    chunks = list(run.chunks.values("status", "heartbeat_at", "started_at", "finished_at", "attempts", "progress"))
    stalled = jobs.stalled_count(run, chunks) > 0
    end = run.finished_at or timezone.now()
    elapsed = (end - run.started_at).total_seconds() if run.started_at else None
    own = max((c["progress"] for c in chunks), default=0.0)
    if run.status == Run.Status.DONE:
        fraction = 1.0
    elif elapsed is None:
        fraction = 0.0
    else:
        fraction = min(0.95, max(own, elapsed / max(run.price_s, 1e-3)))
    eta = None
    if not run.is_final and not stalled:
        eta = max(0.0, run.price_s - (elapsed or 0.0))
    return {"status": "stalled" if stalled else run.status, "fraction": round(fraction, 4),
            "elapsed_s": None if elapsed is None else round(elapsed, 3), "eta_s": None if eta is None else round(eta, 1),
            "price_s": run.price_s, "attempts": max((c["attempts"] for c in chunks), default=0),
            "error": run.error or ""}


def run_out(run: Run, request) -> dict:
    """A run as the API answers it: the job, and once done the answer (``result``)."""
    return {"id": run.pk, "kind": run.kind, "status": run.status, "progress": run_progress(run),
            "created_at": run.created_at, "finished_at": run.finished_at,
            "url": request.build_absolute_uri(status_path(run)),
            "result": run.result if run.status == Run.Status.DONE else None,
            "error": run.error or None}
