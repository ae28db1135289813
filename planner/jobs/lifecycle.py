"""The lifecycle of a chunked job, once for every kind: enqueue, claim, run under a heartbeat, store under a lock,
fail, cancel.

A *job* (a sweep, a deployment search, a day plan) is one row with a run status (:class:`planner.run_state.RunStatus`)
and the chunks it was split into at creation, rows of their own, each run by one Celery task that receives
``[job id, chunk index]``. :class:`ChunkedJob` holds what every kind does the same way; a kind subclasses it, names
its two models, its chunk task and its noun, and supplies only its own steps:

- :meth:`ChunkedJob.run`: simulate one chunk (with a :class:`Watch` for progress and the cancel check);
- :meth:`ChunkedJob.store`: what becomes of a finished run: :meth:`ChunkedJob.store_done` with the chunk's result
  fields and the kind's *gather* step, which runs under the lock on the job row (recount, merge, send the next
  chunk, finish);
- and where it differs, :meth:`ChunkedJob.waiting` (the chunk cannot run yet), :meth:`ChunkedJob.claim_fields`
  (more to write when a chunk starts), :meth:`ChunkedJob.stopped` (what a cancel keeps), :meth:`ChunkedJob.cancelled`
  (which chunks a cancel skips) and :meth:`ChunkedJob.resend` (what healing sends, :mod:`planner.jobs.healing`).

Every step is idempotent, so late acknowledgement is safe: a chunk already done returns at once, a result is
written keyed by ``(job, index)``, a chunk running elsewhere with a live heartbeat is left alone, and a chunk is
claimed by one compare-and-set update (two deliveries read the same row, one claims it). The outcomes a chunk task
returns: ``done``, ``already-done``, ``skipped``, ``waiting``, ``running-elsewhere``, ``missing``, ``failed``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.utils import timezone

from config.celery import app as celery_app
from planner.errors import InputError
from planner.jobs.fairness import priorities as fair_priorities
from planner.jobs.heartbeat import MAX_CHUNK_ATTEMPTS, Heartbeat, gave_up_message, is_stalled
from planner.run_state import FINAL_STATES, RunStatus

logger = logging.getLogger(__name__)

#: Seconds between progress writes (and cancel checks) from inside a running chunk.
PROGRESS_INTERVAL_S = 0.5
#: What :meth:`ChunkedJob.claim` returns when the chunk is now this worker's.
CLAIMED = "claimed"
#: Job states whose chunks may still run.
UNFINISHED = (RunStatus.QUEUED, RunStatus.RUNNING)


class QuotaExceeded(InputError):
    """The owner's queued and running jobs are at their limit (API: 429)."""


class JobCancelled(Exception):
    """Raised inside a running chunk (by :class:`Watch`) when its job was cancelled."""


def queue_options() -> dict:
    """``send_task`` options of the planner's queue (``KVP_SWEEP_QUEUE``; none: Celery's default queue)."""
    queue = getattr(settings, "KVP_SWEEP_QUEUE", None) or None
    return {"queue": queue} if queue else {}


def send_now(name: str, args: list, *, task_id: str, priority: int | None = None) -> None:
    """Send task ``name`` with ``args`` to the planner's queue (no queue declared: see :mod:`planner.broker_messages`),
    at broker ``priority`` when given (:mod:`planner.jobs.fairness`)."""
    extra = {"priority": priority} if priority is not None else {}
    celery_app.send_task(name, args=args, task_id=task_id, **queue_options(), **extra)


def failure_message(exc: BaseException) -> str:
    """What a failed chunk tells its owner (a time limit and a memory limit said in words)."""
    from celery.exceptions import SoftTimeLimitExceeded

    from simulator.batch import budget

    if isinstance(exc, SoftTimeLimitExceeded):
        return "time limit exceeded for this chunk"
    if isinstance(exc, MemoryError):
        limit = getattr(settings, "KVP_WORKER_MAX_BYTES", 0)
        where = f" (the worker's limit is {budget.format_bytes(limit)})" if limit else ""
        return (f"out of memory{where}: these points need more memory than the worker may use; "
                "use fewer or shorter requests or fewer KV blocks")
    return f"{type(exc).__name__}: {exc}"


