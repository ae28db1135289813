"""Sweeps, their chunks of results, and shareable reports.

A :class:`Sweep` is a user's request to simulate one base scenario over one or
two axes (a grid) or to find a cliff by bisection. At creation every point is
resolved into a plain engine configuration and a workload variant, stored in
:class:`SweepChunk` rows: a chunk is the unit of work a Celery worker runs as
ONE batched ``simulator.batch.runner.simulate`` call. Chunk results are written once,
keyed by ``(sweep, index)``, so a chunk re-run after a worker crash replaces
nothing twice.

A :class:`Report` is an immutable snapshot of a finished sweep: copies of the
model and GPU profiles, every parameter and every result, reachable by an
unguessable slug without signing in.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from planner.run_state import ChunkRecord, JobRecord, new_report_slug


class Sweep(JobRecord):
    class Mode(models.TextChoices):
        GRID = "grid", "Grid"
        CLIFF = "cliff", "Find the cliff"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sweeps")
    name = models.CharField(max_length=200, blank=True)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.GRID)
    #: The definition as the user sent it, normalized (see planner.sweeps.definition).
    definition = models.JSONField()
    #: Resolved inputs: copies of the model and GPU specs, the base sizing, the
    #: base engine config and the workload definition. Never re-read from profiles.
    snapshot = models.JSONField()
    total_points = models.PositiveIntegerField()  # points planned (cliff: an upper bound until done)
    points_done = models.PositiveIntegerField(default=0)
    num_chunks = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"Sweep {self.pk}"


class SweepChunk(ChunkRecord):
    """One batched simulation: the points of a sweep that share a workload."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Skipped"  # sweep cancelled before it ran

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="chunks")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    #: The workload variant all points of this chunk run on (see planner.sweeps.points.workload_for).
    workload = models.JSONField()
    #: ``[{"index", "params", "config", "meta"}]``: one entry per point.
    points = models.JSONField()
    #: ``[{"index", "params", "meta", "metrics", "totals", "series"}]`` once done.
    results = models.JSONField(null=True, blank=True)
    progress = models.FloatField(default=0.0)  # fraction of this chunk's simulation done, 0..1

    class Meta:
        ordering = ["sweep_id", "index"]
        constraints = [models.UniqueConstraint(fields=["sweep", "index"], name="sweepchunk_unique_index")]

    def __str__(self) -> str:
        return f"Sweep {self.sweep_id} chunk {self.index}"


class Report(models.Model):
    """An immutable, shareable snapshot of a finished sweep."""

    slug = models.CharField(max_length=32, unique=True, default=new_report_slug, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reports")
    sweep = models.OneToOneField(Sweep, on_delete=models.SET_NULL, null=True, blank=True, related_name="report")
    title = models.CharField(max_length=200)
    #: ``{"definition", "inputs", "points": [...], "cliff", "advice", "created"}``: everything the
    #: report shows, copied at creation. Nothing here refers to a live profile row.
    snapshot = models.JSONField()
    #: ``[[id, title, figure dict], ...]`` built once from ``snapshot`` (the report never changes,
    #: so neither do its figures); the page then only serializes them.
    figures = models.JSONField(null=True, blank=True, editable=False)
    #: ``{"version", "cliff", "operating_point", "replicas", "saturation", "headline"}``: what the report
    #: concludes, computed once at creation (``planner.sweeps.findings``); the advice, figures, page and downloads
    #: read it. Null for a report made before it existed: computed from ``snapshot`` when first read, then stored.
    findings = models.JSONField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title


from planner.dayplans.models import DayPlan, DayPlanChunk  # noqa: E402, F401  (day plans, planner/dayplans/)
from planner.runs.models import Run, RunChunk  # noqa: E402, F401  (runs handed to workers, planner/runs/)
from planner.search.models import Search, SearchChunk  # noqa: E402, F401  (deployment searches, planner/search/)
