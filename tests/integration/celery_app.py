"""The project's Celery app for worker subprocesses in the integration tests.

Identical to ``config.celery.app`` except for the Redis ``visibility_timeout``
(``KVP_TEST_VISIBILITY_TIMEOUT`` seconds): with late acknowledgement, a task
whose worker was SIGKILLed stays unacknowledged and Redis hands it to another
worker once this timeout passes (an hour in production settings); and a key prefix
(``KVP_TEST_REDIS_PREFIX``, one per xdist worker) under which all its broker keys live,
so that the tests of the two xdist workers never see each other's queues or unacked messages.
"""

import os

from config.celery import app

app.conf.broker_transport_options = {
    **(app.conf.broker_transport_options or {}),
    "visibility_timeout": int(os.environ.get("KVP_TEST_VISIBILITY_TIMEOUT", "6")),
    # Scan for abandoned messages every second (kombu's default is 10 s x a throttle of 10 scans).
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
    "global_keyprefix": os.environ.get("KVP_TEST_REDIS_PREFIX", ""),
}

__all__ = ["app"]
