"""The worker's healer: every ``KVP_HEAL_INTERVAL_S`` seconds its main process sends again the sweep chunks
whose worker died (a stopped heartbeat, :func:`planner.sweeps.services.chunks_heal`).

Registered on Celery's ``worker_ready`` signal when the worker imports :mod:`planner.tasks`; web processes never
start it.
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection

from planner.sweeps.services import chunks_heal

logger = logging.getLogger(__name__)
_healer_stop = threading.Event()


def _heal_forever(interval_s: float) -> None:
    while not _healer_stop.wait(interval_s):
        try:
            sent = chunks_heal()
            if sent:
                logger.warning("sent %d sweep chunk(s) again after a worker stopped", sent)
        except Exception:  # noqa: BLE001 - try again at the next tick
            logger.exception("healing stalled sweep chunks failed")
        finally:
            connection.close()


@worker_ready.connect
def start_healer(**_kwargs) -> None:
    interval = float(getattr(settings, "KVP_HEAL_INTERVAL_S", 15.0))
    if interval > 0:
        threading.Thread(target=_heal_forever, args=(interval,), name="kvp-heal-stalled", daemon=True).start()


@worker_shutdown.connect
def stop_healer(**_kwargs) -> None:
    _healer_stop.set()