class Watch:
    """Progress writes and the cancel check of one running chunk, at most every :data:`PROGRESS_INTERVAL_S`.

    ``finished`` collects what the run finished before a cancel stopped it (the kind's :meth:`ChunkedJob.stopped`
    keeps it).
    """

    def __init__(self, kind: ChunkedJob, job_id: int, chunk_id: int) -> None:
        self.kind, self.job_id, self.chunk_id = kind, job_id, chunk_id
        self.last, self.cancelled = 0.0, False
        self.finished: list = []

    def progress(self, fraction: float) -> None:
        """Write the chunk's progress now (``fraction`` of it done, clipped to 0..1)."""
        self.kind.chunk_model.objects.filter(pk=self.chunk_id).update(progress=max(0.0, min(1.0, float(fraction))))

    def should_stop(self) -> bool:
        """Whether the job was cancelled (read from the database at most every :data:`PROGRESS_INTERVAL_S`)."""
        now = time.monotonic()
        if now - self.last >= PROGRESS_INTERVAL_S:
            self.last = now
            self.cancelled = self.kind.job_model.objects.filter(pk=self.job_id, status=RunStatus.CANCELLED).exists()
        return self.cancelled

    def __call__(self, fraction: float) -> None:
        """A progress callback: every :data:`PROGRESS_INTERVAL_S`, write ``fraction`` and raise
        :class:`JobCancelled` when the job was cancelled."""
        if time.monotonic() - self.last < PROGRESS_INTERVAL_S:
            return
        self.progress(fraction)
        if self.should_stop():
            raise JobCancelled()


