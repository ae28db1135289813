"""The engine: one vLLM v1 engine core simulated step by step, for one configuration.

:class:`EngineConfig` (vLLM's scheduler and cache knobs), the scheduler's rules
(:mod:`~simulator.engine.scheduler`), the block pool with vLLM's prefix cache (:mod:`~simulator.engine.pool`),
CPU/disk tiers below it, the engine's clock (:mod:`~simulator.engine.step_clock`, over the cost models of
:mod:`simulator.clock`), the accelerators that change no result (:mod:`~simulator.engine.accelerators`), and
the results (:class:`SimResult`, latency metrics). :class:`FastEngine` holds them as objects
(``requests``, ``pool``, ``tiers``, ``step_clock``, ``loads``, ``jumps``, ``drafts``, ``hooks``;
:mod:`~simulator.engine.core`) and runs the loop; the batch runner
(:func:`simulator.batch.simulate`) and the cluster (:mod:`simulator.cluster`) drive it.

May import: simulator.base, simulator.clock, simulator.speculative, simulator.workload.
"""

from simulator.engine.accelerators import may_share_schedules
from simulator.engine.config import EngineConfig
from simulator.engine.core import DROPPED, FastEngine, StepTimeFn, WorkloadPrep, cdiv
from simulator.engine.metrics import LATENCY_METRICS, LatencySummary, MetricsError, TokenGaps, request_latencies
from simulator.engine.pool import FastPool
from simulator.engine.results import SimResult, assemble_result, jsonable
from simulator.engine.serving import serving_offsets

__all__ = ["DROPPED", "LATENCY_METRICS", "TokenGaps", "EngineConfig", "FastEngine", "FastPool", "LatencySummary", "MetricsError", "SimResult", "StepTimeFn", "WorkloadPrep", "assemble_result", "cdiv", "jsonable", "may_share_schedules", "request_latencies", "serving_offsets"]
