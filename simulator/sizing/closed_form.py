"""Closed-form KV cache sizing, the way vLLM computes it at start-up.

Given a :class:`~simulator.base.specs.ModelSpec`, a :class:`~simulator.base.specs.GpuSpec`
and a :class:`~simulator.base.specs.DeploymentSpec`, :func:`plan` returns a
:class:`SizingResult`: KV bytes per token, bytes per block, the number of GPU
blocks vLLM would allocate, the "GPU KV cache size" in tokens, the "Maximum
concurrency for max_model_len tokens per request", the smallest cache that can
serve one ``max_model_len`` prompt, and the per-GPU memory budget.

vLLM's rule (v1 ``gpu_worker.determine_available_memory``)::

    available_kv = total_gpu_memory x gpu_memory_utilization
                   - weights - peak activation - non-torch memory
                   [- CUDA-graph estimate, when that estimate is enabled]
    num_gpu_blocks = available_kv // bytes_per_block

The weights are modelled in :mod:`simulator.sizing.weights` (:func:`weights_bytes_per_gpu`, with the
quantization of :mod:`simulator.sizing.quantization`); KV bytes per token, blocks and vLLM's KV
cache groups in :mod:`simulator.sizing.kv_layout`; activation, non-torch, CUDA-graph,
LoRA and encoder-cache terms and the vLLM version rules in
:mod:`simulator.sizing.memory_model`; each term can be replaced by the figure from a
real log (:mod:`simulator.sizing.vllm_log`). Sources and fit: ``docs/sizing.md``.

Units: ``# bytes`` unless a name ends in ``_gib`` (GiB = 2**30 bytes);
``# tokens``, ``# blocks``, ``# requests`` as named.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import simulator.sizing.quantization as quantization
from simulator.base import (
    GIB,
    DeploymentSpec,
    GpuSpec,
    LayerSpec,
    ModelSpec,
)
from simulator.sizing.draft_memory import DraftMemory
from simulator.sizing.fragmentation import FragmentationResult, paged_vs_naive, tier_blocks
from simulator.sizing.kv_layout import (
    KV_SCALE_OVERHEAD_BYTES,
    KVGroups,
    blocks_for_tokens,
    blocks_per_request,
    check_parallelism,
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_element_bytes,
    kv_groups,
    last_block_waste,
    layer_kv_elements_per_token,
    linear_state_bytes_per_request,
    min_blocks_unservable,
    pp_layer_partition,
    resolve_kv_dtype,
)
from simulator.sizing.memory_model import (
    ACTIVATION_DTYPES,
    CUDAGRAPH_GIB,
    CUDAGRAPH_SUBTRACTED_SINCE,
    NEWEST_VLLM,
    NON_TORCH_GIB,
    NON_TORCH_MULTI_GPU_GIB,
    SAMPLER_BYTES_PER_LOGIT,
    Overheads,
    VersionRules,
    activation_bytes,
    compute_dtype,
    cudagraph_subtracted,
    default_batch_knobs,
    encoder_cache_bytes,
    forward_activation_bytes,
    lora_bytes_per_gpu,
    non_torch_bytes,
    overheads,
    sampler_bytes,
    sampler_path,
    version_rules,
    warmup_sampler_need_bytes,
)
from simulator.sizing.memory_terms import MemoryTerm, memory_terms
from simulator.sizing.moe_parallel import check_moe_shape, local_experts
from simulator.sizing.vllm_log import calibrate, calibration_from_log, parse_vllm_log
from simulator.sizing.weights import estimate_num_parameters, weights_bytes_per_gpu

# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory of the tightest pipeline stage.  # GiB

    ``budget = total x gpu_memory_utilization``; ``kv`` is what vLLM reports as
    "Available KV cache memory"; ``kv_used`` what the allocated blocks occupy;
    ``free = total - budget`` (left to other processes) plus the unused tail of
    ``kv`` below one block. ``lora``: adapter slots (``max_loras x rank``);
    ``encoder_cache``: a multimodal model's encoder cache budget;
    ``kv_shortfall``: how far the KV memory is below zero (0 when it fits).
    """

    total: float
    budget: float
    weights: float
    activation: float
    non_torch: float
    cudagraph: float
    kv: float
    kv_used: float
    free: float
    lora: float = 0.0
    encoder_cache: float = 0.0
    kv_shortfall: float = 0.0


