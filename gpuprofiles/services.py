"""Writes to the catalog: import a config.json, create / update / copy / delete own profiles.

Every service is keyword-only and atomic. Bad input raises the one input-error
type, :class:`simulator.base.errors.FieldError`, with its messages per field in
``errors`` (a form attaches them to its fields; the API answers 400 with them, as
for every input error: ``planner.api.errors``);
a write to a row the user does not own raises
:class:`~django.core.exceptions.PermissionDenied` (403); copying a row the
user may not see raises :class:`~django.http.Http404`, as for an unknown slug.

Slugs: catalog rows keep readable slugs (``llama-3-1-8b``); a private row's
slug is ``<username>-<name>-<16 hex digits>``, the digits drawn by
:mod:`secrets` (64 bits), so nobody can guess another user's slug from a
catalog slug or a name.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.utils.text import slugify

from simulator.base import GpuSpec, SpecError, generation_config_path
from simulator.base.errors import FieldError
from simulator.sizing import parse_hf_config

from .convert import spec_columns
from .models import GpuProfile, ModelProfile

#: Largest config.json accepted (pasted or uploaded; the API: the whole body).  # bytes
#: Published configs take 1-10 KB (the shipped ones 2-4 KB). Checking and storing a body costs about 4.5 us per JSON
#: value on the project's VM: a 1 MiB body of 340,000 numbers took 1.5 s (and its page 12.6 s), past the 1 s that
#: may run inside a request; 256 KiB bounds the worst import well under it (docs/operations.md).
MAX_CONFIG_BYTES = 256 * 2**10
#: The limit in words, for messages and help texts.
MAX_CONFIG_WORDS = f"{MAX_CONFIG_BYTES:,} bytes ({MAX_CONFIG_BYTES // 2**10} KiB)"

#: Fields a user may set on a GPU profile.
GPU_EDITABLE = ("name", "vendor", "memory_gib", "memory_mib", "bandwidth_tbps", "bf16_tflops", "fp8_tflops",
                "fp4_tflops", "price_per_hour", "measured", "measured_source")

#: Fields a user may set on a model profile (the rest come from the imported config).
MODEL_EDITABLE = ("name", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
                  "intermediate_size", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
                  "vocab_size", "tie_word_embeddings", "num_parameters", "num_active_parameters",
                  "kv_lora_rank", "qk_rope_head_dim", "max_position_embeddings", "weights_dtype", "quantization",
                  "sampling")

#: Model fields whose "none" is stored as "" (a form's or the API's None clears them).
_BLANK_FOR_NONE = ("quantization", "sampling")


#: Random bytes at the end of a private row's slug (hex: two characters each).
PRIVATE_SLUG_RANDOM_BYTES = 8  # 64 bits


def private_slug(model, *, owner, name: str) -> str:
    """A fresh, unguessable slug for ``owner``'s row: ``<username>-<name>-<16 random hex digits>``."""
    base = (slugify(f"{owner.get_username()}-{name}".replace(".", "-")) or "profile")[:100]
    while True:
        slug = f"{base}-{secrets.token_hex(PRIVATE_SLUG_RANDOM_BYTES)}"
        if not model.objects.filter(slug=slug).exists():
            return slug


def profile_check_editable(*, profile, user) -> None:
    """Raise PermissionDenied unless ``user`` owns ``profile`` (catalog rows: never)."""
    _require_owner(profile, user)


def _require_owner(profile, user) -> None:
    if profile.is_catalog:
        raise PermissionDenied("Catalog rows are read-only: copy this one to your profiles to edit it.")
    if not profile.can_edit(user):
        raise PermissionDenied("Only the owner may change this profile.")


def _spec_error(exc: SpecError, prefix: str | None = None) -> FieldError:
    """A SpecError as the service's input error on its ``field`` with its ``message`` (on ``prefix`` with its whole
    words, "field: message"; on ``non_field_errors`` where it names no field): no field read back out of the
    words."""
    if prefix:
        return FieldError.many({prefix: [str(exc)]})
    return FieldError.many({exc.field or "non_field_errors": [exc.message if exc.field else str(exc)]})


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------


@transaction.atomic
def model_profile_import(*, owner, config: Any, name: str | None = None, num_parameters: int | None = None,
                         quant_config: Any = None, generation_config: Any = None) -> ModelProfile:
    """Create ``owner``'s model profile from a Hugging Face ``config.json`` (already parsed JSON).

    ``generation_config``, the model's ``generation_config.json``, gives the default sampling (kept verbatim);
    without it a model known by name or by the config's ``_name_or_path`` gets its shipped defaults.
    Errors name the field: ``{"config": ["num_key_value_heads: 7 does not divide ..."]}``,
    ``{"generation_config": ["generation_config.top_p: must be a number, got 'x'"]}``.
    """
    name = (name or "").strip() or None
    spec = model_import_check(config=config, name=name, num_parameters=num_parameters, quant_config=quant_config,
                              generation_config=generation_config)
    display = (name or spec.name or "model")[:200]
    profile = ModelProfile(
        owner=owner, is_catalog=False, name=display, slug=private_slug(ModelProfile, owner=owner, name=display),
        hf_id=str(config.get("_name_or_path") or "")[:200] if not str(config.get("_name_or_path") or "").startswith("/")
        else "",
        model_type=str(config.get("model_type") or "")[:60],
        hf_config=config, hf_quant_config=quant_config, hf_generation_config=generation_config,
        sources="config.json imported by the user",
        params_note="given by the user" if num_parameters else "estimated from config.json",
    )
    profile.set_from_spec(spec)
    profile.save()
    return profile


