"""Parse a Hugging Face ``config.json`` (already loaded as a dict) into a :class:`ModelSpec`.

Pure: no network, no file access, no Django. Handles the families in the
catalog: Llama / Mistral / Mixtral / Qwen2-3 (dense and MoE), DeepSeek-V2/V3/R1
(MLA), Gemma 2/3/4 (sliding windows, multimodal ``text_config``), gpt-oss
(alternating sliding/full layers, MXFP4 experts), GPT-2, Qwen3-Next and Jamba
(linear-attention / Mamba layers), and checkpoint quantization given by
``quantization_config`` or a ModelOpt ``hf_quant_config.json``.

Every error is a :class:`~simulator.base.specs.SpecError` naming the config key,
e.g. ``"num_key_value_heads: 7 does not divide num_attention_heads 32"``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simulator.base import (
    DTYPE_BYTES,
    LAYER_FULL,
    LAYER_LINEAR,
    LAYER_SLIDING,
    MAX_LAYERS,
    LayerSpec,
    ModelSpec,
    SpecError,
    generation_config_path,
    model_sampler_path,
    normalize_dtype,
)
from simulator.sizing.config_rules import (
    rope_cache_elements,
    tie_word_embeddings,
    unknown_architecture_note,
    vision_parameters,
)
from simulator.sizing.quantization import METHOD_ALIASES, check_group_size, scheme_for
from simulator.sizing.weights import estimate_num_parameters

# ModelSpec field -> the config key a user would recognise.
_FIELD_TO_KEY = {
    "num_layers": "num_hidden_layers",
    "num_kv_heads": "num_key_value_heads",
    "num_experts": "num_local_experts",
    "weights_dtype": "torch_dtype",
    "quantization": "quantization_config.quant_method",
    "quant_group_size": "quantization_config.group_size",
    "quant_bits": "quantization_config.bits",
    "layers": "layer_types",
    "layers.window": "sliding_window",
}


def _get(cfg: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def _int(cfg: dict, keys: tuple[str, ...], *, required: bool = False, default: int | None = None,
         lo: int = 0, hi: int | None = None) -> int | None:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            v = cfg[k]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, int):
                raise SpecError(f"must be a whole number, got {v!r}", field=k)
            if v < lo:
                raise SpecError(f"must be >= {lo}, got {v}", field=k)
            if hi is not None and v > hi:
                raise SpecError(f"must be between {lo} and {hi:,}, got {v:,}", field=k)
            return v
    if required:
        raise SpecError("missing from config.json", field=keys[0])
    return default


def _quantization(cfg: dict, quant_config: dict | None) -> tuple[dict[str, Any], str | None]:
    """ModelSpec quantization fields (``quantization``, ``quant_scheme``, ``quant_bits``,
    ``quant_group_size``, ``quant_ignore``) and the KV cache format the checkpoint ships scales for."""
    if quant_config:
        return _modelopt_quantization(quant_config)
    qc = cfg.get("quantization_config")
    if qc is None:
        return {}, None
    if not isinstance(qc, dict):
        raise SpecError("must be an object", field="quantization_config")
    raw = str(qc.get("quant_method") or "").strip()
    if not raw:
        raise SpecError("missing", field="quantization_config.quant_method")
    method = METHOD_ALIASES.get(raw.lower())
    if method == "none":
        return {}, None
    if method is None:
        raise SpecError(f"{raw!r} is not a quantization method the planner "
                        f"knows (known: {', '.join(sorted(set(METHOD_ALIASES)))})", field="quantization_config.quant_method")
    ignore = qc.get("modules_to_not_convert") or qc.get("ignore") or qc.get("llm_int8_skip_modules") or []
    if not isinstance(ignore, list):
        raise SpecError("must be a list of module names", field="quantization_config.modules_to_not_convert")
    out: dict[str, Any] = {"quantization": method, "quant_ignore": tuple(str(x) for x in ignore)}
    return out, _method_fields(method, qc, out)


def _method_fields(method: str, qc: dict, out: dict[str, Any]) -> str | None:
    """Adds the method's own fields (bits, group size, scheme) to ``out``; returns the KV cache format the
    checkpoint ships scales for (compressed-tensors with 8-bit KV: ``fp8``), else None."""
    kv_hint = None
    if method in ("awq", "gptq"):
        bits = _int(qc, ("bits", "w_bit"), default=4, lo=1)
        if bits not in (4, 8) or (method == "awq" and bits != 4):
            raise SpecError(f"{bits}-bit {method} is not supported (awq: 4; gptq: 4 or 8)", field="quantization_config.bits")
        group = _int(qc, ("group_size", "q_group_size"), default=128, lo=-1)
        out.update(quant_bits=bits, quant_group_size=group, quant_scheme="w4a16" if bits == 4 else "w8a16")
    elif method == "fp8":
        block = qc.get("weight_block_size")
        if block:
            out.update(quant_scheme="fp8-block", quant_group_size=int(block[0]))
        else:
            act = str(qc.get("activation_scheme", "dynamic")).lower()
            out.update(quant_scheme="fp8-static" if act == "static" else "fp8-dynamic")
    elif method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            out.update(quant_bits=4, quant_scheme="nf4-dq" if qc.get("bnb_4bit_use_double_quant") else "nf4")
        else:
            out.update(quant_bits=8, quant_scheme="int8")
    elif method == "compressed-tensors":
        out.update(_compressed_tensors(qc))
        kv = qc.get("kv_cache_scheme")
        if isinstance(kv, dict) and kv.get("num_bits") == 8:
            kv_hint = "fp8"
    return kv_hint


def _compressed_tensors(qc: dict) -> dict[str, Any]:
    """Scheme of a compressed-tensors checkpoint (the first config group that quantizes weights)."""
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict):
        raise SpecError("must be an object", field="quantization_config.config_groups")
    for g in groups.values():
        w = (g or {}).get("weights") if isinstance(g, dict) else None
        if not isinstance(w, dict):
            continue
        bits, typ = w.get("num_bits"), str(w.get("type", "int")).lower()
        strategy = str(w.get("strategy", "")).lower()
        acts = (g or {}).get("input_activations")
        group = w.get("group_size")
        if strategy == "channel":
            group = -1
        elif strategy == "tensor":
            group = 0
        if bits == 4 and typ == "float":
            return {"quant_scheme": "nvfp4", "quant_bits": 4, "quant_group_size": group or 16}
        if bits == 4:
            return {"quant_scheme": "w4a16", "quant_bits": 4, "quant_group_size": 128 if group is None else group}
        if bits == 8 and strategy == "block":
            return {"quant_scheme": "fp8-block", "quant_bits": 8, "quant_group_size": (w.get("block_structure")
                                                                                       or [128])[0]}
        if bits == 8 and acts:
            return {"quant_scheme": "w8a8-fp8" if typ == "float" else "w8a8-int8", "quant_bits": 8,
                    "quant_group_size": -1 if group is None else group}
        if bits == 8:
            return {"quant_scheme": "w8a16", "quant_bits": 8, "quant_group_size": 128 if group is None else group}
        raise SpecError(f"{bits}-bit {typ} weights are not supported", field="quantization_config.config_groups")
    raise SpecError("cannot tell the weight bits", field="quantization_config.config_groups")


def _modelopt_quantization(quant_config: dict) -> tuple[dict[str, Any], str | None]:
    """A ModelOpt ``hf_quant_config.json`` (NVIDIA FP8 / NVFP4 checkpoints)."""
    q = quant_config.get("quantization", quant_config)
    if not isinstance(q, dict):
        raise SpecError("hf_quant_config.json must hold a 'quantization' object", field="quantization")
    algo = str(q.get("quant_algo") or "").lower()
    kv_algo = q.get("kv_cache_quant_algo")
    kv_hint = "fp8" if kv_algo and "fp8" in str(kv_algo).lower() else None
    ignore = tuple(str(x) for x in (q.get("exclude_modules") or []))
    if "fp8" in algo:
        return {"quantization": "fp8", "quant_scheme": "fp8-static", "quant_ignore": ignore}, kv_hint
    if "fp4" in algo:
        return {"quantization": "nvfp4", "quant_scheme": "nvfp4", "quant_ignore": ignore,
                "quant_group_size": _int(q, ("group_size",), default=16, lo=1)}, kv_hint
    if "w4a16" in algo or "int4" in algo or "awq" in algo:
        return {"quantization": "int4", "quant_scheme": "w4a16", "quant_ignore": ignore,
                "quant_group_size": _int(q, ("group_size",), default=128, lo=1)}, kv_hint
    if "int8" in algo or "w8a8" in algo:
        return {"quantization": "int8", "quant_scheme": "w8a8-int8", "quant_ignore": ignore}, kv_hint
    raise SpecError(f"{q.get('quant_algo')!r} is not a quantization the planner knows "
                    "(known: FP8, NVFP4, W4A16_AWQ, W8A8)", field="quantization.quant_algo")


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
        return _listed_layer_kinds(layer_types, n_layers, full(), window, linear_state)
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


def _listed_layer_kinds(layer_types: Any, n_layers: int, full: LayerSpec, window: int | None,
                        linear_state: int) -> tuple[LayerSpec, ...]:
    """Per-layer kinds from the config's ``layer_types`` list; () when every layer is plain full attention."""
    if not isinstance(layer_types, list) or len(layer_types) != n_layers:
        got = len(layer_types) if isinstance(layer_types, list) else type(layer_types).__name__
        raise SpecError(f"{got} entries for num_hidden_layers {n_layers}", field="layer_types")
    out = []
    for i, t in enumerate(layer_types):
        t = str(t).lower()
        if t in ("full_attention", "attention", "global", "full"):
            out.append(full)
        elif t in ("sliding_attention", "sliding_window", "local", "chunked_attention"):
            if window is None:
                raise SpecError(f"layer_types[{i}] is sliding but no sliding_window is given", field="sliding_window")
            out.append(LayerSpec(kind=LAYER_SLIDING, window=window))
        elif t in ("linear_attention", "mamba", "mamba2", "ssm", "gated_deltanet", "conv", "linear"):
            out.append(LayerSpec(kind=LAYER_LINEAR, state_bytes=linear_state))
        else:
            raise SpecError(f"unknown layer type {layer_types[i]!r} at index {i}", field="layer_types")
    if all(lay.kind == LAYER_FULL and lay.num_kv_heads is None and lay.head_dim is None for lay in out):
        return ()
    return tuple(out)


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


