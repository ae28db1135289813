"""Parse a Hugging Face ``config.json`` (already loaded as a dict) into a :class:`ModelSpec`.

Pure: no network, no file access, no Django. Handles the families in the
catalog: Llama / Mistral / Mixtral / Qwen2-3 (dense and MoE), DeepSeek-V2/V3/R1
(MLA), Gemma 2/3/4 (sliding windows, multimodal ``text_config``), gpt-oss
(alternating sliding/full layers, MXFP4 experts), GPT-2, Qwen3-Next and Jamba
(linear-attention / Mamba layers), and checkpoint quantization given by
``quantization_config`` or a ModelOpt ``hf_quant_config.json``.

Every error is a :class:`~simulator.specs.SpecError` naming the config key,
e.g. ``"num_key_value_heads: 7 does not divide num_attention_heads 32"``.
"""

from __future__ import annotations

from typing import Any

from simulator.specs import (
    DTYPE_BYTES,
    LAYER_FULL,
    LAYER_LINEAR,
    LAYER_SLIDING,
    LayerSpec,
    ModelSpec,
    SpecError,
    normalize_dtype,
)

# ModelSpec field -> the config key a user would recognise.
_FIELD_TO_KEY = {
    "num_layers": "num_hidden_layers",
    "num_kv_heads": "num_key_value_heads",
    "num_experts": "num_local_experts",
    "weights_dtype": "torch_dtype",
    "quantization": "quantization_config.quant_method",
    "layers": "layer_types",
    "layers.window": "sliding_window",
}


def _get(cfg: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def _int(cfg: dict, keys: tuple[str, ...], *, required: bool = False, default: int | None = None,
         lo: int = 0) -> int | None:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            v = cfg[k]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, int):
                raise SpecError(f"{k}: must be a whole number, got {v!r}")
            if v < lo:
                raise SpecError(f"{k}: must be >= {lo}, got {v}")
            return v
    if required:
        raise SpecError(f"{keys[0]}: missing from config.json")
    return default


def _quantization(cfg: dict, quant_config: dict | None) -> tuple[str | None, str | None]:
    """Return (quantization method, KV cache quantization hinted by the checkpoint)."""
    kv_hint = None
    if quant_config:
        q = quant_config.get("quantization", quant_config)
        if not isinstance(q, dict):
            raise SpecError("quantization: hf_quant_config.json must hold a 'quantization' object")
        algo = str(q.get("quant_algo") or "").lower()
        kv_algo = q.get("kv_cache_quant_algo")
        if kv_algo:
            kv_hint = str(kv_algo).lower()
        if algo:
            if "fp8" in algo:
                return "fp8", kv_hint
            if "nvfp4" in algo or algo == "fp4":
                return "nvfp4", kv_hint
            if "w4a16" in algo or "int4" in algo or "awq" in algo:
                return "int4", kv_hint
            if "int8" in algo or "w8a8" in algo:
                return "int8", kv_hint
            raise SpecError(f"quantization.quant_algo: unsupported {q.get('quant_algo')!r}")
    qc = cfg.get("quantization_config")
    if qc is None:
        return None, kv_hint
    if not isinstance(qc, dict):
        raise SpecError("quantization_config: must be an object")
    method = str(qc.get("quant_method") or "").lower()
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8", kv_hint
    if method == "mxfp4":
        return "mxfp4", kv_hint
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        bits = qc.get("bits", qc.get("w_bit", 4))
        if bits == 8:
            return "int8", kv_hint
        if bits != 4:
            raise SpecError(f"quantization_config.bits: {bits} bits is not supported (4 or 8)")
        return ("awq" if method.startswith("awq") else "gptq"), kv_hint
    if method in ("bitsandbytes",):
        return ("int4" if qc.get("load_in_4bit") else "int8"), kv_hint
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        for g in groups.values() if isinstance(groups, dict) else []:
            w = (g or {}).get("weights") or {}
            bits, typ = w.get("num_bits"), str(w.get("type", "")).lower()
            if bits == 8:
                return ("fp8" if typ == "float" else "int8"), kv_hint
            if bits == 4:
                return ("nvfp4" if typ == "float" else "int4"), kv_hint
        raise SpecError("quantization_config.config_groups: cannot tell the weight bits")
    if method in ("modelopt",):
        algo = str(qc.get("quant_algo", "fp8")).lower()
        return ("nvfp4" if "fp4" in algo else "fp8"), kv_hint
    if not method:
        raise SpecError("quantization_config.quant_method: missing")
    raise SpecError(f"quantization_config.quant_method: unsupported {qc.get('quant_method')!r}")


