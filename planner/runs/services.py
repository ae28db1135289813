"""Runs handed from a web request to the workers (issue 37): create, run on a worker, store, progress.

``/api/simulations/``, ``/api/replicas/``, ``/replicas/``, ``/api/calibrations/`` and ``/calibrations/`` price
their run first. Within ``KVP_INLINE_MAX_SECONDS`` (:func:`runs_inline`) it runs in the request as before;
dearer, the caller checks it against the chunk limit (``KVP_CHUNK_MAX_SECONDS``, not the synchronous one) and
:func:`run_create` stores a :class:`planner.runs.models.Run` with one chunk and sends it to the workers after
commit: the one job lifecycle (:class:`WorkerRuns`, a :class:`planner.jobs.ChunkedJob`) claims it, heartbeats
it, heals it when its worker dies, and stores the answer the request would have given. What each kind runs on
the worker is in :mod:`planner.runs.kinds`.

Quota: a run, with the caller's queued and running runs (and a signed-in owner's sweeps and deployment searches),
may not be estimated over ``KVP_USER_QUEUE_SECONDS`` (:mod:`planner.jobs.quota`; the API answers 429).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from planner.jobs import ChunkedJob, Watch
from planner.jobs import failure_message as _failure_message
from planner.jobs.quota import check_queue
from planner.runs.models import Run, RunChunk
from planner.sweeps import limits
from simulator.base.errors import FieldError

logger = logging.getLogger(__name__)

#: The Celery task (:mod:`planner.tasks`) that runs a run's one chunk.
CHUNK_TASK = "planner.run_worker_run"


def runs_inline(seconds: float) -> bool:
    """Whether a run priced at ``seconds`` runs inside the web request (else on a worker)."""
    return seconds <= limits.inline_max_seconds()


def run_create(*, kind: str, definition: Any, price_s: float, owner, client: str) -> Run:
    """Store a run and its chunk and send it to the workers after commit; raises :class:`QuotaExceeded`."""
    check_queue(owner=owner, client=client, price_s=price_s, what="This run")  # the first run included
    with transaction.atomic():
        run = Run.objects.create(owner=owner, client=client[:120], kind=kind, definition=definition,
                                 price_s=round(float(price_s), 4))
        RunChunk.objects.create(run=run, index=0, task_id=str(uuid.uuid4()))
        run_id = run.pk
        transaction.on_commit(lambda: RUNS.enqueue(run_id))
    logger.info("run %s (%s) priced at %.2f s sent to the workers", run_id, kind, price_s)
    return run


class WorkerRuns(ChunkedJob):
    """Runs in the job lifecycle: one chunk each, whose result is the run's answer."""

    job_model, chunk_model, parent, chunk_task, noun = Run, RunChunk, "run", CHUNK_TASK, "run"

    def run(self, run: Run, chunk: RunChunk, watch: Watch) -> dict:
        from planner.runs.kinds import run_kind

        return run_kind(run.kind, run.definition, owner=run.owner, progress=watch)

    def store(self, run: Run, chunk: RunChunk, result: dict) -> None:
        def gather(job: Run, _chunk: RunChunk) -> None:
            if job.is_final:
                return
            job.result, job.status, job.finished_at = result, Run.Status.DONE, timezone.now()
            job.save(update_fields=["result", "status", "finished_at"])

        self.store_done(run.pk, chunk.index, {}, gather=gather)

    def failure_message(self, exc: BaseException) -> str:
        if isinstance(exc, FieldError):  # input refused on the worker (priced over a limit too): its messages
            return "; ".join(m for ms in exc.errors.values() for m in ms)
        return _failure_message(exc)

    def fail(self, chunk: RunChunk, message: str, *, label: str | None = None) -> None:
        """A run has one chunk: its error is the chunk's, without a chunk label."""
        self.chunks.filter(pk=chunk.pk).update(status="failed", error=message[:2000])
        self.fail_job(chunk.run_id, message if label is None or label.startswith("chunk") else
                      f"{label}: {message}")


#: Runs in the job lifecycle.
RUNS = WorkerRuns()


def chunk_run(*, run_id: int) -> str:
    """The chunk task: run ``run_id`` on this worker and store its answer; idempotent."""
    return RUNS.run_chunk(run_id, 0)


def run_cancel(*, run: Run, user) -> Run:
    """Cancel a queued or running run (owner only)."""
    return RUNS.cancel(run, user=user)


__all__ = ["CHUNK_TASK", "RUNS", "chunk_run", "run_cancel", "run_create", "runs_inline"]
