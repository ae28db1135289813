"""The broker priority of a chunk (planner/jobs/fairness.py): from its owner's chunks ahead of it, in every kind."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from planner.dayplans.models import DayPlan
from planner.jobs import fairness
from planner.models import Sweep
from planner.search.models import Search
from planner.sweeps import services

pytestmark = pytest.mark.django_db


def test_priority_steps_grow_with_depth():
    assert [fairness.priority_at(d) for d in (0, 1, 2, 7, 8, 31, 32, 10_000)] == [0, 0, 3, 3, 6, 6, 9, 9]


def _sweep(owner, n):
    return services.sweep_create(owner=owner, definition={
        "name": "f", "engine": {"num_gpu_blocks": 2000, "max_num_seqs": 16},
        "workload": {"spec": {"n": 8, "prompt": "normal:64,16", "output": "normal:16,4",
                              "arrival": {"kind": "poisson", "rate": 2.0, "unit": "step"}}, "seed": 3},
        "axes": [{"param": "num_gpu_blocks", "values": [300 + 20 * i for i in range(n)]}]})


def test_a_job_is_sent_after_its_owners_other_work_and_not_after_others(settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 1
    users = get_user_model().objects
    alice, bob = users.create_user("alice", password="pw-123456789"), users.create_user("bob", password="pw-1234567")
    first = _sweep(alice, 5)
    assert fairness.owner_backlog(alice.pk) == 5 and fairness.owner_backlog(bob.pk) == 0
    assert fairness.owner_backlog(alice.pk, exclude=(Sweep, first.pk)) == 0
    second = _sweep(alice, 4)
    # alice's second sweep waits behind her first (5 chunks ahead): steps 3, 3, 3, 6
    assert fairness.priorities(Sweep, second.pk, alice.pk, 4) == [3, 3, 3, 6]
    # bob's first chunk is not behind alice's 9
    assert fairness.priorities(Sweep, 0, bob.pk, 3) == [0, 0, 3]
    # every kind counts, whether or not its module was imported in this process
    kinds = {job for _, _, job in fairness.chunk_models()}
    assert {Sweep, Search, DayPlan} <= kinds
    assert fairness.owner_backlog(None) == 0  # anonymous runs have no backlog
