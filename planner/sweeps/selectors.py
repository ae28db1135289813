"""Reads for sweeps and reports: lists, access checks, progress and gathered results."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from planner.models import Report, Sweep, SweepChunk


def stall_after_s() -> float:
    """Seconds without a heartbeat after which a running chunk counts as stalled (``KVP_STALL_AFTER_S``)."""
    return float(getattr(settings, "KVP_STALL_AFTER_S", 45))


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
    chunks = list(sweep.chunks.values("status", "progress", "points", "heartbeat_at"))
    running_partial = sum(len(c["points"]) * c["progress"] for c in chunks if c["status"] == SweepChunk.Status.RUNNING)
    total = max(sweep.total_points, 1)
    if sweep.status == Sweep.Status.DONE:
        fraction = 1.0
    else:
        fraction = min(1.0, (sweep.points_done + running_partial) / total)
    start = sweep.started_at or sweep.created_at
    end = sweep.finished_at or timezone.now()
    elapsed = max(0.0, (end - start).total_seconds()) if sweep.started_at or sweep.is_final else 0.0
    eta = None
    if not sweep.is_final and fraction > 0 and sweep.started_at:
        eta = elapsed * (1 - fraction) / fraction
    counts = {s: 0 for s in SweepChunk.Status.values}
    for c in chunks:
        counts[c["status"]] += 1
    # A running chunk whose heartbeat stopped lost its worker: say so instead of an ETA (it is sent again).
    stale = timezone.now() - timezone.timedelta(seconds=stall_after_s())
    stalled = 0 if sweep.is_final else sum(
        1 for c in chunks if c["status"] == SweepChunk.Status.RUNNING and (c["heartbeat_at"] or stale) <= stale)
    counts["stalled"] = stalled
    return {
        "status": "stalled" if stalled else sweep.status,
        "points_done": sweep.points_done,
        "points_total": sweep.total_points,
        "fraction": round(fraction, 4),
        "elapsed_s": round(elapsed, 2),
        "eta_s": None if eta is None or stalled else round(eta, 1),
        "chunks": {"total": len(chunks), **counts},
        "error": sweep.error,
    }


def sweep_points(*, sweep: Sweep, with_series: bool = True) -> list[dict]:
    """Every finished point of the sweep, ordered by point index (gathered from the chunks)."""
    points: list[dict] = []
    for results in sweep.chunks.filter(status=SweepChunk.Status.DONE).order_by("index").values_list(
            "results", flat=True):
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
