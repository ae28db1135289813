"""Reads for deployment searches: one search (owner only), its progress, a report by slug."""

from __future__ import annotations

import re

from django.http import Http404
from django.utils import timezone

from planner.heartbeat import is_stalled
from planner.search.models import Search


def search_get(*, search_id: int, user) -> Search:
    """The owner's search, or 404 (another user's search is not revealed)."""
    s = Search.objects.filter(pk=search_id, owner_id=getattr(user, "pk", None)).first()
    if s is None:
        raise Http404("No such search.")
    return s


def search_list(*, owner):
    return Search.objects.filter(owner=owner).only("id", "name", "status", "created_at", "slug")


_SLUG_RE = re.compile(r"[A-Za-z0-9_-]+")


def search_report(*, slug: str) -> Search:
    """A finished search by its public slug (readable signed out), or 404."""
    # Slugs are URL-safe base64; anything else (e.g. a NUL byte, refused by PostgreSQL) is simply unknown.
    if not isinstance(slug, str) or not 8 <= len(slug) <= 32 or not _SLUG_RE.fullmatch(slug):
        raise Http404("No such report.")
    s = Search.objects.filter(slug=slug, status=Search.Status.DONE).first()
    if s is None:
        raise Http404("No such report.")
    return s


def search_progress(*, search: Search) -> dict:
    """``{status, candidates_done, candidates_total, fraction, elapsed_s, chunks}``; status ``stalled`` while a
    running chunk's worker has stopped (its heartbeat did; the chunk is being sent again)."""
    chunks = list(search.chunks.values("index", "status", "progress", "candidates", "heartbeat_at"))
    stalled = not search.is_final and any(c["status"] == "running" and is_stalled(c["heartbeat_at"]) for c in chunks)
    total = search.total_candidates or 1
    done = sum(len(c["candidates"]) for c in chunks if c["status"] == "done")
    partial = sum(len(c["candidates"]) * c["progress"] for c in chunks if c["status"] == "running")
    end = search.finished_at or timezone.now()
    return {"status": "stalled" if stalled else search.status, "candidates_done": done, "candidates_total": search.total_candidates,
            "fraction": 1.0 if search.status == Search.Status.DONE else min(1.0, (done + partial) / total),
            "elapsed_s": (end - search.started_at).total_seconds() if search.started_at else None,
            "chunks": [{"index": c["index"], "status": c["status"], "progress": c["progress"]} for c in chunks],
            "error": search.error or None}
