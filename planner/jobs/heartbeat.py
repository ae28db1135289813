"""Heartbeats of running chunks (sweep chunks, cliff rounds, search chunks, day-plan chunks) and the test for a stall.

A worker stamps ``heartbeat_at`` on the row it runs every ``KVP_HEARTBEAT_S`` seconds (:func:`heartbeat_s`),
from a thread (so a long simulation step without a progress callback still looks
alive). A running row whose stamp is older than ``KVP_STALL_AFTER_S`` lost its worker
(killed as a whole, out of memory, ``docker stop`` past its grace): the healer
(:mod:`planner.healer`, :mod:`planner.jobs.healing`) sends its task again, and the status pages say
"stalled" meanwhile. A row sent again more than :data:`MAX_CHUNK_ATTEMPTS` times fails with a
message instead of running again (:meth:`planner.jobs.ChunkedJob.claim`).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

logger = logging.getLogger(__name__)

#: Seconds between heartbeats of running work, unless ``KVP_HEARTBEAT_S`` says otherwise.
HEARTBEAT_S = 5.0
#: Work whose worker died this many times fails instead of running again.
MAX_CHUNK_ATTEMPTS = 3


def heartbeat_s() -> float:
    """Seconds between heartbeats of running work (``KVP_HEARTBEAT_S``; keep it well under ``KVP_STALL_AFTER_S``)."""
    return float(getattr(settings, "KVP_HEARTBEAT_S", HEARTBEAT_S))


def stall_after_s() -> float:
    """Seconds without a heartbeat after which running work counts as stalled (``KVP_STALL_AFTER_S``)."""
    return float(getattr(settings, "KVP_STALL_AFTER_S", 45))


def is_stalled(heartbeat_at: datetime | None, now: datetime | None = None) -> bool:
    """True when a heartbeat is missing or older than :func:`stall_after_s`."""
    now = now or timezone.now()
    return heartbeat_at is None or (now - heartbeat_at).total_seconds() > stall_after_s()


def stale_running(queryset: models.QuerySet, *, now: datetime | None = None) -> models.QuerySet:
    """The rows of ``queryset`` (chunks with ``status``, ``heartbeat_at``, ``started_at``) running without a
    heartbeat for longer than :func:`stall_after_s`."""
    cutoff = (now or timezone.now()) - timezone.timedelta(seconds=stall_after_s())
    return queryset.filter(status="running").filter(
        models.Q(heartbeat_at__lt=cutoff) | models.Q(heartbeat_at__isnull=True, started_at__lt=cutoff))


def gave_up_message(attempts: int) -> str:
    """What failed work says when it was sent again :data:`MAX_CHUNK_ATTEMPTS` times."""
    return (f"gave up after {attempts} attempts: the worker running this chunk stopped each time "
            "(killed, or out of memory)")


class Heartbeat:
    """``with Heartbeat(SweepChunk, pk):`` stamps the row's ``heartbeat_at`` every :func:`heartbeat_s` s."""

    def __init__(self, model: type[models.Model], pk: int) -> None:
        self.model, self.pk = model, pk
        self._stop = threading.Event()
        self._every_s = heartbeat_s()
        self._thread = threading.Thread(target=self._beat, name=f"{model.__name__}-{pk}-heartbeat", daemon=True)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self._every_s):
                self.model.objects.filter(pk=self.pk).update(heartbeat_at=timezone.now())
        except Exception:  # noqa: BLE001 - a missed beat only makes the work look stalled sooner
            logger.warning("heartbeat of %s %s stopped", self.model.__name__, self.pk, exc_info=True)
        finally:
            connection.close()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self._every_s)
