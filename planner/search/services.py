"""Writes for deployment searches: create, run a chunk, gather, cancel.

The sweep machinery's pattern (``planner/sweeps/services.py``): chunks are
stored with the search in one transaction and their tasks sent after commit
with fixed task ids; a chunk task re-fetches its row, returns at once when it
is done, writes progress at most twice a second (and notices a cancelled
search there), stores its result keyed by ``(search, index)`` under a lock on
the search row, and the last chunk to finish gathers the answer
(:func:`simulator.search.deployments.merge_results`). A chunk holds the candidates of one
GPU type, so different GPU types run on different workers in parallel.

A search with ``disaggregated`` has one more chunk, the last, with no candidates: the *xPyD stage*
(``planner/search/disaggregated.py``). It waits until the other chunks have gathered the answer
(sent earlier, it returns ``waiting``), is sent by the chunk that gathers it, then simulates the
answer's prefill/decode splits and finishes the search. It has the other chunks' heartbeat, retries
and healing.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from config.celery import app as celery_app
from planner.heartbeat import MAX_CHUNK_ATTEMPTS, Heartbeat, gave_up_message, is_stalled
from planner.search import definition as sdefn
from planner.search import exports
from planner.search.disaggregated import run_stage
from planner.search.models import Search, SearchChunk
from planner.sweeps.services import PROGRESS_INTERVAL_S, QuotaExceeded, _queue

logger = logging.getLogger(__name__)


def search_create(*, owner, definition: Any) -> Search:
    """Validate, store the search and its chunks (one per GPU type), enqueue after commit."""
    norm, snapshot, prices = sdefn.validate(definition, owner=owner)
    _check_quota(owner)
    space = sdefn.build_space(snapshot)
    cands = space.candidates()
    groups = [[i for i, c in enumerate(cands) if c.gpu.name == g.name] for g in space.gpus]
    if snapshot.get("disaggregated") is not None:
        groups.append([])  # the xPyD stage, last
    with transaction.atomic():
        search = Search.objects.create(owner=owner, name=norm["name"] or _default_name(snapshot),
                                       definition=norm, snapshot=snapshot, total_candidates=len(cands),
                                       num_chunks=len(groups))
        SearchChunk.objects.bulk_create([
            SearchChunk(search=search, index=i, candidates=g, task_id=str(uuid.uuid4()),
                        shapes=[prices[c] for c in g if c in prices]) for i, g in enumerate(groups)])
        search_id = search.pk
        transaction.on_commit(lambda: search_enqueue(search_id))
    return search


def _check_quota(owner) -> None:
    """Refuse a search when the owner already has ``KVP_USER_MAX_SEARCHES`` queued or running (API: 429)."""
    limit = int(getattr(settings, "KVP_USER_MAX_SEARCHES", 3))
    active = Search.objects.filter(owner=owner, status__in=[Search.Status.QUEUED, Search.Status.RUNNING]).count()
    if active >= limit:
        raise QuotaExceeded({"non_field_errors": [
            f"You have {active} deployment search{'es' if active != 1 else ''} queued or running; the limit per "
            f"user is {limit}. Wait for one to finish or cancel it."]})


def _default_name(snapshot: dict) -> str:
    rate = ((snapshot["workload"].get("spec") or {}).get("arrival") or {}).get("rate")
    traffic = f" at {rate:g} requests/s" if rate else ""
    return f"Cheapest deployment of {snapshot['model']['spec']['name']}{traffic}"[:200]


#: The Celery task that runs one chunk (planner/tasks.py), sent by name so this module need not import the tasks.
CHUNK_TASK = "planner.run_search_chunk"


def search_enqueue(search_id: int) -> None:
    """Send the pending chunks' tasks (the xPyD stage's only once the answer is gathered)."""
    queue = _queue()
    opts = {"queue": queue} if queue else {}
    search = Search.objects.only("snapshot", "num_chunks", "status").get(pk=search_id)
    for chunk in SearchChunk.objects.filter(search_id=search_id, status="pending").only("index", "task_id"):
        if not is_stage(search, chunk.index) or _stage_ready(search):
            celery_app.send_task(CHUNK_TASK, args=[search_id, chunk.index], task_id=chunk.task_id, **opts)


def is_stage(search: Search, index: int) -> bool:
    """Whether chunk ``index`` of ``search`` is its xPyD stage (the last chunk of a search with ``disaggregated``)."""
    return search.snapshot.get("disaggregated") is not None and index == search.num_chunks - 1


def _stage_ready(search: Search) -> bool:
    """Whether the xPyD stage may run: every other chunk is done (the answer is gathered)."""
    return not search.chunks.exclude(index=search.num_chunks - 1).exclude(status="done").exists()


class _Watch:
    """Throttled progress writer and cancellation check for one chunk."""

    def __init__(self, search_id: int, chunk_id: int) -> None:
        self.search_id, self.chunk_id, self.last = search_id, chunk_id, 0.0
        self.cancelled = False

    def progress(self, fraction: float) -> None:
        SearchChunk.objects.filter(pk=self.chunk_id).update(progress=max(0.0, min(1.0, float(fraction))))

    def should_stop(self) -> bool:
        now = time.monotonic()
        if now - self.last >= PROGRESS_INTERVAL_S:
            self.last = now
            self.cancelled = Search.objects.filter(pk=self.search_id, status=Search.Status.CANCELLED).exists()
        return self.cancelled


def chunk_run(*, search_id: int, index: int) -> str:
    """Search one chunk's candidates and store the result; idempotent (``done``, ``already-done``, ...)."""
    from simulator.search import SearchCancelled, search_deployments

    chunk = SearchChunk.objects.select_related("search").filter(search_id=search_id, index=index).first()
    if chunk is None:
        return "missing"
    if chunk.status == "done":
        return "already-done"
    search = chunk.search
    if search.is_final:
        SearchChunk.objects.filter(pk=chunk.pk).exclude(status="done").update(status="skipped")
        return "skipped"
    stage = is_stage(search, index)
    if stage and not _stage_ready(search):
        return "waiting"  # sent again by the chunk that gathers the answer
    if chunk.status == "running" and not is_stalled(chunk.heartbeat_at):
        return "running-elsewhere"  # a second delivery while another worker runs it (planner/search/stalls.py)
    if chunk.attempts >= MAX_CHUNK_ATTEMPTS:
        _fail(search_id, chunk, gave_up_message(chunk.attempts))
        return "failed"
    Search.objects.filter(pk=search_id, status=Search.Status.QUEUED).update(
        status=Search.Status.RUNNING, started_at=timezone.now())
    bound = _best_so_far(search_id)
    SearchChunk.objects.filter(pk=chunk.pk).update(status="running", started_at=timezone.now(),
                                                   heartbeat_at=timezone.now(), attempts=chunk.attempts + 1,
                                                   progress=0.0, cost_bound=bound)
    watch = _Watch(search_id, chunk.pk)
    try:
        wl, model, space, slo = sdefn.build_inputs(search.snapshot)
        with Heartbeat(SearchChunk, chunk.pk):
            if stage:
                result = {"disaggregated": run_stage(Search.objects.get(pk=search_id).result,
                                                     search.snapshot["disaggregated"], wl, model, space, slo)}
            else:
                result = search_deployments(wl, model, space, slo, candidates=chunk.candidates,
                                            progress=watch.progress, should_stop=watch.should_stop,
                                            cost_bound=bound).to_dict()
    except SearchCancelled:
        SearchChunk.objects.filter(pk=chunk.pk).update(status="skipped")
        return "skipped"
    except Exception as exc:  # noqa: BLE001 - stored and shown; the search fails with the reason
        from celery.exceptions import SoftTimeLimitExceeded

        msg = ("time limit exceeded for this chunk (CELERY_TASK_SOFT_TIME_LIMIT): search fewer shapes or requests"
               if isinstance(exc, SoftTimeLimitExceeded) else f"{type(exc).__name__}: {exc}")
        logger.exception("search %s chunk %s failed", search_id, index)
        _fail(search_id, chunk, msg)
        return "failed"
    (stage_store if stage else chunk_store)(search_id=search_id, index=index, result=result)
    return "done"


