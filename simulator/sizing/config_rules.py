"""What a ``config.json`` leaves unsaid, read the way transformers and vLLM fill it in.

* :func:`tie_word_embeddings` — the default of ``tie_word_embeddings`` when the key is absent: the one of the
  model type's transformers config class (:data:`TIE_DEFAULTS`), else ``PretrainedConfig``'s ``True``, said so
  in a note.
* :func:`vision_parameters` — the vision tower and projector a multimodal checkpoint loads beside the language
  model (Llama 4, Gemma 3, Qwen2/2.5-VL, Mistral 3 / Pixtral, LLaVA-style), counted from ``vision_config``.
* :func:`rope_cache_elements` — vLLM's rotary ``cos_sin_cache`` buffers, loaded with the weights.

Sources per rule are in ``docs/sizing.md`` ("Weights"). Pure: no Django. Units: ``# parameters``, ``# elements``.
"""

from __future__ import annotations

from typing import Any

#: ``tie_word_embeddings`` when config.json omits it: the default of the model type's transformers config class
#: (``src/transformers/models/<type>/configuration_<type>.py``). Types not listed fall back to
#: ``PretrainedConfig``'s default (True) with a note. "read": the class was read for this table; "family": the
#: same default as the family's class, not re-read.
TIE_DEFAULTS: dict[str, tuple[bool, str]] = {
    "llama": (False, "LlamaConfig.tie_word_embeddings = False (read)"),
    "llama4": (False, "Llama4Config.tie_word_embeddings = False (read)"),
    "llama4_text": (False, "Llama4TextConfig.tie_word_embeddings = False (read)"),
    "mistral": (False, "MistralConfig(tie_word_embeddings=False) (read)"),
    "mixtral": (False, "MixtralConfig.tie_word_embeddings = False (read)"),
    "qwen2": (False, "Qwen2Config.tie_word_embeddings = False (read)"),
    "qwen3": (False, "Qwen3Config.tie_word_embeddings = False (read)"),
    "qwen2_moe": (False, "Qwen2MoeConfig: False (family)"),
    "qwen3_moe": (False, "Qwen3MoeConfig: False (family)"),
    "qwen3_next": (False, "Qwen3NextConfig: False (family)"),
    "deepseek_v2": (False, "DeepseekV2Config: False (family)"),
    "deepseek_v3": (False, "DeepseekV3Config(tie_word_embeddings=False) (read)"),
    "gpt_oss": (False, "GptOssConfig.tie_word_embeddings = False (read)"),
    "gemma": (True, "GemmaConfig.tie_word_embeddings = True (read)"),
    "gemma2": (True, "Gemma2Config.tie_word_embeddings = True (read)"),
    "gemma3": (True, "Gemma3TextConfig(tie_word_embeddings=True) (read)"),
    "gemma3_text": (True, "Gemma3TextConfig(tie_word_embeddings=True) (read)"),
    "gpt2": (True, "GPT2Config: PretrainedConfig's True (family)"),
}


#: Model types whose layout the planner reads with family rules (hf_config: sliding windows, MoE keys, linear
#: layers, vision towers); any other type is read as a Llama-style decoder and the answer says so.
KNOWN_MODEL_TYPES = frozenset(TIE_DEFAULTS) | {
    "gemma4", "gemma4_text", "phi3", "jamba", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "mistral3", "pixtral", "llava",
    "llava_next", "gpt_bigcode", "opt",
}


def unknown_architecture_note(model_type: str) -> list[str]:
    """A note for a model type outside :data:`KNOWN_MODEL_TYPES`, naming what the planner assumed."""
    if model_type in KNOWN_MODEL_TYPES:
        return []
    shown = repr(model_type) if model_type else "(missing)"
    return [f"model_type {shown} is not an architecture the planner knows: read as a Llama-style decoder (gated MLP, "
            "one RoPE over head_dim, attention on every layer unless layer_types says otherwise, MoE from "
            "num_local_experts / num_experts); check the weights against vLLM's 'Model loading took' line"]


def tie_word_embeddings(cfg: dict, outer: dict, model_type: str) -> tuple[bool, list[str]]:
    """``(tied, notes)``: the config's ``tie_word_embeddings`` (text config first), else the model type's default."""
    given = cfg.get("tie_word_embeddings", outer.get("tie_word_embeddings"))
    if given is not None:
        return bool(given), []
    if model_type in TIE_DEFAULTS:
        return TIE_DEFAULTS[model_type][0], []
    return True, [f"tie_word_embeddings: missing and model_type {model_type or '(none)'!r} is not one the planner "
                  "knows; assumed True (transformers PretrainedConfig's default), so the LM head is not counted"]


def _first(d: dict, *keys: str) -> Any:
    for k in keys:
        if isinstance(d.get(k), (int, float)) and not isinstance(d.get(k), bool) and d.get(k) > 0:
            return d[k]
    return None


def _vit_layers(vc: dict, h: int, layers: int, gated: bool, bias: bool) -> int:
    """Encoder layers of a ViT: q/k/v/o, the MLP (fc1/fc2, or gate/up/down), two norms."""
    inter = _first(vc, "intermediate_size") or int((_first(vc, "mlp_ratio") or 4) * h)
    attn = 4 * h * h + (4 * h if bias else 0)
    mlp = (3 if gated else 2) * h * inter + (((2 if gated else 1) * inter + h) if bias else 0)
    return layers * (attn + mlp + 4 * h)


