"""Writes for deployment searches: create, run a chunk, gather, cancel.

The one job lifecycle (:mod:`planner.jobs`; :class:`Searches` supplies the run, store and
gather steps): chunks are stored with the search in one transaction and their tasks sent
after commit with fixed task ids; a chunk task re-fetches its row, returns at once when it
is done, notices a cancelled search at most twice a second, stores its result keyed by
``(search, index)`` under a lock on the search row, and the last chunk to finish gathers
the answer (:func:`simulator.search.deployments.merge_results`). A chunk holds the candidates
of one GPU type, so different GPU types run on different workers in parallel.

A search with ``disaggregated`` has one more chunk, the last, with no candidates: the *xPyD stage*
(``planner/search/disaggregated.py``). It waits until the other chunks have gathered the answer
(sent earlier, it returns ``waiting``), is sent by the chunk that gathers it, then simulates the
answer's prefill/decode splits and finishes the search. It has the other chunks' heartbeat, retries
and healing. The same last stage checks the answer on ``check_seeds`` more traffic seeds (``planner/search/seeds.py``)
when the workload is generated: a search has that stage when it asks for either, and the stage stores what it
computed (``disaggregated``, ``seed_check``) into the gathered answer.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from planner.jobs import ChunkedJob, Watch
from planner.jobs.quota import check_queue
from planner.search import definition as sdefn
from planner.search import exports
from planner.search.disaggregated import run_pools, run_stage
from planner.search.models import Search, SearchChunk
from planner.search.pricing import price_stage
from planner.search.seeds import run_seed_check
from simulator.search import SearchCancelled, Slo, merge_results, search_deployments


def search_create(*, owner, definition: Any) -> Search:
    """Validate, store the search and its chunks (one per GPU type), enqueue after commit."""
    norm, snapshot, price = sdefn.validate(definition, owner=owner)
    prices = price.shapes
    SEARCHES.check_quota(owner, limit=int(getattr(settings, "KVP_USER_MAX_SEARCHES", 3)), one="deployment search",
                         many="deployment searches")
    # its worst case (every shape's whole replicas search, the last stage) in the one queue quota of every kind
    check_queue(owner=owner, price_s=price.total_seconds, what="This deployment search")
    snapshot = {**snapshot, "price": {"seconds": round(price.total_seconds, 3)}}
    space = sdefn.build_space(snapshot)
    cands = space.candidates()
    groups = [[i for i, c in enumerate(cands) if c.gpu.name == g.name] for g in space.gpus]
    if sdefn.has_stage(snapshot):
        groups.append([])  # the last stage: xPyD splits, seed check
    with transaction.atomic():
        search = Search.objects.create(owner=owner, name=norm["name"] or _default_name(snapshot),
                                       definition=norm, snapshot=snapshot, total_candidates=len(cands),
                                       num_chunks=len(groups))
        SearchChunk.objects.bulk_create([  # the stage's price: one entry at no cost (skipped by no answer)
            SearchChunk(search=search, index=i, candidates=g, task_id=str(uuid.uuid4()),
                        shapes=[prices[c] for c in g if c in prices] if g else [[0.0, round(price.stage.seconds, 4)]])
            for i, g in enumerate(groups)])
        search_id = search.pk
        transaction.on_commit(lambda: search_enqueue(search_id))
    return search


def _default_name(snapshot: dict) -> str:
    rate = ((snapshot["workload"].get("spec") or {}).get("arrival") or {}).get("rate")
    traffic = f" at {rate:g} requests/s" if rate else ""
    return f"Cheapest deployment of {snapshot['model']['spec']['name']}{traffic}"[:200]


#: The Celery task that runs one chunk (planner/tasks.py), sent by name so this module need not import the tasks.
CHUNK_TASK = "planner.run_search_chunk"


def search_enqueue(search_id: int) -> None:
    """Send the pending chunks' tasks (the last stage's only once the answer is gathered)."""
    search = Search.objects.only("snapshot", "num_chunks", "status").get(pk=search_id)
    stage_waits = sdefn.has_stage(search.snapshot) and not _stage_ready(search)
    SEARCHES.enqueue(search_id, indices=range(search.num_chunks - 1) if stage_waits else None)


def is_stage(search: Search, index: int) -> bool:
    """Whether chunk ``index`` of ``search`` is its last stage (the last chunk of a search with ``disaggregated``
    or a seed check: :func:`planner.search.definition.has_stage`)."""
    return sdefn.has_stage(search.snapshot) and index == search.num_chunks - 1


def _stage_ready(search: Search) -> bool:
    """Whether the last stage may run: every other chunk is done (the answer is gathered)."""
    return not search.chunks.exclude(index=search.num_chunks - 1).exclude(status="done").exists()


class Searches(ChunkedJob):
    """Deployment searches' chunks in the job lifecycle: each the candidates of one GPU type, or the last stage."""

    job_model, chunk_model, parent, chunk_task, noun = Search, SearchChunk, "search", CHUNK_TASK, "search"
    stop_on = (SearchCancelled,)

    def waiting(self, search: Search, chunk: SearchChunk) -> bool:
        """The last stage waits for the answer (sent again by the chunk that gathers it)."""
        return is_stage(search, chunk.index) and not _stage_ready(search)

    def claim_fields(self, search: Search, chunk: SearchChunk) -> dict:
        return {"cost_bound": _best_so_far(search.pk)}

    def run(self, search: Search, chunk: SearchChunk, watch: Watch) -> dict:
        wl, model, space, slo = sdefn.build_inputs(search.snapshot)
        if is_stage(search, chunk.index):
            return last_stage(search.snapshot, Search.objects.get(pk=search.pk).result, (wl, model, space, slo))
        return search_deployments(wl, model, space, slo, candidates=chunk.candidates, progress=watch.progress,
                                  should_stop=watch.should_stop, cost_bound=chunk.cost_bound).to_dict()

    def store(self, search: Search, chunk: SearchChunk, result: dict) -> None:
        (stage_store if is_stage(search, chunk.index) else chunk_store)(
            search_id=search.pk, index=chunk.index, result=result)

    def failure_message(self, exc: BaseException) -> str:
        from celery.exceptions import SoftTimeLimitExceeded

        if isinstance(exc, SoftTimeLimitExceeded):
            return "time limit exceeded for this chunk (CELERY_TASK_SOFT_TIME_LIMIT): search fewer shapes or requests"
        return f"{type(exc).__name__}: {exc}"

    def cancelled(self, search: Search) -> None:
        # Running chunks stop at their next check; none of them is shown as running any more.
        search.chunks.filter(status__in=["pending", "running"]).update(status="skipped")


