"""Issue 37 item 3: the broker loses its keys mid-job, and the sweep or search still finishes, with the same result.

After Redis lost its keys, a sweep showed "running 32/64" for over 72 minutes: the healer sent again only
running chunks whose heartbeat stopped, never pending chunks whose message was gone, and kombu drops what is
sent to a queue whose binding key was lost. Here a real worker runs a grid sweep (four chunks) and a deployment
search (three chunks) on a real Redis; while the first chunk runs, every key of the broker is deleted (the
queue's lists, the unacked hash and its index, kombu's bindings): the messages of the pending chunks are gone.
The worker's healer (every second here; 15 s by default) finds the pending chunks with no message at two checks
in a row and sends them again, declaring the queue first. The run must finish within two minutes of the flush
with a result identical to an undisturbed run (the production visibility timeout, 900 s, is kept: nothing
comes back from Redis's own redelivery).

Run with your own Redis database: ``REDIS_URL=redis://127.0.0.1:6379/<n>``.
"""

from __future__ import annotations

import time

import pytest
import redis
from django.contrib.auth import get_user_model

from gpuprofiles.catalog import load_catalog
from gpuprofiles.models import GpuProfile, ModelProfile
from planner.dayplans.api import EXAMPLE_DAY_PLAN
from planner.models import SweepChunk
from planner.search import services as search_services
from planner.search.models import SearchChunk
from planner.sweeps import services
from tests.conftest import redis_key_prefix

from .conftest import FAST_HEAL, wait_for
from .test_worker_faults import DEFINITION, SEARCH, _answer, _finished, _report_body

pytestmark = pytest.mark.integration


def flush_broker(redis_url: str, queue: str) -> int:
    """Delete every key the broker keeps (the issue's "the broker's keys were lost"); returns how many.

    Only this xdist worker's broker keys (``redis_key_prefix``): the suite's cache shares the database (keys
    under its own prefix), and so does the other xdist worker's broker."""
    client = redis.Redis.from_url(redis_url)
    prefix = redis_key_prefix()
    keys = [*client.scan_iter(match=f"{prefix}{queue}*"), *client.scan_iter(match=f"{prefix}_kombu.binding*"),
            *client.scan_iter(match=f"{prefix}unacked*")]
    if keys:
        client.delete(*keys)
    client.close()
    return len(keys)


def _run_with_flush(worker_factory, redis_url, create, chunks, *, what: str):
    """``create()`` once undisturbed, then again on the same worker with the broker flushed while its first chunk runs. Returns
    ``(undisturbed, flushed run, seconds from the flush to the end, pending chunks at the flush)``."""
    calm = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    undisturbed = create()
    wait_for(_finished(undisturbed), timeout=240, what=f"the undisturbed {what}", logs=[calm])
    assert undisturbed.status == "done", undisturbed.error

    worker = calm  # one worker for both runs
    run = create()
    wait_for(lambda: chunks(run).filter(status="running").exists(), timeout=120, interval=0.05,
             what=f"the {what}'s first chunk running", logs=[worker])
    assert flush_broker(redis_url, worker_factory.queue) > 0
    flushed_at = time.monotonic()
    pending = chunks(run).filter(status="pending").count()
    assert pending, f"every chunk of the {what} had started before the flush: nothing was lost"
    wait_for(_finished(run), timeout=120, interval=0.5, what=f"the {what} to finish after the flush",
             logs=[worker])
    took = time.monotonic() - flushed_at
    assert run.status == "done", run.error
    assert "sent again" in worker.tail(), worker.tail()
    return undisturbed, run, took, pending


def test_a_sweep_finishes_after_the_broker_lost_its_keys(worker_factory, sender_on_redis, redis_url, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 1
    user = get_user_model().objects.create_user("flush", password="pw-123456789")
    undisturbed, sweep, took, pending = _run_with_flush(
        worker_factory, redis_url, lambda: services.sweep_create(owner=user, definition=DEFINITION),
        lambda s: SweepChunk.objects.filter(sweep=s), what="sweep")
    assert _report_body(sweep) == _report_body(undisturbed)
    assert took < 120, took
    print(f"\nbroker flush: sweep finished {took:.1f} s after the flush ({pending} chunks' messages lost)")


def test_a_search_finishes_after_the_broker_lost_its_keys(worker_factory, sender_on_redis, redis_url, settings):
    load_catalog(GpuProfile, ModelProfile)  # a transactional test before this one flushed the catalog
    user = get_user_model().objects.create_user("flush-search", password="pw-123456789")
    undisturbed, search, took, pending = _run_with_flush(
        worker_factory, redis_url, lambda: search_services.search_create(owner=user, definition=SEARCH),
        lambda s: SearchChunk.objects.filter(search=s), what="search")
    assert _answer(search.result) == _answer(undisturbed.result)
    assert took < 120, took
    print(f"\nbroker flush: search finished {took:.1f} s after the flush ({pending} chunks' messages lost)")


def test_a_day_plan_finishes_after_the_broker_lost_its_keys(worker_factory, sender_on_redis, redis_url, monkeypatch):
    """A day plan's chunks are sent one by one, each when the one before is stored, so the one message a plan has
    in the broker is its next chunk's. Here it is lost before any worker took it: the plan is created with no
    worker running (its first chunk's message waits in Redis), every broker key is deleted, then a worker starts.
    Before, nothing read day plans for lost messages and the plan stayed queued for ever; the healer now finds its
    first chunk pending with no message at two checks and sends it again. The answer is the one the same plan
    gives run in this process."""
    from planner.dayplans import services as dayplan_services
    from planner.dayplans.models import DayPlan

    from .test_dayplan_worker import _here

    user = get_user_model().objects.create_user("flush-day", password="pw-123456789")
    plan = dayplan_services.dayplan_create(owner=user, definition=EXAMPLE_DAY_PLAN)
    assert flush_broker(redis_url, worker_factory.queue) > 0  # the first chunk's message, and the binding
    flushed_at = time.monotonic()
    worker = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    wait_for(lambda: DayPlan.objects.get(pk=plan.pk).is_final, timeout=120, interval=0.5,
             what="the day plan to finish after the flush", logs=[worker])
    took = time.monotonic() - flushed_at
    plan.refresh_from_db()
    assert plan.status == "done", plan.error
    assert "sent again" in worker.tail(), worker.tail()
    worker.kill()  # the reference run is this process's alone (its pending chunks have no message: see above)
    here = _here(EXAMPLE_DAY_PLAN, user, monkeypatch)
    for key in ("gpu_hours", "cost", "attainment", "peak_replicas", "fixed_peak_gpu_hours", "hours"):
        assert plan.answer[key] == here[key], key
    assert took < 120, took
    print(f"\nbroker flush: day plan finished {took:.1f} s after the flush (its first chunk's message lost)")
