"""Autoscaling: how many replicas a fleet asks for over time, and what a new replica costs to start.

Policies (:mod:`~simulator.autoscale.policies`): fixed, scheduled per hour, the Kubernetes HPA on a fleet
metric, and an oracle that knows the future rate; :class:`ColdStart` (:mod:`~simulator.autoscale.cold_start`):
container start, weights read at a storage bandwidth, compile and CUDA graph capture, with defaults from
published vLLM start-up logs. Pure decisions over numbers: the fleet that carries them out over a day is
built on the cluster.

May import: simulator.base.
"""

from simulator.autoscale.cold_start import ColdStart
from simulator.autoscale.policies import (
    METRICS,
    POLICIES,
    FixedPolicy,
    HpaPolicy,
    HpaState,
    Observation,
    OraclePolicy,
    Policy,
    ScheduledPolicy,
    policy_from_dict,
    rate_curve,
)

__all__ = ["METRICS", "POLICIES", "ColdStart", "FixedPolicy", "HpaPolicy", "HpaState", "Observation", "OraclePolicy",
           "Policy", "ScheduledPolicy", "policy_from_dict", "rate_curve"]
