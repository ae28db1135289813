"""The Celery application; configuration comes from Django settings (``CELERY_*``).

Two worker hooks hold the workers under faults (issue 23):

- each pool process runs under an address-space limit (``KVP_WORKER_MAX_BYTES``,
  ``setrlimit(RLIMIT_AS)``), so a run that allocates past it raises ``MemoryError``
  in that process, which fails its chunk with a message, instead of the kernel
  killing a process of the host;
- the main process checks every ``KVP_HEAL_INTERVAL_S`` seconds for chunks whose
  worker died (a stopped heartbeat) and sends them again
  (:func:`planner.sweeps.services.chunks_heal`).
"""

import logging
import os
import threading

from celery import Celery
from celery.signals import worker_process_init, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("kvplanner")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)
_healer_stop = threading.Event()


@worker_process_init.connect
def limit_memory(**_kwargs) -> None:
    """Cap this pool process's address space (no effect where ``resource`` is missing or the cap is 0)."""
    from django.conf import settings

    limit = int(getattr(settings, "KVP_WORKER_MAX_BYTES", 0) or 0)
    if limit <= 0:
        return
    try:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ImportError, ValueError, OSError):
        logger.warning("could not set the worker's memory limit to %s bytes", limit)


def _heal_forever(interval_s: float) -> None:
    from django.db import connection

    from planner.sweeps.services import chunks_heal

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
    from django.conf import settings

    interval = float(getattr(settings, "KVP_HEAL_INTERVAL_S", 15.0))
    if interval > 0:
        threading.Thread(target=_heal_forever, args=(interval,), name="kvp-heal-stalled", daemon=True).start()


@worker_shutdown.connect
def stop_healer(**_kwargs) -> None:
    _healer_stop.set()
