"""A sweep point deployed as TP x PP x DP with expert parallelism on or off: one DP group (issue 34).

A point whose deployment has ``data_parallel_size`` > 1 or ``enable_expert_parallel`` runs as the simulator's DP
group (:func:`simulator.cluster.data_parallel.simulate_dp`, as ``python -m simulator run`` does): one engine per
DP rank over the point's config (its ``num_gpu_blocks`` one rank's pool, as sizing gives them), requests balanced
by vLLM's DP client; an MoE model's ranks step in lockstep on the DP / EP clock
(:class:`simulator.clock.expert_parallel.DPClock`), a dense model's run as independent engines.

:func:`point_group` says so for a point (``point["data_parallel"]``, a :class:`Group`: the shape and, for
lockstep, the clock's inputs as JSON, written once for storage, and as the specs they were written from), :func:`group_problem` what such a point cannot be combined with yet, :func:`run` simulates it
and :func:`metrics` / :func:`ranks` shape what a point keeps. A point at DP 1 with EP off has no group: today's
engine, its results unchanged. No ORM here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simulator.base import DeploymentSpec, FieldError
from simulator.sizing.moe_parallel import shape_label

#: The sweep axes of a DP group's shape (sizing axes: each value re-sizes the KV pool per rank).
AXES: dict[str, dict[str, Any]] = {
    "data_parallel_size": {"kind": "sizing", "type": int, "label": "Data-parallel ranks (DP)", "unit": "ranks"},
    "enable_expert_parallel": {"kind": "sizing", "type": bool, "label": "Expert parallelism", "unit": ""},
}
#: What a point reports of its group (metrics beside the engine's).
METRICS = ("deployment_shape", "data_parallel_size", "enable_expert_parallel", "dp_lockstep", "dp_group_steps",
           "dp_dummy_steps", "kv_cache_tokens_per_deployment")


def active(dep: DeploymentSpec) -> bool:
    """The deployment is a DP group (DP > 1, or experts spread over TP GPUs with EP on), not today's single
    engine. EP on at TP x DP = 1 is no EP (vLLM's ``FusedMoEParallelConfig.make``: ``use_ep = TP x DP > 1 and
    enable_expert_parallel``)."""
    return dep.data_parallel_size > 1 or dep.expert_parallel_size > 1


def rank_deployment(dep: DeploymentSpec) -> DeploymentSpec:
    """One DP rank's deployment (DP 1, EP off): what its engine's own clock times."""
    return replace(dep, data_parallel_size=1, enable_expert_parallel=False) if active(dep) else dep


class Group(dict):
    """A point's DP group: the JSON it is stored as (``point["data_parallel"]``) and, not part of it, the DP / EP
    clock's model, GPU and deployment specs its ``clock`` JSON was written from (:attr:`specs`; lockstep only).
    The process that resolved the point times the group with those; a group read back from storage (a worker's
    chunk) is the JSON alone, and its specs are built from it (:func:`dp_clock`)."""

    specs: tuple | None = None


def point_group(model, gpu, dep: DeploymentSpec, coefficients: dict | None, spec_dict) -> Group | None:
    """``point["data_parallel"]`` of a point's model, GPU and deployment specs (None: not a DP group).

    ``{"data_parallel_size", "enable_expert_parallel", "shape", "lockstep", "clock"}``; ``clock`` (lockstep only)
    holds the DP / EP clock's inputs as JSON (model, GPU, deployment, coefficients), written once for storage;
    the group carries the specs themselves (:class:`Group`). Raises :class:`FieldError` naming the field when the
    DP / EP clock refuses the shape (PP > 1, a GPU without its roofline figures)."""
    if not active(dep):
        return None
    lockstep = bool(model.is_moe)
    group = Group({"data_parallel_size": dep.data_parallel_size, "enable_expert_parallel": dep.enable_expert_parallel,
                   "shape": shape_label(dep), "lockstep": lockstep})
    if lockstep:
        group["clock"] = {"model": spec_dict(model), "gpu": spec_dict(gpu), "deployment": dep.to_dict(),
                          "coefficients": coefficients}
        group.specs = (model, gpu, dep)
        dp_clock(group)  # refused here, with the field, rather than on a worker
    return group


def clock_specs(group: dict) -> tuple:
    """The lockstep group's DP / EP clock inputs as specs ``(model, GPU, deployment)``: those it carries (a
    :class:`Group` resolved in this process), else built from its ``clock`` JSON (a stored group)."""
    from simulator.base import GpuSpec, ModelSpec

    carried = getattr(group, "specs", None)
    if carried is not None:
        return carried
    c = group["clock"]
    return ModelSpec.from_dict(c["model"]), GpuSpec.from_dict(c["gpu"]), DeploymentSpec.from_dict(c["deployment"])


def dp_clock(group: dict):
    """The lockstep group's :class:`simulator.cluster.data_parallel.DPClockGroup` (async scheduling set by
    :func:`run`); :class:`FieldError` naming the deployment's field when the clock refuses the shape."""
    from simulator.clock.expert_parallel import DPClock, DPShape

    try:
        model, gpu, dep = clock_specs(group)
        return DPClock.build(model, gpu, DPShape(dep), coefficients=group["clock"].get("coefficients"))
    except FieldError as exc:
        raise FieldError(f"the DP / EP clock of {group['shape']}: {exc.message}",
                         field=exc.field if exc.field in ("pipeline_parallel_size", "all2all_backend")
                         else "data_parallel_size") from None