class ChunkedJob:
    """One kind of chunked job: its models, its chunk task, and the lifecycle every kind shares (module docstring).

    The job model has ``status`` (:class:`planner.run_state.RunStatus`), ``owner``, ``error``, ``started_at``,
    ``finished_at`` and ``is_final``; the chunk model a foreign key named :attr:`parent` with ``related_name``
    ``chunks``, and ``index``, ``status`` (pending, running, done, failed, skipped), ``task_id``, ``attempts``,
    ``heartbeat_at``, ``error``, ``started_at``, ``finished_at`` and optionally ``progress`` (0..1).
    """

    job_model: ClassVar[type[models.Model]]
    chunk_model: ClassVar[type[models.Model]]
    #: The chunk's foreign key to its job: ``sweep``, ``search``, ``plan``.
    parent: ClassVar[str]
    #: The Celery task that runs one chunk (:mod:`planner.tasks`), sent by name with ``[job id, chunk index]``.
    chunk_task: ClassVar[str]
    #: What the job is called in messages and logs: ``sweep``, ``search``, ``day plan``.
    noun: ClassVar[str]
    #: Exceptions a cancel raises inside :meth:`run` (the chunk is then :meth:`stopped`, not failed).
    stop_on: ClassVar[tuple[type[BaseException], ...]] = (JobCancelled,)

    # ------------------------------------------------------------------ what a kind supplies

    def run(self, job, chunk, watch: Watch) -> Any:
        """Simulate ``chunk`` of ``job`` (under a heartbeat) and return its result for :meth:`store`."""
        raise NotImplementedError

    def store(self, job, chunk, result: Any) -> None:
        """Store ``result``: :meth:`store_done` with the kind's result fields and gather step."""
        raise NotImplementedError

    def waiting(self, job, chunk) -> bool:
        """True when ``chunk`` cannot run yet (it is sent again when it can); by default it always can."""
        return False

    def claim_fields(self, job, chunk) -> dict:
        """More fields to write on ``chunk`` when it starts (none by default)."""
        return {}

    def failure_message(self, exc: BaseException) -> str:
        """What a chunk that raised ``exc`` tells its owner."""
        return failure_message(exc)

    def stopped(self, chunk, watch: Watch) -> None:
        """A cancel stopped ``chunk`` while it ran: by default it is skipped and keeps nothing."""
        self.chunks.filter(pk=chunk.pk).update(status="skipped")

    def cancelled(self, job) -> None:
        """Under the lock of a job just cancelled: skip its chunks that have not started (running ones stop at
        their next check, finished ones are kept)."""
        job.chunks.filter(status="pending").update(status="skipped")

    def resend(self, job_id: int, stalled: list, pending: list, send) -> int:
        """After ``stalled`` chunks of ``job_id`` went back to pending: send every ``pending`` chunk of the job (the
        dead worker may have reserved their messages too); returns how many tasks were sent."""
        logger.warning("%s %s: %d stalled chunk(s) sent again with %d pending", self.noun, job_id, len(stalled),
                       len(pending))
        for ch in pending:
            send(self.chunk_task, [job_id, ch.index], task_id=ch.task_id)
        return len(pending)

    # ------------------------------------------------------------------ the lifecycle

    @property
    def chunks(self) -> models.QuerySet:
        return self.chunk_model.objects.all()

    def _has_progress(self) -> bool:
        return any(f.name == "progress" for f in self.chunk_model._meta.fields)

    def of_job(self, job_id: int) -> models.QuerySet:
        """The chunks of job ``job_id``."""
        return self.chunks.filter(**{f"{self.parent}_id": job_id})

    def enqueue(self, job_id: int, *, indices=None) -> None:
        """Send the tasks of job ``job_id``'s pending chunks (those of ``indices`` only, when given), each with its
        stored task id."""
        pending = self.of_job(job_id).filter(status="pending")
        if indices is not None:
            pending = pending.filter(index__in=list(indices))
        chunks = list(pending.only("index", "task_id"))
        owner_id = self.job_model.objects.filter(pk=job_id).values_list("owner_id", flat=True).first()
        for chunk, priority in zip(chunks, fair_priorities(self.job_model, job_id, owner_id, len(chunks))):
            send_now(self.chunk_task, [job_id, chunk.index], task_id=chunk.task_id, priority=priority)

    def run_chunk(self, job_id: int, index: int) -> str:
        """The chunk task: run chunk ``index`` of job ``job_id`` and store it; idempotent (outcomes: module
        docstring)."""
        chunk = self.of_job(job_id).select_related(self.parent).filter(index=index).first()
        if chunk is None:
            return "missing"
        if chunk.status == "done":
            return "already-done"
        job = getattr(chunk, self.parent)
        if job.is_final:
            self.chunks.filter(pk=chunk.pk).exclude(status="done").update(status="skipped")
            return "skipped"
        if self.waiting(job, chunk):
            return "waiting"
        if chunk.status == "running" and not is_stalled(chunk.heartbeat_at):
            return "running-elsewhere"  # a second delivery while another worker runs it
        claimed = self.claim(chunk, label=f"chunk {index}", **self.claim_fields(job, chunk))
        if claimed != CLAIMED:
            return claimed
        watch = Watch(self, job_id, chunk.pk)
        try:
            with Heartbeat(self.chunk_model, chunk.pk):
                result = self.run(job, chunk, watch)
        except self.stop_on:
            self.stopped(chunk, watch)
            return "skipped"
        except Exception as exc:  # noqa: BLE001 - stored and shown; the job fails with the reason
            msg = self.failure_message(exc)
            logger.exception("%s %s chunk %s failed", self.noun, job_id, index)
            self.fail(chunk, msg)
            return "failed"
        self.store(job, chunk, result)
        return "done"

    def claim(self, chunk, *, label: str, **fields) -> str:
        """Make ``chunk`` (as read) this worker's: running, one more attempt, a fresh heartbeat, its job running.

        One compare-and-set update: a second claim from the same read finds the row changed and returns
        ``running-elsewhere``. A chunk whose workers died :data:`MAX_CHUNK_ATTEMPTS` times fails instead, with its
        job (the job's error starts with ``label``): ``failed``. Otherwise :data:`CLAIMED`.
        """
        if chunk.attempts >= MAX_CHUNK_ATTEMPTS:
            self.fail(chunk, gave_up_message(chunk.attempts), label=label)
            return "failed"
        now = timezone.now()
        if self._has_progress():
            fields["progress"] = 0.0
        won = self.chunks.filter(pk=chunk.pk, status=chunk.status, attempts=chunk.attempts).update(
            status="running", started_at=now, heartbeat_at=now, attempts=chunk.attempts + 1, **fields)
        if not won:
            return "running-elsewhere"
        for name, value in {"status": "running", "started_at": now, "heartbeat_at": now,
                            "attempts": chunk.attempts + 1, **fields}.items():
            setattr(chunk, name, value)  # the caller's copy says what the row says now
        self.job_model.objects.filter(pk=getattr(chunk, f"{self.parent}_id"), status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, started_at=now)
        return CLAIMED

    def fail(self, chunk, message: str, *, label: str | None = None) -> None:
        """``chunk`` failed with ``message``, and so does its job (its error: ``label: message``, ``label``
        ``chunk <index>`` by default)."""
        self.chunks.filter(pk=chunk.pk).update(status="failed", error=message[:2000])
        self.fail_job(getattr(chunk, f"{self.parent}_id"), f"{label or f'chunk {chunk.index}'}: {message}")

    def fail_job(self, job_id: int, message: str) -> None:
        """Job ``job_id`` failed with ``message`` (a final job stays as it is)."""
        self.job_model.objects.filter(pk=job_id).exclude(status__in=FINAL_STATES).update(
            status=RunStatus.FAILED, error=message[:4000], finished_at=timezone.now())

    def store_done(self, job_id: int, index: int, fields: dict, *, gather=None) -> tuple[Any, Any]:
        """Write chunk ``index`` of job ``job_id`` done with ``fields`` (its result), keyed by ``(job, index)``,
        under a lock on the job row, then ``gather(job, chunk)`` under the same lock; returns ``(chunk, what
        gather returned)``. Writing the same chunk twice writes the same row twice: nothing is counted twice."""
        with transaction.atomic():
            job = self.job_model.objects.select_for_update().get(pk=job_id)
            done = {**fields, "status": "done", "finished_at": timezone.now(), "error": ""}
            if self._has_progress():
                done["progress"] = 1.0
            chunk, _ = self.chunk_model.objects.update_or_create(**{self.parent: job, "index": index}, defaults=done)
            return chunk, (gather(job, chunk) if gather is not None else None)

    def check_quota(self, owner, *, limit: int, one: str, many: str) -> None:
        """Refuse one more job when ``owner`` already has ``limit`` queued or running (:class:`QuotaExceeded`);
        ``one``/``many``: the job's name in the message ("day plan", "day plans")."""
        active = self.job_model.objects.filter(owner=owner, status__in=UNFINISHED).count()
        if active >= limit:
            raise QuotaExceeded({"non_field_errors": [
                f"You have {active} {one if active == 1 else many} queued or running; the limit per user is "
                f"{limit}. Wait for one to finish or cancel it."]})

    def cancel(self, job, *, user):
        """Cancel a queued or running job (owner only); finished ones are left as they are, finished chunks kept
        (:meth:`cancelled` says which chunks are skipped). Returns the job as it is now."""
        if job.owner_id != getattr(user, "pk", None):
            raise PermissionDenied(f"Only the owner can cancel this {self.noun}.")
        with transaction.atomic():
            locked = self.job_model.objects.select_for_update().get(pk=job.pk)
            if locked.is_final:
                return locked
            locked.status = RunStatus.CANCELLED
            locked.finished_at = timezone.now()
            locked.save(update_fields=["status", "finished_at"])
            self.cancelled(locked)
        return locked