def _layer_kinds(cfg: dict, model_type: str, n_layers: int, dtype_bytes: float) -> tuple[LayerSpec, ...]:
    """Per-layer kinds from ``layer_types`` or the family's known pattern; () = all full attention."""
    window = _int(cfg, ("sliding_window",), lo=1)
    if cfg.get("use_sliding_window") is False:
        window = None
    layer_types = cfg.get("layer_types")
    gkv = _int(cfg, ("num_global_key_value_heads",), lo=1)
    ghd = _int(cfg, ("global_head_dim",), lo=1)
    linear_state = _linear_state_bytes(cfg, dtype_bytes)

    def full() -> LayerSpec:
        return LayerSpec(kind=LAYER_FULL, num_kv_heads=gkv, head_dim=ghd)

    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers:
            got = len(layer_types) if isinstance(layer_types, list) else type(layer_types).__name__
            raise SpecError(f"layer_types: {got} entries for num_hidden_layers {n_layers}")
        out = []
        for i, t in enumerate(layer_types):
            t = str(t).lower()
            if t in ("full_attention", "attention", "global", "full"):
                out.append(full())
            elif t in ("sliding_attention", "sliding_window", "local", "chunked_attention"):
                if window is None:
                    raise SpecError(f"sliding_window: layer_types[{i}] is sliding but no sliding_window is given")
                out.append(LayerSpec(kind=LAYER_SLIDING, window=window))
            elif t in ("linear_attention", "mamba", "mamba2", "ssm", "gated_deltanet", "conv", "linear"):
                out.append(LayerSpec(kind=LAYER_LINEAR, state_bytes=linear_state))
            else:
                raise SpecError(f"layer_types: unknown layer type {layer_types[i]!r} at index {i}")
        if all(lay.kind == LAYER_FULL and lay.num_kv_heads is None and lay.head_dim is None for lay in out):
            return ()
        return tuple(out)
    # Known patterns without layer_types.
    if model_type == "qwen3_next" or "full_attention_interval" in cfg:
        k = _int(cfg, ("full_attention_interval",), default=4, lo=1)
        return tuple(full() if (i + 1) % k == 0 else LayerSpec(kind=LAYER_LINEAR, state_bytes=linear_state)
                     for i in range(n_layers))
    if model_type == "jamba" or "attn_layer_period" in cfg:
        period = _int(cfg, ("attn_layer_period",), default=8, lo=1)
        offset = _int(cfg, ("attn_layer_offset",), default=4)
        return tuple(full() if i % period == offset else LayerSpec(kind=LAYER_LINEAR, state_bytes=linear_state)
                     for i in range(n_layers))
    if window is None:
        return ()
    if model_type == "gemma2":
        return tuple(LayerSpec(kind=LAYER_SLIDING, window=window) if i % 2 == 0 else full() for i in range(n_layers))
    pattern = _int(cfg, ("sliding_window_pattern",), lo=1)
    if model_type.startswith("gemma3") or pattern:
        p = pattern or 6
        return tuple(full() if (i + 1) % p == 0 else LayerSpec(kind=LAYER_SLIDING, window=window)
                     for i in range(n_layers))
    if model_type.startswith("qwen2") or model_type.startswith("qwen3"):
        # Qwen: layers from max_window_layers on use the window when use_sliding_window is true.
        mwl = _int(cfg, ("max_window_layers",), default=n_layers)
        if mwl >= n_layers:
            return ()
        return tuple(full() if i < mwl else LayerSpec(kind=LAYER_SLIDING, window=window) for i in range(n_layers))
    # Mistral 7B v0.1, Phi-3: one window on every layer.
    return tuple(LayerSpec(kind=LAYER_SLIDING, window=window) for _ in range(n_layers))


