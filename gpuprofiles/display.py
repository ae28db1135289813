"""What a profile page shows for each value: the figure, or what stands in for a missing one.

A catalog row or an imported ``config.json`` leaves some values empty: a figure the
source did not publish (KV bytes per token), or a value that does not apply to this
model (MLA ranks of a GQA model, expert sizes of a dense one). The pages never show
a bare dash for them: a figure that can be computed from the config is computed
(the sizing page's own rule, :func:`simulator.sizing.closed_form.kv_bytes_per_token`) and said
to be computed; a value that does not apply says why.

A model's default sampling (the sampler path its requests take when they set no
sampling parameters) is said in words with where it comes from, by
:func:`default_sampling_words`: the one place for those words.
"""

from __future__ import annotations

from simulator.base import (
    DEFAULT_SAMPLER_PATH,
    LAYER_FULL,
    PATH_WORDS,
    SAMPLER_PATHS,
    SAMPLING_KEYS,
    generation_config_path,
    generation_defaults,
    path_words,
)
from simulator.sizing import kv_bytes_per_token

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


# --------------------------------------------------------------------------
# default sampling
# --------------------------------------------------------------------------

#: The blank choice of a model's default sampling: not known, timed as the planner's default path.
SAMPLING_UNKNOWN = f"not known (timed as {PATH_WORDS[DEFAULT_SAMPLER_PATH]})"

#: The edit form's and the API's choices: blank (not known) and every path in words.
MODEL_SAMPLING_CHOICES = [("", SAMPLING_UNKNOWN), *((k, PATH_WORDS[k]) for k in SAMPLER_PATHS)]


def sampling_fields_text(fields: dict) -> str:
    """What a generation_config sets for the sampler, in its own keys: ``"sets temperature 0.6, top_p 0.9"``,
    or ``"sets no sampling fields"``."""
    parts = [f"{key} {_number_text(fields[key])}" for key in SAMPLING_KEYS if fields.get(key) is not None]
    return "sets " + ", ".join(parts) if parts else "sets no sampling fields"


def _number_text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _path_of(fields) -> str | None:
    """The sampler path of a generation_config's fields; None when they do not give one."""
    try:
        return generation_config_path(fields) if isinstance(fields, dict) else None
    except ValueError:
        return None


def default_sampling_words(profile) -> str:
    """A model profile's default sampling in words, and why.

    * blank: ``"not known — timed as top-k / top-p, the planner's default"``;
    * the generation_config.json its owner imported gives the path: ``"… — from the generation_config you
      imported (it sets …)"``;
    * the shipped generation defaults of its Hugging Face id or name give it (catalog rows, their copies, an
      import recognised by name): ``"… — its generation_config.json sets … (source: …; not verified against the
      owner's file)"``;
    * otherwise (a user's own row): ``"… — set by you"``.
    """
    path = profile.sampling
    if not path:
        return f"not known — timed as {PATH_WORDS[DEFAULT_SAMPLER_PATH]}, the planner's default"
    words = path_words(path)
    imported = profile.hf_generation_config
    if not profile.is_catalog and imported is not None and _path_of(imported) == path:
        return f"{words} — from the generation_config you imported (it {sampling_fields_text(imported)})"
    entry = generation_defaults(profile.hf_id) or generation_defaults(profile.name)
    if entry is not None and _path_of(entry["fields"]) == path:
        checked = "read from the owner's file" if entry.get("verified") else "not verified against the owner's file"
        return (f"{words} — its generation_config.json {sampling_fields_text(entry['fields'])} "
                f"(source: {entry['source']}; {checked})")
    return words if profile.is_catalog else f"{words} — set by you"


def clock_physics(profile) -> dict:
    """What the step clock times a GPU profile with (issue 30): ``measured`` (bool), ``note`` (the source, or
    "timed from data-sheet peaks; not checked against a measurement"), ``figures`` and ``sources`` (by name:
    the profile's own figures, else the shipped measurements of a catalog GPU of the same name)."""
    from simulator.clock import gpu_physics

    try:
        phys = gpu_physics(profile.to_spec())
    except ValueError:  # (a row whose values no longer make a spec: nothing to say about its clock)
        return {"measured": False, "note": "", "figures": {}, "sources": {}}
    return {"measured": phys.measured, "note": phys.note, "figures": dict(phys.coefficients),
            "sources": dict(phys.sources)}
