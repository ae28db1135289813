"""Writes for day plans: create, run a chunk, store it, answer, cancel.

The one job lifecycle (:mod:`planner.jobs`; :class:`DayPlans` supplies the run, store and gather steps), with one
difference from a sweep's or a search's chunks: a day's chunk ``h + 1`` starts from chunk ``h``'s handover (the
replicas it had alive and the counts its policy chose, :class:`simulator.day.Handover`). That handover is known
once chunk ``h``'s run has passed the start of chunk ``h + 1`` (``on_handover``), before its cool-down and its
storing: it is written on chunk ``h``'s row then (``handover``) and chunk ``h + 1`` is sent, so two workers run
the two at once (**pipelined**; each chunk's result is exactly the one of chunks run one after another, since
it starts from the same handover). So only chunk 0 (and the speculative chain's first, below) is sent at
creation; :func:`chunk_store` writes a finished chunk (keyed by ``(plan, index)``, under a lock on the plan)
and sends chunk ``h + 1`` again if it is still pending (a worker that died between the handover and the
message); the chunk whose store completes the plan joins the chunks and stores the answer (:func:`plan_answer`).

Idempotent everywhere, so late acknowledgement is safe: a chunk task whose row is done returns at once
(``already-done``), a chunk whose previous one has told no handover yet returns ``waiting`` (it is sent again
when that one tells it), and a running chunk whose worker died is sent again by the healer
(``planner/dayplans/stalls.py``) after its heartbeat stopped; run again, it tells the same handover. A crashed
worker loses at most the chunks it was running, never a stored one.

**Speculative** (``speculate``, the default from 4 chunks: ``snapshot.day.speculate_at`` is chunk ``K``, about
the middle): chunk ``K`` is sent at creation beside chunk 0. Its task first guesses its handover by a lead-in
(:func:`simulator.day.chunks.guess_handover`: chunk ``K - 1`` from the policy's start, up to the handover), unless
the true one is known by then, and runs from it; chunks ``K + 1``... follow it as above: a second chain. Every
chunk's row keeps the handover its run started from (``started_from``, written when it starts). When a chunk
tells (or stores) its handover, the next row is compared (:func:`_follow`): started from an equal one, it and
the chain after it stand (the chains met: the first chain sends nothing more there); started from another, it
is put back to pending and sent again from the true one (a run still going on from the old start is no longer
stored, nor are its tells). A chunk is **kept** when it is done and started from its predecessor's handover,
all the way from chunk 0 (:func:`kept_chunks`); the plan is answered once every chunk is kept, so the answer is
the one of chunks run one after another (the chains change only who runs which chunk when). A chunk's result
is a function of the handover it starts from, so a chain that met costs nothing; one that never meets costs one
wasted chain beside the first.

Cancelling keeps the finished chunks: a chunk still running is stored when it ends but starts no other, and
:data:`ANSWER_TASK` answers the finished hours (``partial``: consecutive from chunk 0) on a worker.
"""

from __future__ import annotations

import logging
import math
import uuid
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.celery import app as celery_app
from planner.dayplans import definition as ddefn
from planner.dayplans.models import DayPlan, DayPlanChunk
from planner.jobs import ChunkedJob, Watch, queue_options

logger = logging.getLogger(__name__)

#: Names of the Celery tasks of :mod:`planner.tasks` this module sends.
CHUNK_TASK = "planner.run_day_plan_chunk"
ANSWER_TASK = "planner.answer_day_plan"
#: Fleet columns kept with the answer, for the chart over time.
FLEET_COLUMNS = ("time_s", "desired", "ready", "starting", "draining", "router_queue")


def dayplan_create(*, owner, definition: Any) -> DayPlan:
    """Validate ``definition``, store the plan and its chunks, send chunk 0 after commit.

    Raises :class:`planner.errors.InputError` (messages per field) or :class:`planner.jobs.QuotaExceeded`.
    """
    norm, snapshot = ddefn.validate(definition, owner=owner)
    DAY_PLANS.check_quota(owner, limit=int(getattr(settings, "KVP_USER_MAX_DAY_PLANS", 3)), one="day plan",
                          many="day plans")
    day = snapshot["day"]
    with transaction.atomic():
        plan = DayPlan.objects.create(owner=owner, name=norm.get("name") or _default_name(snapshot),
                                      definition=norm, snapshot=snapshot, num_chunks=len(day["plans"]),
                                      span_s=day["span_s"])
        DayPlanChunk.objects.bulk_create([
            DayPlanChunk(plan=plan, index=p["index"], start_s=p["start_s"], end_s=p["end_s"],
                         task_id=str(uuid.uuid4())) for p in day["plans"]])
        plan_id, first = plan.pk, [0] + ([day["speculate_at"]] if day.get("speculate_at") else [])
        transaction.on_commit(lambda: [chunk_enqueue(plan_id, i) for i in first])
    return plan


