"""Day plans (issue 36): a day of traffic replayed against an autoscaling policy, priced, one chunk at a time.

A :class:`DayPlan` keeps the definition as sent, a snapshot of every input it resolved (copies of the model
and GPU specs, the engine configuration, the workload, the policy, the cold start, the price), and once every
chunk is stored the answer (:meth:`simulator.day.DayAnswer.to_dict` with the fleet over time). A
:class:`DayPlanChunk` is one span of the day (``chunk_s`` seconds with ``overlap_s`` either side,
:func:`simulator.day.chunk_plans`): it is run by one Celery task, from the previous chunk's handover, and
stored once done as :meth:`simulator.day.DayChunk.to_dict`, so a finished chunk survives any later crash.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from planner.run_state import ChunkRecord, JobRecord


class DayPlan(JobRecord):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="day_plans")
    name = models.CharField(max_length=200, blank=True)
    #: The definition as the user sent it (a trace's text replaced by a note of its size).
    definition = models.JSONField()
    #: Resolved inputs (planner/dayplans/definition.py): never re-read from profiles.
    snapshot = models.JSONField()
    num_chunks = models.PositiveIntegerField()
    #: Seconds of traffic the plan covers (first arrival at 0 to the last arrival).
    span_s = models.FloatField(default=0.0)
    #: ``DayAnswer.to_dict()`` plus ``fleet`` (columns over time) and ``chunks_done``; once every chunk is
    #: stored, or for a cancelled plan the answer of its finished chunks (``partial``: true).
    answer = models.JSONField(null=True, blank=True)

    class Meta:
        app_label = "planner"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"Day plan {self.pk}"


class DayPlanChunk(ChunkRecord):
    """One span of the day, simulated by one task from the previous chunk's handover."""

    Status = models.TextChoices("Status", "pending running done failed skipped")

    plan = models.ForeignKey(DayPlan, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=10, default="pending")
    #: Seconds of the day this chunk reports: ``[start_s, end_s)`` (``end_s`` null for the last chunk).
    start_s = models.FloatField()
    end_s = models.FloatField(null=True, blank=True)
    #: ``simulator.day.DayChunk.to_dict()`` once done (its requests' columns, billed pods, fleet samples and
    #: the handover the next chunk starts from).
    result = models.JSONField(null=True, blank=True)
    #: ``simulator.day.Handover.to_dict()`` for the next chunk, written as soon as this chunk's run knows it
    #: (before its cool-down ends, before it is stored): the next chunk starts from it meanwhile.
    handover = models.JSONField(null=True, blank=True)
    #: The handover this chunk's run started from (written when it starts; for the speculative chain's first
    #: chunk the lead-in's guess): its result is kept only while this equals the previous chunk's ``handover``.
    started_from = models.JSONField(null=True, blank=True)

    class Meta:
        app_label = "planner"
        ordering = ["plan_id", "index"]
        constraints = [models.UniqueConstraint(fields=["plan", "index"], name="dayplanchunk_unique_index")]

    def __str__(self) -> str:
        return f"Day plan {self.plan_id} chunk {self.index}"
