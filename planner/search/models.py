"""Deployment searches and their chunks (one chunk per GPU type, run by a Celery worker).

A :class:`Search` keeps the definition as sent, a snapshot of every input it
resolved (copies of the model and GPU specs: editing a profile later changes
nothing), and once done the gathered result. A finished search *is* its
report: immutable, public at ``/searches/r/<slug>/`` with an unguessable slug.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from planner.run_state import ChunkRecord, JobRecord, new_report_slug


class Search(JobRecord):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="searches")
    name = models.CharField(max_length=200, blank=True)
    definition = models.JSONField()
    #: Resolved inputs: model and GPU specs (copies), workload, SLO, space.
    snapshot = models.JSONField()
    total_candidates = models.PositiveIntegerField()
    num_chunks = models.PositiveIntegerField(default=0)
    #: ``simulator.search.deployments.SearchResult.to_dict()`` of all chunks gathered, once done.
    result = models.JSONField(null=True, blank=True)
    slug = models.CharField(max_length=32, unique=True, default=new_report_slug, editable=False)

    class Meta:
        app_label = "planner"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"Search {self.pk}"


class SearchChunk(ChunkRecord):
    """The candidates of one GPU type, searched as one unit by one task."""

    Status = models.TextChoices("Status", "pending running done failed skipped")

    search = models.ForeignKey(Search, on_delete=models.CASCADE, related_name="chunks")
    candidates = models.JSONField()  # indices into the space's candidates
    #: ``[least cost per hour, estimated seconds of one simulation]`` of each shape of the chunk that will be
    #: simulated (``planner/search/pricing.SearchPrice.shapes``), for the time left while the search runs.
    shapes = models.JSONField(default=list, blank=True)
    #: The best answer's cost per hour (USD) known when the chunk started: its dearer shapes were skipped.
    cost_bound = models.FloatField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    progress = models.FloatField(default=0.0)

    class Meta:
        app_label = "planner"
        ordering = ["search_id", "index"]
        constraints = [models.UniqueConstraint(fields=["search", "index"], name="searchchunk_unique_index")]
