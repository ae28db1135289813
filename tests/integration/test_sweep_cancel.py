"""Cancelling a sweep on a real worker keeps every point it had finished (issue 33 item 6).

A batch (one chunk) simulates its points one after another; a cancel stops it at its next progress check.
Before, the chunk's finished points were thrown away with it ("Cancelled: 0 of 8"); now they are stored,
counted and shown, equal to the same points simulated here.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from planner.models import Sweep, SweepChunk
from planner.sweeps import definition as defn
from planner.sweeps import selectors, services
from planner.sweeps.points import plan_chunks
from planner.sweeps.runner import build_workload, simulate_points
from planner.sweeps.views import runnable_definition

from .conftest import wait_for

pytestmark = pytest.mark.integration

#: Eight points that do not share a run (each max_num_seqs is its own simulation), about 0.3-1 s each.
SEQS = [4, 6, 8, 12, 16, 24, 32, 48]


def cancel_definition(n: int = 3000) -> dict:
    return {"name": "cancel me", "engine": {"num_gpu_blocks": 3000},
            "workload": {"spec": {"n": n, "prompt": "normal:512,128", "output": "normal:256,64",
                                  "arrival": {"kind": "poisson", "rate": 4.0, "unit": "step"}}, "seed": 3},
            "axes": [{"param": "max_num_seqs", "values": SEQS}]}


def test_cancel_keeps_and_counts_the_finished_points_of_a_running_batch(worker_factory, sender_on_redis, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = len(SEQS)  # one batch: every point finishes inside the running chunk
    worker = worker_factory(concurrency=1)
    owner = get_user_model().objects.create_user("carol", password="pw-123456789")
    sweep = services.sweep_create(owner=owner, definition=cancel_definition())
    assert sweep.num_chunks == 1 and sweep.total_points == len(SEQS)

    def three_under_way() -> bool:
        chunk = SweepChunk.objects.get(sweep=sweep)
        return chunk.status == SweepChunk.Status.RUNNING and chunk.progress >= 3 / len(SEQS)

    wait_for(three_under_way, timeout=120, what="three of the batch's points simulated", logs=[worker])
    services.sweep_cancel(sweep=sweep, user=owner)
    wait_for(lambda: not selectors.sweep_progress(sweep=Sweep.objects.get(pk=sweep.pk))["stopping"], timeout=30,
             what="the cancelled batch to store its finished points", logs=[worker])

    sweep.refresh_from_db()
    chunk = SweepChunk.objects.get(sweep=sweep)
    assert sweep.status == Sweep.Status.CANCELLED and chunk.status == SweepChunk.Status.SKIPPED
    points = selectors.sweep_points(sweep=sweep)
    assert 2 <= sweep.points_done < len(SEQS), sweep.points_done  # the finished ones, not the whole batch
    assert len(points) == sweep.points_done
    assert selectors.sweep_progress(sweep=sweep)["points_done"] == sweep.points_done

    # each kept point is the one this process simulates for the same parameters
    _, _, planned = defn.validate(sweep.definition | {"workload": cancel_definition()["workload"]}, owner=owner)
    (batch,) = plan_chunks(planned, size=len(SEQS))
    expected = {r["index"]: r for r in simulate_points(build_workload(batch["workload"]), batch["points"])}
    for p in points:
        want = expected[p["index"]]
        assert p["params"] == want["params"]
        assert p["metrics"]["throughput_tok_s"] == pytest.approx(want["metrics"]["throughput_tok_s"], rel=1e-9)
        assert p["metrics"]["preemptions_per_request"] == want["metrics"]["preemptions_per_request"]

    # "Run again" from the cancelled sweep: a new sweep of every point, the same definition
    again = services.sweep_create(owner=owner, definition=runnable_definition(sweep))
    assert again.total_points == len(SEQS) and again.name == "cancel me (again)"
    services.sweep_cancel(sweep=again, user=owner)
