"""One per-user quota of queued work, in estimated seconds, across every job kind priced in seconds (issue 37).

``KVP_USER_QUEUE_SECONDS`` (default 3600 s) bounds the estimated work left in one caller's queued and running
sweeps, runs handed to the workers (simulations, replicas searches, calibrations) and deployment searches, all
counted together by :func:`queued_seconds`. :func:`check_queue` refuses a new job when the work already queued
plus the job's own estimate would pass the limit, **the first job included**: a single sweep estimated at 25 h
used to be accepted against the 1 h limit because only a non-empty queue was checked.

What each kind counts (its stored price times the part not yet done):

- a sweep: ``snapshot.price.seconds`` x (1 - points done / points);
- a run: ``price_s`` x (1 - its chunk's progress);
- a deployment search: ``snapshot.price.seconds`` (every shape's whole replicas search, the worst case its
  pruning only lowers, plus its last stage) x (1 - chunks done / chunks).

Day plans are not priced in seconds (their size is bounded by ``KVP_DAY_MAX_REQUESTS`` and ``KVP_DAY_MAX_HOURS``)
and are counted by number (``KVP_USER_MAX_DAY_PLANS``); deployment searches are counted by number too
(``KVP_USER_MAX_SEARCHES``) besides their seconds. A visitor who is not signed in has runs only, counted by
address. The models are read from Django's app registry: this package imports no kind.
"""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.db.models import Count

from planner.jobs.lifecycle import UNFINISHED, QuotaExceeded


def queue_limit_seconds() -> float:
    """``KVP_USER_QUEUE_SECONDS``: the estimated work one user may have queued and running."""
    return float(getattr(settings, "KVP_USER_QUEUE_SECONDS", 3600.0))


def _left(seconds, done, total) -> float:
    if seconds is None:
        return 0.0
    return float(seconds) * (1 - min(done or 0, total or 0) / max(1, total or 0))


def queued_seconds(*, owner, client: str = "") -> float:
    """Estimated seconds of work left in the caller's queued and running sweeps, runs and deployment searches
    (by owner when signed in; a visitor's runs by ``client`` address)."""
    Run = apps.get_model("planner", "Run")
    runs = Run.objects.filter(status__in=UNFINISHED)
    runs = runs.filter(owner=owner) if owner is not None else runs.filter(owner__isnull=True, client=client)
    left = sum(float(price) * (1 - min(1.0, progress or 0.0))
               for price, progress in runs.values_list("price_s", "chunks__progress"))
    if owner is None:
        return left
    Sweep = apps.get_model("planner", "Sweep")
    left += sum(_left(*row) for row in Sweep.objects.filter(owner=owner, status__in=UNFINISHED).values_list(
        "snapshot__price__seconds", "points_done", "total_points"))
    Search = apps.get_model("planner", "Search")
    searches = Search.objects.filter(owner=owner, status__in=UNFINISHED)
    done = {row["search_id"]: row["n"] for row in apps.get_model("planner", "SearchChunk").objects.filter(
        search__in=searches, status="done").values("search_id").annotate(n=Count("id"))}
    left += sum(_left(seconds, done.get(pk, 0), chunks)
                for pk, seconds, chunks in searches.values_list("pk", "snapshot__price__seconds", "num_chunks"))
    return left


def check_queue(*, owner, client: str = "", price_s: float, what: str) -> None:
    """Refuse (:class:`QuotaExceeded`, the API's 429) a new job estimated at ``price_s`` seconds when it, with the
    caller's queued and running work, would pass ``KVP_USER_QUEUE_SECONDS``; ``what``: the job in words ("This
    sweep"). A job alone over the limit is refused too, whatever the queue holds."""
    from simulator.batch.budget import format_seconds as fmt

    limit = queue_limit_seconds()
    queued = queued_seconds(owner=owner, client=client)
    if queued + price_s <= limit:
        return
    if queued <= 0:
        message = (f"{what} is estimated at {fmt(price_s)} of work; the limit per user is {fmt(limit)} of queued "
                   "and running work. Make it smaller (fewer points, requests or shapes).")
    else:
        message = (f"Your queued and running work (sweeps, runs, deployment searches) is estimated at {fmt(queued)} "
                   f"and {what[0].lower() + what[1:]} at {fmt(price_s)}; the limit per user is {fmt(limit)}. Wait for "
                   "it to finish or cancel some.")
    raise QuotaExceeded({"non_field_errors": [message]})
