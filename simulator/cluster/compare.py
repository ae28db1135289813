"""Aggregated replicas against xPyD splits of the same GPUs.

>>> cfg, kvbpt = engine_config_for(llama_8b, h100, max_model_len=2048)                      # doctest: +SKIP
>>> rows = compare_splits(workload, cfg, instances=4, kv_bytes_per_token=kvbpt, cost_per_hour=3.78)  # doctest: +SKIP

:func:`compare_splits` simulates N aggregated replicas (:func:`simulator.cluster.replicas.simulate_cluster`)
and every split of the same N instances into x prefill and N - x decode instances
(:mod:`simulator.cluster.disaggregated`), so every row has the same GPU count and, with one GPU type, the
same cost per hour. :func:`engine_config_for` builds one instance's configuration the way the
deployment search does (vLLM's start-up sizing, the roofline clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.base import DeploymentSpec, GpuSpec, ModelSpec
from simulator.cluster.disaggregated import DisaggError, DisaggregatedDeployment, KvLink, Pool
from simulator.cluster.replicas import simulate_cluster
from simulator.engine import EngineConfig, LatencySummary
from simulator.workload import Workload


def engine_config_for(model: ModelSpec, gpu: GpuSpec, *, max_model_len: int, tp: int = 1,
                      kv_cache_dtype: str = "auto", gpu_memory_utilization: float = 0.9,
                      max_num_seqs: int | None = None) -> tuple[EngineConfig, float]:
    """One instance of ``model`` on ``tp`` x ``gpu``: its engine configuration and the model's KV bytes per token.

    The blocks come from :func:`simulator.sizing.closed_form.plan` (vLLM's start-up rule),
    the clock from :class:`simulator.clock.cost_model.RooflineStepTime`; the second
    value is the whole model's KV bytes per token (what a transfer moves).  # bytes

    Raises
    ------
    DisaggError
        The model does not fit, or has no roofline (the message names ``gpu``).
    """
    from simulator.clock import CostModelError, RooflineStepTime
    from simulator.sizing import default_async_scheduling, plan

    kw = {} if max_num_seqs is None else {"max_num_seqs": max_num_seqs}
    dep = DeploymentSpec(tensor_parallel_size=tp, kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len,
                         gpu_memory_utilization=gpu_memory_utilization, **kw)
    sizing = plan(model, gpu, dep)
    if not sizing.fits or sizing.num_gpu_blocks < 2:
        raise DisaggError(f"{model.name} does not fit on {tp}x {gpu.name}: {sizing.reason}", field="gpu")
    try:
        terms = RooflineStepTime.from_specs(model, gpu, deployment=dep).terms
    except (CostModelError, ValueError) as exc:
        raise DisaggError(f"no step-time model for {gpu.name}: {exc}", field="gpu") from None
    cfg = EngineConfig(num_gpu_blocks=sizing.num_gpu_blocks, block_size=sizing.block_size,
                       max_num_seqs=sizing.max_num_seqs, max_num_batched_tokens=sizing.max_num_batched_tokens,
                       max_model_len=max_model_len, cost_model=terms,
                       kv_bytes_per_block=int(sizing.bytes_per_block_per_gpu),
                       async_scheduling=default_async_scheduling(dep.vllm_version))
    return cfg, float(sizing.kv_bytes_per_token)


@dataclass(frozen=True)
class SplitRow:
    """One deployment of a comparison: aggregated (``prefill_instances`` 0) or xPyD."""

    name: str
    prefill_instances: int
    decode_instances: int
    num_gpus: int
    cost_per_hour: float | None  # USD/h
    finished: int
    ttft_p50_s: float | None  # s
    ttft_p90_s: float | None  # s
    itl_p90_s: float | None  # s
    e2e_p90_s: float | None  # s
    output_tokens_per_s: float  # tokens/s
    transfer_p90_s: float | None = None  # s
    prefill_utilisation: float | None = None
    decode_utilisation: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _figures(lat: LatencySummary) -> dict[str, Any]:
    def pct(v: float) -> float | None:
        return None if v != v else float(v)
    return {"ttft_p50_s": pct(lat.ttft.p50), "ttft_p90_s": pct(lat.ttft.p90), "itl_p90_s": pct(lat.itl.p90),
            "e2e_p90_s": pct(lat.e2e.p90), "output_tokens_per_s": float(lat.output_tokens_per_s)}


def compare_splits(workload: Workload, config: EngineConfig, *, instances: int, kv_bytes_per_token: float,
                   link: KvLink | None = None, routing: str = "least-loaded", gpus_per_instance: int = 1,
                   cost_per_hour: float | None = None, splits: list[int] | None = None,
                   prefill_config: EngineConfig | None = None) -> list[SplitRow]:
    """``instances`` aggregated replicas of ``config``, then each split into x prefill + (instances - x) decode.

    Parameters
    ----------
    workload : Workload
        Arrivals in seconds.
    config : EngineConfig
        One instance (the aggregated replicas and the decode pool).
    instances : int
        Instances in every deployment (2 or more).
    kv_bytes_per_token : float
        The model's KV bytes per token.  # bytes
    link : KvLink, optional
        Default :class:`KvLink` () (50 GB/s, 100 us).
    splits : list of int, optional
        Prefill instance counts to try (default 1 .. instances - 1).
    prefill_config : EngineConfig, optional
        The prefill instances' own configuration (another GPU type or TP).

    Returns
    -------
    list of SplitRow
        Aggregated first, then the splits in the order given.
    """
    if isinstance(instances, bool) or not isinstance(instances, int) or not 2 <= instances <= 256:
        raise DisaggError(f"must be a whole number from 2 to 256, got {instances!r}", field="instances")
    splits = list(range(1, instances)) if splits is None else splits
    if any(isinstance(x, bool) or not isinstance(x, int) or not 1 <= x < instances for x in splits):
        raise DisaggError(f"prefill counts must lie between 1 and {instances - 1}, got {splits!r}", field="splits")
    agg = simulate_cluster(workload, config, instances, routing=routing)
    cost = None if cost_per_hour is None else instances * cost_per_hour
    rows = [SplitRow(f"aggregated x{instances}", 0, instances, instances * gpus_per_instance, cost,
                     int(agg.totals["finished"]), **_figures(agg.latency))]
    for x in splits:
        dep = DisaggregatedDeployment(
            Pool(prefill_config or config, x, routing, gpus_per_instance, cost_per_hour),
            Pool(config, instances - x, routing, gpus_per_instance, cost_per_hour),
            link or KvLink(), kv_bytes_per_token=int(round(kv_bytes_per_token)))
        res = dep.run(workload)
        rows.append(SplitRow(dep.name, x, instances - x, dep.num_gpus, dep.cost_per_hour,
                             int(res.totals["finished"]), **_figures(res.latency),
                             transfer_p90_s=res.transfer["p90_s"],
                             prefill_utilisation=res.pools["prefill"]["utilisation"],
                             decode_utilisation=res.pools["decode"]["utilisation"]))
    return rows


__all__ = ["SplitRow", "compare_splits", "engine_config_for"]
