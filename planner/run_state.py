"""What sweeps and searches share: their run states and the slug of their public report.

Kept apart from the models so that both :mod:`planner.models` and :mod:`planner.search.models` can use them
without importing each other.
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
