"""The healer's rule for lost messages (planner.healer.LostMessages, planner.broker_messages), without a worker.

The integration test (tests/integration/test_lost_messages.py) flushes a real Redis under a real worker;
these check the rule itself: pending work with no message at two checks in a row is sent again, once; work
whose message is in the broker, or missing at one check only, is not; and the embedded filesystem broker's
messages are read.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from planner import broker_messages, healer
from planner.sweeps import services
from planner.sweeps.services import CHUNK_TASK

pytestmark = pytest.mark.django_db

DEFINITION = {"engine": {"num_gpu_blocks": 600, "max_num_seqs": 16},
              "workload": {"spec": {"n": 10, "prompt": "normal:100,20", "output": "normal:30,5"}, "seed": 1},
              "axes": [{"param": "num_gpu_blocks", "values": [40, 80, 160]}]}


@pytest.fixture
def sweep(settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 1
    user = get_user_model().objects.create_user("lost", password="pw-123456789")
    return services.sweep_create(owner=user, definition=DEFINITION)  # (in a test transaction: nothing is sent)


@pytest.fixture
def sent(monkeypatch):
    calls: list[tuple] = []
    monkeypatch.setattr(broker_messages, "send_task", lambda name, args, *, task_id: calls.append((name, args)))
    from planner.dayplans import services as dayplan_services
    from planner.dayplans import stalls as dayplan_stalls
    from planner.runs import stalls as run_stalls
    from planner.search import stalls as search_stalls
    from planner.sweeps import stalls as sweep_stalls

    for module in (sweep_stalls, search_stalls, run_stalls, dayplan_stalls):
        monkeypatch.setattr(module, "send_task", lambda name, args, *, task_id: calls.append((name, args)))
    monkeypatch.setattr(dayplan_services.celery_app, "send_task",  # a day plan's answer task
                        lambda name, args, **kw: calls.append((name, args)))
    return calls


def _broker_holds(monkeypatch, tasks):
    monkeypatch.setattr(broker_messages, "live_tasks", lambda: set(tasks))


def test_pending_chunks_without_a_message_are_sent_again_at_the_second_check(sweep, sent, monkeypatch):
    _broker_holds(monkeypatch, [])
    lost = healer.LostMessages()
    assert lost.tick() == 0 and sent == []  # the first check only suspects them
    assert lost.tick() == 3
    assert sorted(sent) == [(CHUNK_TASK, [sweep.pk, i]) for i in range(3)]
    assert lost.tick() == 0  # sent again once: at the next check they are suspects again, not resent


def test_a_message_seen_once_clears_the_suspicion(sweep, sent, monkeypatch):
    lost = healer.LostMessages()
    _broker_holds(monkeypatch, [])
    lost.tick()
    _broker_holds(monkeypatch, [(CHUNK_TASK, (sweep.pk, i)) for i in range(3)])  # between queue and worker
    assert lost.tick() == 0
    _broker_holds(monkeypatch, [])
    assert lost.tick() == 0 and sent == []


def test_work_in_the_broker_or_finished_is_never_sent(sweep, sent, monkeypatch):
    _broker_holds(monkeypatch, [(CHUNK_TASK, (sweep.pk, 0)), (CHUNK_TASK, (sweep.pk, 1))])
    sweep.chunks.filter(index=2).update(status="done")
    lost = healer.LostMessages()
    assert lost.tick() + lost.tick() == 0 and sent == []


def test_a_broker_that_cannot_be_read_calls_nothing_lost(sweep, sent, monkeypatch):
    monkeypatch.setattr(broker_messages, "live_tasks", lambda: None)
    lost = healer.LostMessages()
    assert lost.tick() + lost.tick() == 0 and sent == []


def test_the_filesystem_broker_s_messages_are_read(tmp_path, settings):
    from config.celery import app

    settings.KVP_SWEEP_QUEUE = "kvp-test-lost"
    folders = {k: tmp_path / k for k in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir()
    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url = "filesystem://"
    app.conf.broker_transport_options = {
        "data_folder_in": str(folders["queue"]), "data_folder_out": str(folders["queue"]),
        "processed_folder": str(folders["processed"]), "control_folder": str(folders["control"]),
        "store_processed": False}
    app._pool = None
    app.amqp._producer_pool = None
    try:
        assert broker_messages.live_tasks() == set()
        broker_messages.send_task(CHUNK_TASK, [7, 2], task_id="t-7-2")
        assert broker_messages.live_tasks() == {(CHUNK_TASK, (7, 2))}
    finally:
        app.conf.broker_url, app.conf.broker_transport_options = saved
        app._pool = None
        app.amqp._producer_pool = None


def test_a_day_plan_s_one_step_that_should_have_a_message_is_sent_again(sent, monkeypatch):
    """Issue 37 item 3 names day plans too; they were not read for lost messages at all (a queued plan whose first
    chunk's message was lost waited for ever). A plan's chunks run one after another, each sent when the one before
    is stored: only the first chunk not done may be lost, or, with every chunk done, the answer task; the chunks
    after it have no message by design and are never sent."""
    import copy

    from planner.dayplans import services as dayplan_services
    from planner.dayplans.api import EXAMPLE_DAY_PLAN

    user = get_user_model().objects.create_user("lost-day", password="pw-123456789")
    plan = dayplan_services.dayplan_create(owner=user, definition=copy.deepcopy(EXAMPLE_DAY_PLAN))
    assert plan.chunks.count() == 3 and sent == []  # (in a test transaction: chunk 0 was never sent)
    _broker_holds(monkeypatch, [])
    lost = healer.LostMessages()
    assert lost.tick() == 0
    assert lost.tick() == 1 and sent == [(dayplan_services.CHUNK_TASK, [plan.pk, 0])]
    _broker_holds(monkeypatch, [(dayplan_services.CHUNK_TASK, (plan.pk, 0))])  # on its way: nothing lost
    assert lost.tick() + lost.tick() == 0
    plan.chunks.filter(index=0).update(status="done")
    plan.chunks.filter(index=1).update(status="running")  # running: the heartbeat rule's, not this one's
    _broker_holds(monkeypatch, [])
    assert lost.tick() + lost.tick() == 0
    plan.chunks.filter(index=1).update(status="done")
    assert lost.tick() + lost.tick() == 1 and sent[-1] == (dayplan_services.CHUNK_TASK, [plan.pk, 2])
    plan.chunks.filter(index=2).update(status="done")
    assert lost.tick() + lost.tick() == 1 and sent[-1] == (dayplan_services.ANSWER_TASK, [plan.pk])
    type(plan).objects.filter(pk=plan.pk).update(answer={"partial": False}, status="done")
    assert lost.tick() + lost.tick() == 0 and len(sent) == 3
