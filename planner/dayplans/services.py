"""Writes for day plans: create, run a chunk, store it, answer, cancel.

The one job lifecycle (:mod:`planner.jobs`; :class:`DayPlans` supplies the run, store and gather steps), with one
difference from a sweep's or a search's chunks: a day's chunk ``h + 1`` starts from chunk ``h``'s handover (the
replicas it had alive and the counts its policy chose, :class:`simulator.day.Handover`). That handover is known
once chunk ``h``'s run has passed the start of chunk ``h + 1`` (``on_handover``), before its cool-down and its
storing: it is written on chunk ``h``'s row then (``handover``) and chunk ``h + 1`` is sent, so two workers run
the two at once (**pipelined**; each chunk's result is exactly the one of chunks run one after another, since
it starts from the same handover). So only chunk 0 is sent at creation; :func:`chunk_store` writes a finished
chunk (keyed by ``(plan, index)``, under a lock on the plan) and sends chunk ``h + 1`` again if it is still
pending (a worker that died between the handover and the message); the chunk whose store completes the plan
joins the chunks and stores the answer (:func:`plan_answer`).

Idempotent everywhere, so late acknowledgement is safe: a chunk task whose row is done returns at once
(``already-done``), a chunk whose previous one has told no handover yet returns ``waiting`` (it is sent again
when that one tells it), and a running chunk whose worker died is sent again by the healer
(``planner/dayplans/stalls.py``) after its heartbeat stopped; run again, it tells the same handover. A crashed
worker loses at most the chunks it was running, never a stored one.

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
        plan_id = plan.pk
        transaction.on_commit(lambda: chunk_enqueue(plan_id, 0))
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


def _tell_handover(plan_id: int, chunk_id: int, index: int, handover) -> None:
    """Chunk ``index`` knows the next one's ``handover``: write it on its row and send the next chunk (if pending:
    not after a cancel, nor when it runs or ran already)."""
    DayPlanChunk.objects.filter(pk=chunk_id).update(handover=handover.to_dict())
    chunk_enqueue(plan_id, index + 1)


class DayPlans(ChunkedJob):
    """Day plans' chunks in the job lifecycle: each one span of the day, from the previous chunk's handover."""

    job_model, chunk_model, parent, chunk_task, noun = DayPlan, DayPlanChunk, "plan", CHUNK_TASK, "day plan"
    stop_on = ()  # a running chunk is not stopped by a cancel: it is stored, and its hours answered

    def waiting(self, plan: DayPlan, chunk: DayPlanChunk) -> bool:
        """A chunk waits for the previous one's handover (it is sent when that one tells it)."""
        return chunk.index > 0 and _handover(plan.pk, chunk.index) is None

    def run(self, plan: DayPlan, chunk: DayPlanChunk, watch: Watch) -> dict:
        from simulator.day import Handover, simulate_chunk

        index, prev = chunk.index, _handover(plan.pk, chunk.index) if chunk.index > 0 else None
        wl, config, policy = build_inputs(plan.snapshot)
        plans = _plans(plan.snapshot)
        day = plan.snapshot["day"]
        done = simulate_chunk(wl, config, policy, plans[index], cold_start_s=day["cold_start_s"],
                              routing=day["routing"], handover=None if prev is None else Handover.from_dict(prev),
                              next_plan=plans[index + 1] if index + 1 < len(plans) else None,
                              on_handover=lambda h, _t: _tell_handover(plan.pk, chunk.pk, index, h))
        return done.to_dict()

    def store(self, plan: DayPlan, chunk: DayPlanChunk, result: dict) -> None:
        if chunk_store(plan_id=plan.pk, index=chunk.index, result=result):
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


def chunk_store(*, plan_id: int, index: int, result: dict) -> bool:
    """Write a finished chunk (keyed by ``(plan, index)``, with the handover it told) and, after commit, send the
    next one if it is still pending; True when the plan has every chunk now (whichever of them was stored last),
    or was cancelled (the caller then answers it)."""
    def gather(plan: DayPlan, chunk: DayPlanChunk) -> bool:
        if plan.is_final:
            return plan.status == DayPlan.Status.CANCELLED
        if index + 1 < plan.num_chunks:
            transaction.on_commit(lambda: chunk_enqueue(plan_id, index + 1))
        return not plan.chunks.exclude(status="done").exists()

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
    rows = list(plan.chunks.filter(status="done").order_by("index").values_list("index", "result"))
    rows = [r for i, r in enumerate(rows) if r[0] == i]  # consecutive from chunk 0
    if not rows or (plan.answer and plan.answer.get("chunks_done") == len(rows)):
        return "unchanged"
    if plan.status != DayPlan.Status.CANCELLED and len(rows) < plan.num_chunks:
        return "waiting"
    wl, _, policy = build_inputs(plan.snapshot)
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


__all__ = ["ANSWER_TASK", "CHUNK_TASK", "build_inputs", "chunk_run", "chunk_store", "dayplan_cancel",
           "dayplan_create", "dayplan_run_here", "plan_answer"]
