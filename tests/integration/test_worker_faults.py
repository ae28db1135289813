"""Issue 23: a worker killed as a whole (its process group) mid-sweep, with the production visibility timeout.

The broker's visibility timeout stays at its production value (900 s): the sweep
must not wait for it. The killed chunk's heartbeat stops; a new worker's healer
sees it stalled and sends it again. Only the stall threshold is shortened
(``KVP_STALL_AFTER_S`` 15 s instead of 45 s, healer every 3 s) to keep the suite
quick; the test still asks for the sweep to finish within two minutes of the kill,
with a report identical to an undisturbed run of the same definition.

Run with your own Redis database: ``REDIS_URL=redis://127.0.0.1:6379/<n>``.
"""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model

from planner.models import Report, Sweep, SweepChunk
from planner.sweeps import selectors, services

from .conftest import wait_for

pytestmark = pytest.mark.integration

FAST_HEAL = {"KVP_STALL_AFTER_S": "15", "KVP_HEAL_INTERVAL_S": "3"}

DEFINITION = {
    "name": "kill test",
    "engine": {"num_gpu_blocks": 4000, "max_num_seqs": 64},
    "workload": {"spec": {"n": 3000, "prompt": "normal:256,64", "output": "normal:128,32",
                          "arrival": {"kind": "poisson", "rate": 4.0, "unit": "step"}}, "seed": 11},
    "axes": [{"param": "num_gpu_blocks", "values": [600, 1200, 2400, 4800]}],
}


def _finished(sweep: Sweep):
    def check() -> bool:
        sweep.refresh_from_db()
        return sweep.is_final
    return check


def _report_body(sweep: Sweep) -> dict:
    """The report without what differs between two runs of one definition (ids and times)."""
    snapshot = dict(Report.objects.get(sweep=sweep).snapshot)
    snapshot.pop("sweep")
    return snapshot


def test_a_sweep_survives_its_worker_s_process_group_being_killed(worker_factory, sender_on_redis, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 1
    settings.KVP_STALL_AFTER_S = 15
    user = get_user_model().objects.create_user("kim", password="pw-123456789")

    calm = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    undisturbed = services.sweep_create(owner=user, definition=DEFINITION)
    wait_for(_finished(undisturbed), timeout=120, what="the undisturbed sweep", logs=[calm])
    assert undisturbed.status == Sweep.Status.DONE, undisturbed.error
    calm.stop()

    first = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    sweep = services.sweep_create(owner=user, definition=DEFINITION)

    def a_chunk_running() -> bool:
        return SweepChunk.objects.filter(sweep=sweep, status=SweepChunk.Status.RUNNING).exists()

    wait_for(a_chunk_running, timeout=90, interval=0.05, what="a chunk to be running", logs=[first])
    first.kill()  # SIGKILL to the whole process group: main process and pool child, nothing acknowledged
    killed_at = time.monotonic()
    killed = list(SweepChunk.objects.filter(sweep=sweep, status=SweepChunk.Status.RUNNING)
                  .values_list("index", flat=True))
    assert killed, "the chunk finished before the kill; the test saw no work in flight"

    # No worker is alive, so nothing heals yet: the status must say the sweep is stalled once the
    # killed chunk's heartbeat is older than the threshold (polling while a healer runs could miss
    # the moment between the stall and the resend, which is as short as the healer's tick).
    wait_for(lambda: selectors.sweep_progress(sweep=sweep)["status"] == "stalled", timeout=60, interval=0.5,
             what="the status to say the sweep is stalled", logs=[first])
    assert selectors.sweep_progress(sweep=sweep)["eta_s"] is None

    second = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    wait_for(_finished(sweep), timeout=120, interval=0.5, what="the sweep to finish after the kill",
             logs=[first, second])
    took = time.monotonic() - killed_at
    assert sweep.status == Sweep.Status.DONE, sweep.error
    assert took < 120, took
    rerun = SweepChunk.objects.get(sweep=sweep, index=killed[0])
    assert rerun.attempts == 2 and rerun.status == SweepChunk.Status.DONE
    assert _report_body(sweep) == _report_body(undisturbed)
    print(f"\nkill test: sweep finished {took:.1f} s after its worker's process group was killed")
