"""Empty this test process's cache without touching anyone else's keys.

With ``REDIS_URL`` set the cache is Redis, shared by both xdist workers (and Celery's broker keys
live in the same database): ``cache.clear()`` would flush them all. Each test process gets its own
key prefix (``KVP_CACHE_KEY_PREFIX``, set in ``tests/testenv.py``) and deletes only its keys.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache


def reset_cache() -> None:
    options = settings.CACHES["default"]
    if not options["BACKEND"].endswith("RedisCache"):
        cache.clear()  # the file cache is this process's own directory
        return
    client = cache._cache.get_client(write=True)
    keys = list(client.scan_iter(match=f"{options['KEY_PREFIX']}:*"))
    if keys:
        client.delete(*keys)