#: Deployment searches in the job lifecycle.
SEARCHES = Searches()


def chunk_run(*, search_id: int, index: int) -> str:
    """Search one chunk's candidates and store the result; idempotent (``done``, ``already-done``, ...)."""
    return SEARCHES.run_chunk(search_id, index)


def last_stage(snapshot: dict, result: dict, inputs: tuple) -> dict:
    """What the last stage adds to the gathered ``result``: ``disaggregated`` (the answer's xPyD splits),
    ``disaggregated_pools`` (prefill and decode pools of their own shapes, with ``disaggregated.pools``) and
    ``seed_check`` (the answer on more seeds), each when the search asks for it."""
    wl, model, space, slo = inputs
    out = {}
    if snapshot.get("disaggregated") is not None:
        out["disaggregated"] = run_stage(result, snapshot["disaggregated"], wl, model, space, slo)
        if snapshot["disaggregated"].get("pools"):
            out["disaggregated_pools"] = run_pools(result, snapshot["disaggregated"], wl, model, space, slo)
    if sdefn.seeds_to_check(snapshot):
        out["seed_check"] = run_seed_check(result, snapshot, model, space, slo)
    return out


def _best_so_far(search_id: int) -> float | None:
    """Cost per hour of the cheapest answer among the search's finished chunks (they prune the rest)."""
    costs = [r["best"]["cost_per_hour"] for r in SearchChunk.objects.filter(search_id=search_id, status="done")
             .values_list("result", flat=True) if r and r.get("best")]
    return min(costs, default=None)


