"""Batches: one workload under many configurations at once, priced before it runs.

:func:`simulate` runs a batch (engine configurations and cluster deployments), lets configurations that
share one schedule derive theirs from one run (:mod:`~simulator.batch.sharing`) and spreads the rest over
worker processes; :mod:`~simulator.batch.budget` prices a run's memory and time from its inputs.

May import: simulator.base, simulator.workload, simulator.engine, simulator.cluster.
"""

from simulator.batch.budget import (
    OverBudget,
    Price,
    WorkloadSize,
    check,
    format_bytes,
    price_batch,
    price_configs,
    price_replicas_search,
    price_run,
)
from simulator.batch.runner import MAX_PROCESSES, simulate

__all__ = ["MAX_PROCESSES", "OverBudget", "Price", "WorkloadSize", "check", "format_bytes", "price_batch", "price_configs", "price_replicas_search", "price_run", "simulate"]