def model_import_check(*, config: Any, name: str | None = None, num_parameters: Any = None, quant_config: Any = None,
                       generation_config: Any = None):
    """The ModelSpec an import would create, or a FieldError with every problem of its parts at once
    (the generation config is checked on its own, so a config.json problem does not hide it). ``config``
    None: only the other parts are checked (the page's config field is refused already)."""
    errors: dict[str, list[str]] = {}
    if config is not None and not isinstance(config, dict):
        errors["config"] = ["must be a JSON object (the contents of config.json)"]
    if quant_config is not None and not isinstance(quant_config, dict):
        errors["quant_config"] = ["must be a JSON object (hf_quant_config.json)"]
    if generation_config is not None and not isinstance(generation_config, dict):
        errors["generation_config"] = ["must be a JSON object (generation_config.json)"]
    elif generation_config is not None:
        try:
            generation_config_path(generation_config)
        except ValueError as exc:  # worded as the import words it (simulator.sizing.hf_config)
            errors["generation_config"] = [f"generation_config.{exc}"]
    if num_parameters is not None and (isinstance(num_parameters, bool) or not isinstance(num_parameters, int)
                                       or num_parameters < 1):
        errors["num_parameters"] = ["must be a whole number >= 1"]
    spec = None
    if isinstance(config, dict):
        try:
            spec = parse_hf_config(config, name=(name or "").strip() or None,
                                   quant_config=quant_config if "quant_config" not in errors else None,
                                   num_parameters=num_parameters if "num_parameters" not in errors else None,
                                   generation_config=generation_config if "generation_config" not in errors else None)
        except SpecError as exc:
            where = "generation_config" if (exc.field or "").startswith("generation_config") else "config"
            for field, messages in _spec_error(exc, where).errors.items():
                errors.setdefault(field, messages)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            # A structurally odd config (a list where a number belongs...): still a field error, never a 500.
            errors.setdefault("config", [f"cannot read this config.json: {exc}"])
    if errors:
        raise FieldError.many(errors)
    return spec


def _every_problem(apply, profile, data: dict[str, Any], fallback: dict[str, Any], tries: int = 8) -> None:
    """``apply(profile, data)``, or a FieldError with every problem at once, not only the first.

    The checks (a ModelSpec or GpuSpec) stop at their first problem: each refused field is put back to
    ``fallback`` (the profile's values before the edit; absent: None) and the values checked again on a copy
    of the profile, until nothing more is refused or can be put back. ``profile`` changes only on success.
    """
    import copy

    values, errors = dict(data), {}
    for _ in range(tries):
        try:
            apply(copy.copy(profile), values)
        except FieldError as exc:
            refused = exc.errors
            for field, messages in refused.items():
                errors.setdefault(field, messages)
            back = [f for f in refused if f in values and values[f] != fallback.get(f)] or _partner(
                apply, profile, values, fallback, refused)
            if not back:
                break
            values.update({f: fallback.get(f) for f in back})
            continue
        break
    if errors:
        raise FieldError.many(errors)
    apply(profile, values)


def _partner(apply, profile, values: dict, fallback: dict, refused: dict) -> list[str]:
    """The changed field whose own value makes a refused field wrong (``num_experts`` for a refused
    ``num_experts_per_tok`` already at its old value), found by putting each back in turn; [] if none."""
    import copy

    for field in [f for f in values if values[f] != fallback.get(f)]:
        try:
            apply(copy.copy(profile), {**values, field: fallback.get(field)})
        except FieldError as exc:
            if set(exc.errors) == set(refused):
                continue
        return [field]
    return []


def profile_check(*, profile, data: dict[str, Any]) -> None:
    """Check edits of a profile without saving: a FieldError with every problem (the page uses it for the
    fields its form accepted while others were refused)."""
    apply = _model_apply if isinstance(profile, ModelProfile) else _gpu_apply
    editable = MODEL_EDITABLE if isinstance(profile, ModelProfile) else GPU_EDITABLE
    import copy

    _every_problem(apply, copy.copy(profile), data, {f: getattr(profile, f, None) for f in editable})


def _create_own(model_cls, apply, *, owner, data: dict[str, Any]):
    """A new profile of ``owner``'s from field values: ``apply`` validates and sets them, then a unique slug."""
    profile = model_cls(owner=owner, is_catalog=False, sources="entered by the user")
    _every_problem(apply, profile, data, {})
    profile.slug = private_slug(model_cls, owner=owner, name=profile.name)
    profile.save()
    return profile