def chunk_store(*, search_id: int, index: int, result: dict) -> None:
    """Write a chunk's result (keyed by ``(search, index)``); the last one gathers the answer (and, with an
    xPyD stage, sends it: the search finishes when the stage does)."""
    SEARCHES.store_done(search_id, index, {"result": result}, gather=_gather)


def _gather(search: Search, chunk: SearchChunk) -> None:
    """Under the search's lock: once every searched chunk is done, merge their results into the answer."""
    has_stage = sdefn.has_stage(search.snapshot)
    searched = search.chunks.exclude(index=search.num_chunks - 1) if has_stage else search.chunks
    if search.is_final:
        return
    if searched.exclude(status="done").exists():
        best = _cheapest_answer(searched) if has_stage else None
        if best is not None:  # the stage priced for the answer so far, until the answer is gathered
            _price_stage_for_answer(search, best)
        return
    parts = list(searched.order_by("index").values_list("result", flat=True))
    search.result = merge_results(parts, Slo.from_dict(search.snapshot["slo"])).to_dict()
    search.result["launch"] = exports.search_launch(search.result, search.snapshot)  # what to run
    if has_stage:
        search.save(update_fields=["result"])
        _price_stage_for_answer(search, search.result.get("best"))
        transaction.on_commit(lambda: search_enqueue(search.pk))
        return
    _finish(search)


def _cheapest_answer(searched) -> dict | None:
    """The cheapest answer among the finished shape chunks (a chunk result's ``best``), None before one."""
    answers = [r["best"] for r in searched.filter(status="done").values_list("result", flat=True)
               if r and r.get("best")]
    return min(answers, key=lambda b: b["cost_per_hour"], default=None)


def _price_stage_for_answer(search: Search, best: dict | None) -> None:
    """The last stage's estimate for the answer ``best`` (the gathered one, or the cheapest so far while shape
    chunks still run), 0 without one: its shape at its replicas, not the heaviest shape at ``space.max_replicas``
    it was checked at. The time left reads it: priced at the heaviest shape until the answer was gathered, the
    stage alone was 3 s of a 3.8 s estimate with 0.8 s left (the search of
    ``tests/integration/test_search_eta.py``)."""
    seconds = 0.0
    if best:
        seconds = price_stage(*sdefn.build_inputs(search.snapshot), best, search.snapshot.get("disaggregated"),
                              sdefn.seeds_to_check(search.snapshot)).seconds
    search.chunks.filter(index=search.num_chunks - 1).update(shapes=[[0.0, round(seconds, 4)]])


def stage_store(*, search_id: int, index: int, result: dict) -> None:
    """Write the last stage's findings (xPyD splits, seed check) into the gathered answer and finish the search."""
    def gather(search: Search, chunk: SearchChunk) -> None:
        if not search.is_final:
            search.result = {**search.result, **result}
            _finish(search)

    SEARCHES.store_done(search_id, index, {"result": result}, gather=gather)


def _finish(search: Search) -> None:
    search.status = Search.Status.DONE
    search.finished_at = timezone.now()
    search.save(update_fields=["result", "status", "finished_at"])


def search_cancel(*, search: Search, user) -> Search:
    """Cancel a queued or running search (owner only); pending and running chunks are skipped."""
    return SEARCHES.cancel(search, user=user)


def search_run_here(*, search: Search) -> Search:
    """Run every pending chunk in this process (``manage.py search``), then re-read the search."""
    for index in search.chunks.exclude(status="done").values_list("index", flat=True):
        chunk_run(search_id=search.pk, index=index)
    return Search.objects.get(pk=search.pk)
