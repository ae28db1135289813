"""What every chunked job shares: its run states, the slug of its public report, and the fields of a job and of a
chunk in the job lifecycle (:mod:`planner.jobs`).

Kept apart from the models so that :mod:`planner.models` (sweeps), :mod:`planner.search.models`,
:mod:`planner.dayplans.models` and :mod:`planner.runs.models` can use them without importing each other.
"""

from __future__ import annotations

import secrets

from django.db import models


def new_report_slug() -> str:
    """An unguessable permalink slug (128 bits, URL-safe)."""
    return secrets.token_urlsafe(16)


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


#: States a sweep or search never leaves.
FINAL_STATES = (RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED)


class JobRecord(models.Model):
    """A job of the lifecycle (a sweep, a search, a day plan, a run): its state, why it failed, and when it was
    made, started and finished. Each kind adds its definition, snapshot and result."""

    Status = RunStatus
    FINAL_STATES = FINAL_STATES

    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATES


class ChunkRecord(models.Model):
    """A chunk of a job, as the lifecycle claims, runs and heals it: the Celery task sent for it, how many times
    it was claimed, the heartbeat a running chunk stamps (planner/jobs/heartbeat.py), why it failed, and when it
    started and finished, its place in the job and its state (``"pending"`` until claimed; a kind may declare the
    choices). Each kind adds what the chunk holds (and ``progress`` where it reports one: a day plan's chunk does
    not, so the field is not here)."""

    index = models.PositiveIntegerField()
    status = models.CharField(max_length=10, default="pending")
    task_id = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)  # stamped while running: stalls are seen by it
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
