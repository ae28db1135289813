"""Closed-form KV cache sizing, the way vLLM computes it at start-up.

Given a :class:`~simulator.specs.ModelSpec`, a :class:`~simulator.specs.GpuSpec`
and a :class:`~simulator.specs.DeploymentSpec`, :func:`plan` returns a
:class:`SizingResult`: KV bytes per token, bytes per block, the number of GPU
blocks vLLM would allocate, the "GPU KV cache size" in tokens, the "Maximum
concurrency for max_model_len tokens per request", the smallest cache that can
serve one ``max_model_len`` prompt, and the per-GPU memory budget.

vLLM's rule (v1 ``gpu_worker.determine_available_memory``)::

    available_kv = total_gpu_memory x gpu_memory_utilization
                   - weights - peak activation - non-torch memory
                   [- CUDA-graph estimate, when that estimate is enabled]
    num_gpu_blocks = available_kv // bytes_per_block

The weights are modelled here (:func:`weights_bytes_per_gpu`, with the
quantization of :mod:`simulator.quantization`); activation, non-torch, CUDA-graph,
LoRA and encoder-cache terms and the vLLM version rules in
:mod:`simulator.memory_model`; each term can be replaced by the figure from a
real log (:mod:`simulator.vllm_log`). Sources and fit: ``docs/sizing.md``.

Units: ``# bytes`` unless a name ends in ``_gib`` (GiB = 2**30 bytes);
``# tokens``, ``# blocks``, ``# requests`` as named.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator import quantization
from simulator.fragmentation import FragmentationResult, paged_vs_naive, tier_blocks
from simulator.memory_model import (
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
    lora_bytes_per_gpu,
    non_torch_bytes,
    overheads,
    version_rules,
)
from simulator.specs import (
    DTYPE_BYTES,
    GIB,
    LAYER_FULL,
    LAYER_LINEAR,
    LAYER_SLIDING,
    DeploymentSpec,
    GpuSpec,
    LayerSpec,
    ModelSpec,
    SpecError,
)
from simulator.vllm_log import calibrate, calibration_from_log, parse_vllm_log

if TYPE_CHECKING:
    from simulator.speculative_sizing import DraftMemory

# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------

#: Extra bytes per cached element for the scales a KV format needs.
#: fp8/int8 in vLLM use one scale per tensor (per layer): negligible, 0.
#: int4: one fp16 scale per group of 64 elements (2/64 B); fp4/nvfp4: one fp8
#: scale per 16 elements (1/16 B), as NVFP4 defines it.
KV_SCALE_OVERHEAD_BYTES: dict[str, float] = {
    "fp32": 0.0, "bf16": 0.0, "fp16": 0.0, "fp8": 0.0, "fp8_e4m3": 0.0, "fp8_e5m2": 0.0, "int8": 0.0,
    "int4": 2.0 / 64, "fp4": 1.0 / 16, "nvfp4": 1.0 / 16, "mxfp4": 1.0 / 32,
}


def kv_element_bytes(kv_dtype: str) -> float:
    """Bytes per cached K/V element, scale overhead included.  # bytes

    Parameters
    ----------
    kv_dtype : str
        Canonical dtype name (``bf16``, ``fp8``, ``int4``, ``fp4``...).
    """
    if kv_dtype not in DTYPE_BYTES:
        raise SpecError(f"kv_cache_dtype: unknown dtype {kv_dtype!r}")
    return DTYPE_BYTES[kv_dtype] + KV_SCALE_OVERHEAD_BYTES.get(kv_dtype, 0.0)


def resolve_kv_dtype(model: ModelSpec, deployment: DeploymentSpec) -> str:
    """``kv_cache_dtype``, with ``auto`` resolved to the activation dtype (:func:`compute_dtype`):
    quantized weights (AWQ, GPTQ, fp8, NVFP4...) never quantize the KV cache by themselves."""
    return compute_dtype(model, deployment) if deployment.kv_cache_dtype == "auto" else deployment.kv_cache_dtype


# ---------------------------------------------------------------------------
# per-token KV
# ---------------------------------------------------------------------------


def check_parallelism(model: ModelSpec, tensor_parallel_size: int, pipeline_parallel_size: int = 1) -> None:
    """Raise :class:`SpecError` when vLLM would refuse this TP / PP split."""
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    if model.num_attention_heads % tp:
        raise SpecError(f"tensor_parallel_size: {tp} does not divide num_attention_heads {model.num_attention_heads}")
    if model.attention != "MLA":
        for kv in {lay.num_kv_heads or model.num_kv_heads for lay in model.layer_specs}:
            if kv % tp and tp % kv:
                raise SpecError(f"tensor_parallel_size: {tp} and num_kv_heads {kv} must divide one another")
    if pp > model.num_layers:
        raise SpecError(f"pipeline_parallel_size: {pp} is more than num_layers {model.num_layers}")


def layer_kv_elements_per_token(model: ModelSpec, layer: LayerSpec, tensor_parallel_size: int = 1) -> int:
    """K/V elements one token occupies in one attention layer on one TP rank.  # elements

    Full / sliding attention: ``2 x kv_heads_per_rank x head_dim`` where
    ``kv_heads_per_rank = max(1, kv_heads // tp)`` (heads are replicated when
    ``tp > kv_heads``). MLA: ``kv_lora_rank + qk_rope_head_dim`` (one latent,
    not K and V), held whole by every rank. Linear / Mamba layers: 0 (fixed
    state, see :func:`linear_state_bytes_per_request`).
    """
    if layer.kind == LAYER_LINEAR:
        return 0
    if model.attention == "MLA":
        return int(model.kv_lora_rank) + int(model.qk_rope_head_dim or 0)
    kv = layer.num_kv_heads or model.num_kv_heads
    hd = layer.head_dim or model.head_dim
    return 2 * max(1, kv // tensor_parallel_size) * hd


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16", tensor_parallel_size: int = 1,
                       layers: Sequence[LayerSpec] | None = None, *, per_gpu: bool = False) -> float:
    """KV bytes one token of context occupies, over all attention layers.  # bytes

    Parameters
    ----------
    model : ModelSpec
    kv_dtype : str
        Canonical KV cache dtype.
    tensor_parallel_size : int
        TP degree.
    layers : sequence of LayerSpec, optional
        Restrict to these layers (one pipeline stage); default all.
    per_gpu : bool
        False: whole model (the sum over ranks, i.e. ``2 x layers x kv_heads x
        head_dim x bytes`` for a dense model; replicated heads and the MLA
        latent are counted once). True: what one TP rank holds.

    Sliding-window layers are counted in full here (this is the per-token
    width vLLM pages); they hold at most their window per request, see
    :func:`kv_bytes_per_request`.
    """
    lays = model.layer_specs if layers is None else layers
    tp = tensor_parallel_size if per_gpu else 1
    elems = sum(layer_kv_elements_per_token(model, lay, tp) for lay in lays)
    return elems * kv_element_bytes(kv_dtype)


def linear_state_bytes_per_request(model: ModelSpec, tensor_parallel_size: int = 1,
                                   layers: Sequence[LayerSpec] | None = None, *, per_gpu: bool = False) -> float:
    """Fixed per-request state of linear-attention / Mamba layers.  # bytes

    Split evenly across TP ranks when ``per_gpu``.
    """
    lays = model.layer_specs if layers is None else layers
    total = float(sum(lay.state_bytes for lay in lays if lay.kind == LAYER_LINEAR))
    return total / tensor_parallel_size if per_gpu else total


def kv_bytes_per_request(model: ModelSpec, tokens: int, kv_dtype: str = "bf16") -> float:
    """KV bytes one request of ``tokens`` tokens holds, whole model.  # bytes

    Full layers hold every token, sliding-window layers at most ``window``
    tokens, linear layers their fixed state.
    """
    eb = kv_element_bytes(kv_dtype)
    total = 0.0
    for lay in model.layer_specs:
        if lay.kind == LAYER_LINEAR:
            total += lay.state_bytes
            continue
        n = min(tokens, lay.window) if lay.kind == LAYER_SLIDING else tokens
        total += n * layer_kv_elements_per_token(model, lay, 1) * eb
    return total


# ---------------------------------------------------------------------------
# blocks
# ---------------------------------------------------------------------------


def blocks_for_tokens(tokens: int | np.ndarray, block_size: int) -> int | np.ndarray:
    """Blocks a request of ``tokens`` tokens needs: ``ceil(tokens / block_size)``.  # blocks"""
    if isinstance(tokens, np.ndarray):
        return -(-tokens // block_size)
    return -(-int(tokens) // int(block_size))


def last_block_waste(tokens: int, block_size: int) -> int:
    """Unused slots in a request's last block: ``block_size - tokens % block_size``, or 0.  # tokens"""
    r = int(tokens) % int(block_size)
    return 0 if r == 0 else int(block_size) - r


def min_blocks_unservable(max_input_tokens: int, block_size: int) -> int:
    """Total blocks below which a prompt of ``max_input_tokens`` can never be scheduled (BLIS
    ``DroppedUnservable``): ``ceil(max_input / block_size)``.  # blocks"""
    return int(blocks_for_tokens(max_input_tokens, block_size))


def pp_layer_partition(num_layers: int, pipeline_parallel_size: int) -> list[range]:
    """Layer indices of each pipeline stage, as vLLM's ``get_pp_indices`` splits them
    (even split; the remainder goes to the stages before the last)."""
    pp = pipeline_parallel_size
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    out, start = [], 0
    for n in parts:
        out.append(range(start, start + n))
        start += n
    return out


@dataclass(frozen=True)
class KVGroups:
    """vLLM's KV cache groups for one pipeline stage on one rank.

    Attributes
    ----------
    group_size : int
        Layers per group (all groups share one block pool; a block holds one group's layers).
    full_groups, sliding_groups : int
        Groups of full-attention and sliding-window layers.
    sliding_window : int or None
        Largest window among the sliding groups.  # tokens
    bytes_per_block : float
        ``group_size x block_size x widest per-layer page``.  # bytes
    linear_state_bytes : float
        Fixed per-request state of the stage's linear layers on this rank.  # bytes
    """

    group_size: int
    full_groups: int
    sliding_groups: int
    sliding_window: int | None
    bytes_per_block: float
    linear_state_bytes: float

    @property
    def num_groups(self) -> int:
        return self.full_groups + self.sliding_groups


def kv_groups(model: ModelSpec, layers: Sequence[LayerSpec], kv_dtype: str, block_size: int,
              tensor_parallel_size: int = 1) -> KVGroups:
    """Group a stage's attention layers the way vLLM's hybrid allocator does.

    One kind of attention: one group of all layers. Several kinds (gpt-oss:
    18 full + 18 sliding): ``group_size = min(layers per kind)``, each kind
    split into ``ceil(n / group_size)`` groups, one shared block pool with
    ``bytes_per_block = group_size x page_size``.
    """
    eb = kv_element_bytes(kv_dtype)
    attn = [lay for lay in layers if lay.kind != LAYER_LINEAR]
    lin = linear_state_bytes_per_request(model, tensor_parallel_size, layers, per_gpu=True)
    if not attn:
        return KVGroups(0, 0, 0, None, 0.0, lin)
    kinds: dict[tuple, int] = {}
    for lay in attn:
        key = (lay.kind, lay.window if lay.kind == LAYER_SLIDING else None)
        kinds[key] = kinds.get(key, 0) + 1
    page = max(layer_kv_elements_per_token(model, lay, tensor_parallel_size) for lay in attn) * eb * block_size
    if len(kinds) == 1:
        (kind, window), n = next(iter(kinds.items()))
        full = 1 if kind == LAYER_FULL else 0
        # one group of every layer: sum of the (possibly different) per-layer pages
        bpb = sum(layer_kv_elements_per_token(model, lay, tensor_parallel_size) for lay in attn) * eb * block_size
        return KVGroups(n, full, 1 - full, window, bpb, lin)
    gsize = min(kinds.values())
    full_g = sum(-(-n // gsize) for (k, _), n in kinds.items() if k == LAYER_FULL)
    slide_g = sum(-(-n // gsize) for (k, _), n in kinds.items() if k == LAYER_SLIDING)
    windows = [w for (k, w) in kinds if k == LAYER_SLIDING]
    return KVGroups(gsize, full_g, slide_g, max(windows) if windows else None, gsize * page, lin)


def blocks_per_request(groups: KVGroups, tokens: int, block_size: int, max_num_batched_tokens: int) -> int:
    """Blocks of the shared pool one request of ``tokens`` tokens needs at most (vLLM's
    ``max_memory_usage_bytes`` summed over groups).  # blocks

    Full groups: ``cdiv(tokens, B)``; sliding groups:
    ``cdiv(min(window - 1 + max_num_batched_tokens, tokens), B) + 1``; linear
    state counted as ``cdiv(state, bytes_per_block)`` blocks (our approximation).
    """
    n = groups.full_groups * int(blocks_for_tokens(tokens, block_size))
    if groups.sliding_groups:
        w = min(groups.sliding_window - 1 + max_num_batched_tokens, tokens)
        n += groups.sliding_groups * (int(blocks_for_tokens(w, block_size)) + 1)
    if groups.linear_state_bytes and groups.bytes_per_block:
        n += math.ceil(groups.linear_state_bytes / groups.bytes_per_block)
    return n


# ---------------------------------------------------------------------------
# parameters and weights
# ---------------------------------------------------------------------------


def _param_parts(model: ModelSpec) -> dict[str, float]:
    """Parameter counts by category, whole model.  # parameters"""
    return dict(_param_parts_cached(model))


@lru_cache(maxsize=256)
def _param_parts_cached(model: ModelSpec) -> dict[str, float]:
    H, L = model.hidden_size, model.num_layers
    nh, d = model.num_attention_heads, model.head_dim
    parts: dict[str, float] = {}
    parts["embed"] = model.vocab_size * H
    parts["lm_head"] = 0 if model.tie_word_embeddings else model.vocab_size * H
    attn = 0.0
    for lay in model.layer_specs:
        if lay.kind == LAYER_LINEAR:
            continue  # linear-attention / Mamba mixers: not modelled, give num_parameters to be exact
        if model.attention == "MLA":
            qd = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0) or d
            vd = model.v_head_dim or d
            ql = model.q_lora_rank
            q = (H * ql + ql + ql * nh * qd) if ql else H * nh * qd
            kv_a = H * (model.kv_lora_rank + (model.qk_rope_head_dim or 0)) + model.kv_lora_rank
            kv_b = model.kv_lora_rank * nh * ((model.qk_nope_head_dim or 0) + vd)
            attn += q + kv_a + kv_b + nh * vd * H
        else:
            kv = lay.num_kv_heads or model.num_kv_heads
            hd = lay.head_dim or d
            a = H * nh * hd + 2 * H * kv * hd + nh * hd * H
            if model.attention_bias:
                a += nh * hd + 2 * kv * hd + H
            attn += a
    parts["attention"] = attn
    mlp_mats = 3 if model.gated_mlp else 2
    n_moe = L - model.num_dense_layers if model.is_moe else 0
    n_dense = L - n_moe
    dense = n_dense * mlp_mats * H * model.intermediate_size
    if not model.gated_mlp:
        dense += n_dense * (model.intermediate_size + H)  # GPT-2 MLP biases
    parts["dense_mlp"] = dense
    if model.is_moe:
        ie = model.moe_intermediate_size or model.intermediate_size
        per_expert = mlp_mats * H * ie
        if model.attention_bias and model.gated_mlp and not model.num_shared_experts and model.num_dense_layers == 0 \
                and model.quantization == "mxfp4":
            per_expert += 2 * ie + H  # gpt-oss expert biases
        parts["experts"] = n_moe * model.num_experts * per_expert
        parts["experts_active"] = n_moe * model.num_experts_per_tok * per_expert
        si = model.shared_expert_intermediate_size or ie
        parts["shared"] = n_moe * model.num_shared_experts * mlp_mats * H * si
        parts["router"] = n_moe * model.num_experts * H
    else:
        parts["experts"] = parts["experts_active"] = parts["shared"] = parts["router"] = 0.0
    parts["norms"] = (2 * L + 1) * H
    return parts


def estimate_num_parameters(model: ModelSpec) -> tuple[int, int]:
    """Total and active parameters computed from the config.  # parameters

    Returns
    -------
    (total, active) : tuple of int
        ``active`` counts ``num_experts_per_tok`` routed experts per MoE layer
        and everything else, the input embedding included (the convention of
        Mistral's, Qwen's and DeepSeek's cards; OpenAI's gpt-oss card leaves the
        embedding out). Linear-attention / Mamba mixer weights are not modelled.
    """
    p = _param_parts(model)
    common = p["attention"] + p["dense_mlp"] + p["shared"] + p["router"] + p["norms"] + p["lm_head"]
    total = common + p["embed"] + p["experts"]
    active = common + p["experts_active"] + p["embed"]
    return int(round(total)), int(round(active))


def weights_bytes_per_gpu(model: ModelSpec, deployment: DeploymentSpec, stage: int | None = None) -> float:
    """Weight bytes one GPU loads (vLLM's "Model loading took X GiB").  # bytes

    Every tensor is split by TP (vocab-parallel embedding and head, heads,
    MLP columns); K/V projections are replicated when ``tp > kv_heads``.
    Pipeline stage ``s`` holds its layers, the embedding on the first stage and
    the head on the last. With ``num_parameters`` given, the estimate is scaled
    to match it.

    Quantized checkpoints (:mod:`simulator.quantization`): the linear layers
    (attention, MLP, experts) at the scheme's bits plus group scales and zero
    points; embedding, head, norms, router and the config's ignore list in the
    activation dtype; ``mxfp4`` (gpt-oss) on the MoE experts only, padded as vLLM does.

    Parameters
    ----------
    stage : int, optional
        Pipeline stage; default the heaviest stage.
    """
    tp, pp = deployment.tensor_parallel_size, deployment.pipeline_parallel_size
    if stage is None:
        return max(weights_bytes_per_gpu(model, deployment, s) for s in range(pp))
    cb = DTYPE_BYTES[compute_dtype(model, deployment)]
    scheme = quantization.scheme_for(model, deployment.dtype)
    p = _param_parts(model)
    est_total, _ = estimate_num_parameters(model)
    scale = (model.num_parameters / est_total) if (model.num_parameters and est_total) else 1.0
    n_stage_layers = len(pp_layer_partition(model.num_layers, pp)[stage])
    frac = n_stage_layers / model.num_layers
    by_cat, _ = quantization.weight_bytes_by_category(model, scheme, p, cb, tp)
    per_layer_bytes = sum(by_cat[k] for k in ("attention", "dense_mlp", "shared", "experts", "router", "norms")) * frac
    # replicated K/V projections when tp > kv heads
    if model.attention != "MLA" and tp > model.num_kv_heads:
        kv_proj = 2 * model.hidden_size * model.num_kv_heads * model.head_dim * model.num_layers * frac
        qb = scheme.bytes_per_weight(model.hidden_size) if scheme and not scheme.experts_only else cb
        per_layer_bytes += kv_proj * (tp / model.num_kv_heads - 1) * qb
    edge = 0.0
    if stage == 0:
        edge += p["embed"] * cb
    if stage == pp - 1:
        edge += (p["lm_head"] if not model.tie_word_embeddings or pp == 1 else p["embed"]) * cb
    return (per_layer_bytes + edge) / tp * scale


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
    speculative: dict[str, Any] | None = None  # the drafter's memory (simulator.speculative_sizing)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        if self.speculative is None:
            del d["speculative"]
        return d


def _stage_layers(model: ModelSpec, pp: int) -> list[list[LayerSpec]]:
    specs = model.layer_specs
    return [[specs[i] for i in r] for r in pp_layer_partition(model.num_layers, pp)]


def _verdict(w_b: float, total_b: float, avail_b: float, ov: Overheads, budget_b: float, blocks: int,
             need: int, groups: KVGroups, mml: int, kv_tokens: int, conc: float,
             given_kv: bool = False) -> tuple[bool, str]:
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
    return True, f"{kv_tokens:,} tokens of KV cache per GPU, about {conc:.2f} requests of {mml:,} tokens at once"


def _plan_notes(model: ModelSpec, gpu: GpuSpec, deployment: DeploymentSpec, groups: KVGroups,
                rules: VersionRules, kv_dtype: str) -> list[str]:
    notes: list[str] = []
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
    draft : simulator.speculative_sizing.DraftMemory, optional
        Speculative decoding: the drafter's weights and KV come out of the budget
        (:func:`simulator.speculative_sizing.plan_with_draft` builds it).

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
    tp, pp = deployment.tensor_parallel_size, deployment.pipeline_parallel_size
    check_parallelism(model, tp, pp)
    scheme = quantization.scheme_for(model, deployment.dtype)
    quantization.check_group_size(model, scheme, tp)
    rules = version_rules(deployment.vllm_version)
    mml, mnbt, seqs = default_batch_knobs(model, gpu, deployment)
    B = deployment.block_size
    kv_dtype = resolve_kv_dtype(model, deployment)
    total_b = gpu.memory_gib * GIB
    budget_b = math.ceil(total_b * deployment.gpu_memory_utilization)
    ov = overheads(model, deployment, rules, mnbt, seqs)

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
    fits, reason = _verdict(w_b, total_b, avail_b, ov, budget_b, blocks, need, groups, mml, kv_tokens, conc,
                            deployment.available_kv_gib is not None)
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
        speculative=spec_d,
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