def _update_own(apply, *, profile, user, data: dict[str, Any]):
    """Change fields of ``user``'s own profile (403 for anyone else, and for catalog rows)."""
    _require_owner(profile, user)
    editable = MODEL_EDITABLE if isinstance(profile, ModelProfile) else GPU_EDITABLE
    _every_problem(apply, profile, data, {f: getattr(profile, f, None) for f in editable})
    profile.save()
    return profile


@transaction.atomic
def model_profile_create(*, owner, data: dict[str, Any]) -> ModelProfile:
    """Create ``owner``'s model profile from field values (validated as a ModelSpec)."""
    return _create_own(ModelProfile, _model_apply, owner=owner, data=data)


@transaction.atomic
def model_profile_update(*, profile: ModelProfile, user, data: dict[str, Any]) -> ModelProfile:
    """Change fields of ``user``'s own model profile (403 for anyone else, and for catalog rows)."""
    return _update_own(_model_apply, profile=profile, user=user, data=data)


def _model_apply(profile: ModelProfile, data: dict[str, Any]) -> None:
    unknown = set(data) - set(MODEL_EDITABLE)
    if unknown:
        raise FieldError.many({k: ["cannot be set on a model profile"] for k in sorted(unknown)})
    for field, value in data.items():
        setattr(profile, field, "" if field in _BLANK_FOR_NONE and value is None else value)
    if not (profile.name or "").strip():
        raise FieldError.many({"name": ["is required"]})
    if profile.layers and len(profile.layers) != profile.num_layers:
        profile.layers = []  # the per-layer pattern no longer fits: fall back to all full attention
    try:
        spec = profile.to_spec()
    except SpecError as exc:
        raise _spec_error(exc) from None
    except TypeError as exc:
        raise FieldError.many({"non_field_errors": [str(exc)]}) from None
    for field, value in spec_columns(spec).items():
        setattr(profile, field, value)


# --------------------------------------------------------------------------
# GPUs
# --------------------------------------------------------------------------


def _gpu_apply(profile: GpuProfile, data: dict[str, Any]) -> None:
    unknown = set(data) - set(GPU_EDITABLE)
    if unknown:
        raise FieldError.many({k: ["cannot be set on a GPU profile"] for k in sorted(unknown)})
    for field, value in data.items():
        if value is None and field == "measured":
            value = {}
        setattr(profile, field, value if value is not None or field not in ("name", "vendor", "measured_source") else "")
    if not (profile.name or "").strip():
        raise FieldError.many({"name": ["is required"]})
    if profile.memory_gib is None:
        raise FieldError.many({"memory_gib": ["is required (total memory as torch / vLLM see it, GiB)"]})
    profile.memory_gib_estimated = False
    try:
        spec = GpuSpec(**{f: getattr(profile, f) for f in ("name", "memory_gib", "memory_mib", "bandwidth_tbps",
                                                           "bf16_tflops", "fp8_tflops", "fp4_tflops", "price_per_hour",
                                                           "measured", "measured_source")})
    except SpecError as exc:
        raise _spec_error(exc) from None
    profile.measured = spec.measured_figures  # (numbers as floats, names sorted)


@transaction.atomic
def gpu_profile_create(*, owner, data: dict[str, Any]) -> GpuProfile:
    """Create ``owner``'s GPU profile (``name`` and ``memory_gib`` required)."""
    return _create_own(GpuProfile, _gpu_apply, owner=owner, data=data)


@transaction.atomic
def gpu_profile_update(*, profile: GpuProfile, user, data: dict[str, Any]) -> GpuProfile:
    """Change fields of ``user``'s own GPU profile (403 for anyone else, and for catalog rows)."""
    return _update_own(_gpu_apply, profile=profile, user=user, data=data)


# --------------------------------------------------------------------------
# both
# --------------------------------------------------------------------------


@transaction.atomic
def profile_copy(*, profile: GpuProfile | ModelProfile, owner) -> GpuProfile | ModelProfile:
    """An owned, editable copy of a catalog row or of ``owner``'s own row; provenance is kept.

    Another user's private row is not found (404), whoever asks.
    """
    if not profile.is_catalog and (profile.owner_id is None or profile.owner_id != getattr(owner, "pk", None)):
        raise Http404("No such profile.")
    model = type(profile)
    copy = model.objects.get(pk=profile.pk)
    copy.pk = None
    copy.id = None
    copy._state.adding = True
    copy.owner = owner
    copy.is_catalog = False
    copy.copied_from = profile
    copy.name = f"{profile.name} (copy)"[:200]
    copy.slug = private_slug(model, owner=owner, name=profile.name)
    copy.save()
    return copy


@transaction.atomic
def profile_delete(*, profile: GpuProfile | ModelProfile, user) -> None:
    """Delete ``user``'s own profile (403 for anyone else, and for catalog rows)."""
    _require_owner(profile, user)
    profile.delete()
