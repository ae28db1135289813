"""How the KV cache is laid out: bytes per cached element, per token and per request, blocks, and vLLM's
KV cache groups (hybrid full / sliding-window models) and pipeline stages.

Pure: numpy only. Used by :func:`simulator.sizing.closed_form.plan` (and re-exported there) and by the roofline
clock (:mod:`simulator.clock.cost_model`).

Units: ``# bytes``, ``# tokens``, ``# blocks``, ``# elements`` as named.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.base import (
    DTYPE_BYTES,
    LAYER_FULL,
    LAYER_LINEAR,
    LAYER_SLIDING,
    DeploymentSpec,
    LayerSpec,
    ModelSpec,
    SpecError,
)
from simulator.sizing.memory_model import compute_dtype

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
        raise SpecError(f"unknown dtype {kv_dtype!r}", field="kv_cache_dtype")
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
        raise SpecError(f"{tp} does not divide num_attention_heads {model.num_attention_heads}", field="tensor_parallel_size")
    if model.attention != "MLA":
        for kv in {lay.num_kv_heads or model.num_kv_heads for lay in model.layer_specs}:
            if kv % tp and tp % kv:
                raise SpecError(f"{tp} and num_kv_heads {kv} must divide one another", field="tensor_parallel_size")
    if pp > model.num_layers:
        raise SpecError(f"{pp} is more than num_layers {model.num_layers}", field="pipeline_parallel_size")


def layer_kv_elements_per_token(model: ModelSpec, layer: LayerSpec, tensor_parallel_size: int = 1) -> int:
    """K/V elements one token occupies in one attention layer on one TP rank.  # elements

    Full / sliding attention: ``2 x kv_heads_per_rank x head_dim`` where
    ``kv_heads_per_rank = max(1, kv_heads // tp)`` (heads are replicated when
    ``tp > kv_heads``; vLLM ``QKVParallelLinear``). MLA: ``kv_lora_rank + qk_rope_head_dim``
    (one latent, not K and V), held whole by every rank (vLLM ``deepseek_v2.py``
    ``DeepseekV2MLAAttention``: ``kv_a_proj_with_mqa`` is a ``ReplicatedLinear``; the MLA backend
    caches one head of that size). Data parallelism does not change it: each DP rank
    has its own pool (docs/moe_parallelism.md). Linear / Mamba layers: 0 (fixed
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


__all__ = [
    "KV_SCALE_OVERHEAD_BYTES",
    "KVGroups",
    "blocks_for_tokens",
    "blocks_per_request",
    "check_parallelism",
    "kv_bytes_per_request",
    "kv_bytes_per_token",
    "kv_element_bytes",
    "kv_groups",
    "last_block_waste",
    "layer_kv_elements_per_token",
    "linear_state_bytes_per_request",
    "min_blocks_unservable",
    "pp_layer_partition",
    "resolve_kv_dtype",
]