def _shared_experts(cfg: dict, model_type: str, inter: int, n_experts: int) -> tuple[int, int | None]:
    """Shared experts per MoE layer and their intermediate size (``None``: the routed experts' width)."""
    n_shared = _int(cfg, ("n_shared_experts", "num_shared_experts"), default=0)
    shared_inter = _int(cfg, ("shared_expert_intermediate_size",), default=None)
    if shared_inter and not n_shared:
        n_shared = 1
    if n_experts and model_type.startswith("llama4") and not n_shared:
        # Llama 4 runs one shared expert of intermediate_size beside the routed ones in every MoE layer
        # (transformers' Llama4TextMoe.shared_expert); its config has no key for it. Scout: 17B active of 109B.
        n_shared, shared_inter = 1, inter
    return n_shared, shared_inter


def parse_hf_config(config: dict, *, name: str | None = None, quant_config: dict | None = None,
                    num_parameters: int | None = None, num_active_parameters: int | None = None,
                    generation_config: dict | None = None) -> ModelSpec:
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
        Known parameter counts; estimated from the config by :func:`simulator.sizing.weights.estimate_num_parameters`
        when omitted.
    generation_config : dict, optional
        The model's ``generation_config.json``: its sampling fields give ``ModelSpec.sampling``
        (:func:`simulator.base.sampling.generation_config_path`). Without it, a model known by ``name`` or by the config's
        ``_name_or_path`` gets its shipped defaults (:func:`simulator.base.sampling.generation_defaults`).

    Returns
    -------
    ModelSpec

    Raises
    ------
    SpecError
        When a required key is missing or values are inconsistent; the message starts with the key.
    """
    if not isinstance(config, dict):
        raise SpecError("must be a JSON object", field="config")
    outer, cfg, model_type = _text_config(config)
    # read in this order: the first problem found is the one reported
    shape = _attention_shape(cfg)
    weights_dtype = _weights_dtype(cfg, outer, model_type)
    quant, _kv_hint = _quantization(outer if "quantization_config" in outer else cfg, quant_config)
    if quant.get("quant_group_size") is not None and quant["quant_group_size"] < -1:
        raise SpecError(f"{quant['quant_group_size']} must be -1 or more", field="quantization_config.group_size")
    ffn = _ffn_and_experts(cfg, model_type, shape["num_layers"], shape["hidden_size"])
    layers = _layer_kinds(cfg, model_type, shape["num_layers"], DTYPE_BYTES[weights_dtype])

    tie, notes = tie_word_embeddings(cfg, outer, model_type)
    vision, vision_notes = vision_parameters(outer, shape["hidden_size"], model_type)
    vocab = _int(cfg, ("vocab_size", "padded_vocab_size"), required=True, lo=1)
    max_pos = _int(cfg, ("max_position_embeddings", "n_positions", "seq_length"), default=None, lo=1)

    sampling = _sampling(generation_config, name, outer.get("_name_or_path"))
    if name is None:
        archs = outer.get("architectures") or []
        name = str(outer.get("_name_or_path") or (archs[0] if archs else "") or model_type or "model")

    kwargs = dict(
        name=name,
        **shape,
        q_lora_rank=_int(cfg, ("q_lora_rank",), lo=1),
        layers=layers,
        vocab_size=vocab,
        **ffn,
        attention_bias=bool(cfg.get("attention_bias") or cfg.get("qkv_bias") or model_type in ("qwen2", "gpt2")),
        gated_mlp=model_type not in ("gpt2", "gpt_bigcode", "opt", "phi"),
        tie_word_embeddings=bool(tie),
        num_parameters=num_parameters,
        num_active_parameters=num_active_parameters,
        weights_dtype=weights_dtype,
        max_position_embeddings=max_pos,
        mm_tokens_per_item=_mm_tokens_per_item(outer),
        sampling=sampling,
        vision_parameters=vision,
        rope_cache_elements=rope_cache_elements(cfg, model_type, shape["head_dim"], max_pos,
                                                shape.get("qk_rope_head_dim")),
        config_notes=tuple(unknown_architecture_note(model_type) + notes + vision_notes),
        **quant,
    )
    return _model_spec(kwargs, num_parameters, num_active_parameters)


def _sampling(generation_config: dict | None, *names: str | None) -> str | None:
    """The sampler path of a given ``generation_config.json``, else of the first known name; None if neither."""
    if generation_config is not None:
        if not isinstance(generation_config, dict):
            raise SpecError("must be a JSON object", field="generation_config")
        try:
            return generation_config_path(generation_config)
        except ValueError as exc:
            raise SpecError.nested(exc, "generation_config") from None
    return next((path for path in map(model_sampler_path, names) if path), None)


def _text_config(config: dict) -> tuple[dict, dict, str]:
    """``(outer, cfg, model_type)``: the config as given, the one describing the language model (a multimodal
    config's ``text_config`` over its own top-level keys) and the lower-case model type."""
    outer = config
    cfg = config
    tc = config.get("text_config")
    if isinstance(tc, dict) and "num_hidden_layers" not in config and "n_layer" not in config:
        cfg = {**{k: v for k, v in config.items() if k not in ("text_config", "vision_config", "audio_config")},
               **tc}
    model_type = str(cfg.get("model_type") or outer.get("model_type") or "").lower()
    return outer, cfg, model_type


def _attention_shape(cfg: dict) -> dict[str, Any]:
    """ModelSpec fields of the layer shape: layers, hidden size, heads, head size, MLA latent sizes."""
    # ModelSpec's bound, checked before anything is built per layer (a 200-byte config of 10,000,000 layers took
    # 22 s to refuse).
    n_layers = _int(cfg, ("num_hidden_layers", "n_layer", "num_layers"), required=True, lo=1, hi=MAX_LAYERS)
    hidden = _int(cfg, ("hidden_size", "n_embd", "d_model"), required=True, lo=1)
    n_heads = _int(cfg, ("num_attention_heads", "n_head", "num_heads"), required=True, lo=1)
    kv_lora = _int(cfg, ("kv_lora_rank",), lo=1)
    is_mla = kv_lora is not None
    n_kv = _int(cfg, ("num_key_value_heads", "num_kv_heads", "n_head_kv"), default=n_heads, lo=1)
    if cfg.get("multi_query") is True:
        n_kv = 1
    if not is_mla:
        if n_kv > n_heads:
            raise SpecError(f"{n_kv} is more than num_attention_heads {n_heads}", field="num_key_value_heads")
        if n_heads % n_kv:
            raise SpecError(f"{n_kv} does not divide num_attention_heads {n_heads}", field="num_key_value_heads")
    head_dim = _int(cfg, ("head_dim",), lo=1)
    if head_dim is None and not is_mla:
        if hidden % n_heads:
            raise SpecError(f"missing and hidden_size {hidden} is not a multiple of "
                            f"num_attention_heads {n_heads}", field="head_dim")
        head_dim = hidden // n_heads
    qk_rope = _int(cfg, ("qk_rope_head_dim",), lo=0)
    qk_nope = _int(cfg, ("qk_nope_head_dim",), lo=0)
    v_head = _int(cfg, ("v_head_dim",), lo=1)
    if is_mla:
        if qk_rope is None:
            raise SpecError("required with kv_lora_rank (MLA)", field="qk_rope_head_dim")
        if head_dim is None:
            head_dim = (qk_nope or 0) + qk_rope or (hidden // n_heads)
    return dict(num_layers=n_layers, hidden_size=hidden, num_attention_heads=n_heads,
                num_kv_heads=1 if is_mla else n_kv, head_dim=head_dim, attention="MLA" if is_mla else "",
                kv_lora_rank=kv_lora, qk_rope_head_dim=qk_rope, qk_nope_head_dim=qk_nope, v_head_dim=v_head)


def _weights_dtype(cfg: dict, outer: dict, model_type: str) -> str:
    """The checkpoint's dtype (``torch_dtype``; GPT-2 fp32, others bf16 when absent), normalized."""
    dtype_raw = _get(cfg, "torch_dtype", "dtype", default=None) or _get(outer, "torch_dtype", "dtype", default=None)
    if dtype_raw is None:
        dtype_raw = "fp32" if model_type == "gpt2" else "bf16"
    try:
        return normalize_dtype(str(dtype_raw), "torch_dtype")
    except SpecError:
        raise SpecError(f"unknown dtype {dtype_raw!r}", field="torch_dtype") from None


def _ffn_and_experts(cfg: dict, model_type: str, n_layers: int, hidden: int) -> dict[str, Any]:
    """ModelSpec fields of the feed-forward part: intermediate size and, for MoE models, the experts."""
    n_experts = _int(cfg, ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"), default=0)
    if model_type.startswith("gemma4") and cfg.get("enable_moe_block") is False:
        n_experts = 0
    topk = _int(cfg, ("num_experts_per_tok", "experts_per_token", "top_k_experts", "moe_top_k"), default=0)
    if n_experts and not topk:
        raise SpecError("the config has experts but no experts per token", field="num_experts_per_tok")
    if n_experts and topk > n_experts:
        raise SpecError(f"{topk} is more than the {n_experts} experts", field="num_experts_per_tok")
    inter = _int(cfg, ("intermediate_size", "n_inner", "ffn_hidden_size"), default=None)
    if inter is None:
        inter = 4 * hidden if model_type == "gpt2" else 0
    moe_inter = _int(cfg, ("moe_intermediate_size", "expert_intermediate_size"), default=None)
    n_shared, shared_inter = _shared_experts(cfg, model_type, inter, n_experts)
    n_dense = 0
    if n_experts:
        n_dense = _dense_layers(cfg, model_type, n_layers)
        if model_type.startswith("gemma4"):
            # Gemma 4 runs a dense MLP beside the experts in every layer: count it as a shared expert.
            n_shared, shared_inter, n_dense = 1, inter, 0
        if model_type in ("mixtral", "gpt_oss") or moe_inter is None:
            moe_inter = moe_inter or inter
        n_dense = min(n_dense, n_layers)
    return dict(intermediate_size=inter, num_experts=n_experts, num_experts_per_tok=topk if n_experts else 0,
                moe_intermediate_size=moe_inter if n_experts else None,
                num_shared_experts=n_shared if n_experts else 0,
                shared_expert_intermediate_size=shared_inter if n_experts else None, num_dense_layers=n_dense)


def _dense_layers(cfg: dict, model_type: str, n_layers: int) -> int:
    """Layers of an MoE model with a dense FFN: the first k, the listed MLP-only ones, those between sparse steps
    (may exceed ``n_layers``; the caller clips)."""
    n_dense = _int(cfg, ("first_k_dense_replace",), default=0)
    mlp_only = cfg.get("mlp_only_layers") or []
    if isinstance(mlp_only, list):
        n_dense += len(mlp_only)
    step = _int(cfg, ("decoder_sparse_step", "moe_layer_freq"), default=1, lo=1)
    if step > 1:
        n_dense += n_layers - len(range(step - 1, n_layers, step))
    return n_dense


def _model_spec(kwargs: dict[str, Any], num_parameters: int | None, num_active_parameters: int | None) -> ModelSpec:
    """The ModelSpec (its errors named by config key), parameter counts estimated when not given, group size
    checked against the quantization scheme."""
    try:
        spec = ModelSpec(**kwargs)
    except SpecError as exc:  # named by its config key, in its field (never only in the words)
        raise SpecError(exc.message, field=_FIELD_TO_KEY.get(exc.field, exc.field)) from None
    if num_parameters is None:
        total, active = estimate_num_parameters(spec)
        spec = replace(spec, num_parameters=total,
                       num_active_parameters=num_active_parameters if num_active_parameters else active)
    check_group_size(spec, scheme_for(spec))
    return spec


def _mm_tokens_per_item(outer: dict) -> int | None:
    """Embedding tokens of one full-size image: the config's own figure (``mm_tokens_per_image``,
    ``vision_soft_tokens_per_image``, ``vision_config.default_output_length``), else
    ``(image_size / patch_size)^2 / spatial_merge_size^2`` from ``vision_config``; None for text-only models."""
    vc = outer.get("vision_config")
    if not isinstance(vc, dict):
        return None
    given = _int(outer, ("mm_tokens_per_image", "vision_soft_tokens_per_image"), lo=1) or \
        _int(vc, ("default_output_length",), lo=1)
    if given:
        return given
    image = _int(vc, ("image_size",), lo=1)
    patch = _int(vc, ("patch_size",), lo=1)
    if not image or not patch:
        return None
    merge = _int(outer, ("spatial_merge_size",), default=None, lo=1) or _int(vc, ("spatial_merge_size",),
                                                                             default=1, lo=1)
    return max((image // patch) ** 2 // (merge * merge), 1)


__all__ = ["parse_hf_config"]