def _projector(outer: dict, vc: dict, h: int, text_hidden: int, family: str) -> int:
    """The projector from the vision tower into the language model, per family."""
    if family == "llama4":  # pixel-shuffle adapter (fc1, fc2) + multi_modal_projector.linear_1
        ratio = float(vc.get("pixel_shuffle_ratio") or 0.5)
        p_in = int(_first(vc, "projector_input_dim") or 4096)
        p_out = int(_first(vc, "projector_output_dim") or 4096)
        out_dim = int(_first(vc, "vision_output_dim") or p_out)
        return int(h / ratio ** 2) * p_in + p_in * p_out + out_dim * text_hidden
    if family == "gemma3":  # mm_soft_emb_norm + mm_input_projection_weight
        return h * text_hidden + h
    if family == "qwen_vl":  # merger: ln_q, mlp (h m^2 -> h m^2 -> out) with biases
        m = int(_first(vc, "spatial_merge_size") or 2)
        merged = h * m * m
        out = int(_first(vc, "out_hidden_size", "hidden_size_out") or text_hidden)
        return h + merged * merged + merged + merged * out + out
    if family == "mistral3":  # norm + patch merger (h m^2 -> h) + 2-layer MLP projector
        m = int(_first(outer, "spatial_merge_size") or _first(vc, "spatial_merge_size") or 2)
        return h + h * m * m * h + h * text_hidden + text_hidden * text_hidden
    # LLaVA-style mlp2x_gelu projector: linear_1 (h -> text) + linear_2 (text -> text), with biases
    return h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden


def _family(model_type: str, vc: dict) -> str:
    vt = str(vc.get("model_type") or "").lower()
    if model_type.startswith("llama4"):
        return "llama4"
    if model_type.startswith("gemma3") or model_type.startswith("gemma4"):
        return "gemma3"
    if model_type.startswith("qwen2_vl") or model_type.startswith("qwen2_5_vl") or model_type.startswith("qwen3_vl"):
        return "qwen_vl"
    if model_type in ("mistral3", "pixtral") or vt == "pixtral":
        return "mistral3"
    return "llava"


def vision_parameters(outer: dict, text_hidden: int, model_type: str) -> tuple[int | None, list[str]]:
    """``(parameters, notes)`` of the vision tower + projector in ``outer['vision_config']``; ``(None, [])``
    for a text-only config.

    ``layers x (4 h^2 [+ 4 h] + MLP + 4 h)`` with the MLP ``2 h i`` (fc1/fc2, SigLIP, CLIP, Llama 4) or ``3 h i``
    (SwiGLU: Qwen2.5-VL, Pixtral), biases except Pixtral's; the patch embedding ``channels x patch^2 [x
    temporal_patch_size] x h``, learned positions ``(image / patch)^2 x h`` (not for the RoPE towers of Qwen-VL and
    Pixtral) and the family's projector (:func:`_projector`). Llama-4-Scout: 871,931,008, within 1,408 of its
    published module table (871,932,416: 34 layers of 23,807,872, the rest embeddings, adapter and projector).
    """
    vc = outer.get("vision_config")
    if not isinstance(vc, dict):
        return None, []
    h = _first(vc, "hidden_size", "embed_dim", "width")
    layers = _first(vc, "num_hidden_layers", "depth", "num_layers")
    if not h or not layers:
        missing = "hidden_size" if not h else "num_hidden_layers"
        return None, [f"vision_config.{missing}: missing, so the vision tower's weights are not counted"]
    h, layers = int(h), int(layers)
    family = _family(model_type, vc)
    gated = family in ("qwen_vl", "mistral3") and model_type != "qwen2_vl"
    bias = family != "mistral3"
    total = _vit_layers(vc, h, layers, gated, bias)
    patch = int(_first(vc, "patch_size", "spatial_patch_size") or 14)
    chans = int(_first(vc, "num_channels", "in_channels", "in_chans") or 3)
    total += chans * patch * patch * int(_first(vc, "temporal_patch_size") or 1) * h
    image = _first(vc, "image_size")
    if image and family not in ("qwen_vl", "mistral3"):
        total += (int(image) // patch) ** 2 * h + (h if family == "llama4" else 0)
    total += _projector(outer, vc, h, text_hidden, family) + (4 * h if family == "llama4" else 2 * h)  # final norm(s)
    notes = [] if family != "llava" or model_type.startswith("llava") else [
        f"vision_config: model_type {model_type!r} is not a multimodal family the planner knows; its projector is "
        "assumed LLaVA's two-layer MLP"]
    return int(total), notes


#: Model types without rotary embeddings (learned positions or none): no ``cos_sin_cache``.
NO_ROPE_TYPES = ("gpt2", "gpt_bigcode", "opt", "jamba", "bloom", "mpt")


def rope_cache_elements(cfg: dict, model_type: str, head_dim: int, max_positions: int | None,
                        rope_head_dim: int | None) -> int:
    """Elements of vLLM's rotary ``cos_sin_cache`` (``RotaryEmbedding.__init__``: ``[max_position, rotary_dim]``
    in the model dtype, one per distinct RoPE, cached by ``get_rope``): ``max_position_embeddings x rotary_dim``,
    rotary_dim = ``qk_rope_head_dim`` (MLA) or ``head_dim x partial_rotary_factor``; Gemma 3 keeps two (local and
    global). Llama 3.1 8B: 131,072 x 128 = 16.8 M (32 MiB in bf16); Llama-4-Scout-Instruct: 10,485,760 x 128 (2.5 GiB)."""
    if not max_positions or model_type in NO_ROPE_TYPES:
        return 0
    factor = cfg.get("partial_rotary_factor")
    rot = rope_head_dim or int(head_dim * (float(factor) if isinstance(factor, (int, float)) and factor else 1.0))
    n = 2 if model_type.startswith("gemma3") else 1
    return int(max_positions) * rot * n


__all__ = ["KNOWN_MODEL_TYPES", "TIE_DEFAULTS", "unknown_architecture_note", "rope_cache_elements", "tie_word_embeddings", "vision_parameters"]
