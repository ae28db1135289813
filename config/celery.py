"""The Celery application; configuration comes from Django settings (``CELERY_*``).

Two worker hooks hold the workers under faults (issue 23):

- each pool process runs under an address-space limit (``KVP_WORKER_MAX_BYTES``,
  ``setrlimit(RLIMIT_AS)``), so a run that allocates past it raises ``MemoryError``
  in that process, which fails its chunk with a message, instead of the kernel
  killing a process of the host;
- the main process checks every ``KVP_HEAL_INTERVAL_S`` seconds for chunks whose
  worker died (a stopped heartbeat) and sends them again: :mod:`planner.healer`,
  registered when the worker imports ``planner.tasks``.
"""

import logging
import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("kvplanner")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)


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
