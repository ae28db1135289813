"""Reads for deployment searches: one search (owner only), its progress, a report by slug."""

from __future__ import annotations

import math
import re

from django.db import models
from django.http import Http404
from django.utils import timezone

from planner import jobs
from planner.search import definition as search_definition
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


#: The most a search's bar shows before the search is done (its last stage may still be running).
UNFINISHED_CAP = 0.99


def search_progress(*, search: Search) -> dict:
    """``{status, phase, candidates_done, candidates_shown, candidates_total, fraction, elapsed_s, eta_s, chunks,
    error}``.

    ``candidates_done`` counts the shapes of finished chunks; ``fraction`` adds the running chunks' share and
    ``candidates_shown`` is the bar's own count (``fraction`` of the total, never below ``candidates_done``),
    so a page showing both never contradicts itself. ``eta_s`` is the time left (:func:`time_left`), None
    before it can be estimated, once final, or while a chunk is stalled. Status ``stalled`` while a running
    chunk's worker has stopped (its heartbeat did; the chunk is being sent again).

    The bar reaches 100 % only when the search is done: until then ``fraction`` stops at :data:`UNFINISHED_CAP`.
    ``phase`` is ``"xpyd"`` while a search with ``disaggregated`` has settled every shape and its last stage
    (the last chunk) still compares the answer's prefill/decode splits (and checks its seeds, when asked),
    ``"seeds"`` while a search without it checks the answer on more seeds, else ``"shapes"``."""
    chunks = list(search.chunks.values("index", "status", "progress", "candidates", "heartbeat_at", "shapes",
                                       "cost_bound", "started_at", "finished_at",
                                       best_cost=models.F("result__best__cost_per_hour")))
    stalled = jobs.stalled_count(search, chunks) > 0
    total = search.total_candidates or 1
    done = sum(len(c["candidates"]) for c in chunks if c["status"] == "done")
    partial = sum(len(c["candidates"]) * c["progress"] for c in chunks if c["status"] == "running")
    fraction = 1.0 if search.status == Search.Status.DONE else min(UNFINISHED_CAP, (done + partial) / total)
    has_stage, stage = search_definition.has_stage(search.snapshot), search.num_chunks - 1
    phase = "shapes"
    if has_stage and not search.is_final and all(c["status"] == "done" for c in chunks if c["index"] != stage):
        phase = "xpyd" if search.snapshot.get("disaggregated") is not None else "seeds"
    end = search.finished_at or timezone.now()
    elapsed = (end - search.started_at).total_seconds() if search.started_at else None
    eta = None
    if not search.is_final and not stalled and elapsed is not None:
        eta = time_left(chunks, elapsed=elapsed, fraction=fraction)
    return {"status": "stalled" if stalled else search.status, "phase": phase, "candidates_done": done,
            "candidates_shown": max(done, math.floor(fraction * search.total_candidates + 1e-9)),
            "candidates_total": search.total_candidates, "fraction": round(fraction, 4), "elapsed_s": elapsed,
            "eta_s": None if eta is None else round(eta, 1),
            "chunks": [{"index": c["index"], "status": c["status"], "progress": c["progress"]} for c in chunks],
            "error": search.error or None}


#: A chunk's cost beyond its simulations (task, workload, gathering), in estimated seconds.
CHUNK_OVERHEAD_S = 0.5
#: Simulations per shape of a chunk that starts with no answer known (a doubling and a bisection over the
#: replica counts) against one that starts with one (the dearest useful count is tried first, and most shapes
#: stop there): measured on the default space, 4.5 simulations per shape against 0.5 to 2.6.
UNBOUNDED_TRIALS = 4.0


def chunk_cost(shapes: list, bound: float | None, *, stage: bool = False) -> float:
    """A chunk's cost in estimated seconds: one simulation's price (``shapes``, set at creation) for each shape
    the search will simulate, those whose least cost is below ``bound`` (the best answer known; dearer ones
    are skipped), times :data:`UNBOUNDED_TRIALS` when no answer is known yet. The last ``stage`` (a chunk of no
    candidates: xPyD splits, seed check) costs its one price, set at creation."""
    if stage:
        return CHUNK_OVERHEAD_S + sum(seconds for _, seconds in shapes)
    live = sum(seconds for least, seconds in shapes if bound is None or least < bound)
    return CHUNK_OVERHEAD_S + live * (UNBOUNDED_TRIALS if bound is None else 1.0)


def _best(chunks: list[dict]) -> float | None:
    costs = [float(c["best_cost"]) for c in chunks if c["status"] == "done" and c["best_cost"] is not None]
    return min(costs, default=None)


def _answer_ratio(chunks: list[dict]) -> float | None:
    """How much dearer than its least cost a finished chunk's answer came out (the least such ratio over the
    finished chunks with an answer), to foresee the answers of the chunks still to run; None before one is
    known. The least, not a mean: a later chunk's answer only counts when it is the cheapest so far."""
    leasts = [(float(c["best_cost"]), _least(c["shapes"])) for c in chunks
              if c["status"] == "done" and c["best_cost"] is not None and c["shapes"]]
    return min((best / least for best, least in leasts if least > 0), default=None)


def _least(shapes: list) -> float:
    """The least cost per hour of a chunk's shapes (``[least cost, seconds]`` each)."""
    return min(least for least, _ in shapes)


def time_left(chunks: list[dict], *, elapsed: float, fraction: float) -> float | None:
    """Seconds left of a running search, from what its finished chunks took against their estimates.

    As a sweep's (:func:`planner.jobs.time_left`), in estimated seconds, not in shapes: the finished chunks took
    ``scale`` times their :func:`chunk_cost` (with the answer they started from); what is left is what the
    running chunks have not yet used of theirs plus the pending chunks' cost (:func:`_pending_cost`), times
    ``scale``, shared among the chunks running at once. None before a chunk is done; a one-chunk search from
    its own progress once a quarter of its shapes is settled.
    """
    return jobs.time_left(chunks, elapsed=elapsed, fraction=fraction, pending_cost=_pending_cost,
                          cost=lambda c: chunk_cost(c["shapes"], c["cost_bound"], stage=_is_stage(c)))


def _is_stage(chunk: dict) -> bool:
    """Whether a chunk (a row's values) is the search's last stage: the one chunk with no candidates."""
    return chunk.get("candidates") == []


def _pending_cost(chunks: list[dict]) -> float:
    """The pending chunks' cost: each starts from the best answer found by then, the best so far lowered by
    the answers the chunks before it are foreseen to find (their least cost times :func:`_answer_ratio`),
    since every answer found makes the dearer shapes of the later chunks skipped."""
    best, ratio, cost = _best(chunks), _answer_ratio(chunks), 0.0
    running = [c for c in chunks if c["status"] == "running"]
    for c in sorted(running, key=lambda c: c["index"]) + sorted(
            (c for c in chunks if c["status"] == "pending"), key=lambda c: c["index"]):
        if c["status"] == "pending":
            cost += chunk_cost(c["shapes"], best, stage=_is_stage(c))
        if ratio is not None and c["shapes"] and not _is_stage(c):
            foreseen = ratio * _least(c["shapes"])
            best = foreseen if best is None else min(best, foreseen)
    return cost