def _linear_state_bytes(cfg: dict, dtype_bytes: float) -> int:
    """Fixed per-request state of one linear-attention / Mamba layer, whole layer.  # bytes"""
    if "linear_num_value_heads" in cfg:  # Qwen3-Next Gated DeltaNet
        vh = _int(cfg, ("linear_num_value_heads",), lo=1)
        kh = _int(cfg, ("linear_num_key_heads",), default=vh, lo=1)
        kd = _int(cfg, ("linear_key_head_dim",), default=128, lo=1)
        vd = _int(cfg, ("linear_value_head_dim",), default=128, lo=1)
        conv = _int(cfg, ("linear_conv_kernel_dim",), default=4, lo=1)
        elems = vh * kd * vd + (conv - 1) * (2 * kh * kd + vh * vd)
        return int(elems * dtype_bytes)
    if "mamba_d_state" in cfg or "ssm_state_size" in cfg or "state_size" in cfg:  # Mamba-1/2 (Jamba ...)
        hidden = _int(cfg, ("hidden_size",), default=0)
        d_state = _int(cfg, ("mamba_d_state", "ssm_state_size", "state_size"), default=16, lo=1)
        d_conv = _int(cfg, ("mamba_d_conv", "conv_kernel"), default=4, lo=1)
        expand = _get(cfg, "mamba_expand", "expand", default=2)
        inner = int(expand * hidden)
        # conv state in the model dtype, SSM state in fp32 (vLLM's default mamba_ssm_cache_dtype for Jamba).
        return int((d_conv - 1) * inner * dtype_bytes + inner * d_state * 4)
    return 0


