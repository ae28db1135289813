"""Reads for the sizing page and API: catalog (and own) profiles as choices and specs.

One query for the models a user may pick (the catalog plus their own rows),
one for the GPUs; the chosen rows are converted to simulator specs without
further queries. Large JSON columns (verbatim configs) are deferred.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuprofiles.models import GpuProfile, ModelProfile
from gpuprofiles.selectors import visible_profiles

#: Defaults of the sizing form: Llama 3.1 8B on one H100 SXM (looked up by name, then by slug).
DEFAULT_MODEL_NAMES = ("Llama 3.1 8B",)
DEFAULT_GPU_PREFIXES = ("H100 SXM",)

_DEFERRED = ("hf_config", "hf_quant_config", "source_row", "sources", "verification", "params_note",
             "checkpoint_quant_text", "layer_pattern")
_GPU_DEFERRED = ("source_row", "sources", "verification", "price_text")


@dataclass(frozen=True)
class ProfileOptions:
    """Profiles a user may pick, by slug, in display order."""

    rows: dict  # slug -> profile
    choices: list  # [(group label, [(slug, label), ...]), ...] or [(slug, label), ...]
    default: str | None


def model_profile_options(*, user) -> ProfileOptions:
    """Catalog models plus the user's own, grouped for a ``<select>`` (one query)."""
    rows = list(visible_profiles(ModelProfile, user=user).defer(*_DEFERRED).order_by("name", "pk"))
    catalog = [(r.slug, r.name) for r in rows if r.is_catalog]
    own = [(r.slug, f"{r.name} (yours)") for r in rows if not r.is_catalog]
    choices = [("Catalog", catalog)] + ([("Your models", own)] if own else [])
    default = next((r.slug for n in DEFAULT_MODEL_NAMES for r in rows if r.is_catalog and r.name == n), None)
    return ProfileOptions(rows={r.slug: r for r in rows}, choices=choices,
                          default=default or (catalog[0][0] if catalog else None))


def gpu_profile_options(*, user=None) -> ProfileOptions:
    """Catalog GPUs plus the user's own (one query), with the price where the catalog has one."""
    rows = list(visible_profiles(GpuProfile, user=user).defer(*_GPU_DEFERRED).order_by("name", "pk"))

    def label(r: GpuProfile) -> str:
        price = f", ${r.price_per_hour:,.2f}/GPU-h" if r.price_per_hour else ""
        mine = " (yours)" if not r.is_catalog else ""
        return f"{r.name} ({r.memory_gib:,.2f} GiB{price}){mine}"

    choices = [(r.slug, label(r)) for r in rows]
    default = next((r.slug for p in DEFAULT_GPU_PREFIXES for r in rows if r.is_catalog and r.name.startswith(p)),
                   None)
    return ProfileOptions(rows={r.slug: r for r in rows}, choices=choices,
                          default=default or (choices[0][0] if choices else None))


def model_profile_get(*, slug: str, user=None) -> ModelProfile | None:
    """A catalog model, or one of the user's own, by slug (``None`` when not visible to them)."""
    return visible_profiles(ModelProfile, user=user).filter(slug=slug).defer(*_DEFERRED).first()


def gpu_profile_get(*, slug: str, user=None) -> GpuProfile | None:
    """A catalog GPU, or one of the user's own, by slug."""
    return visible_profiles(GpuProfile, user=user).filter(slug=slug).defer(*_GPU_DEFERRED).first()