def _fail(search_id: int, chunk: SearchChunk, msg: str) -> None:
    SearchChunk.objects.filter(pk=chunk.pk).update(status="failed", error=msg[:2000])
    Search.objects.filter(pk=search_id).exclude(status__in=Search.FINAL_STATES).update(
        status=Search.Status.FAILED, error=f"chunk {chunk.index}: {msg}"[:4000], finished_at=timezone.now())


def _best_so_far(search_id: int) -> float | None:
    """Cost per hour of the cheapest answer among the search's finished chunks (they prune the rest)."""
    costs = [r["best"]["cost_per_hour"] for r in SearchChunk.objects.filter(search_id=search_id, status="done")
             .values_list("result", flat=True) if r and r.get("best")]
    return min(costs, default=None)


def chunk_store(*, search_id: int, index: int, result: dict) -> None:
    """Write a chunk's result (keyed by ``(search, index)``); the last one gathers the answer (and, with an
    xPyD stage, sends it: the search finishes when the stage does)."""
    from simulator.search import Slo, merge_results

    with transaction.atomic():
        search = Search.objects.select_for_update().get(pk=search_id)
        SearchChunk.objects.update_or_create(search=search, index=index, defaults={
            "result": result, "status": "done", "finished_at": timezone.now(), "progress": 1.0, "error": ""})
        has_stage = search.snapshot.get("disaggregated") is not None
        searched = search.chunks.exclude(index=search.num_chunks - 1) if has_stage else search.chunks
        if search.is_final or searched.exclude(status="done").exists():
            return
        parts = list(searched.order_by("index").values_list("result", flat=True))
        search.result = merge_results(parts, Slo.from_dict(search.snapshot["slo"])).to_dict()
        search.result["launch"] = exports.search_launch(search.result, search.snapshot)  # what to run
        if has_stage:
            search.save(update_fields=["result"])
            transaction.on_commit(lambda: search_enqueue(search_id))
            return
        search.status = Search.Status.DONE
        search.finished_at = timezone.now()
        search.save(update_fields=["result", "status", "finished_at"])