def _default_name(snapshot: dict) -> str:
    who = (snapshot.get("model") or {}).get("spec", {}).get("name") or "Engine"
    gpu = (snapshot.get("gpu") or {}).get("spec", {}).get("name")
    kind = (snapshot["day"]["policy"] or {}).get("kind", "policy")
    return f"{who}{' on ' + gpu if gpu else ''}, {kind} policy over {snapshot['day']['span_s'] / 3600:.3g} h"[:200]


def chunk_enqueue(plan_id: int, index: int) -> None:
    """Send chunk ``index``'s task if it is pending (by name: :mod:`planner.tasks` calls into this module)."""
    DAY_PLANS.enqueue(plan_id, indices=[index])


def answer_enqueue(plan_id: int) -> None:
    celery_app.send_task(ANSWER_TASK, args=[plan_id], task_id=f"dayplan-{plan_id}-answer-{uuid.uuid4()}",
                         **queue_options())


# --------------------------------------------------------------------------- run


_INPUTS: dict = {}  # the last plan's inputs in this worker process: rebuilt only for another plan


def plan_inputs(plan: DayPlan):
    """:func:`build_inputs` of ``plan``, kept for the next chunk of the same plan on this worker (a day's
    workload is generated once per worker process, not once per chunk)."""
    key = (plan.pk, plan.created_at)
    if _INPUTS.get("key") != key:
        _INPUTS.clear()
        _INPUTS.update(key=key, inputs=build_inputs(plan.snapshot))
    return _INPUTS["inputs"]


def build_inputs(snapshot: dict):
    """``(workload, engine config, policy)`` of a plan, rebuilt from its snapshot (the same on every worker)."""
    from planner.sweeps.runner import workload_of
    from simulator.day import build_policy
    from simulator.engine import EngineConfig

    day = snapshot["day"]
    wl = workload_of(snapshot["point"]["workload"], snapshot["workload"])
    policy = build_policy(dict(day["policy"]), wl.arrival, day["cold_start_s"])
    return wl, EngineConfig.from_dict(snapshot["point"]["config"]), policy


def _plans(snapshot: dict):
    from simulator.day.chunks import ChunkPlan

    day = snapshot["day"]
    out = []
    for p in day["plans"]:
        end = math.inf if p["end_s"] is None else p["end_s"]
        last = p["end_s"] is None
        out.append(ChunkPlan(p["index"], p["start_s"], end, max(0.0, p["start_s"] - day["overlap_s"]),
                             math.inf if last else end + day["overlap_s"]))
    return out


def _handover(plan_id: int, index: int) -> dict | None:
    """The handover chunk ``index`` starts from: the one the previous chunk told (None before, and for chunk 0);
    a chunk stored before rows kept their handover has it in its result only."""
    row = DayPlanChunk.objects.filter(plan_id=plan_id, index=index - 1).values("handover", "status",
                                                                              "result__handover").first()
    if row is None:
        return None
    if row["handover"] is not None:
        return row["handover"]
    return row["result__handover"] if row["status"] == "done" else None


def _locked(plan_id: int) -> DayPlan:
    return DayPlan.objects.select_for_update().get(pk=plan_id)


def _follow(plan: DayPlan, index: int, handover: dict) -> bool:
    """Chunk ``index - 1``'s handover is ``handover`` now (told or stored; under the plan's lock): chunk ``index``
    is to be sent if it has not started, put back (and sent) if it started from another handover, and left if it
    started from this one (module docstring). True when the caller is to send it (after its commit)."""
    row = DayPlanChunk.objects.filter(plan_id=plan.pk, index=index).first()
    if row is None or plan.is_final:
        return False
    if row.started_from is None:
        return row.status == "pending"  # running with no start yet: a lead-in, which takes the true one at its end
    if row.started_from == handover:
        return False  # the chains met here (or a chunk already started from the true handover)
    logger.warning("day plan %s: chunk %s started from another handover; sent again from the true one", plan.pk,
                index)
    DayPlanChunk.objects.filter(pk=row.pk).update(status="pending", started_from=None, result=None, handover=None,
                                                  attempts=0, task_id=str(uuid.uuid4()), heartbeat_at=None,
                                                  finished_at=None)
    return True


