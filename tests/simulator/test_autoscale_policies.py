"""Autoscaling policies (issue 36, item 2) decide as the Kubernetes HPA does, checked step by step by hand.

The HPA's rules are those of kubernetes.io's "Horizontal Pod Autoscaling" (algorithm details, configurable
scaling behavior): desired = ceil(ratio x pods) outside a 10 % tolerance, starting pods as idle for a
scale-up and at target for a scale-down, a 300 s scale-down stabilization window, at most max(+100 %, +4
pods) up and -100 % down per 15 s.
"""

from __future__ import annotations

import pytest

from simulator.autoscale import (
    ColdStart,
    FixedPolicy,
    HpaPolicy,
    Observation,
    OraclePolicy,
    ScheduledPolicy,
    policy_from_dict,
    rate_curve,
)
from simulator.base import ConfigError


def obs(t, ready, running, starting=0):
    return Observation(time_s=t, ready=ready, starting=starting, metrics={"running": running})


def test_the_hpa_scales_by_the_ratio_outside_its_tolerance():
    hpa = HpaPolicy(metric="running", target=32, min_replicas=1, max_replicas=20)
    state = hpa.new_state()
    assert state.decide(obs(0, 4, 34)) == 4  # 34 / 32 = 1.06: inside the 10 % tolerance
    assert state.decide(obs(15, 4, 48)) == 6  # ceil(1.5 x 4)
    assert state.decide(obs(30, 6, 160)) == 12  # ceil(5 x 6) = 30, limited to max(6 x 2, 6 + 4) = 12 a period


def test_starting_pods_count_as_idle_for_a_scale_up():
    state = HpaPolicy(metric="running", target=32, max_replicas=20).new_state()
    # 2 ready at 40 and 2 starting: (40 x 2 + 0 x 2) / (4 x 32) = 0.625, the other way: no change
    assert state.decide(obs(0, 2, 40, starting=2)) == 4
    # 2 ready at 100 and 2 starting: (200 + 0) / 128 = 1.5625 -> ceil(1.5625 x 4) = 7
    assert state.decide(obs(15, 2, 100, starting=2)) == 7


def test_scale_down_waits_for_the_stabilization_window():
    state = HpaPolicy(metric="running", target=32, min_replicas=1, max_replicas=20).new_state()
    assert state.decide(obs(0, 8, 32)) == 8
    downs = [state.decide(obs(t, 8, 8)) for t in range(15, 301, 15)]  # 8 x 8 / 32 = 2 wanted from 15 s on
    assert downs == [8] * len(downs)  # the 0 s recommendation (8) is inside the 300 s window until 300 s
    assert state.decide(obs(315, 8, 8)) == 2


def test_bounds_and_cooldown():
    hpa = HpaPolicy(metric="waiting", target=2.0, min_replicas=2, max_replicas=5, scale_down_window_s=0,
                    cooldown_s=60)
    state = hpa.new_state()
    ob = Observation(time_s=0, ready=2, starting=0, metrics={"waiting": 20.0})
    assert state.decide(ob) == 5  # ceil(10 x 2) = 20, capped at max_replicas
    calm = Observation(time_s=30, ready=5, starting=0, metrics={"waiting": 0.1})
    assert state.decide(calm) == 5  # cooldown: no change within 60 s of the last
    assert state.decide(Observation(time_s=75, ready=5, starting=0, metrics={"waiting": 0.1})) == 2  # min_replicas
    assert state.decide(Observation(time_s=90, ready=2, starting=0, metrics={})) == 2  # no metric: no change


def test_fixed_scheduled_and_oracle():
    assert FixedPolicy(3).decide(obs(100, 3, 99)) == 3
    sched = ScheduledPolicy(replicas=(2, 4, 8), period_s=3600, lead_s=300)
    assert [sched.at(t) for t in (0, 3299, 3300, 7200, 10800)] == [2, 2, 4, 8, 2]
    oracle = OraclePolicy(rates=(1.0, 1.0, 9.0, 2.0), period_s=60, capacity_per_replica=2.0, lead_s=45,
                          min_replicas=1)
    assert oracle.start() == 1
    assert oracle.decide(obs(0, 1, 0)) == 1  # the next 60 s stay at 1/s
    assert oracle.decide(obs(75, 1, 0)) == 5  # 75 + 45 + 15 = 135 s falls in the 9/s minute: ceil(9 / 2)
    assert oracle.decide(obs(200, 5, 0)) == 1  # ceil(2 / 2), nothing higher ahead
    assert rate_curve([0.5, 1.0, 61.0, 62.0, 63.0], 60.0) == (2 / 60, 3 / 60)


def test_cold_start_adds_its_parts():
    cs = ColdStart()
    assert cs.seconds(60.0) == 25 + 60 + 30 + 20
    assert ColdStart(storage_gib_per_s=4.0, compile_s=7.5).breakdown(16.0)["weights_s"] == 4.0
    with pytest.raises(ConfigError, match="cold_start.storage_gib_per_s: must be a number of GiB/s > 0"):
        ColdStart(storage_gib_per_s=0)
    with pytest.raises(ConfigError, match="cold_start.graph_capture: unknown field"):
        ColdStart.from_dict({"graph_capture": 3})


@pytest.mark.parametrize(("data", "message"), [
    ({"kind": "hpa", "min_replicas": 4, "max_replicas": 2}, "policy.max_replicas: 2 is below min_replicas 4"),
    ({"kind": "hpa", "metric": "cpu"}, "policy.metric: 'cpu' is not a fleet metric"),
    ({"kind": "hpa", "scale_down_window_s": 0, "cooldown_s": 0, "tolerance": 0},
     "would change at every sync"),
    ({"kind": "hpa", "target": 0}, "policy.target: must be a number > 0"),
    ({"kind": "hpa", "scale_up_percent": 0, "scale_up_pods": 0}, "can never scale up"),
    ({"kind": "scheduled", "replicas": [0, 0]}, "at least one period needs a replica"),
    ({"kind": "fixed", "replicas": 2, "target": 3}, "policy.target: unknown field of a fixed policy"),
    ({"kind": "magic"}, "policy.kind: must be one of fixed, scheduled, hpa, oracle"),
])
def test_a_policy_that_cannot_work_is_refused_naming_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        policy_from_dict(data)


def test_policies_round_trip_through_their_dicts():
    for p in (FixedPolicy(2), ScheduledPolicy((1, 3)), HpaPolicy(metric="kv_usage", target=0.7),
              OraclePolicy(rates=(1.0, 2.0), capacity_per_replica=3.0)):
        assert policy_from_dict(p.to_dict()) == p


@pytest.mark.parametrize("sync_s", ["soon", 0, None])
def test_an_oracles_bad_sync_is_named_not_a_type_error(sync_s):
    """An oracle's ``sync_s`` was never checked, and ``build_policy`` added a text one to the cold start
    (a TypeError, a 500 in the planner): now it is refused as the HPA's is."""
    import numpy as np

    from simulator.day import build_policy

    with pytest.raises(ConfigError, match="policy.sync_s: must be a number"):
        build_policy({"kind": "oracle", "capacity_per_replica": 2, "sync_s": sync_s}, np.arange(10.0), 45.0)
