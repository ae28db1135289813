"""What the broker holds, and sending that survives a broker that lost its keys.

:func:`live_tasks` reads the broker: the ``(task name, args)`` of every message waiting in the work queue
or delivered to a worker and not yet acknowledged. The healer (:mod:`planner.healer`) compares it with the
pending work in the database: a chunk pending with no message anywhere was lost (the issue's Redis lost its
keys, and a sweep showed "running 32/64" for 72 minutes), and is sent again.

- Redis: the queue's lists (one per priority step) and kombu's ``unacked`` hash (messages a worker has
  reserved or is running: acks are late).
- The embedded filesystem broker: the message files of the queue folder. A message a worker has taken
  leaves the folder before it runs, so a message reserved by a live worker looks lost; sending it again is
  harmless (chunks are idempotent; one running elsewhere with a live heartbeat is skipped).
- Any other broker: None (cannot tell; pending work is then never called lost).

:func:`send_task` is Celery's, declaring the queue first when the broker has forgotten it: kombu routes a
message through the Redis set ``_kombu.binding.<queue>``, and when that key is lost it drops what is sent
to the queue without an error (``UndeliverableWarning`` at most), so even work sent again would vanish.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

from kombu import Exchange, Queue

from config.celery import app as celery_app

logger = logging.getLogger(__name__)


def queue_name() -> str:
    """The Celery queue of the planner's tasks (``KVP_SWEEP_QUEUE``, else Celery's default)."""
    from django.conf import settings

    return getattr(settings, "KVP_SWEEP_QUEUE", "") or celery_app.conf.task_default_queue or "celery"


def _task_of(message: Any) -> tuple[str, tuple] | None:
    """``(task name, args)`` of a kombu message (Celery's protocol 2), or None when it is not one."""
    try:
        if isinstance(message, (bytes, str)):
            message = json.loads(message)
        if isinstance(message, list):  # the unacked hash: [message, exchange, routing key]
            message = message[0]
        name = message["headers"]["task"]
        body = message["body"]
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return str(name), tuple(args)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


def _redis_messages(channel, queue: str) -> list:
    client = channel.client
    raw: list = []
    for pri in channel.priority_steps:
        raw += client.lrange(channel._q_for_pri(queue, pri), 0, -1)
    raw += client.hvals(channel.unacked_key)
    return raw


def _filesystem_messages(channel, queue: str) -> list:
    folder = Path(channel.data_folder_in)
    raw = []
    for path in folder.glob(f"*.{queue}.msg"):
        try:
            raw.append(path.read_bytes())
        except OSError:  # taken by a worker meanwhile
            continue
    return raw


def live_tasks() -> set[tuple[str, tuple]] | None:
    """``{(task name, args)}`` of the messages the broker holds for the planner's queue, or None when the
    broker cannot be read that way (or cannot be reached now)."""
    queue = queue_name()
    try:
        with celery_app.connection_for_read() as conn:
            driver = conn.transport.driver_type
            if driver == "redis":
                raw = _redis_messages(conn.default_channel, queue)
            elif driver == "filesystem":
                raw = _filesystem_messages(conn.default_channel, queue)
            else:
                return None
    except Exception:  # noqa: BLE001 - the broker is down: nothing is called lost
        logger.warning("could not read the broker's messages", exc_info=True)
        return None
    return {task for task in map(_task_of, raw) if task is not None}


def declare_queue() -> None:
    """Declare the planner's queue (and its binding) on the broker: a no-op when it exists."""
    name = queue_name()
    with celery_app.connection_for_write() as conn:
        Queue(name, Exchange(name), routing_key=name)(conn.default_channel).declare()


def send_task(name: str, args: list, *, task_id: str) -> None:
    """``celery_app.send_task`` to the planner's queue, after declaring it (see the module docstring)."""
    declare_queue()
    celery_app.send_task(name, args=args, task_id=task_id, queue=queue_name())
