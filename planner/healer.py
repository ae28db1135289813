"""The worker's healer: every ``KVP_HEAL_INTERVAL_S`` seconds its main process sends again the work whose
worker died (a stopped heartbeat, :mod:`planner.jobs.heartbeat`; the healing is the job lifecycle's,
:mod:`planner.jobs.healing`): grid chunks and cliff searches of sweeps
(:func:`planner.sweeps.stalls.chunks_heal`), chunks of deployment searches
(:func:`planner.search.stalls.chunks_heal`), of day plans (:func:`planner.dayplans.stalls.chunks_heal`) and of runs
handed over by web requests (:func:`planner.runs.stalls.chunks_heal`); and the work of sweeps, searches, runs and day
plans whose message was lost (:class:`LostMessages`).

The healing rule (docs/operations.md, "Stalls are seen and healed"): work that is **running** with no
heartbeat for ``KVP_STALL_AFTER_S`` is put back to pending and sent again; work that is **pending** (or a
cliff search with no round active) with **no message in the broker** at two checks in a row (one
``KVP_HEAL_INTERVAL_S`` apart: a message between the queue and a worker is never missed twice) is sent
again, its queue declared first. So a chunk pending or running with no live message and no heartbeat is
sent again within ``KVP_STALL_AFTER_S`` plus two ticks: under a minute with the defaults (45 s, 15 s) for
running work, 15-30 s for pending work.

Registered on Celery's ``worker_ready`` signal when the worker imports :mod:`planner.tasks`; web processes never
start it.
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection

from planner import broker_messages
from planner.dayplans import stalls as dayplan_stalls
from planner.runs import stalls as run_stalls
from planner.search import stalls as search_stalls
from planner.sweeps import stalls as sweep_stalls

logger = logging.getLogger(__name__)
_healer_stop = threading.Event()


class LostMessages:
    """Work whose message the broker does not hold at two checks in a row is sent again (see the module)."""

    def __init__(self) -> None:
        self.suspects: set[tuple] = set()

    def tick(self) -> int:
        """One check; returns how many tasks were sent again."""
        live = broker_messages.live_tasks()  # (read before the database: work created meanwhile is not lost)
        if live is None:
            self.suspects = set()
            return 0
        lost = {**sweep_stalls.lost_messages(live), **search_stalls.lost_messages(live),
                **run_stalls.lost_messages(live), **dayplan_stalls.lost_messages(live)}
        sent = [key for key in lost if key in self.suspects]
        for key in sent:
            logger.warning("%s %s: no message in the broker at two checks, sent again", key[0], key[1:])
            lost[key]()
        self.suspects = set(lost) - set(sent)
        return len(sent)


def _heal_forever(interval_s: float) -> None:
    lost = LostMessages()
    while not _healer_stop.wait(interval_s):
        for what, heal in (("sweep", sweep_stalls.chunks_heal), ("search", search_stalls.chunks_heal),
                           ("day plan", dayplan_stalls.chunks_heal), ("run", run_stalls.chunks_heal),
                           ("lost", lost.tick)):
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
