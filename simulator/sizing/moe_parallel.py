"""Where an MoE model's layers live under TP x PP x DP with expert parallelism on or off, as vLLM places them.

A deployment of ``data_parallel_size`` ranks of ``TP x PP`` GPUs (``docs/moe_parallelism.md``):

- **Attention, embeddings, dense layers, norms** are replicated on every DP rank and split by TP within it, as
  without DP (``vllm/config/parallel.py`` ``ParallelConfig.data_parallel_size``: "MoE layers will be sharded
  according to the product of the tensor, prefill-context, and data parallel sizes"; nothing else is). Each DP
  rank is its own engine with its own KV cache pool (``vllm/v1/engine/core.py`` ``DPEngineCoreProc``); vLLM
  makes the pools the same size on every rank (``ParallelConfig.sync_kv_cache_memory_size``: the minimum over
  the DP group).
- **KV cache** per GPU is what one TP rank of one DP rank holds: GQA heads split by TP (replicated when
  ``TP > kv_heads``), the MLA latent whole on every TP rank
  (:func:`simulator.sizing.kv_layout.layer_kv_elements_per_token`); DP multiplies the pools, not the bytes a GPU
  holds per token.
- **Routed experts** are sharded over all ``TP x DP`` GPUs (``vllm/model_executor/layers/fused_moe/config.py``
  ``FusedMoEParallelConfig.make`` / ``flatten_tp_across_dp``): EP off, every expert is split ``TP x DP`` ways;
  EP on (``enable_expert_parallel``, ``use_ep = TP x DP > 1``), ``ep_size = TP x DP`` and each GPU holds whole
  experts, ``ceil(E / ep_size)`` on the fullest rank (``fused_moe/expert_map_manager.py``
  ``determine_expert_map``: ``base = E // ep_size``, the first ``E % ep_size`` ranks one more).
- **Shared experts** are split by TP like a dense MLP, except when vLLM runs the MoE block sequence-parallel
  (``ParallelConfig.use_sequence_parallel_moe``: EP on, TP > 1 and DP > 1 with the default all-to-all backend):
  then DeepSeek-V2/V3's and Llama 4's shared experts are replicated on every TP rank
  (``models/deepseek_v2.py`` ``DeepseekV2MLP(..., disable_tp=is_sequence_parallel)``).
- **All-to-all buffers**: the default backend (``all2all_backend = "allgather_reducescatter"``) allocates no
  buffer of its own: it all-gathers and reduce-scatters over the EP group's NCCL communicator, whose buffers
  :func:`simulator.sizing.memory_model.non_torch_rule` counts. DeepEP's kernels would add
  ``VLLM_DEEPEP_BUFFER_SIZE_MB`` (1024 MiB) of NVLink buffer per GPU (and as much RDMA across nodes;
  ``device_communicators/all2all.py`` ``DeepEPHTAll2AllManager._make_all2all_kwargs``); not modelled: give the
  log's non-torch figure (``non_torch_gib``).

Pure: no Django. Units: ``# experts``, ``# GPUs``, fractions as named.
"""

from __future__ import annotations

from simulator.base import DeploymentSpec, ModelSpec, SpecError
from simulator.base.specs import DEPLOYMENT_LIMITS

#: Cap on a deployment's DP ranks (one of :data:`simulator.base.specs.DEPLOYMENT_LIMITS`).
MAX_DATA_PARALLEL_SIZE = int(DEPLOYMENT_LIMITS["data_parallel_size"])  # DP ranks


