"""What a profile page shows for each value: the figure, or what stands in for a missing one.

A catalog row or an imported ``config.json`` leaves some values empty: a figure the
source did not publish (KV bytes per token), or a value that does not apply to this
model (MLA ranks of a GQA model, expert sizes of a dense one). The pages never show
a bare dash for them: a figure that can be computed from the config is computed
(the sizing page's own rule, :func:`simulator.sizing.kv_bytes_per_token`) and said
to be computed; a value that does not apply says why.
"""

from __future__ import annotations

from simulator.sizing import kv_bytes_per_token
from simulator.specs import LAYER_FULL

#: Source columns of the KV figures, computed when the source gives none: (dtype, full-attention layers only).
_KV_FIGURES = {"kv_bytes_per_token_bf16": ("bf16", False), "kv_bytes_per_token_bf16_global": ("bf16", True),
               "kv_bytes_per_token_fp8": ("fp8", False)}


def computed_kv_bytes(profile, field: str) -> int | None:
    """A KV-bytes-per-token figure of ``profile`` computed from its config (whole model, no TP); None when the
    config does not convert."""
    dtype, global_only = _KV_FIGURES[field]
    try:
        spec = profile.to_spec()
    except (ValueError, TypeError):
        return None
    layers = [lay for lay in spec.layer_specs if lay.kind == LAYER_FULL] if global_only else None
    return round(kv_bytes_per_token(spec, dtype, layers=layers))


def kv_bf16_shown(profile) -> dict:
    """The model list's KV column: ``{"value", "computed"}`` (the source's figure, else computed)."""
    if profile.kv_bytes_per_token_bf16 is not None:
        return {"value": profile.kv_bytes_per_token_bf16, "computed": False}
    return {"value": computed_kv_bytes(profile, "kv_bytes_per_token_bf16"), "computed": True}


def with_kv_figures(profiles) -> list:
    """``profiles`` as a list, each with ``kv_bf16`` set (:func:`kv_bf16_shown`) for the model list."""
    out = list(profiles)
    for p in out:
        p.kv_bf16 = kv_bf16_shown(p)
    return out


def _why_empty(profile, field: str) -> str:
    """Why ``field`` has no value for this model, in words."""
    if field in ("kv_lora_rank", "qk_rope_head_dim"):
        return f"does not apply: {profile.attention} attention, not MLA"
    if field in ("moe_intermediate_size", "num_shared_experts") and not profile.num_experts:
        return "does not apply: a dense model (no experts)"
    if field == "sliding_window":
        return "does not apply: no sliding-window layers"
    if field == "quantization":
        return f"none: {profile.weights_dtype or 'unquantized'} weights"
    if field == "quant_ignore_text":
        return "nothing listed" if profile.quantization else "does not apply: the checkpoint is not quantized"
    if field == "hf_id":
        return "not given"
    return "not in the source"


def value_and_note(profile, field: str) -> tuple[str, str]:
    """The figure a page shows for ``field`` (formatted) and a note when it is not the source's own."""
    value = getattr(profile, field)
    note = ""
    if value in (None, "") and field in _KV_FIGURES:
        value = computed_kv_bytes(profile, field)
        note = "computed from the config (the sizing page's rule); the source gives no figure"
    if isinstance(value, bool):
        return ("yes" if value else "no"), note
    if isinstance(value, float):
        return (f"{value:,.4g}" if value < 1000 else f"{value:,.0f}"), note
    if isinstance(value, int):
        return f"{value:,}", note
    if value in (None, ""):
        return _why_empty(profile, field), ""
    return str(value), note


def detail_rows(profile, spec_rows) -> list[dict]:
    """One row per ``(label, field, unit, source column)``: figure, unit, flag, and the source cell or a note."""
    rows = []
    for label, field, unit, column in spec_rows:
        empty = getattr(profile, field) in (None, "") and field not in _KV_FIGURES
        value, note = value_and_note(profile, field)
        if field in ("num_parameters", "num_active_parameters") and not note:
            note = profile.params_note  # "estimated from config.json", "given by the user"
        cell = profile.cell(column)
        rows.append({"label": label, "value": value, "unit": "" if empty else unit,
                     "unverified": profile.field_unverified(field), "cell": cell,
                     "note": note or ("" if cell or profile.is_catalog else profile.sources)})
    return rows
