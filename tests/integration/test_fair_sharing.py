"""Workers are shared fairly between users (issue 37 item 2): a small job of one user does not wait behind
another user's long queue of chunks. Real Redis broker, a real worker started only once both jobs are queued."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from planner.jobs import fairness
from planner.models import SweepChunk
from planner.sweeps import services

from .conftest import wait_for

pytestmark = pytest.mark.integration


def _definition(blocks: list[int]) -> dict:
    return {"name": "fair", "engine": {"num_gpu_blocks": 2000, "max_num_seqs": 16},
            "workload": {"spec": {"n": 12, "prompt": "normal:64,16", "output": "normal:16,4",
                                  "arrival": {"kind": "poisson", "rate": 2.0, "unit": "step"}}, "seed": 3},
            "axes": [{"param": "num_gpu_blocks", "values": blocks}]}


def test_a_small_job_runs_before_the_tail_of_another_users_long_one(worker_factory, sender_on_redis, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 1
    users = get_user_model().objects
    alice, bob = users.create_user("alice", password="pw-123456789"), users.create_user("bob", password="pw-1234567")
    long = services.sweep_create(owner=alice, definition=_definition([300 + 20 * i for i in range(12)]))
    small = services.sweep_create(owner=bob, definition=_definition([500]))
    assert (long.num_chunks, small.num_chunks) == (12, 1)
    worker = worker_factory(concurrency=1)  # started after both are queued: delivery order is the broker's

    def both_done():
        return SweepChunk.objects.filter(status="done").count() == 13

    wait_for(both_done, timeout=180, what="both sweeps to finish", logs=[worker])
    order = list(SweepChunk.objects.order_by("started_at").values_list("sweep_id", "index"))
    position = order.index((small.pk, 0))
    # alice's first HEAD_CHUNKS go at the first step, ahead of bob's (sent later); then bob's, before her tail
    assert position == fairness.HEAD_CHUNKS, order
    assert order[:position] == [(long.pk, i) for i in range(position)]
