"""A day plan's speculative second chain (planner/dayplans/services.py), driven in this process in the order two
workers would take the chunks: the answer is the one of chunks run one after another, whether the lead-in's
guess is right or wrong (a wrong guess: its chunk is put back and run again from the true handover)."""

from __future__ import annotations

import copy

import pytest
from django.contrib.auth import get_user_model

from planner.dayplans import selectors, services
from planner.dayplans.api import EXAMPLE_DAY_PLAN
from planner.dayplans.models import DayPlan, DayPlanChunk

#: Five chunks of 240 s (120 s overlaps) over 20 minutes of traffic: the second chain starts at chunk 3.
SMALL = {**copy.deepcopy(EXAMPLE_DAY_PLAN), "name": "speculation",
         "workload": {"spec": {"n": 2000, "prompt": "normal:256,64", "output": "normal:128,32",
                               "arrival": {"kind": "piecewise", "segments": [[1, 400], [3, 400], [1, 400]],
                                           "unit": "s"}}, "seed": 2},
         "chunk_s": 240, "overlap_s": 120}
KEYS = ("gpu_hours", "cost", "attainment", "peak_replicas", "fixed_peak_gpu_hours", "hours", "fleet")


@pytest.fixture
def owner(transactional_db):  # on_commit callbacks run: each chunk's tells send (here: queue) the next
    return get_user_model().objects.create_user("spec", password="pw-123456789")


def _drive(definition: dict, owner, monkeypatch) -> tuple[DayPlan, list[int]]:
    """Create the plan and run what it sends, first in first out, as one worker taking messages would."""
    sent: list[int] = []
    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: sent.append(index))
    plan = services.dayplan_create(owner=owner, definition=definition)
    ran, counts = [], []
    while sent:
        index = sent.pop(0)
        if services.chunk_run(plan_id=plan.pk, index=index) == "done":
            ran.append(index)
        p = selectors.dayplan_progress(plan=DayPlan.objects.get(pk=plan.pk))
        counts.append((p["chunks_done"], p["hours_done"], p["chunks_ahead"]))
    done, hours = [c[0] for c in counts], [c[1] for c in counts]
    assert done == sorted(done) and hours == sorted(hours), counts  # a rerun chunk never takes the count back
    return DayPlan.objects.get(pk=plan.pk), ran


def test_the_second_chain_starts_at_the_middle_and_the_answer_is_one_after_another(owner, monkeypatch):
    spec, ran = _drive(SMALL, owner, monkeypatch)
    assert spec.snapshot["day"]["speculate_at"] == 3 and spec.num_chunks == 5
    assert spec.status == "done", spec.error
    assert ran[:2] == [0, 3]  # chunk 3 ran from the lead-in's guess before chunk 2 told its handover
    assert sorted(ran) == [0, 1, 2, 3, 4]  # the guess was right: the chains met at chunk 3, nothing ran twice
    plain, ran_plain = _drive({**SMALL, "speculate": False}, owner, monkeypatch)
    assert plain.snapshot["day"]["speculate_at"] is None and ran_plain == [0, 1, 2, 3, 4]
    for key in KEYS:
        assert spec.answer[key] == plain.answer[key], key
    rows = list(spec.chunks.order_by("index"))
    assert all(r.started_from == p.handover for p, r in zip(rows, rows[1:]))  # every chunk kept


def test_a_wrong_guess_is_run_again_from_the_true_handover(owner, monkeypatch):
    from simulator.day import chunks

    true_guess = chunks.guess_handover

    def wrong(*args, **kwargs):  # one replica more than the lead-in saw: never the true handover
        h = true_guess(*args, **kwargs)
        return chunks.Handover((*h.ready_s, h.ready_s[-1]), h.script)

    monkeypatch.setattr(chunks, "guess_handover", wrong)
    spec, ran = _drive(SMALL, owner, monkeypatch)
    assert spec.status == "done", spec.error
    assert ran.count(3) == 2  # from the guess, then again from chunk 2's handover
    assert selectors.dayplan_progress(plan=spec)["chunks_ahead"] == 0
    monkeypatch.setattr(chunks, "guess_handover", true_guess)
    plain, _ = _drive({**SMALL, "speculate": False}, owner, monkeypatch)
    for key in KEYS:
        assert spec.answer[key] == plain.answer[key], key
    assert [c.result for c in spec.chunks.order_by("index")] == [c.result for c in plain.chunks.order_by("index")]


def test_speculate_must_be_a_boolean(owner):
    from planner.errors import InputError

    with pytest.raises(InputError) as exc:
        services.dayplan_create(owner=owner, definition={**SMALL, "speculate": "yes"})
    assert "speculate" in exc.value.errors
    assert DayPlanChunk.objects.count() == 0


def test_both_chains_first_chunks_are_looked_for_among_lost_messages(owner, monkeypatch):
    from planner.dayplans import stalls

    monkeypatch.setattr(services, "chunk_enqueue", lambda plan_id, index: None)  # every message "lost"
    plan = services.dayplan_create(owner=owner, definition=SMALL)
    assert sorted(stalls.lost_messages(set())) == [("dayplan-chunk", plan.pk, 0), ("dayplan-chunk", plan.pk, 3)]
    live = {(services.CHUNK_TASK, (plan.pk, 0)), (services.CHUNK_TASK, (plan.pk, 3))}
    assert stalls.lost_messages(live) == {}  # both on their way; chunks 1, 2 and 4 wait for a handover
