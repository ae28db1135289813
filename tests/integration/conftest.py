"""Real Celery worker processes for the sweep integration tests (never eager mode).

The worker is ``celery -A tests.integration.celery_app worker``: the project's own
``config.celery`` app, unchanged except for a short Redis ``visibility_timeout`` so a
message left unacknowledged by a killed worker comes back in seconds, not an hour.

The worker must see the rows the test writes, so the tests use ``transactional_db``
and hand the worker the test database: PostgreSQL's ``test_<name>``, or, on SQLite,
a file database (set below, for the whole session, because an in-memory SQLite
database cannot be opened by another process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from django.db import connections

from tests.conftest import redis_key_prefix

ROOT = Path(__file__).resolve().parents[2]

#: The worker-fault tests' healing: a heartbeat every 0.5 s and stalled after 3 s without one (production: every
#: 5 s, stalled after 45 s, so 9 beats missed; here 6), the healer every second (15 s). The test process reads the
#: same threshold (``settings.KVP_STALL_AFTER_S = STALL_AFTER_S``) for the status it shows. (Before: 1 s, 6 s and
#: 3 s; each kill test waited the 6 s of the stall, and each lost-message test two healer ticks, with no worker busy.)
STALL_AFTER_S = 3
FAST_HEAL = {"KVP_HEARTBEAT_S": "0.5", "KVP_STALL_AFTER_S": str(STALL_AFTER_S), "KVP_HEAL_INTERVAL_S": "1"}

_default = connections.databases["default"]
if _default["ENGINE"] == "django.db.backends.sqlite3" and not (_default.get("TEST") or {}).get("NAME"):
    _default.setdefault("TEST", {})["NAME"] = str(Path(tempfile.mkdtemp(prefix="kvp-it-")) / "test.sqlite3")


def database_url() -> str:
    """A DATABASE_URL for the test database as it exists now (call inside a DB test)."""
    s = connections["default"].settings_dict
    if s["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{s['NAME']}"
    if s["ENGINE"] == "django.db.backends.postgresql":
        auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    pytest.skip(f"no worker test for database engine {s['ENGINE']}")


class Worker:
    """One ``celery worker`` subprocess on a private queue; its log goes to a file."""

    def __init__(self, *, queue: str, redis_url: str, db_url: str, log: Path, concurrency: int = 1,
                 data_dir: Path | None = None, visibility_timeout: int = 6, env: dict | None = None):
        # redis_url "" means the embedded filesystem broker under ``data_dir`` (KVP_DATA_DIR).
        env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": redis_url, "DEBUG": "false",
               "PYTHONPATH": str(ROOT), "KVP_TEST_VISIBILITY_TIMEOUT": str(visibility_timeout),
               "KVP_SWEEP_QUEUE": queue, "KVP_TEST_REDIS_PREFIX": redis_key_prefix(), **(env or {})}
        if data_dir is not None:
            env["KVP_DATA_DIR"] = str(data_dir)
        self.log = log
        self._fh = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.integration.celery_app", "worker", "-Q", queue,
             "--concurrency", str(concurrency), "--pool", "prefork", "--loglevel", "INFO", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-n", f"kvp-it-{uuid.uuid4().hex[:8]}@%h"],
            cwd=ROOT, env=env, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children): nothing is acknowledged."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def freeze(self) -> None:
        """SIGSTOP the whole worker: it writes nothing until ``thaw`` or ``kill``."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def end(self) -> None:
        """At a test's end: SIGKILL, no warm shutdown (SIGTERM took 2-5 s for one, and nothing reads it then:
        the queue is the test's own and the broker's keys go at the session's end), and close the log."""
        self.kill()
        self._fh.close()

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


@pytest.fixture
def worker_factory(redis_url, transactional_db, settings, tmp_path):
    """Start real workers on a private queue; every one is killed at the end (:meth:`Worker.end`)."""
    queue = f"kvp-it-{uuid.uuid4().hex[:10]}"
    settings.KVP_SWEEP_QUEUE = queue
    db_url = database_url()
    started: list[Worker] = []

    def start(**kw) -> Worker:
        w = Worker(queue=queue, redis_url=redis_url, db_url=db_url, log=tmp_path / f"worker{len(started)}.log", **kw)
        started.append(w)
        return w

    start.queue = queue
    yield start
    for w in started:
        w.end()


def wait_for(predicate, *, timeout: float, interval: float = 0.2, what: str = "condition", logs=()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    detail = "\n".join(w.tail() for w in logs)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{detail}")


@pytest.fixture
def sender_on_redis(redis_url):
    """Point this process's Celery producer at Redis (the workers' broker), whatever REDIS_URL says, under
    this xdist worker's key prefix, as its workers (``tests.conftest.redis_key_prefix``)."""
    from config.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options)

    def reset_pools():  # new connections and producers for the new broker URL (old ones are left to GC)
        app._pool = None
        app.amqp._producer_pool = None

    app.conf.broker_url = redis_url
    app.conf.broker_transport_options = {"visibility_timeout": 6, "global_keyprefix": redis_key_prefix()}
    reset_pools()
    yield app
    app.conf.broker_url, app.conf.broker_transport_options = saved
    reset_pools()


@pytest.fixture
def filesystem_worker(transactional_db, settings, tmp_path):
    """The embedded default: a real worker and this process both on the filesystem broker (no Redis)."""
    from config.celery import app

    queue = f"kvp-it-{uuid.uuid4().hex[:10]}"
    settings.KVP_SWEEP_QUEUE = queue
    data_dir = tmp_path / "data"
    broker = data_dir / "broker"
    for sub in ("queue", "processed", "control"):
        (broker / sub).mkdir(parents=True)
    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url = "filesystem://"
    app.conf.broker_transport_options = {
        "data_folder_in": str(broker / "queue"),
        "data_folder_out": str(broker / "queue"),
        "processed_folder": str(broker / "processed"),
        "control_folder": str(broker / "control"),
        "store_processed": False,
    }
    app._pool = None
    app.amqp._producer_pool = None
    worker = Worker(queue=queue, redis_url="", db_url=database_url(), log=tmp_path / "worker.log",
                    concurrency=1, data_dir=data_dir)
    yield worker
    worker.end()
    app.conf.broker_url, app.conf.broker_transport_options = saved
    app._pool = None
    app.amqp._producer_pool = None
