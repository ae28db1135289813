"""A day plan's policy from its JSON, completed from the workload where the user left it to the planner."""

from __future__ import annotations

from typing import Any

from simulator.autoscale import Policy, policy_from_dict, rate_curve
from simulator.base import ConfigError


def build_policy(data: dict[str, Any], arrival, cold_s: float) -> Policy:
    """The policy of ``data``; an oracle without rates gets the workload's own (and a lead of cold start + sync)."""
    if data.get("kind") == "oracle":
        data = dict(data)
        period = data.get("period_s", 60.0)
        if "rates" not in data:
            if isinstance(period, bool) or not isinstance(period, (int, float)) or not 1 <= period <= 1e7:
                raise ConfigError(f"must be a number of seconds from 1 to 1e7, got {period!r}", field="policy.period_s")
            data["rates"] = list(rate_curve(arrival, float(period)))
        sync = data.get("sync_s", 15.0)
        if isinstance(sync, (int, float)) and not isinstance(sync, bool):  # (a bad one is named by the policy)
            data.setdefault("lead_s", cold_s + sync)
    return policy_from_dict(data)


__all__ = ["build_policy"]
