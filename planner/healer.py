"""The worker's healer: every ``KVP_HEAL_INTERVAL_S`` seconds its main process sends again the work whose
worker died (a stopped heartbeat, :mod:`planner.heartbeat`): grid chunks and cliff searches of sweeps
(:func:`planner.sweeps.stalls.chunks_heal`), chunks of deployment searches
(:func:`planner.search.stalls.chunks_heal`) and of day plans (:func:`planner.dayplans.stalls.chunks_heal`).

Registered on Celery's ``worker_ready`` signal when the worker imports :mod:`planner.tasks`; web processes never
start it.
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection

from planner.dayplans import stalls as dayplan_stalls
from planner.search import stalls as search_stalls
from planner.sweeps import stalls as sweep_stalls

logger = logging.getLogger(__name__)
_healer_stop = threading.Event()


def _heal_forever(interval_s: float) -> None:
    while not _healer_stop.wait(interval_s):
        for what, heal in (("sweep", sweep_stalls.chunks_heal), ("search", search_stalls.chunks_heal),
                           ("day plan", dayplan_stalls.chunks_heal)):
            try:
                sent = heal()
                if sent:
                    logger.warning("sent %d %s task(s) again after a worker stopped", sent, what)
            except Exception:  # noqa: BLE001 - try again at the next tick
                logger.exception("healing stalled %s work failed", what)
        connection.close()


@worker_ready.connect
def start_healer(**_kwargs) -> None:
    interval = float(getattr(settings, "KVP_HEAL_INTERVAL_S", 15.0))
    if interval > 0:
        threading.Thread(target=_heal_forever, args=(interval,), name="kvp-heal-stalled", daemon=True).start()


@worker_shutdown.connect
def stop_healer(**_kwargs) -> None:
    _healer_stop.set()