def _follow_on_commit(plan: DayPlan, index: int, handover: dict) -> None:
    if _follow(plan, index, handover):
        transaction.on_commit(lambda: chunk_enqueue(plan.pk, index))


def _ours(plan_id: int, index: int, start: dict | None) -> bool:
    """Whether chunk ``index``'s row still belongs to a run started from ``start`` (not put back meanwhile)."""
    row = DayPlanChunk.objects.filter(plan_id=plan_id, index=index).values("started_from", "status").first()
    return row is not None and row["status"] != "pending" and row["started_from"] == start


def _tell_handover(plan_id: int, index: int, start: dict | None, handover) -> None:
    """Chunk ``index``'s run (from ``start``) knows the next chunk's ``handover``: write it on its row and follow
    it (:func:`_follow`); a run whose row was put back meanwhile tells nothing."""
    told = handover.to_dict()
    with transaction.atomic():
        plan = _locked(plan_id)
        if not _ours(plan_id, index, start):
            return
        DayPlanChunk.objects.filter(plan_id=plan_id, index=index).update(handover=told)
        send = _follow(plan, index + 1, told)
    if send:  # now, while this chunk runs on (the next one starts on another worker)
        chunk_enqueue(plan_id, index + 1)


def _start_from_guess(plan_id: int, chunk: DayPlanChunk, guess: dict) -> dict | None:
    """After the lead-in: the true handover if the previous chunk told it meanwhile, else ``guess``, written as
    the row's start (None: the row is not this run's any more)."""
    with transaction.atomic():
        _locked(plan_id)
        start = _handover(plan_id, chunk.index) or guess
        won = DayPlanChunk.objects.filter(pk=chunk.pk, status="running", attempts=chunk.attempts,
                                          started_from__isnull=True).update(started_from=start)
    return start if won else None


def kept_chunks(plan: DayPlan, rows: list[dict]) -> list[dict]:
    """The rows kept (``index``, ``status``, ``started_from``, ``handover``), consecutive from chunk 0: done and
    started from the previous one's handover (a plan from before ``started_from`` was kept, with none at all,
    ran its chunks one after another)."""
    legacy = all(r["started_from"] is None for r in rows)
    out: list[dict] = []
    for r in sorted(rows, key=lambda r: r["index"]):
        if r["index"] != len(out) or r["status"] != "done":
            break
        if out and not legacy and r["started_from"] != out[-1]["handover"]:
            break
        out.append(r)
    return out


def _kept_rows(plan: DayPlan) -> list[dict]:
    return kept_chunks(plan, list(plan.chunks.values("index", "status", "started_from", "handover")))


def ready_pending(plan: DayPlan, rows: list[dict]) -> list[int]:
    """The pending chunks of ``plan`` that can run now (chunk 0, the speculative chain's first chunk, and each
    chunk whose previous one told its handover): each should have a message in the broker."""
    told = {r["index"] for r in rows if r["handover"] is not None or r["status"] == "done"}
    spec = plan.snapshot["day"].get("speculate_at")
    return [r["index"] for r in rows if r["status"] == "pending"
            and (r["index"] in (0, spec) or r["index"] - 1 in told)]


def chunk_rows(plan: DayPlan) -> list[dict]:
    """What :func:`ready_pending` and :func:`kept_chunks` read of ``plan``'s chunks."""
    return list(plan.chunks.values("index", "status", "started_from", "handover", "finished_at"))


