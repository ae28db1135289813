"""Runs that a web request priced over ``KVP_INLINE_MAX_SECONDS`` handed to the workers (issue 37).

A :class:`Run` is one simulation, replicas search or calibration fit made through ``/api/simulations/``,
``/api/replicas/``, ``/replicas/``, ``/api/calibrations/`` or ``/calibrations/`` whose price says it would hold
the request longer than the bound: it keeps the input as sent (``definition``), its price, and once done the
answer the request would have given (``result``). It is a one-chunk job of the one job lifecycle
(:mod:`planner.jobs`): its :class:`RunChunk` is claimed, heartbeated, healed and stored like a sweep's.

``owner`` is the signed-in user, or null for the replicas page's anonymous visitors: such a run is reached only
through its ``token`` (an unguessable secret in its URL), and counted against ``client`` (the address the
request came from) for the queue quota.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from planner.run_state import ChunkRecord, JobRecord, new_report_slug


class Run(JobRecord):
    class Kind(models.TextChoices):
        SIMULATION = "simulation", "Simulation"
        REPLICAS = "replicas", "Replicas search"
        REPLICAS_PAGE = "replicas-page", "Replicas search (page)"
        CALIBRATION = "calibration", "Calibration"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True,
                              related_name="runs")
    #: The throttling key of whoever made it (``user-<id>`` or ``ip-<address>``): the quota counts by it.
    client = models.CharField(max_length=120, db_index=True)
    token = models.CharField(max_length=32, unique=True, default=new_report_slug, editable=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    #: What the request sent (its body, or what the page built from its form).
    definition = models.JSONField()
    #: Estimated seconds (``simulator.batch.budget``) the run was priced at.
    price_s = models.FloatField()
    #: The answer, exactly the body the synchronous request would have returned.
    result = models.JSONField(null=True, blank=True)

    class Meta:
        app_label = "planner"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.pk}"


class RunChunk(ChunkRecord):
    """The run's one chunk in the job lifecycle (claim, heartbeat, attempts, progress)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField(default=0)  # one chunk: 0
    progress = models.FloatField(default=0.0)

    class Meta:
        app_label = "planner"
        ordering = ["run_id", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runchunk_unique_index")]

    def __str__(self) -> str:
        return f"Run {self.run_id} chunk {self.index}"