@dataclass(frozen=True)
class SizingResult:
    """What :func:`plan` computes; ``to_dict()`` gives the JSON the API returns.

    Attributes
    ----------
    kv_bytes_per_token : float
        Whole model, all attention layers.  # bytes
    kv_bytes_per_token_per_gpu : float
        One GPU of the tightest stage.  # bytes
    bytes_per_block_per_gpu : float
        vLLM's page size of one block on one GPU.  # bytes
    num_gpu_blocks : int
        vLLM's ``num_gpu_blocks`` (including the null block).  # blocks
    kv_cache_tokens : int
        vLLM's "GPU KV cache size: N tokens".  # tokens
    max_concurrency : float
        vLLM's "Maximum concurrency for max_model_len tokens per request".  # requests
    min_blocks_unservable : int
        Blocks one ``max_model_len`` request needs; fewer and it is unservable.  # blocks
    fits : bool
        vLLM would start (weights fit, KV memory positive, one max_model_len request fits).
    reason : str
        Why not, or a short confirmation.
    memory_gib : MemoryBreakdown
    quantization : str
        The weights' quantization (``"awq w4a16, group 128"``) or ``"none (bf16)"``.
    activation_dtype : str
        What ``kv_cache_dtype auto`` resolves to.
    kv_shortfall_gib : float
        GiB missing for the KV cache when the available memory is negative (0 otherwise).  # GiB
    vllm_rule : str
        The vLLM version rules the answer followed (:func:`version_rules`).
    memory_terms : tuple of MemoryTerm
        Every memory term with its figure, formula, vLLM source, version rule and whether it was given
        (:func:`simulator.sizing.memory_terms.memory_terms`).
    data_parallel_size, enable_expert_parallel, expert_parallel_size : int, bool, int
        The shape (``docs/moe_parallelism.md``); ``num_gpus`` is TP x PP x DP. ``num_gpu_blocks``,
        ``kv_cache_tokens`` and ``max_concurrency`` are per DP rank (each rank is an engine with its own pool,
        all the same size: vLLM's ``sync_kv_cache_memory_size`` takes the minimum over the ranks).
    local_experts : int or None
        Routed experts on the fullest GPU (whole with EP; every expert, as a slice, without); None for a dense model.  # experts
    kv_cache_tokens_per_deployment : int
        ``kv_cache_tokens x DP``.  # tokens
    max_concurrency_per_deployment : float
        ``max_concurrency x DP``: requests of ``max_model_len`` all DP ranks hold at once.  # requests
    """

    model: str
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    num_gpus: int
    kv_cache_dtype: str
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    bytes_per_block_per_gpu: float
    num_kv_groups: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    min_blocks_unservable: int
    last_block_waste_tokens: int
    kv_bytes_per_request: float
    fits: bool
    reason: str
    memory_gib: MemoryBreakdown
    weights_source: str
    available_kv_source: str
    num_parameters: int | None
    num_active_parameters: int | None
    cpu_tier_blocks: int | None = None
    disk_tier_blocks: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    quantization: str = ""
    activation_dtype: str = ""
    kv_shortfall_gib: float = 0.0
    vllm_rule: str = ""
    speculative: dict[str, Any] | None = None  # the drafter's memory (simulator.speculative.memory)
    memory_terms: tuple[MemoryTerm, ...] = ()  # each term with its formula, source and version rule
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    expert_parallel_size: int = 1
    local_experts: int | None = None
    kv_cache_tokens_per_deployment: int = 0  # tokens, all DP ranks
    max_concurrency_per_deployment: float = 0.0  # requests, all DP ranks

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        d["memory_terms"] = [t.to_dict() for t in self.memory_terms]
        if self.speculative is None:
            del d["speculative"]
        return d