class DayPlans(ChunkedJob):
    """Day plans' chunks in the job lifecycle: each one span of the day, from the previous chunk's handover."""

    job_model, chunk_model, parent, chunk_task, noun = DayPlan, DayPlanChunk, "plan", CHUNK_TASK, "day plan"
    stop_on = ()  # a running chunk is not stopped by a cancel: it is stored, and its hours answered

    def waiting(self, plan: DayPlan, chunk: DayPlanChunk) -> bool:
        """A chunk waits for the previous one's handover (it is sent when that one tells it), but for the
        speculative chain's first chunk, which guesses it."""
        return (chunk.index > 0 and chunk.index != plan.snapshot["day"].get("speculate_at")
                and _handover(plan.pk, chunk.index) is None)

    def claim_fields(self, plan: DayPlan, chunk: DayPlanChunk) -> dict:
        """The handover the run starts from (None for chunk 0, and before a lead-in's guess)."""
        return {"started_from": _handover(plan.pk, chunk.index) if chunk.index > 0 else None}

    def run(self, plan: DayPlan, chunk: DayPlanChunk, watch: Watch) -> dict | None:
        from simulator.day import Handover, simulate_chunk
        from simulator.day.chunks import guess_handover

        index, start = chunk.index, chunk.started_from
        wl, config, policy = plan_inputs(plan)
        plans = _plans(plan.snapshot)
        day = plan.snapshot["day"]
        if index > 0 and start is None:
            if index != day.get("speculate_at"):
                return None  # its predecessor was put back between the check and the claim: sent again later
            guess = guess_handover(wl, config, policy, plans, index, cold_start_s=day["cold_start_s"],
                                   routing=day["routing"])
            start = _start_from_guess(plan.pk, chunk, guess.to_dict())
            if start is None:
                return None
        chunk.started_from = start
        done = simulate_chunk(wl, config, policy, plans[index], cold_start_s=day["cold_start_s"],
                              routing=day["routing"], handover=None if start is None else Handover.from_dict(start),
                              next_plan=plans[index + 1] if index + 1 < len(plans) else None,
                              on_handover=lambda h, _t: _tell_handover(plan.pk, index, start, h))
        return done.to_dict()

    def store(self, plan: DayPlan, chunk: DayPlanChunk, result: dict | None) -> None:
        if result is None:
            DayPlanChunk.objects.filter(pk=chunk.pk, status="running", started_from__isnull=True).update(
                status="pending")
            return
        if chunk_store(plan_id=plan.pk, index=chunk.index, result=result, started_from=chunk.started_from):
            plan_answer(plan_id=plan.pk)

    def cancelled(self, plan: DayPlan) -> None:
        # a running chunk finishes and is stored (and answered then); none is shown as running any more
        plan.chunks.filter(status="pending").update(status="skipped")
        if plan.chunks.filter(status="done").exists():
            transaction.on_commit(lambda: answer_enqueue(plan.pk))

    def resend(self, plan_id: int, stalled: list, pending: list, send) -> int:
        """Only the stalled chunk is sent again (the chunks after it are sent one by one as each is stored)."""
        logger.warning("day plan %s: stalled chunk %s sent again", plan_id, [c.index for c in stalled])
        for ch in stalled:
            send(CHUNK_TASK, [plan_id, ch.index], task_id=ch.task_id)
        return len(stalled)


#: Day plans in the job lifecycle.
DAY_PLANS = DayPlans()


def chunk_run(*, plan_id: int, index: int) -> str:
    """Simulate chunk ``index`` from the previous chunk's handover and store it; idempotent.

    Returns ``done``, ``already-done``, ``waiting`` (the previous chunk is not stored yet), ``skipped``,
    ``running-elsewhere``, ``missing`` or ``failed``.
    """
    return DAY_PLANS.run_chunk(plan_id, index)


def chunk_store(*, plan_id: int, index: int, result: dict, started_from: dict | None) -> bool:
    """Write a finished chunk (keyed by ``(plan, index)``, with the handover it told) if its row is still the run's
    from ``started_from``, and follow its handover (:func:`_follow`); True when every chunk is kept now (whichever
    was stored last), or the plan was cancelled (the caller then answers it)."""
    with transaction.atomic():
        plan = _locked(plan_id)
        prev = _handover(plan_id, index) if index > 0 else None
        if not _ours(plan_id, index, started_from) or (prev is not None and prev != started_from):
            if prev is not None and prev != started_from and not plan.is_final:
                _follow_on_commit(plan, index, prev)  # the run started from a guess the true handover contradicts
            return False

        def gather(plan: DayPlan, chunk: DayPlanChunk) -> bool:
            if plan.is_final:
                return plan.status == DayPlan.Status.CANCELLED
            if index + 1 < plan.num_chunks:
                _follow_on_commit(plan, index + 1, result["handover"])
            return len(_kept_rows(plan)) == plan.num_chunks

        return DAY_PLANS.store_done(plan_id, index, {"result": result, "handover": result["handover"]},
                                    gather=gather)[1]