def stage_store(*, search_id: int, index: int, result: dict) -> None:
    """Write the xPyD stage's splits into the gathered answer and finish the search."""
    with transaction.atomic():
        search = Search.objects.select_for_update().get(pk=search_id)
        SearchChunk.objects.filter(search=search, index=index).update(
            result=result, status="done", finished_at=timezone.now(), progress=1.0, error="")
        if search.is_final:
            return
        search.result = {**search.result, "disaggregated": result["disaggregated"]}
        search.status = Search.Status.DONE
        search.finished_at = timezone.now()
        search.save(update_fields=["result", "status", "finished_at"])


def search_cancel(*, search: Search, user) -> Search:
    """Cancel a queued or running search (owner only); pending and running chunks are skipped."""
    if search.owner_id != getattr(user, "pk", None):
        raise PermissionDenied("Only the owner can cancel this search.")
    with transaction.atomic():
        locked = Search.objects.select_for_update().get(pk=search.pk)
        if locked.is_final:
            return locked
        locked.status = Search.Status.CANCELLED
        locked.finished_at = timezone.now()
        locked.save(update_fields=["status", "finished_at"])
        # Running chunks stop at their next check; none of them is shown as running any more.
        locked.chunks.filter(status__in=["pending", "running"]).update(status="skipped")
    return locked


def search_run_here(*, search: Search) -> Search:
    """Run every pending chunk in this process (``manage.py search``), then re-read the search."""
    for index in search.chunks.exclude(status="done").values_list("index", flat=True):
        chunk_run(search_id=search.pk, index=index)
    return Search.objects.get(pk=search.pk)