@dataclass(frozen=True)
class WarmupCheck:
    """The sampler warm-up after the KV cache is allocated (``gpu_worker.compile_or_warm_up_model``).  # bytes

    ``need``: :func:`~simulator.sizing.memory_model.warmup_sampler_need_bytes`; ``free``: the GPU's total minus
    weights, non-torch memory, LoRA slots, the allocated KV blocks and the CUDA graphs; ``short = need - free``
    (> 0: vLLM dies after printing its KV cache size); ``max_seqs`` the largest ``max_num_seqs`` that fits.
    """

    need: float
    free: float
    requests: int
    max_seqs: int

    @property
    def short(self) -> float:
        return self.need - self.free


def _warmup_check(model: ModelSpec, deployment: DeploymentSpec, total_b: float, w_b: float, kv_used_b: float,
                  ov: Overheads, mnbt: int, seqs: int) -> WarmupCheck:
    need = warmup_sampler_need_bytes(model, deployment, mnbt, seqs)
    free = total_b - w_b - ov.non_torch - ov.lora - kv_used_b - ov.cudagraph
    reqs = min(seqs, mnbt)
    return WarmupCheck(need=need, free=free, requests=reqs,
                       max_seqs=_max_warmup_seqs(model, deployment, free - ov.activation, need, mnbt, reqs))


def _max_warmup_seqs(model: ModelSpec, deployment: DeploymentSpec, free_besides_activation: float, need: float,
                     mnbt: int, reqs: int) -> int:
    """The largest ``max_num_seqs`` whose warm-up fits: fewer sequences shrink the profiled peak too, so the KV
    cache takes what they free. Solves ``k s u <= F0 + max(forward, s u)`` (``u`` bytes per dummy request,
    ``k`` the warm-up factor, ``F0`` the memory free besides the activation reserve)."""
    sampler = sampler_bytes(model, deployment, mnbt, reqs)
    if sampler <= 0 or need <= 0:
        return reqs
    u, k = sampler / reqs, need / sampler
    fwd = forward_activation_bytes(model, deployment, mnbt)
    best = 0.0
    if k > 1 and (s1 := free_besides_activation / ((k - 1) * u)) * u >= fwd:
        best = s1
    if (s2 := (free_besides_activation + fwd) / (k * u)) * u <= fwd:
        best = max(best, s2)
    return max(0, min(int(best), reqs))


def _stage_layers(model: ModelSpec, pp: int) -> list[list[LayerSpec]]:
    specs = model.layer_specs
    return [[specs[i] for i in r] for r in pp_layer_partition(model.num_layers, pp)]