def check_moe_shape(model: ModelSpec, deployment: DeploymentSpec) -> None:
    """Raise :class:`SpecError` (naming the field and vLLM's rule) for a DP / EP shape vLLM would not run.

    - ``enable_expert_parallel`` needs an MoE model: vLLM's flag "use expert parallelism instead of tensor
      parallelism for MoE layers" has no layer to act on in a dense model (its ``FusedMoE`` layers are the only
      readers of ``use_ep``), so the planner refuses it rather than silently ignore it.
    - EP size (``TP x DP``) at most the number of routed experts: ``determine_expert_map`` would leave ranks
      without an expert.
    - ``data_parallel_size`` at most :data:`MAX_DATA_PARALLEL_SIZE`.
    """
    dp = deployment.data_parallel_size
    if dp > MAX_DATA_PARALLEL_SIZE:
        raise SpecError(f"{dp:,} is more than the limit of {MAX_DATA_PARALLEL_SIZE:,}", field="data_parallel_size")
    if not deployment.enable_expert_parallel:
        split = deployment.tensor_parallel_size * dp
        width = getattr(model, "moe_intermediate_size", None) or model.intermediate_size
        if dp > 1 and model.is_moe and width and width % split:
            raise SpecError(f"without expert parallelism every routed expert is split TP x DP = "
                            f"{deployment.tensor_parallel_size} x {dp} = {split} ways, which does not divide "
                            f"{model.name}'s expert intermediate size {width:,} (vLLM's FusedMoE: "
                            "divide(intermediate_size, tp_size) over the flattened TP x DP group); choose a DP "
                            "that divides it or turn expert parallelism on", field="data_parallel_size")
        return
    if not model.is_moe:
        raise SpecError(f"{model.name} has no experts; vLLM's expert parallelism "
                        "(--enable-expert-parallel) applies to MoE layers only", field="enable_expert_parallel")
    ep = deployment.expert_parallel_size
    if ep > model.num_experts:
        raise SpecError(f"EP size = TP x DP = {deployment.tensor_parallel_size} x {dp} = "
                        f"{ep} is more than {model.name}'s {model.num_experts} routed experts (vLLM's "
                        "determine_expert_map gives each EP rank at least one); lower TP x DP or turn EP off", field="enable_expert_parallel")


def local_experts(model: ModelSpec, deployment: DeploymentSpec) -> int:
    """Routed experts on the fullest GPU: ``ceil(E / ep_size)`` with EP, all ``E`` (each a slice) without.  # experts"""
    ep = deployment.expert_parallel_size
    return -(-model.num_experts // ep)


def routed_expert_share(model: ModelSpec, deployment: DeploymentSpec) -> float:
    """Fraction of all routed-expert weights one GPU (the fullest) holds.

    EP off: ``1 / (TP x DP)`` (each expert split ``TP x DP`` ways: ``1 / TP`` at DP 1, as before). EP on:
    ``ceil(E / ep_size) / E`` (whole experts).
    """
    if deployment.expert_parallel_size > 1:
        return local_experts(model, deployment) / model.num_experts
    return 1.0 / deployment.moe_parallel_size


def sequence_parallel_moe(deployment: DeploymentSpec) -> bool:
    """vLLM's ``ParallelConfig.use_sequence_parallel_moe`` with the default all-to-all backend: EP on, TP > 1
    and DP > 1 (each TP rank then runs the MoE block on its own slice of the tokens, the shared experts whole)."""
    return (deployment.enable_expert_parallel and deployment.tensor_parallel_size > 1
            and deployment.data_parallel_size > 1)


def shared_expert_tp(deployment: DeploymentSpec) -> int:
    """Ways the shared experts are split: TP, or 1 (replicated) when the MoE block is sequence-parallel.  # GPUs"""
    return 1 if sequence_parallel_moe(deployment) else deployment.tensor_parallel_size


def expert_split(deployment: DeploymentSpec) -> int:
    """Ways each routed expert's intermediate is split: 1 (whole) with EP, else ``TP x DP``
    (``FusedMoE.intermediate_size_per_partition``).  # GPUs"""
    return 1 if deployment.expert_parallel_size > 1 else deployment.moe_parallel_size


def uses_all2all(model: ModelSpec, deployment: DeploymentSpec) -> bool:
    """The MoE layers exchange tokens across DP ranks (``ParallelConfig.use_all2all``: DP > 1) — MoE models only:
    a dense model's DP ranks are independent engines (``ParallelConfig.reconfigure_for_independent_dp_rank``)."""
    return model.is_moe and deployment.data_parallel_size > 1


def shape_label(deployment: DeploymentSpec) -> str:
    """``"TP 8"``, ``"DP 8 + EP 8"``, ``"TP 2 x DP 4 + EP 8"``, ``"TP 4 x PP 2"``: the deployment's shape in words."""
    tp, pp, dp = deployment.tensor_parallel_size, deployment.pipeline_parallel_size, deployment.data_parallel_size
    parts = [f"TP {tp}"] if tp > 1 or dp == 1 else []
    if pp > 1:
        parts.append(f"PP {pp}")
    if dp > 1:
        parts.append(f"DP {dp}")
    label = " x ".join(parts)
    if deployment.expert_parallel_size > 1:
        label += f" + EP {deployment.expert_parallel_size}"
    return label


__all__ = ["MAX_DATA_PARALLEL_SIZE", "check_moe_shape", "expert_split", "local_experts",
           "routed_expert_share", "sequence_parallel_moe", "shape_label", "shared_expert_tp", "uses_all2all"]
