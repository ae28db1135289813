"""Catalog pages under ``/catalog/``: lists, details, own profiles, import, edit, copy, delete.

Thin: forms validate, selectors read, services write.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from config.form_errors import attach_errors
from simulator.base.errors import FieldError

from . import selectors, services
from .display import clock_physics, default_sampling_words, detail_rows, with_kv_figures
from .forms import ConfigImportForm, GpuFilterForm, GpuProfileForm, ModelFilterForm, ModelProfileForm
from .models import GpuProfile

NAV = "catalog"


def _attach(form, exc: FieldError, default_field: str | None = None) -> None:
    """Put a service's input error on the form's fields (:func:`config.form_errors.attach_errors`: a path that is
    a field's name at that field, the others at the default field with their path in front)."""
    attach_errors(form, exc, by_name=True, default=default_field, paths="foreign")


def index(request):
    return render(request, "gpuprofiles/index.html", {
        "nav": NAV,
        "models": selectors.model_profile_list(user=request.user, filters={"scope": "catalog"})[:8],
        "gpus": selectors.gpu_profile_list(user=request.user, filters={"scope": "catalog"})[:8],
        "model_count": selectors.model_profile_list(user=request.user).count(),
        "gpu_count": selectors.gpu_profile_list(user=request.user).count(),
    })


def model_list(request):
    form = ModelFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_bound and form.is_valid() else {}
    return render(request, "gpuprofiles/model_list.html", {
        "nav": NAV, "form": form, "architectures": selectors.model_architectures(),
        "profiles": with_kv_figures(selectors.model_profile_list(filters=filters, user=request.user)),
    })


def gpu_list(request):
    form = GpuFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_bound and form.is_valid() else {}
    return render(request, "gpuprofiles/gpu_list.html", {
        "nav": NAV, "form": form, "vendors": selectors.gpu_vendors(),
        "profiles": selectors.gpu_profile_list(filters=filters, user=request.user),
    })


@login_required
def mine(request):
    return render(request, "gpuprofiles/mine.html", {
        "nav": NAV,
        "models": selectors.model_profile_list(user=request.user, filters={"scope": "mine"}),
        "gpus": selectors.gpu_profile_list(user=request.user, filters={"scope": "mine"}),
    })


def model_detail(request, slug):
    profile = selectors.model_profile_get(slug=slug, user=request.user)
    return render(request, "gpuprofiles/model_detail.html", {
        "nav": NAV, "profile": profile, "can_edit": profile.can_edit(request.user),
        "layer_kinds": _layer_summary(profile), "rows": detail_rows(profile, MODEL_ROWS),
        "default_sampling": default_sampling_words(profile),
    })


def gpu_detail(request, slug):
    profile = selectors.gpu_profile_get(slug=slug, user=request.user)
    return render(request, "gpuprofiles/gpu_detail.html", {
        "nav": NAV, "profile": profile, "can_edit": profile.can_edit(request.user),
        "rows": detail_rows(profile, GPU_ROWS), "clock_physics": clock_physics(profile),
    })


def _layer_summary(profile) -> str:
    if not profile.layers:
        return f"{profile.num_layers} x full attention"
    parts = []
    for kind in ("full", "sliding", "linear"):
        n = getattr(profile, f"num_{kind}_layers")
        if n:
            parts.append(f"{n} {kind}")
    return ", ".join(parts)


@login_required
def model_import(request):
    form = ConfigImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and not form.is_valid():
        # every problem at once: the import's own checks on the parts the form accepted
        c = form.cleaned_data
        try:
            services.model_import_check(config=c.get("config"), name=c.get("name"),
                                        num_parameters=c.get("num_parameters"),
                                        generation_config=c.get("generation_config"))
        except FieldError as exc:
            _attach(form, exc, default_field=c.get("config_field", "config_text"))
    elif request.method == "POST":
        try:
            profile = services.model_profile_import(
                owner=request.user, config=form.cleaned_data["config"], name=form.cleaned_data.get("name"),
                num_parameters=form.cleaned_data.get("num_parameters"),
                generation_config=form.cleaned_data.get("generation_config"))
        except FieldError as exc:
            _attach(form, exc, default_field=form.cleaned_data.get("config_field", "config_text"))
        else:
            messages.success(request, f"Imported {profile.name}.")
            return redirect(profile)
    return render(request, "gpuprofiles/model_import.html", {"nav": NAV, "form": form})


@login_required
def gpu_create(request):
    form = GpuProfileForm(request.POST or None)
    if request.method == "POST" and not form.is_valid():
        _check_the_rest(form, GpuProfile(name="GPU", memory_gib=1.0), services.GPU_EDITABLE)
    elif request.method == "POST":
        try:
            profile = services.gpu_profile_create(owner=request.user, data=form.cleaned_data)
        except FieldError as exc:
            _attach(form, exc)
        else:
            messages.success(request, f"Created {profile.name}.")
            return redirect(profile)
    return render(request, "gpuprofiles/profile_form.html",
                  {"nav": NAV, "form": form, "title": "New GPU profile", "cancel": "gpuprofiles:gpu-list"})


def _check_the_rest(form, profile, fields) -> None:
    """Every problem at once: the profile's own checks on the fields the form accepted (each refused one
    standing at ``profile``'s value), attached beside the form's errors."""
    data = {f: getattr(profile, f, None) for f in fields if f in form.fields}
    data.update({k: v for k, v in form.cleaned_data.items() if k in data})
    try:
        services.profile_check(profile=profile, data=data)
    except FieldError as exc:
        _attach(form, exc)


def _edit(request, profile, form_class, update, fields):
    if not profile.can_edit(request.user):
        raise PermissionDenied("Only the owner may change this profile; catalog rows are read-only.")
    initial = {f: getattr(profile, f) for f in fields}
    form = form_class(request.POST or None, initial=initial)
    if request.method == "POST" and not form.is_valid():
        _check_the_rest(form, profile, fields)
    elif request.method == "POST":
        try:
            update(profile=profile, user=request.user, data=form.cleaned_data)
        except FieldError as exc:
            _attach(form, exc)
        else:
            messages.success(request, f"Saved {profile.name}.")
            return redirect(profile)
    return render(request, "gpuprofiles/profile_form.html",
                  {"nav": NAV, "form": form, "profile": profile, "title": f"Edit {profile.name}"})


@login_required
def gpu_edit(request, slug):
    profile = selectors.gpu_profile_get(slug=slug, user=request.user)
    return _edit(request, profile, GpuProfileForm, services.gpu_profile_update, services.GPU_EDITABLE)


@login_required
def model_edit(request, slug):
    profile = selectors.model_profile_get(slug=slug, user=request.user)
    return _edit(request, profile, ModelProfileForm, services.model_profile_update, services.MODEL_EDITABLE)


def _delete(request, profile, list_url):
    if not profile.can_edit(request.user):
        raise PermissionDenied("Only the owner may delete this profile; catalog rows are read-only.")
    if request.method == "POST":
        services.profile_delete(profile=profile, user=request.user)
        messages.success(request, f"Deleted {profile.name}.")
        return redirect("gpuprofiles:mine")
    return render(request, "gpuprofiles/profile_confirm_delete.html", {"nav": NAV, "profile": profile})


@login_required
def gpu_delete(request, slug):
    return _delete(request, selectors.gpu_profile_get(slug=slug, user=request.user), "gpuprofiles:gpu-list")


@login_required
def model_delete(request, slug):
    return _delete(request, selectors.model_profile_get(slug=slug, user=request.user), "gpuprofiles:model-list")


@login_required
@require_POST
def gpu_copy(request, slug):
    profile = selectors.gpu_profile_get(slug=slug, user=request.user)
    copy = services.profile_copy(profile=profile, owner=request.user)
    messages.success(request, f"Copied to your profiles as {copy.name}; edit it freely.")
    return redirect(copy)


@login_required
@require_POST
def model_copy(request, slug):
    profile = selectors.model_profile_get(slug=slug, user=request.user)
    copy = services.profile_copy(profile=profile, owner=request.user)
    messages.success(request, f"Copied to your profiles as {copy.name}; edit it freely.")
    return redirect(copy)


# --------------------------------------------------------------------------
# detail rows: every value with its unit, its verbatim source cell and its flag
# --------------------------------------------------------------------------

#: (label, field, unit, CSV column) of the GPU detail page.
GPU_ROWS = (
    ("Vendor", "vendor", "", "vendor"),
    ("Memory, nominal", "memory_nominal", "", "memory_nominal"),
    ("Memory type", "memory_type", "", "memory_type"),
    ("Memory, nvidia-smi", "memory_mib", "MiB", "nvidia_smi_total_MiB"),
    ("Memory, torch / vLLM total", "memory_gib", "GiB", "torch_or_vllm_total_GiB_observed"),
    ("Memory bandwidth", "bandwidth_tbps", "TB/s", "mem_bw_TBps"),
    ("BF16 dense", "bf16_tflops", "TFLOPS", "bf16_dense_TFLOPS"),
    ("FP8 dense", "fp8_tflops", "TFLOPS", "fp8_dense_TFLOPS"),
    ("FP4 dense", "fp4_tflops", "TFLOPS", "fp4_dense_TFLOPS"),
    ("GPU interconnect", "interconnect", "", "gpu_interconnect"),
    ("PCIe", "pcie", "", "pcie"),
    ("Board power", "tdp_w", "W", "tdp_W"),
    ("Price per GPU-hour (lowest listed)", "price_per_hour", "USD", "cloud_price_usd_per_gpu_hour"),
)

MODEL_ROWS = (
    ("Hugging Face id", "hf_id", "", "hf_id"),
    ("Architecture (model_type)", "model_type", "", "model_type"),
    ("Layers", "num_layers", "", "num_hidden_layers"),
    ("Hidden size", "hidden_size", "", "hidden_size"),
    ("Attention heads", "num_attention_heads", "", "num_attention_heads"),
    ("KV heads", "num_kv_heads", "", "num_key_value_heads"),
    ("Head dim", "head_dim", "values", "head_dim"),
    ("Attention", "attention", "", "attention_kind"),
    ("MLA kv_lora_rank", "kv_lora_rank", "", "kv_lora_rank"),
    ("MLA qk_rope_head_dim", "qk_rope_head_dim", "", "qk_rope_head_dim"),
    ("Intermediate size", "intermediate_size", "", "intermediate_size"),
    ("Routed experts", "num_experts", "", "experts"),
    ("Experts per token", "num_experts_per_tok", "", "experts"),
    ("Expert intermediate size", "moe_intermediate_size", "", "experts"),
    ("Shared experts", "num_shared_experts", "", "experts"),
    ("Vocabulary", "vocab_size", "tokens", "vocab_size"),
    ("Tied embeddings", "tie_word_embeddings", "", "tie_word_embeddings"),
    ("Parameters, total", "num_parameters", "", "total_params_B"),
    ("Parameters, active per token", "num_active_parameters", "", "active_params_B"),
    ("Sliding window", "sliding_window", "tokens", "sliding_window"),
    ("Full-attention layers", "num_full_layers", "", "n_full_attention_layers"),
    ("Sliding-window layers", "num_sliding_layers", "", "n_sliding_window_layers"),
    ("Linear / Mamba layers", "num_linear_layers", "", "n_linear_or_ssm_layers"),
    ("Max positions", "max_position_embeddings", "tokens", "max_position_embeddings"),
    ("Weights dtype", "weights_dtype", "", "torch_dtype"),
    ("Checkpoint quantization", "quantization", "", "checkpoint_quant"),
    ("Quantization format", "quantization_label", "", "checkpoint_quant"),
    ("Left unquantized", "quant_ignore_text", "", "checkpoint_quant"),
    ("KV per token, BF16, all attention layers", "kv_bytes_per_token_bf16", "bytes",
     "kv_bytes_per_token_bf16_all_attn_layers"),
    ("KV per token, BF16, global layers only", "kv_bytes_per_token_bf16_global", "bytes",
     "kv_bytes_per_token_bf16_global_layers_only"),
    ("KV per token, FP8", "kv_bytes_per_token_fp8", "bytes", "kv_bytes_per_token_fp8_full"),
)