def parse_hf_config(config: dict, *, name: str | None = None, quant_config: dict | None = None,
                    num_parameters: int | None = None, num_active_parameters: int | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json``.

    Parameters
    ----------
    config : dict
        The parsed ``config.json``. Multimodal configs are read through their ``text_config``.
    name : str, optional
        Display name; defaults to ``_name_or_path``, the architecture or the model type.
    quant_config : dict, optional
        A ModelOpt ``hf_quant_config.json`` shipped beside the config (NVIDIA FP8 / FP4 checkpoints).
    num_parameters, num_active_parameters : int, optional
        Known parameter counts; estimated from the config by :func:`simulator.sizing.estimate_num_parameters`
        when omitted.

    Returns
    -------
    ModelSpec

    Raises
    ------
    SpecError
        When a required key is missing or values are inconsistent; the message starts with the key.
    """
    if not isinstance(config, dict):
        raise SpecError("config: must be a JSON object")
    outer = config
    cfg = config
    tc = config.get("text_config")
    if isinstance(tc, dict) and "num_hidden_layers" not in config and "n_layer" not in config:
        cfg = {**{k: v for k, v in config.items() if k not in ("text_config", "vision_config", "audio_config")},
               **tc}
    model_type = str(cfg.get("model_type") or outer.get("model_type") or "").lower()

    n_layers = _int(cfg, ("num_hidden_layers", "n_layer", "num_layers"), required=True, lo=1)
    hidden = _int(cfg, ("hidden_size", "n_embd", "d_model"), required=True, lo=1)
    n_heads = _int(cfg, ("num_attention_heads", "n_head", "num_heads"), required=True, lo=1)
    kv_lora = _int(cfg, ("kv_lora_rank",), lo=1)
    is_mla = kv_lora is not None
    n_kv = _int(cfg, ("num_key_value_heads", "num_kv_heads", "n_head_kv"), default=n_heads, lo=1)
    if cfg.get("multi_query") is True:
        n_kv = 1
    if not is_mla:
        if n_kv > n_heads:
            raise SpecError(f"num_key_value_heads: {n_kv} is more than num_attention_heads {n_heads}")
        if n_heads % n_kv:
            raise SpecError(f"num_key_value_heads: {n_kv} does not divide num_attention_heads {n_heads}")
    head_dim = _int(cfg, ("head_dim",), lo=1)
    if head_dim is None and not is_mla:
        if hidden % n_heads:
            raise SpecError(f"head_dim: missing and hidden_size {hidden} is not a multiple of "
                            f"num_attention_heads {n_heads}")
        head_dim = hidden // n_heads
    qk_rope = _int(cfg, ("qk_rope_head_dim",), lo=0)
    qk_nope = _int(cfg, ("qk_nope_head_dim",), lo=0)
    v_head = _int(cfg, ("v_head_dim",), lo=1)
    if is_mla:
        if qk_rope is None:
            raise SpecError("qk_rope_head_dim: required with kv_lora_rank (MLA)")
        if head_dim is None:
            head_dim = (qk_nope or 0) + qk_rope or (hidden // n_heads)

    dtype_raw = _get(cfg, "torch_dtype", "dtype", default=None) or _get(outer, "torch_dtype", "dtype", default=None)
    if dtype_raw is None:
        dtype_raw = "fp32" if model_type == "gpt2" else "bf16"
    try:
        weights_dtype = normalize_dtype(str(dtype_raw), "torch_dtype")
    except SpecError:
        raise SpecError(f"torch_dtype: unknown dtype {dtype_raw!r}") from None
    quant, _kv_hint = _quantization(outer if "quantization_config" in outer else cfg, quant_config)

    n_experts = _int(cfg, ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"), default=0)
    if model_type.startswith("gemma4") and cfg.get("enable_moe_block") is False:
        n_experts = 0
    topk = _int(cfg, ("num_experts_per_tok", "experts_per_token", "top_k_experts", "moe_top_k"), default=0)
    if n_experts and not topk:
        raise SpecError("num_experts_per_tok: the config has experts but no experts per token")
    if n_experts and topk > n_experts:
        raise SpecError(f"num_experts_per_tok: {topk} is more than the {n_experts} experts")
    inter = _int(cfg, ("intermediate_size", "n_inner", "ffn_hidden_size"), default=None)
    if inter is None:
        inter = 4 * hidden if model_type == "gpt2" else 0
    moe_inter = _int(cfg, ("moe_intermediate_size", "expert_intermediate_size"), default=None)
    n_shared = _int(cfg, ("n_shared_experts", "num_shared_experts"), default=0)
    shared_inter = _int(cfg, ("shared_expert_intermediate_size",), default=None)
    if shared_inter and not n_shared:
        n_shared = 1
    n_dense = 0
    if n_experts:
        n_dense = _int(cfg, ("first_k_dense_replace",), default=0)
        mlp_only = cfg.get("mlp_only_layers") or []
        if isinstance(mlp_only, list):
            n_dense += len(mlp_only)
        step = _int(cfg, ("decoder_sparse_step", "moe_layer_freq"), default=1, lo=1)
        if step > 1:
            n_dense += n_layers - len(range(step - 1, n_layers, step))
        if model_type.startswith("gemma4"):
            # Gemma 4 runs a dense MLP beside the experts in every layer: count it as a shared expert.
            n_shared, shared_inter, n_dense = 1, inter, 0
        if model_type in ("mixtral", "gpt_oss") or moe_inter is None:
            moe_inter = moe_inter or inter
        n_dense = min(n_dense, n_layers)

    dtype_bytes = DTYPE_BYTES[weights_dtype]
    layers = _layer_kinds(cfg, model_type, n_layers, dtype_bytes)

    tie = cfg.get("tie_word_embeddings", outer.get("tie_word_embeddings"))
    if tie is None:
        tie = model_type == "gpt2"
    vocab = _int(cfg, ("vocab_size", "padded_vocab_size"), required=True, lo=1)
    max_pos = _int(cfg, ("max_position_embeddings", "n_positions", "seq_length"), default=None, lo=1)

    if name is None:
        archs = outer.get("architectures") or []
        name = str(outer.get("_name_or_path") or (archs[0] if archs else "") or model_type or "model")

    kwargs = dict(
        name=name,
        num_layers=n_layers,
        hidden_size=hidden,
        num_attention_heads=n_heads,
        num_kv_heads=1 if is_mla else n_kv,
        head_dim=head_dim,
        attention="MLA" if is_mla else "",
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=qk_rope,
        q_lora_rank=_int(cfg, ("q_lora_rank",), lo=1),
        qk_nope_head_dim=qk_nope,
        v_head_dim=v_head,
        layers=layers,
        vocab_size=vocab,
        intermediate_size=inter,
        num_experts=n_experts,
        num_experts_per_tok=topk if n_experts else 0,
        moe_intermediate_size=moe_inter if n_experts else None,
        num_shared_experts=n_shared if n_experts else 0,
        shared_expert_intermediate_size=shared_inter if n_experts else None,
        num_dense_layers=n_dense,
        attention_bias=bool(cfg.get("attention_bias") or cfg.get("qkv_bias") or model_type in ("qwen2", "gpt2")),
        gated_mlp=model_type not in ("gpt2", "gpt_bigcode", "opt", "phi"),
        tie_word_embeddings=bool(tie),
        num_parameters=num_parameters,
        num_active_parameters=num_active_parameters,
        weights_dtype=weights_dtype,
        quantization=quant,
        max_position_embeddings=max_pos,
    )
    try:
        spec = ModelSpec(**kwargs)
    except SpecError as exc:
        msg = str(exc)
        field, _, rest = msg.partition(":")
        raise SpecError(f"{_FIELD_TO_KEY.get(field, field)}:{rest}") from None
    if num_parameters is None:
        from simulator.sizing import estimate_num_parameters  # local: sizing imports specs only

        total, active = estimate_num_parameters(spec)
        from dataclasses import replace

        spec = replace(spec, num_parameters=total,
                       num_active_parameters=num_active_parameters if num_active_parameters else active)
    return spec


__all__ = ["parse_hf_config"]