def _verdict(w_b: float, total_b: float, avail_b: float, ov: Overheads, budget_b: float, blocks: int,
             need: int, groups: KVGroups, mml: int, kv_tokens: int, conc: float,
             given_kv: bool = False, warmup: WarmupCheck | None = None) -> tuple[bool, str]:
    if w_b > total_b:
        return False, (f"weights need {w_b / GIB:.2f} GiB per GPU but the GPU has {total_b / GIB:.2f} GiB; "
                       "raise tensor/pipeline parallelism or quantize")
    if avail_b <= 0 and given_kv:
        return False, (f"no memory left for the KV cache, short by {-avail_b / GIB:.2f} GiB: the given "
                       f"'Available KV cache memory' is {avail_b / GIB:.2f} GiB (a start-up that failed)")
    if avail_b <= 0:
        return False, (f"no memory left for the KV cache, short by {-avail_b / GIB:.2f} GiB: budget "
                       f"{budget_b / GIB:.2f} GiB minus weights {w_b / GIB:.2f}, activation "
                       f"{ov.activation / GIB:.2f} and overhead {(ov.subtracted - ov.activation) / GIB:.2f} GiB "
                       f"leaves {avail_b / GIB:.2f} GiB")
    if groups.bytes_per_block and blocks - 1 < need:
        return False, (f"one request of max_model_len {mml:,} tokens needs {need:,} blocks but only "
                       f"{max(blocks - 1, 0):,} are usable; lower max_model_len or add memory")
    if warmup is not None and warmup.short > 0:
        return False, (f"vLLM would print {avail_b / GIB:.2f} GiB of KV cache and then run out of memory warming "
                       f"up the sampler with {warmup.requests:,} dummy requests: it needs {warmup.need / GIB:.2f} GiB, "
                       f"{warmup.free / GIB:.2f} GiB are left after the KV cache and CUDA graphs; lower max_num_seqs "
                       f"(to about {warmup.max_seqs:,}) or gpu_memory_utilization")
    return True, f"{kv_tokens:,} tokens of KV cache per GPU, about {conc:.2f} requests of {mml:,} tokens at once"


def _plan_notes(model: ModelSpec, gpu: GpuSpec, deployment: DeploymentSpec, groups: KVGroups,
                rules: VersionRules, kv_dtype: str) -> list[str]:
    notes: list[str] = list(model.config_notes)
    if groups.num_groups > 1:
        rule = "blocks / groups x block_size" if rules.hybrid_tokens_rule == "blocks_per_group" else \
            "max concurrency x max_model_len"
        notes.append(f"hybrid model: {groups.full_groups} full + {groups.sliding_groups} sliding-window KV groups of "
                     f"{groups.group_size} layers; 'GPU KV cache size' is {rule} as vLLM {rules.version} prints it")
    if groups.linear_state_bytes:
        notes.append("linear-attention / Mamba state counted as blocks per request (approximation)")
    if gpu.memory_gib_estimated:
        notes.append("GPU total memory estimated from nvidia-smi MiB minus 0.5 GiB")
    scheme = quantization.scheme_for(model, deployment.dtype)
    if scheme is not None and deployment.kv_cache_dtype == "auto":
        notes.append(f"weights {scheme.label}; the KV cache stays {kv_dtype} (kv_cache_dtype auto follows the "
                     "activation dtype); pass kv_cache_dtype fp8 to halve it")
    if scheme is not None and scheme.ignore:
        unknown = quantization.unquantized_fractions(model, scheme)[1]
        if unknown:
            notes.append("quantization ignore entries not matched to a layer (counted as quantized): "
                         + ", ".join(unknown[:5]))
    return notes