def _answer_of(wl, chunks: list, policy, day: dict) -> dict:
    """The answer of ``chunks`` (0 to k, in order): the whole day, or the hours they cover."""
    import numpy as np

    from simulator.day import answer_day, join_chunks
    from simulator.day.chunks import sub_workload

    partial = not math.isinf(chunks[-1].plan.end_s)
    if partial:  # only the finished chunks' hours: their requests, renumbered in that window
        wl, idx = sub_workload(wl, 0.0, chunks[-1].plan.end_s)
        local = np.full(int(idx.max(initial=-1)) + 1, -1, np.int64)
        local[idx] = np.arange(idx.size)
        chunks = [replace(c, request_index=local[c.request_index]) for c in chunks]
    res = join_chunks(wl, chunks, policy, cold_start_s=day["cold_start_s"], routing=day["routing"])
    slo = day["slo"]
    ans = answer_day(res, gpus_per_replica=day["gpus_per_replica"], price_per_gpu_hour=day["price_per_gpu_hour"],
                     slo_ttft_s=slo["ttft_s"], slo_tpot_s=slo["tpot_s"])
    cols = res.replicas_over_time()
    out = _json_safe(ans.to_dict())
    out.update(partial=partial, end_s=res.end_s, policy=res.policy, chunks_done=len(chunks),
               fleet=_json_safe({k: cols[k].tolist() for k in FLEET_COLUMNS if k in cols}))
    out["policy"].pop("rates", None)  # an oracle's own rate curve: long, and rebuilt from the workload
    return out


def _json_safe(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def plan_answer(*, plan_id: int) -> str:
    """Join the stored chunks and store the answer: the day's (the plan is then done) or, for a cancelled plan,
    its finished hours'. Idempotent: an answer of as many chunks is kept."""
    from simulator.day import DayChunk

    plan = DayPlan.objects.get(pk=plan_id)
    kept = [r["index"] for r in _kept_rows(plan)]
    rows = list(plan.chunks.filter(index__in=kept).order_by("index").values_list("index", "result"))
    if not rows or (plan.answer and plan.answer.get("chunks_done") == len(rows)):
        return "unchanged"
    if plan.status != DayPlan.Status.CANCELLED and len(rows) < plan.num_chunks:
        return "waiting"
    wl, _, policy = plan_inputs(plan)
    answer = _answer_of(wl, [DayChunk.from_dict(r) for _, r in rows], policy, plan.snapshot["day"])
    with transaction.atomic():
        locked = DayPlan.objects.select_for_update().get(pk=plan_id)
        if locked.answer and locked.answer.get("chunks_done", 0) >= answer["chunks_done"]:
            return "unchanged"  # another task answered as many chunks (or more) meanwhile
        locked.answer = answer
        fields = ["answer"]
        if not locked.is_final and not answer["partial"]:
            locked.status, locked.finished_at = DayPlan.Status.DONE, timezone.now()
            fields += ["status", "finished_at"]
        locked.save(update_fields=fields)
    return "answered"


def dayplan_cancel(*, plan: DayPlan, user) -> DayPlan:
    """Cancel a queued or running plan (owner only): finished chunks are kept and their hours answered."""
    return DAY_PLANS.cancel(plan, user=user)


def dayplan_run_here(*, plan: DayPlan) -> DayPlan:
    """Run the plan's chunks in this process, in order (``manage.py dayplan --inline``, tests), then re-read it."""
    for index in range(plan.num_chunks):
        if chunk_run(plan_id=plan.pk, index=index) not in ("done", "already-done"):
            break
    plan_answer(plan_id=plan.pk)
    return DayPlan.objects.get(pk=plan.pk)


__all__ = ["ANSWER_TASK", "CHUNK_TASK", "build_inputs", "chunk_rows", "chunk_run", "chunk_store", "dayplan_cancel",
           "dayplan_create", "dayplan_run_here", "kept_chunks", "plan_answer", "plan_inputs", "ready_pending"]
