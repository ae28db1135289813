"""A model's parameters and the weight bytes one GPU loads.

:func:`estimate_num_parameters` counts parameters from the config (by category: embedding, attention,
MLP, experts...); :func:`weights_bytes_per_gpu` turns them into the bytes one GPU of a TP / PP split loads,
with the quantization of :mod:`simulator.sizing.quantization`. Re-exported by :mod:`simulator.sizing.closed_form`.

Units: ``# bytes``, ``# parameters`` as named.
"""

from __future__ import annotations

from functools import lru_cache

import simulator.sizing.quantization as quantization
from simulator.base import DTYPE_BYTES, LAYER_LINEAR, DeploymentSpec, ModelSpec
from simulator.sizing.kv_layout import pp_layer_partition
from simulator.sizing.memory_model import compute_dtype
from simulator.sizing.moe_parallel import expert_split, routed_expert_share, shared_expert_tp

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


def weights_bytes_per_gpu(model: ModelSpec, deployment: DeploymentSpec, stage: int | None = None,
                          *, buffers: bool = True) -> float:
    """Weight bytes one GPU loads (vLLM's "Model loading took X GiB").  # bytes

    Every tensor is split by TP (vocab-parallel embedding and head, heads,
    MLP columns); K/V projections are replicated when ``tp > kv_heads``.
    Pipeline stage ``s`` holds its layers, the embedding on the first stage and
    the head on the last. With ``num_parameters`` given, the estimate is scaled
    to match it. Data parallelism replicates all of it on every DP rank except an MoE
    model's routed experts, sharded over ``TP x DP`` GPUs (whole experts with expert
    parallelism), and shared experts replicated over TP when vLLM runs the MoE block
    sequence-parallel (:func:`moe_weights_adjustment`; DP 1 and EP off add exactly 0).

    Quantized checkpoints (:mod:`simulator.sizing.quantization`): the linear layers
    (attention, MLP, experts) at the scheme's bits plus group scales and zero
    points; embedding, head, norms, router and the config's ignore list in the
    activation dtype; ``mxfp4`` (gpt-oss) on the MoE experts only, padded as vLLM does.

    Parameters
    ----------
    stage : int, optional
        Pipeline stage; default the heaviest stage.
    buffers : bool
        Include what a text decode step does not stream: the vision tower (:func:`vision_bytes_per_gpu`) and the
        rotary cache (:func:`rope_cache_bytes`). The step-time clock passes False.
    """
    tp, pp = deployment.tensor_parallel_size, deployment.pipeline_parallel_size
    if stage is None:
        return max(weights_bytes_per_gpu(model, deployment, s, buffers=buffers) for s in range(pp))
    cb = DTYPE_BYTES[compute_dtype(model, deployment)]
    scheme = quantization.scheme_for(model, deployment.dtype)
    p = _param_parts(model)
    est_total, _ = estimate_num_parameters(model)
    scale = (model.num_parameters / est_total) if (model.num_parameters and est_total) else 1.0
    n_stage_layers = len(pp_layer_partition(model.num_layers, pp)[stage])
    frac = n_stage_layers / model.num_layers
    # the experts' per-GPU width decides gpt-oss's mxfp4 padding: split TP x DP ways, or whole with EP
    by_cat, _ = quantization.weight_bytes_by_category(model, scheme, p, cb, expert_split(deployment))
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
    lm = (per_layer_bytes + edge) / tp * scale
    lm += moe_weights_adjustment(model, deployment, by_cat, frac * scale)
    if not buffers:
        return lm
    vision = vision_bytes_per_gpu(model, deployment) if stage == 0 else 0.0
    return lm + vision + rope_cache_bytes(model, deployment)


def moe_weights_adjustment(model: ModelSpec, deployment: DeploymentSpec, by_cat: dict[str, float],
                           frac: float) -> float:
    """Bytes one GPU holds beyond the plain TP split of the routed and shared experts.  # bytes

    ``by_cat`` are the whole model's bytes by category, ``frac`` the stage's share of the layers (times the
    ``num_parameters`` scale). Routed experts: ``experts x (share - 1 / tp)`` with ``share`` from
    :func:`simulator.sizing.moe_parallel.routed_expert_share` (``1 / (TP x DP)`` split, or whole experts with EP);
    shared experts: ``shared x (1 / split - 1 / tp)`` (:func:`simulator.sizing.moe_parallel.shared_expert_tp`).
    Exactly 0 at DP 1 with EP off, so TP / PP deployments keep their figures.
    """
    if not model.is_moe:
        return 0.0
    tp = deployment.tensor_parallel_size
    routed = by_cat["experts"] * frac * (routed_expert_share(model, deployment) - 1.0 / tp)
    shared = by_cat["shared"] * frac * (1.0 / shared_expert_tp(deployment) - 1.0 / tp)
    return routed + shared


def vision_bytes_per_gpu(model: ModelSpec, deployment: DeploymentSpec) -> float:
    """A multimodal checkpoint's vision tower and projector on one GPU of the first pipeline stage.  # bytes

    ``vision_parameters x activation bytes / tp``: vLLM shards the vision encoder over the TP ranks by default
    (``mm_encoder_tp_mode="weights"``) and keeps it unquantized. Llama-4-Scout at TP 8: 871.9 M parameters,
    0.20 GiB per GPU.
    """
    if not model.vision_parameters:
        return 0.0
    return model.vision_parameters * DTYPE_BYTES[compute_dtype(model, deployment)] / deployment.tensor_parallel_size


def rope_cache_bytes(model: ModelSpec, deployment: DeploymentSpec) -> float:
    """vLLM's rotary ``cos_sin_cache`` buffers on one GPU (every rank and stage holds them whole).  # bytes

    ``rope_cache_elements x activation bytes`` (vLLM ``RotaryEmbedding.__init__`` registers a
    ``[max_position, rotary_dim]`` buffer in the model dtype; counted in "Model loading took"). Without
    ``rope_cache_elements``: ``max_position_embeddings x head_dim`` (``qk_rope_head_dim`` for MLA).
    """
    n = model.rope_cache_elements
    if n is None:
        rot = model.qk_rope_head_dim if model.attention == "MLA" and model.qk_rope_head_dim else model.head_dim
        n = (model.max_position_embeddings or 0) * rot if model.gated_mlp else 0
    return float(n) * DTYPE_BYTES[compute_dtype(model, deployment)]


__all__ = ["estimate_num_parameters", "moe_weights_adjustment", "rope_cache_bytes", "vision_bytes_per_gpu", "weights_bytes_per_gpu"]