def _tightest_stage(model: ModelSpec, deployment: DeploymentSpec, kv_dtype: str, budget_b: float,
                    ov: Overheads) -> tuple[list[LayerSpec], KVGroups, float, float, int]:
    """Per pipeline stage: KV groups, weights, available memory, blocks; the stage with the fewest blocks
    (then the heaviest weights) decides. Returns ``(layers, groups, weights, available, blocks)``."""
    best = None
    for s, lays in enumerate(_stage_layers(model, deployment.pipeline_parallel_size)):
        groups = kv_groups(model, lays, kv_dtype, deployment.block_size, deployment.tensor_parallel_size)
        w_b = deployment.weights_gib * GIB if deployment.weights_gib is not None else \
            weights_bytes_per_gpu(model, deployment, s)
        avail_b = deployment.available_kv_gib * GIB if deployment.available_kv_gib is not None else \
            budget_b - w_b - ov.subtracted
        blocks = max(0, int(avail_b // groups.bytes_per_block)) if groups.bytes_per_block > 0 else 0
        key = (blocks if groups.bytes_per_block > 0 else float("inf"), -w_b)
        if best is None or key < best[0]:
            best = (key, lays, groups, w_b, avail_b, blocks)
    return best[1:]


def plan(model: ModelSpec, gpu: GpuSpec, deployment: DeploymentSpec, draft: DraftMemory | None = None) -> SizingResult:
    """Size the KV cache of one deployment the way vLLM does at start-up.

    Parameters
    ----------
    model : ModelSpec
    gpu : GpuSpec
    deployment : DeploymentSpec
        Knobs and optional calibration overrides (``weights_gib``,
        ``available_kv_gib``, ``activation_gib``, ``non_torch_gib``,
        ``cudagraph_gib``), all per GPU.
    draft : simulator.sizing.draft_memory.DraftMemory, optional
        Speculative decoding: the drafter's weights and KV come out of the budget
        (:func:`simulator.speculative.memory.plan_with_draft` builds it).

    Returns
    -------
    SizingResult
        Never raises for a deployment that merely does not fit: ``fits`` is
        False and ``reason`` says why (with the shortfall in GiB when the KV
        memory is negative).

    Raises
    ------
    SpecError
        For inconsistent input (TP that does not divide the heads, a
        quantization group size that does not divide the layers, no max_model_len...).
    """
    tp, pp, dp = deployment.tensor_parallel_size, deployment.pipeline_parallel_size, deployment.data_parallel_size
    check_parallelism(model, tp, pp)
    check_moe_shape(model, deployment)
    scheme = quantization.scheme_for(model, deployment.dtype)
    quantization.check_group_size(model, scheme, tp)
    rules = replace(version_rules(deployment.vllm_version), sampler_key=sampler_path(model, deployment.vllm_version))
    mml, mnbt, seqs = default_batch_knobs(model, gpu, deployment)
    B = deployment.block_size
    kv_dtype = resolve_kv_dtype(model, deployment)
    total_b = gpu.memory_gib * GIB
    budget_b = math.ceil(total_b * deployment.gpu_memory_utilization)
    ov = overheads(model, deployment, rules, mnbt, seqs, gpu)

    lays, groups, w_b, avail_b, blocks = _tightest_stage(model, deployment, kv_dtype, budget_b, ov)
    spec_d = None
    if draft is not None:
        blocks0 = blocks
        groups, w_b, avail_b, blocks = draft.apply(groups, B, w_b, avail_b, deployment.available_kv_gib is not None)
        spec_d = draft.to_dict(blocks0, blocks)

    need = blocks_per_request(groups, mml, B, mnbt) if groups.bytes_per_block else 0
    conc = blocks / need if need else 0.0
    if groups.num_groups > 1 and rules.hybrid_tokens_rule == "concurrency_x_len":
        kv_tokens = int(conc * mml)
    else:
        kv_tokens = (blocks // max(1, groups.num_groups)) * B
    kv_used_b = blocks * groups.bytes_per_block
    warmup = _warmup_check(model, deployment, total_b, w_b, kv_used_b, ov, mnbt, seqs)
    fits, reason = _verdict(w_b, total_b, avail_b, ov, budget_b, blocks, need, groups, mml, kv_tokens, conc,
                            deployment.available_kv_gib is not None, warmup)
    notes = _plan_notes(model, gpu, deployment, groups, rules, kv_dtype)

    bpb_dep = sum(kv_groups(model, ls, kv_dtype, B, tp).bytes_per_block for ls in _stage_layers(model, pp)) * tp
    shortfall = max(-avail_b, 0.0) / GIB
    mem = MemoryBreakdown(
        total=gpu.memory_gib, budget=budget_b / GIB, weights=w_b / GIB, activation=ov.activation / GIB,
        non_torch=ov.non_torch / GIB, cudagraph=ov.cudagraph / GIB, kv=max(avail_b, 0.0) / GIB,
        kv_used=kv_used_b / GIB, free=(total_b - budget_b + max(avail_b - kv_used_b, 0.0)) / GIB,
        lora=ov.lora / GIB, encoder_cache=ov.encoder / GIB, kv_shortfall=shortfall,
    )
    total_p, active_p = estimate_num_parameters(model)
    return SizingResult(
        model=model.name, gpu=gpu.name, tensor_parallel_size=tp, pipeline_parallel_size=pp,
        num_gpus=deployment.num_gpus, kv_cache_dtype=kv_dtype, block_size=B, max_model_len=mml,
        max_num_batched_tokens=mnbt, max_num_seqs=seqs,
        kv_bytes_per_token=kv_bytes_per_token(model, kv_dtype),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token(model, kv_dtype, tp, lays, per_gpu=True),
        bytes_per_block_per_gpu=groups.bytes_per_block, num_kv_groups=groups.num_groups, num_gpu_blocks=blocks,
        kv_cache_tokens=kv_tokens, max_concurrency=conc, min_blocks_unservable=need,
        last_block_waste_tokens=last_block_waste(mml, B), kv_bytes_per_request=kv_bytes_per_request(model, mml, kv_dtype),
        fits=fits, reason=reason, memory_gib=mem,
        weights_source="given" if deployment.weights_gib is not None else "modelled",
        available_kv_source="given" if deployment.available_kv_gib is not None else "modelled",
        num_parameters=model.num_parameters or total_p, num_active_parameters=model.num_active_parameters or active_p,
        cpu_tier_blocks=_tier(deployment.cpu_tier_gib, bpb_dep), disk_tier_blocks=_tier(deployment.disk_tier_gib, bpb_dep),
        notes=tuple(notes), quantization=quantization.describe(model, deployment.dtype),
        activation_dtype=compute_dtype(model, deployment), kv_shortfall_gib=shortfall, vllm_rule=rules.summary,
        speculative=spec_d, memory_terms=memory_terms(model, gpu, deployment, w_b, ov, mnbt, seqs, warmup),
        data_parallel_size=dp, enable_expert_parallel=deployment.enable_expert_parallel,
        expert_parallel_size=deployment.expert_parallel_size,
        local_experts=local_experts(model, deployment) if model.is_moe else None,
        kv_cache_tokens_per_deployment=kv_tokens * dp, max_concurrency_per_deployment=conc * dp,
    )


def _tier(gib: float | None, bytes_per_block: float) -> int | None:
    if gib is None:
        return None
    return int(gib * GIB // bytes_per_block) if gib and bytes_per_block else 0


__all__ = [
    "ACTIVATION_DTYPES",
    "CUDAGRAPH_GIB",
    "CUDAGRAPH_SUBTRACTED_SINCE",
    "NEWEST_VLLM",
    "NON_TORCH_GIB",
    "NON_TORCH_MULTI_GPU_GIB",
    "Overheads",
    "KV_SCALE_OVERHEAD_BYTES",
    "SAMPLER_BYTES_PER_LOGIT",
    "FragmentationResult",
    "KVGroups",
    "MemoryBreakdown",
    "MemoryTerm",
    "SizingResult",
    "VersionRules",
    "activation_bytes",
    "encoder_cache_bytes",
    "lora_bytes_per_gpu",
    "version_rules",
    "blocks_for_tokens",
    "blocks_per_request",
    "calibrate",
    "calibration_from_log",
    "check_parallelism",
    "compute_dtype",
    "cudagraph_subtracted",
    "default_batch_knobs",
    "estimate_num_parameters",
    "kv_bytes_per_request",
    "kv_bytes_per_token",
    "kv_element_bytes",
    "kv_groups",
    "last_block_waste",
    "layer_kv_elements_per_token",
    "linear_state_bytes_per_request",
    "min_blocks_unservable",
    "non_torch_bytes",
    "paged_vs_naive",
    "parse_vllm_log",
    "plan",
    "pp_layer_partition",
    "resolve_kv_dtype",
    "tier_blocks",
    "weights_bytes_per_gpu",
]
