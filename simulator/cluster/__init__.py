"""Several engines: replicas behind a router, and disaggregated prefill and decode pools.

:func:`simulate_cluster` / :class:`Deployment` (N replicas, :mod:`~simulator.cluster.routing`'s policies),
the fleet that steps them together, :class:`DisaggregatedDeployment` (a prefill pool, a decode pool and the
KV link between them), :func:`compare_splits` (aggregated replicas against xPyD splits) and
:func:`simulate_dp` (a DP group: one engine per rank, vLLM's DP balancing, an MoE model's ranks in lockstep).

May import: simulator.base, simulator.sizing, simulator.clock, simulator.workload, simulator.engine.
"""

from simulator.cluster.closed_loop import ClosedLoop, ClosedLoopResult, simulate_closed_loop
from simulator.cluster.compare import compare_splits, engine_config_for
from simulator.cluster.data_parallel import DPError, DPResult, DPRun, dp_run_from_config, simulate_dp
from simulator.cluster.disaggregated import DisaggError, DisaggregatedDeployment, KvLink, Pool, deployment_from_dict
from simulator.cluster.replicas import (
    SUMMED_TOTALS,
    ClusterResult,
    Deployment,
    LoadBalance,
    simulate_cluster,
    smallest_replicas,
)
from simulator.cluster.routing import POLICIES, ClusterError, parse_routing

__all__ = ["ClosedLoop", "ClosedLoopResult", "ClusterError", "ClusterResult", "DPError", "DPResult", "DPRun",
           "Deployment", "DisaggError", "DisaggregatedDeployment", "KvLink", "LoadBalance", "POLICIES", "Pool", "SUMMED_TOTALS", "compare_splits", "deployment_from_dict", "dp_run_from_config", "engine_config_for", "parse_routing", "simulate_closed_loop", "simulate_cluster", "simulate_dp", "smallest_replicas"]