def group_problem(group: dict, *, cluster: dict | None, disaggregated: bool, speculative: bool,
                  arrival_unit: str | None) -> tuple[str, str] | None:
    """``(field, message)`` for what a DP group point cannot be combined with yet, or None. ``cluster``: the
    point's replicas (``{"num_instances", "routing", "router_delay_s"}``), each replica one DP group."""
    shape = group["shape"]
    if cluster and (cluster.get("routing") != "round-robin" or cluster.get("router_delay_s")):
        return "cluster.routing", (f"replicas of a DP group ({shape}, each TP x PP x DP GPUs) are routed "
                                   "round-robin without router delay (each group balances its own ranks as vLLM's "
                                   "DP client does); other routings across DP groups are not simulated yet")
    if disaggregated:
        return "disaggregated", (f"prefill and decode pools of their own DP / EP shapes are not simulated yet; "
                                 f"leave disaggregated out with {shape}")
    if group["lockstep"] and speculative:
        return "engine.speculative", (f"speculative decoding in a lockstep DP group ({shape}, an MoE model) is not "
                                      "modelled; leave it out or DP at 1 with EP off")
    if group["lockstep"] and arrival_unit == "step":
        return "workload.spec.arrival", (f"a lockstep DP group ({shape}, an MoE model) needs arrivals in seconds "
                                         "(\"unit\": \"s\"): its ranks share the DP / EP clock's step times")
    return None


def run(wl, config, group: dict, replicas: int = 1, **kw):
    """Simulate the point's DP group (``replicas`` of it behind a round-robin router): a
    :class:`simulator.cluster.data_parallel.DPResult`; ``kw``: :func:`simulate_dp`'s (SLOs)."""
    from simulator.cluster.data_parallel import DPClockGroup, simulate_dp

    clock = DPClockGroup(dp_clock(group), config.async_scheduling) if group["lockstep"] else None
    return simulate_dp(wl, config, int(group["data_parallel_size"]), clock=clock, lockstep=bool(group["lockstep"]),
                       replicas=int(replicas), **kw)


def metrics(group: dict, res, kv_cache_tokens: int) -> dict:
    """The point's group metrics (:data:`METRICS`): its shape in words, DP size, EP, lockstep, group steps, the
    ranks' dummy steps summed and the KV tokens of all its ranks (``kv_cache_tokens`` is one rank's)."""
    dp = int(group["data_parallel_size"])
    return {"deployment_shape": group["shape"], "data_parallel_size": dp,
            "enable_expert_parallel": bool(group["enable_expert_parallel"]), "dp_lockstep": bool(group["lockstep"]),
            "dp_group_steps": int(res.group_steps), "dp_dummy_steps": sum(int(r["dummy_steps"]) for r in res.ranks),
            "kv_cache_tokens_per_deployment": kv_cache_tokens * dp}


def ranks(res) -> dict:
    """What a point keeps of each rank (``result["data_parallel"]``, in the JSON export): requests,
    preemptions, peak and mean KV usage, dummy steps and their seconds."""
    return {"lockstep": res.lockstep, "routing": res.routing, "group_steps": int(res.group_steps),
            "ranks": [dict(r) for r in res.ranks]}
