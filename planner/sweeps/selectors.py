"""Reads for sweeps and reports: lists, access checks, progress and gathered results."""

from __future__ import annotations

import re
from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from planner import jobs
from planner.models import Report, Sweep, SweepChunk


def sweep_list(*, owner) -> QuerySet[Sweep]:
    return Sweep.objects.filter(owner=owner).defer("snapshot", "definition").select_related("report")


def sweep_get(*, sweep_id, user) -> Sweep:
    """The sweep if ``user`` owns it; 404 when it does not exist, 403 for another user's."""
    try:
        sweep = Sweep.objects.select_related("owner").get(pk=int(sweep_id))
    except (Sweep.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such sweep.") from None
    if not user.is_authenticated or sweep.owner_id != user.pk:
        raise PermissionDenied("This sweep belongs to another user.")
    return sweep


def sweep_progress(*, sweep: Sweep) -> dict:
    """Points done of total, a fraction that counts running chunks' partial progress, elapsed and ETA (s)."""
    chunks = list(sweep.chunks.values("status", "progress", "points", "heartbeat_at", "started_at", "finished_at"))
    running_partial = 0.0 if sweep.status == Sweep.Status.CANCELLED else sum(  # (cancelled: the finished only)
        len(c["points"]) * c["progress"] for c in chunks if c["status"] == SweepChunk.Status.RUNNING)
    total = max(sweep.total_points, 1)
    if sweep.status == Sweep.Status.DONE:
        fraction = 1.0
    else:
        fraction = min(1.0, (sweep.points_done + running_partial) / total)
    start = sweep.started_at or sweep.created_at
    end = sweep.finished_at or timezone.now()
    elapsed = max(0.0, (end - start).total_seconds()) if sweep.started_at or sweep.is_final else 0.0
    eta = None
    if not sweep.is_final and sweep.started_at and sweep.mode == Sweep.Mode.GRID:
        eta = time_left(chunks, elapsed=elapsed, fraction=fraction)
    counts = {s: 0 for s in SweepChunk.Status.values}
    cancelled = sweep.status == Sweep.Status.CANCELLED
    for c in chunks:  # (a cancelled sweep's running chunk is stopping: it is counted as skipped)
        counts[SweepChunk.Status.SKIPPED if cancelled and c["status"] == SweepChunk.Status.RUNNING else c["status"]] += 1
    # A running chunk whose heartbeat stopped lost its worker: say so instead of an ETA (it is sent again).
    stalled = counts["stalled"] = jobs.stalled_count(sweep, chunks)
    # cancelled, but a running chunk has not yet stored the points it finished (it does at its next check)
    stopping = cancelled and any(
        c["status"] == SweepChunk.Status.RUNNING and not jobs.is_stalled(c["heartbeat_at"]) for c in chunks)
    return {
        "status": "stalled" if stalled else sweep.status,
        "stopping": stopping,
        "points_done": sweep.points_done,
        "points_total": sweep.total_points,
        "fraction": round(fraction, 4),
        "elapsed_s": round(elapsed, 2),
        "eta_s": None if eta is None or stalled else round(eta, 1),
        "chunks": {"total": len(chunks), **counts},
        "error": sweep.error,
    }


#: A chunk's cost beyond its points' simulations (task, workload, storing results), in estimated seconds.
CHUNK_OVERHEAD_S = 0.5
#: A point's cost beyond its simulation (summary, time series), in estimated seconds.
POINT_OVERHEAD_S = 0.5


def chunk_cost(points: list[dict]) -> float:
    """A chunk's cost in estimated seconds: its points' prices (``cost_s``, set at creation) and overheads.

    Points of sweeps made before prices were stored count one estimated second each.
    """
    return CHUNK_OVERHEAD_S + sum(POINT_OVERHEAD_S + float(p.get("cost_s", 1.0)) for p in points)


def time_left(chunks: list[dict], *, elapsed: float, fraction: float, now: datetime | None = None) -> float | None:
    """Seconds left of a grid sweep, from what its finished chunks took against what they were priced at
    (:func:`planner.jobs.time_left`).

    Points differ in cost (the fewest KV blocks preempt most: 10x in a KV-blocks sweep), so the pace is
    measured in estimated seconds (:func:`chunk_cost`), not in points. None before a chunk is done; a
    one-chunk sweep from its own progress once a quarter is simulated. ``now`` defaults to the clock.
    """
    return jobs.time_left(chunks, elapsed=elapsed, fraction=fraction, cost=lambda c: chunk_cost(c["points"]), now=now)


def sweep_points(*, sweep: Sweep, with_series: bool = True) -> list[dict]:
    """Every finished point of the sweep, ordered by point index (gathered from the chunks: the done ones, and
    the points a cancel stopped a chunk after)."""
    points: list[dict] = []
    for results in sweep.chunks.filter(status__in=[SweepChunk.Status.DONE, SweepChunk.Status.SKIPPED]).order_by(
            "index").values_list("results", flat=True):
        for r in results or []:
            points.append(r if with_series else {k: v for k, v in r.items() if k != "series"})
    points.sort(key=lambda p: p["index"])
    return points


def report_list(*, owner) -> QuerySet[Report]:
    return Report.objects.filter(owner=owner).defer("snapshot")


_SLUG_RE = re.compile(r"[A-Za-z0-9_-]+")


def report_get(*, slug: str) -> Report:
    """A report by its permalink slug (public); 404 when unknown."""
    # Slugs are URL-safe base64; anything else (e.g. a NUL byte, refused by PostgreSQL) is simply unknown.
    if not isinstance(slug, str) or not 8 <= len(slug) <= 32 or not _SLUG_RE.fullmatch(slug):
        raise Http404("No such report.")
    report = Report.objects.filter(slug=slug).first()
    if report is None:
        raise Http404("No such report.")
    return report
