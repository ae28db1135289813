"""Each memory term of a plan with its figure, its formula, its vLLM source and the version rule it used.

:func:`memory_terms` turns what :func:`simulator.sizing.closed_form.plan` computed into the rows the API
(``memory_terms``) and the sizing page show; a term read from the user's log says ``source: "given"`` and keeps
its figure (the log wins, term by term). Formulas and sources: ``docs/sizing.md``. Pure: no Django.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from simulator.base import GIB, DeploymentSpec, GpuSpec, ModelSpec
from simulator.sizing.memory_model import (
    SAMPLER_BYTES_PER_LOGIT,
    compute_dtype,
    cudagraph_subtracted,
    forward_activation_bytes,
    non_torch_rule,
    sampler_bytes,
    sampler_path,
    sampler_requests,
    version_rules,
)
from simulator.sizing.moe_parallel import local_experts, sequence_parallel_moe, uses_all2all
from simulator.sizing.weights import rope_cache_bytes, vision_bytes_per_gpu

_SAMPLER_RULES = {
    "v0": "V0 engine (< 0.7): sampling with top-k/top-p inside the profile run",
    "0.7-0.10": "V1 0.7-0.10: dummy sampler without the top-k/top-p sort",
    "mrv1": "model runner V1 (0.11 on; MoE models until 0.29): top-k/top-p with a full-vocabulary sort",
    "mrv2": "model runner V2 (dense models from 0.25, all from 0.29): no full-vocabulary sort",
}


_WARMUP_RULES = {
    "v0": "V0 engine: no sampler warm-up after the KV cache",
    "0.7-0.10": "the sampler once more after the KV cache",
    "mrv1": "1.6 x the profiled sampler on model runner V1 (fitted on gpt-oss-20b at gmu 0.9 / 0.95)",
    "mrv2": "the sampler once more after the KV cache (model runner V2)",
}


@dataclass(frozen=True)
class MemoryTerm:
    """One row of the memory breakdown, per GPU.

    Attributes
    ----------
    key : str
        ``weights``, ``activation_forward``, ``activation_sampler``, ``activation``, ``non_torch``, ``cudagraph``,
        ``lora``, ``encoder_cache``, ``all2all`` (MoE with DP > 1), ``sampler_warmup``.
    gib : float
        The figure used.  # GiB
    source : str
        ``"modelled"`` or ``"given"`` (read from the user's log or typed in).
    formula : str
        The formula with this plan's numbers.
    vllm_source : str
        The vLLM file and function that allocates or measures it.
    rule : str
        The vLLM version rule that applied.
    subtracted : bool
        Taken off the KV cache budget (``activation_forward`` / ``activation_sampler`` are the two parts of
        ``activation``; ``sampler_warmup`` is a start-up check, not a deduction).
    """

    key: str
    label: str
    gib: float
    source: str
    formula: str
    vllm_source: str
    rule: str
    subtracted: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _weights_term(model: ModelSpec, deployment: DeploymentSpec, w_b: float) -> MemoryTerm:
    given = deployment.weights_gib is not None
    vision, rope = vision_bytes_per_gpu(model, deployment), rope_cache_bytes(model, deployment)
    formula = (f"language model {(w_b - vision - rope) / GIB:.2f} GiB (parameters x bytes / TP, embedding on the "
               f"first stage, head on the last) + vision tower {vision / GIB:.2f} + rotary cos/sin cache "
               f"{rope / GIB:.2f}") if not given else "your log's 'Model loading took'"
    tie = "tied" if model.tie_word_embeddings else "untied"
    formula += _experts_words(model, deployment) if not given else ""
    return MemoryTerm("weights", "Weights", w_b / GIB, "given" if given else "modelled", formula,
                      "gpu_model_runner.load_model ('Model loading took'); rotary_embedding RotaryEmbedding.__init__",
                      f"embeddings {tie}; vision tower sharded over TP (mm_encoder_tp_mode 'weights')", True)


def _experts_words(model: ModelSpec, deployment: DeploymentSpec) -> str:
    """Where an MoE model's experts sit under DP / EP, for the weights formula ("" at DP 1 with EP off)."""
    if not model.is_moe or (deployment.data_parallel_size == 1 and deployment.expert_parallel_size == 1):
        return ""
    if deployment.expert_parallel_size > 1:
        words = (f"; routed experts whole, {local_experts(model, deployment)} of {model.num_experts} per GPU "
                 f"(EP {deployment.expert_parallel_size} = TP x DP)")
    else:
        words = f"; each routed expert split TP x DP = {deployment.moe_parallel_size} ways (EP off)"
    if model.num_shared_experts and sequence_parallel_moe(deployment):
        words += "; shared experts whole on every TP rank (sequence-parallel MoE)"
    return words + "; attention, embeddings and dense layers replicated on every DP rank, split by TP"


def _all2all_term(model: ModelSpec, deployment: DeploymentSpec) -> MemoryTerm:
    """The MoE all-to-all's own buffers: none with vLLM's default backend (docs/moe_parallelism.md)."""
    return MemoryTerm(
        "all2all", "MoE all-to-all buffers", 0.0, "modelled",
        "0 with the default backend (all-gather / reduce-scatter over the EP group's NCCL communicator, counted in "
        "non-torch memory); DeepEP would add VLLM_DEEPEP_BUFFER_SIZE_MB (1024 MiB) per GPU: give non_torch_gib",
        "config/parallel.py ParallelConfig.all2all_backend; device_communicators/all2all.py",
        f"DP {deployment.data_parallel_size}, EP {deployment.expert_parallel_size}", False)


def _activation_terms(model: ModelSpec, deployment: DeploymentSpec, act_b: float, mnbt: int,
                      seqs: int) -> list[MemoryTerm]:
    path = sampler_path(model, deployment.vllm_version)
    fwd = forward_activation_bytes(model, deployment, mnbt)
    smp = sampler_bytes(model, deployment, mnbt, seqs)
    reqs = sampler_requests(deployment, mnbt, seqs)
    b = SAMPLER_BYTES_PER_LOGIT[path]
    a = compute_dtype(model, deployment)
    given = deployment.activation_gib is not None
    src = "given" if given else "modelled"
    return [
        MemoryTerm("activation_forward", "Activation: dummy forward pass", fwd / GIB, "modelled",
                   f"{mnbt:,} tokens x {a} x (3 x {model.hidden_size:,} + widest per-rank intermediate)",
                   "gpu_model_runner.profile_run -> _dummy_run(max_num_batched_tokens)", "every V1 version", False),
        MemoryTerm("activation_sampler", "Activation: sampler warm-up", smp / GIB, "modelled",
                   f"{reqs:,.0f} dummy requests x {model.vocab_size:,} vocab x {b:g} B per logit",
                   "gpu_model_runner.profile_run -> _dummy_sampler_run; topk_topp_sampler.apply_top_k_top_p",
                   _SAMPLER_RULES[path], False),
        MemoryTerm("activation", "Peak activation", act_b / GIB, src,
                   "your log's activation peak" if given else "max(forward pass, sampler warm-up)",
                   "gpu_worker.determine_available_memory (torch peak of profile_run)",
                   f"vLLM {version_rules(deployment.vllm_version).version}", True),
    ]


def memory_terms(model: ModelSpec, gpu: GpuSpec, deployment: DeploymentSpec, w_b: float, ov: Any, mnbt: int,
                 seqs: int, warmup: Any) -> tuple[MemoryTerm, ...]:
    """The breakdown rows of one plan (``ov``: :class:`~simulator.sizing.memory_model.Overheads`; ``warmup``:
    :class:`~simulator.sizing.closed_form.WarmupCheck`)."""
    nt_gib, nt_rule = non_torch_rule(deployment, gpu, model)
    sub = cudagraph_subtracted(deployment)
    terms = [_weights_term(model, deployment, w_b), *_activation_terms(model, deployment, ov.activation, mnbt, seqs)]
    terms.append(MemoryTerm(
        "non_torch", "Non-torch memory", ov.non_torch / GIB, "given" if deployment.non_torch_gib is not None else
        "modelled", "your log's non-torch memory" if deployment.non_torch_gib is not None else f"{nt_gib:.2f} GiB",
        "gpu_worker.determine_available_memory (non_torch_increase); NCCL, custom_all_reduce", nt_rule, True))
    cg_given = deployment.cudagraph_gib is not None
    terms.append(MemoryTerm(
        "cudagraph", "CUDA graphs", ov.cudagraph / GIB, "given" if cg_given else "modelled",
        "your log's CUDA graph memory" if cg_given else ("0 (enforce_eager)" if deployment.enforce_eager else
                                                         "0.5 GiB estimate"),
        "gpu_model_runner.profile_cudagraph_memory / capture_model",
        "subtracted before sizing (vLLM >= 0.21)" if sub else "captured after sizing, not subtracted", sub))
    if ov.lora:
        terms.append(MemoryTerm("lora", "LoRA adapter slots", ov.lora / GIB, "modelled",
                                f"{deployment.max_loras} adapters x rank {deployment.max_lora_rank} x per-layer A/B",
                                "lora.layers (stacked A/B buffers at load)", "every version", True))
    if ov.encoder:
        terms.append(MemoryTerm("encoder_cache", "Multimodal encoder cache", ov.encoder / GIB, "modelled",
                                f"max({mnbt:,}, {model.mm_tokens_per_item:,} image tokens) x hidden x activation bytes",
                                "gpu_model_runner.profile_run (encoder cache budget)", "every V1 version", True))
    if uses_all2all(model, deployment):
        terms.append(_all2all_term(model, deployment))
    terms.append(MemoryTerm(
        "sampler_warmup", "Sampler warm-up after the KV cache", warmup.need / GIB, "modelled",
        f"needs {warmup.need / GIB:.2f} GiB; {warmup.free / GIB:.2f} GiB free after the KV cache and CUDA graphs",
        "gpu_worker.compile_or_warm_up_model -> _dummy_sampler_run", _WARMUP_RULES[sampler_path(model,
                                                                                      deployment.vllm_version)], False))
    return tuple(terms)


__all__ = ["MemoryTerm", "memory_terms"]
