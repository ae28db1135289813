"""Throttle counters are exact across processes and slide with time (issue 37 item 6; config.throttling.hit).

The anonymous limit let 796-831 requests through in a minute against 600: DRF's throttles keep a list of
request times in the cache and write it back, so gunicorn workers overwrote each other's counts. Now every
limit is a shared atomic counter (Redis INCR), checked after counting and taken back when over.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from config import throttling
from tests.cache_reset import reset_cache


@pytest.fixture
def clock(monkeypatch):
    now = SimpleNamespace(t=1_800_000_002.0)
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: now.t))
    reset_cache()
    yield now
    reset_cache()


def test_the_window_slides_and_refusals_cost_nothing(clock):
    admitted = [throttling.hit("slide", "c1", "3/min") is None for _ in range(5)]
    assert admitted == [True, True, True, False, False]
    clock.t += 58  # a fixed one-minute window would have started afresh here (its boundary is crossed)
    assert throttling.hit("slide", "c1", "3/min") is not None
    clock.t += 8  # 66 s after the three: they have left the window
    assert [throttling.hit("slide", "c1", "3/min") is None for _ in range(4)] == [True, True, True, False]
    assert throttling.hit("slide", "c2", "3/min") is None  # another client counts on its own


def test_retry_after_is_when_there_is_room_again(clock):
    for _ in range(2):
        throttling.hit("wait", "c", "2/min")
    wait = throttling.hit("wait", "c", "2/min")
    assert wait is not None and 55 <= wait <= 66
    clock.t += wait
    assert throttling.hit("wait", "c", "2/min") is None


WORKER = """
import django, sys
django.setup()
from config.throttling import hit
print("ready", flush=True)
sys.stdin.readline()  # start together
print(sum(hit("exact", "one-client", "{rate}") is None for _ in range({tries})))
"""


def test_concurrent_processes_admit_exactly_the_limit(redis_url):
    """Six processes (as gunicorn's workers) send 600 requests at once against 200/min on the shared Redis:
    exactly 200 are admitted."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "REDIS_URL": redis_url,
           "KVP_CACHE_KEY_PREFIX": f"kvp-test-exact-{os.getpid()}"}
    code = WORKER.replace("{rate}", "200/min").replace("{tries}", "100")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(6)]
    try:
        for p in procs:  # each has imported Django (and none has counted) before any starts
            assert p.stdout.readline() == "ready\n", p.stderr.read()[-500:]
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
        import redis

        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{env['KVP_CACHE_KEY_PREFIX']}:*"))
        if keys:
            client.delete(*keys)
    assert all(p.returncode == 0 for p in procs), [err[-500:] for _, err in outs]
    assert sum(int(out.strip().splitlines()[-1]) for out, _ in outs) == 200
