"""Sweeps run end to end on real ``celery worker`` processes over Redis (no eager mode).

Bounded: small workloads, a few seconds of simulation, every wait has a timeout.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from planner.models import Report, Sweep, SweepChunk
from planner.sweeps import definition as defn
from planner.sweeps import selectors, services
from planner.sweeps.points import plan_chunks
from planner.sweeps.runner import build_workload, simulate_points

from .conftest import FAST_HEAL, wait_for

pytestmark = pytest.mark.integration


def _definition(n: int, blocks: list[int]) -> dict:
    return {
        "name": "integration",
        "engine": {"num_gpu_blocks": 2000, "max_num_seqs": 64},
        "workload": {"spec": {"n": n, "prompt": "normal:256,64", "output": "normal:128,32",
                              "arrival": {"kind": "poisson", "rate": 2.0, "unit": "step"}}, "seed": 7},
        "axes": [{"param": "num_gpu_blocks", "values": blocks},
                 {"param": "enable_prefix_caching", "values": [True, False]}],
    }


def _expected(sweep: Sweep) -> dict[int, dict]:
    """The same points simulated here, in this process, for comparison."""
    _, snapshot, points = defn.validate(sweep.definition | {"workload": _definition(0, [])["workload"] | {
        "spec": sweep.snapshot["workload"]["spec"], "seed": sweep.snapshot["workload"]["seed"]}},
        owner=sweep.owner)
    out = {}
    for chunk in plan_chunks(points):
        wl = build_workload(chunk["workload"])
        for r in simulate_points(wl, chunk["points"], record_steps=True):
            out[r["index"]] = r
    return out


def _user(name="alice"):
    return get_user_model().objects.create_user(name, password="pw-123456789")


def test_sweep_runs_end_to_end_on_a_real_worker(worker_factory, sender_on_redis, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 2
    worker = worker_factory(concurrency=2)
    sweep = services.sweep_create(owner=_user(), definition=_definition(60, [200, 400, 800]))
    assert sweep.num_chunks == 3 and sweep.total_points == 6

    seen_progress = []

    def finished():
        sweep.refresh_from_db()
        seen_progress.append(selectors.sweep_progress(sweep=sweep)["points_done"])
        return sweep.is_final

    wait_for(finished, timeout=120, what="the sweep to finish", logs=[worker])
    assert sweep.status == Sweep.Status.DONE, sweep.error
    progress = selectors.sweep_progress(sweep=sweep)
    assert progress["points_done"] == progress["points_total"] == 6 and progress["fraction"] == 1.0
    assert seen_progress == sorted(seen_progress)  # progress only moves forward

    points = selectors.sweep_points(sweep=sweep)
    assert [p["index"] for p in points] == list(range(6))
    expected = _expected(sweep)
    for p in points:
        assert p["metrics"] == expected[p["index"]]["metrics"]
        assert p["totals"] == expected[p["index"]]["totals"]
    report = Report.objects.get(sweep=sweep)
    assert len(report.snapshot["points"]) == 6


def test_sweep_runs_on_the_embedded_filesystem_broker(filesystem_worker, settings):
    """The default set-up (no Redis): a separate worker process runs the sweep, with progress."""
    settings.KVP_SWEEP_CHUNK_POINTS = 3
    sweep = services.sweep_create(owner=_user("fs"), definition=_definition(40, [300, 600]))
    assert sweep.total_points == 4

    def finished():
        sweep.refresh_from_db()
        return sweep.is_final

    wait_for(finished, timeout=120, what="the sweep to finish on the filesystem broker", logs=[filesystem_worker])
    assert sweep.status == Sweep.Status.DONE, sweep.error
    progress = selectors.sweep_progress(sweep=sweep)
    assert progress["points_done"] == progress["points_total"] == 4
    expected = _expected(sweep)
    for p in selectors.sweep_points(sweep=sweep):
        assert p["totals"] == expected[p["index"]]["totals"]
    assert Report.objects.filter(sweep=sweep).exists()


def test_killed_worker_loses_and_duplicates_nothing(worker_factory, sender_on_redis, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 1
    # The redelivered message of the killed chunk is skipped while its heartbeat looks alive, so the run waits for
    # the stall threshold: the fault tests' 3 s (tests/integration/conftest.py) instead of the default 45 s.
    first = worker_factory(concurrency=1, env=FAST_HEAL)
    sweep = services.sweep_create(owner=_user("bob"), definition=_definition(400, [150, 300, 600, 1200]))
    assert sweep.num_chunks == 8

    def one_done_one_running():
        statuses = list(SweepChunk.objects.filter(sweep=sweep).values_list("status", flat=True))
        return "done" in statuses and "running" in statuses

    def frozen_mid_chunk():
        """Freeze the worker while a chunk runs. A chunk takes milliseconds, so the state seen
        before the freeze may be gone by then: check it again with the worker stopped."""
        if not one_done_one_running():
            return False
        first.freeze()
        if one_done_one_running():
            return True
        first.thaw()
        return False

    wait_for(frozen_mid_chunk, timeout=90, interval=0.01, what="a chunk to be running", logs=[first])
    killed = list(SweepChunk.objects.filter(sweep=sweep, status=SweepChunk.Status.RUNNING)
                  .values_list("index", flat=True))
    first.kill()  # SIGKILL mid-chunk: its message stays unacknowledged
    sweep.refresh_from_db()
    assert sweep.status != Sweep.Status.DONE
    assert killed and killed == list(SweepChunk.objects.filter(sweep=sweep, status=SweepChunk.Status.RUNNING)
                          .values_list("index", flat=True))

    second = worker_factory(concurrency=1, env=FAST_HEAL)

    def finished():
        sweep.refresh_from_db()
        return sweep.is_final

    wait_for(finished, timeout=150, what="the sweep to finish on the second worker", logs=[first, second])
    assert sweep.status == Sweep.Status.DONE, sweep.error
    points = selectors.sweep_points(sweep=sweep)
    assert sorted(p["index"] for p in points) == list(range(8))  # none lost, none twice
    assert sweep.points_done == 8
    expected = _expected(sweep)
    for p in points:
        assert p["metrics"] == expected[p["index"]]["metrics"]
    rerun = SweepChunk.objects.get(sweep=sweep, index=list(killed)[0])
    assert rerun.attempts >= 2 and rerun.status == SweepChunk.Status.DONE
    assert Report.objects.filter(sweep=sweep).count() == 1
