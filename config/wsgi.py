"""WSGI entry point (gunicorn config.wsgi).

``KVP_WEB_MAX_BYTES`` (bytes, unset or 0: no limit) caps the address space of each
process that loads this module: gunicorn loads it in every worker after the fork,
so one web worker that allocates past it gets a ``MemoryError`` (a logged 500 for
that request) instead of the host's out-of-memory killer. Simulations made inside a
request run in a child process under ``KVP_WORKER_MAX_BYTES`` anyway
(``planner/sweeps/bounded.py``); this is the backstop for everything else.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def _limit_memory() -> None:
    limit = int(os.environ.get("KVP_WEB_MAX_BYTES", "0") or 0)
    if limit <= 0:
        return
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


_limit_memory()
application = get_wsgi_application()
