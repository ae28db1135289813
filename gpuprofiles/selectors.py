"""Reads of the catalog: lists with filters, one row by slug.

Visibility, one rule for every caller (catalog pages and API, sizing, sweeps,
replicas, management commands): a user sees the catalog rows plus their own
private rows, nothing else. :func:`visible_profiles` is that rule as a
queryset; every read of a profile goes through it, so another user's private
row is "not found" (404) everywhere, exactly like a slug that does not exist.
Only the owner may change a private row; catalog rows are read-only.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from config.json_input import object_id

from .models import GpuProfile, ModelProfile

ProfileClass = type[GpuProfile] | type[ModelProfile]


def _own(user) -> Q:
    """The rows ``user`` owns (none for an anonymous user or ``None``)."""
    if user is not None and getattr(user, "is_authenticated", False):
        return Q(is_catalog=False, owner_id=user.pk)
    return Q(pk__in=[])


def visible_profiles(model: ProfileClass, *, user, scope: str | None = None) -> QuerySet:
    """The ``model`` rows ``user`` may see: catalog rows plus their own private rows.

    ``scope`` narrows it: ``"catalog"`` (curated rows only) or ``"mine"`` (own rows only).
    """
    if scope == "catalog":
        return model.objects.filter(is_catalog=True)
    if scope == "mine":
        return model.objects.filter(_own(user))
    return model.objects.filter(Q(is_catalog=True) | _own(user))


def profile_find(model: ProfileClass, *, ref: str | int, user) -> GpuProfile | ModelProfile | None:
    """A visible row by slug (or by id, for sweep definitions); ``None`` when unknown or not visible."""
    qs = visible_profiles(model, user=user)
    pk = object_id(ref)
    if pk is not None:
        return qs.filter(pk=pk).first()
    if isinstance(ref, int) or (isinstance(ref, str) and ref.strip().isdigit()):
        return None  # an id out of range (or of non-ASCII digits): no such row
    return qs.filter(slug=ref).first()


def gpu_profile_list(*, filters: dict[str, Any] | None = None, user=None) -> QuerySet[GpuProfile]:
    """GPUs visible to ``user`` matching ``filters``.

    Filters (all optional): ``q`` (name contains), ``vendor`` (exact, any case),
    ``memory_type`` (contains, e.g. ``HBM3``), ``min_memory_gib`` /
    ``max_memory_gib`` (runtime total, GiB), ``scope`` (``catalog`` / ``mine``).
    Ordered by vendor, then memory.
    """
    f = filters or {}
    qs = visible_profiles(GpuProfile, user=user, scope=f.get("scope")).select_related("owner")
    if f.get("q"):
        qs = qs.filter(name__icontains=f["q"])
    if f.get("vendor"):
        qs = qs.filter(vendor__iexact=f["vendor"])
    if f.get("memory_type"):
        qs = qs.filter(memory_type__icontains=f["memory_type"])
    if f.get("min_memory_gib") is not None:
        qs = qs.filter(memory_gib__gte=f["min_memory_gib"])
    if f.get("max_memory_gib") is not None:
        qs = qs.filter(memory_gib__lte=f["max_memory_gib"])
    return qs.order_by("vendor", "memory_gib", "name")


def model_profile_list(*, filters: dict[str, Any] | None = None, user=None) -> QuerySet[ModelProfile]:
    """Models visible to ``user`` matching ``filters``.

    Filters (all optional): ``q`` (name or Hugging Face id contains),
    ``attention`` (MHA/GQA/MQA/MLA), ``architecture`` (``model_type`` contains,
    e.g. ``llama``, ``qwen3_moe``), ``moe`` (True/False), ``hybrid``
    (sliding-window or linear layers present), ``min_params_b`` /
    ``max_params_b`` (total parameters, billions), ``scope``.
    Ordered by name.
    """
    f = filters or {}
    qs = visible_profiles(ModelProfile, user=user, scope=f.get("scope")).select_related("owner")
    if f.get("q"):
        qs = qs.filter(Q(name__icontains=f["q"]) | Q(hf_id__icontains=f["q"]))
    if f.get("attention"):
        qs = qs.filter(attention__iexact=f["attention"])
    if f.get("architecture"):
        qs = qs.filter(model_type__icontains=f["architecture"])
    if f.get("moe") is not None:
        qs = qs.filter(num_experts__gt=0) if f["moe"] else qs.filter(num_experts=0)
    if f.get("hybrid") is not None:
        hybrid = Q(num_sliding_layers__gt=0) | Q(num_linear_layers__gt=0)
        qs = qs.filter(hybrid) if f["hybrid"] else qs.exclude(hybrid)
    if f.get("min_params_b") is not None:
        qs = qs.filter(num_parameters__gte=int(f["min_params_b"] * 1e9))
    if f.get("max_params_b") is not None:
        qs = qs.filter(num_parameters__lte=int(f["max_params_b"] * 1e9))
    return qs.order_by("name")


def gpu_profile_get(*, slug: str, user) -> GpuProfile:
    """One GPU by slug that ``user`` may see (404 when unknown or another user's)."""
    return get_object_or_404(visible_profiles(GpuProfile, user=user).select_related("owner"), slug=slug)


def model_profile_get(*, slug: str, user) -> ModelProfile:
    """One model by slug that ``user`` may see (404 when unknown or another user's)."""
    return get_object_or_404(visible_profiles(ModelProfile, user=user).select_related("owner"), slug=slug)


def gpu_vendors() -> list[str]:
    """Vendors of the catalog GPUs, for filter menus."""
    return list(visible_profiles(GpuProfile, user=None, scope="catalog").order_by("vendor")
                .values_list("vendor", flat=True).distinct())


def model_architectures() -> list[str]:
    """``model_type`` values of catalog models, for filter menus."""
    return list(visible_profiles(ModelProfile, user=None, scope="catalog").exclude(model_type="")
                .order_by("model_type").values_list("model_type", flat=True).distinct())
