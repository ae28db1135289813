"""The step clock's cost models: how long one engine step takes, in seconds.

A roofline of the model on the GPU (dense GEMMs, attention, MoE experts, all-reduce, sampler, CPU time;
:class:`RooflineStepTime`) or coefficients a user fitted (:func:`build_step_time_model`,
:func:`parse_cost_model`), each evaluated per configuration from :class:`StepCostTerms` rows. The step of a DP x EP group
of an MoE model, from each rank's batch, is :func:`step_time_dp` (:mod:`simulator.clock.expert_parallel`). The
engine's side of the clock (which steps are timed, and when) is :mod:`simulator.engine.step_clock`.

May import: simulator.base, simulator.sizing.
"""

from simulator.clock.cost_model import (
    CostModelError,
    RooflineStepTime,
    build_step_time_model,
    model_coefficients,
    parse_cost_model,
    sampling_coefficients,
)
from simulator.clock.expert_parallel import (
    ALL2ALL_BACKENDS,
    DPClock,
    DPShape,
    DPStepTime,
    Fabric,
    RankBatch,
    step_time_dp,
)
from simulator.clock.physics import UNMEASURED_NOTE, GpuPhysics, gpu_physics, measured_gpu_names
from simulator.clock.terms import StepCostTerms, overlapped

__all__ = ["ALL2ALL_BACKENDS", "DPClock", "DPShape", "DPStepTime", "Fabric", "RankBatch", "step_time_dp",
           "UNMEASURED_NOTE", "CostModelError", "GpuPhysics", "RooflineStepTime", "gpu_physics", "measured_gpu_names", "StepCostTerms", "build_step_time_model", "model_coefficients", "overlapped", "parse_cost_model", "sampling_coefficients"]
