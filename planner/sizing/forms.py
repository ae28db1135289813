"""The sizing form (home page) and the compare form: labels, units, limits.

Both are submitted with GET so a result is a link. Field validation (types,
ranges, caps on absurd values) lives here; what needs the model and the GPU
(TP dividing the heads, ``max_model_len`` beyond the model's positions, a plan
that does not fit) comes back from :mod:`planner.sizing.services` as
:class:`~planner.sizing.services.PlanInputError` and is attached to the field
with :meth:`SizingForm.add_plan_errors`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from simulator.specs import KV_CACHE_DTYPES

from . import selectors
from .services import LIMITS

WEIGHT_DTYPE_CHOICES = [
    ("auto", "auto — the checkpoint's dtype"),
    ("bf16", "bf16 (2 bytes)"),
    ("fp16", "fp16 (2 bytes)"),
    ("fp32", "fp32 (4 bytes)"),
    ("fp8", "fp8 (1 byte, on-the-fly quantization)"),
]
_KV_LABELS = {"auto": "auto — same as the weights", "fp32": "fp32 (4 bytes)", "bf16": "bf16 (2 bytes)",
              "fp16": "fp16 (2 bytes)", "fp8": "fp8 (1 byte)", "int8": "int8 (1 byte)",
              "int4": "int4 (0.5 byte + scales)", "fp4": "fp4 (0.5 byte + scales)", "nvfp4": "nvfp4 (0.5 byte + scales)"}
KV_DTYPE_CHOICES = [(k, _KV_LABELS.get(k, k)) for k in KV_CACHE_DTYPES]
BLOCK_SIZE_CHOICES = [(b, f"{b} tokens") for b in (8, 16, 32, 64, 128)]

DEFAULT_LENGTHS = "lognormal:2048,1536"

#: What an empty form stands for: vLLM's defaults (model and GPU are filled in from the catalog).
DEFAULTS: dict[str, str] = {
    "tensor_parallel_size": "1",
    "pipeline_parallel_size": "1",
    "dtype": "auto",
    "kv_cache_dtype": "auto",
    "block_size": "16",
    "gpu_memory_utilization": "0.9",
    "lengths": DEFAULT_LENGTHS,
}

_NUMBER = {"class": "num"}


class SizingForm(forms.Form):
    """Model, GPU and vLLM knobs of one deployment, plus optional calibration."""

    model = forms.ChoiceField(label="Model", help_text="A catalog model or one of your own profiles.")
    gpu = forms.ChoiceField(label="GPU", help_text="Memory as vLLM sees it (GiB = 2³⁰ bytes) and the catalog's "
                                                   "lowest price per GPU-hour ($/h).")
    num_gpus = forms.IntegerField(
        label="Number of GPUs", required=False, min_value=1, max_value=LIMITS["num_gpus"],
        help_text="GPUs in the deployment. Blank = TP × PP (one engine); a multiple of TP × PP runs that many "
                  "replicas.", widget=forms.NumberInput(attrs=_NUMBER))
    tensor_parallel_size = forms.IntegerField(
        label="Tensor parallel size (TP)", min_value=1, max_value=LIMITS["tensor_parallel_size"],
        help_text="GPUs one layer is split across; must divide the attention heads.",
        widget=forms.NumberInput(attrs=_NUMBER))
    pipeline_parallel_size = forms.IntegerField(
        label="Pipeline parallel size (PP)", min_value=1, max_value=LIMITS["pipeline_parallel_size"],
        help_text="Stages the layers are split into; the fullest stage decides the KV cache.",
        widget=forms.NumberInput(attrs=_NUMBER))
    dtype = forms.ChoiceField(label="Weight dtype", choices=WEIGHT_DTYPE_CHOICES,
                              help_text="vLLM --dtype; quantized checkpoints keep their own format.")
    kv_cache_dtype = forms.ChoiceField(label="KV cache dtype", choices=KV_DTYPE_CHOICES,
                                       help_text="Bytes per cached K/V element.")
    block_size = forms.TypedChoiceField(label="Block size", choices=BLOCK_SIZE_CHOICES, coerce=int,
                                        help_text="Tokens per KV block (vLLM default 16).")
    gpu_memory_utilization = forms.FloatField(
        label="GPU memory utilization", help_text="Fraction of each GPU's memory vLLM may use, in (0, 1]; "
                                                  "vLLM default 0.9.",
        widget=forms.NumberInput(attrs={"step": "0.01", **_NUMBER}))
    max_model_len = forms.IntegerField(
        label="Max model length", required=False, min_value=1, max_value=LIMITS["max_model_len"],
        help_text="Tokens per request (prompt + output). Blank = the model's maximum.",
        widget=forms.NumberInput(attrs=_NUMBER))
    max_num_batched_tokens = forms.IntegerField(
        label="Max batched tokens", required=False, min_value=1, max_value=LIMITS["max_num_batched_tokens"],
        help_text="Tokens per engine step; sizes the activation peak. Blank = vLLM's default for the GPU "
                  "(8,192 on 80 GB-class GPUs, else 2,048).", widget=forms.NumberInput(attrs=_NUMBER))
    cpu_tier_gib = forms.FloatField(
        label="CPU offload tier (GiB)", required=False, min_value=0, max_value=LIMITS["cpu_tier_gib"],
        help_text="Optional host memory for offloaded KV blocks, per deployment, GiB.",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))
    vllm_log = forms.CharField(
        label="Calibrate from a vLLM log", required=False, max_length=LIMITS["vllm_log"],
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "Model loading took 14.99 GiB …\n"
                                                              "Available KV cache memory: 55.26 GiB"}),
        help_text="Optional: paste the start-up lines 'Model loading took … GiB' and 'Available KV cache memory: "
                  "… GiB' of your own run; their figures replace the modelled ones.")
    weights_gib = forms.FloatField(
        label="Weights per GPU (GiB)", required=False, min_value=0, max_value=LIMITS["weights_gib"],
        help_text="Optional: vLLM's 'Model loading took X GiB'.",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))
    available_kv_gib = forms.FloatField(
        label="Available KV cache per GPU (GiB)", required=False, min_value=0,
        max_value=LIMITS["available_kv_gib"], help_text="Optional: vLLM's 'Available KV cache memory: Y GiB'.",
        widget=forms.NumberInput(attrs={"step": "any", **_NUMBER}))
    lengths = forms.CharField(
        label="Request lengths (paged vs naive)", required=False, max_length=200,
        help_text="Token lengths of the requests for the fragmentation chart, e.g. 'lognormal:2048,1536' "
                  "(mean, std), 'uniform:1000,2000', 'const:1024'.")

    #: Fields shown under "Calibration" (the rest are the deployment).
    calibration_fields = ("vllm_log", "weights_gib", "available_kv_gib")

    def __init__(self, data=None, *, user=None, **kwargs):
        self.user = user
        self.model_options = selectors.model_profile_options(user=user)
        self.gpu_options = selectors.gpu_profile_options(user=user)
        super().__init__(data, **kwargs)
        self.fields["model"].choices = self.model_options.choices
        if "gpu" in self.fields:
            self.fields["gpu"].choices = gpu_choices(self.gpu_options)

    # -- binding ------------------------------------------------------------

    @classmethod
    def defaults(cls, *, model_default: str | None, gpu_default: str | None) -> dict[str, str]:
        d = dict(DEFAULTS)
        if model_default:
            d["model"] = model_default
        if gpu_default:
            d["gpu"] = gpu_default
        return d

    @classmethod
    def from_query(cls, query: QueryDict, *, user=None) -> SizingForm:
        """Bind to a query string, with defaults for every missing knob (an empty query = the default plan)."""
        form = cls(None, user=user)
        data = query.copy()
        for key, value in cls.defaults(model_default=form.model_options.default,
                                       gpu_default=form.gpu_options.default).items():
            if key in form.fields and key not in data:
                data[key] = value
        form.data = data
        form.is_bound = True
        return form

    # -- validation ---------------------------------------------------------

    def clean_gpu_memory_utilization(self) -> float:
        v = self.cleaned_data["gpu_memory_utilization"]
        if not (0 < v <= 1):
            raise forms.ValidationError(
                f"Must be more than 0 and at most 1 (a fraction of each GPU's memory, e.g. 0.9 for 90%); got {v:g}.")
        return v

    def clean_lengths(self) -> str:
        return (self.cleaned_data.get("lengths") or "").strip() or DEFAULT_LENGTHS

    def model_spec(self):
        return self.model_options.rows[self.cleaned_data["model"]].to_spec()

    def gpu_spec(self):
        return self.gpu_options.rows[self.cleaned_data["gpu"]].to_spec()

    def knobs(self) -> dict[str, Any]:
        """The cleaned knobs as :func:`~planner.sizing.services.plan_deployment` takes them."""
        c = self.cleaned_data
        keys = ("num_gpus", "tensor_parallel_size", "pipeline_parallel_size", "dtype", "kv_cache_dtype",
                "block_size", "gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "cpu_tier_gib",
                "weights_gib", "available_kv_gib", "vllm_log")
        return {k: c.get(k) for k in keys if k in c}

    def add_plan_errors(self, errors: dict[str, list[str]]) -> None:
        """Attach service errors to their fields (unknown names go to the top of the form)."""
        aliases = {"non_field_errors": None, "lengths": "lengths"}
        for name, messages in errors.items():
            target = aliases.get(name, name)
            if target is not None and target not in self.fields:
                target = "model" if target.startswith("model") else None
            for msg in messages:
                self.add_error(target, msg)


class CompareForm(SizingForm):
    """The same model and knobs on 2 to 4 GPUs."""

    gpus = forms.MultipleChoiceField(
        label="GPUs to compare", widget=forms.CheckboxSelectMultiple,
        help_text="Pick 2 to 4 GPUs; each gets the same model and knobs.")

    def __init__(self, data=None, *, user=None, **kwargs):
        super().__init__(data, user=user, **kwargs)
        del self.fields["gpu"]
        del self.fields["lengths"]
        self.fields["gpus"].choices = gpu_choices(self.gpu_options)
        # put the GPU picker right after the model
        order = ["model", "gpus"] + [f for f in self.fields if f not in ("model", "gpus")]
        self.order_fields(order)

    @classmethod
    def defaults(cls, *, model_default, gpu_default) -> dict[str, str]:
        d = super().defaults(model_default=model_default, gpu_default=gpu_default)
        d.pop("gpu", None)
        return d

    @classmethod
    def from_query(cls, query: QueryDict, *, user=None) -> CompareForm:
        form = super().from_query(query, user=user)
        if "gpus" not in query:
            form.data.setlist("gpus", default_compare_gpus(form.gpu_options))
        return form

    def clean_gpus(self) -> list[str]:
        gpus = list(dict.fromkeys(self.cleaned_data["gpus"]))
        if not (2 <= len(gpus) <= LIMITS["compare_gpus"]):
            raise forms.ValidationError(f"Pick 2 to {LIMITS['compare_gpus']} GPUs (you picked {len(gpus)}).")
        return gpus

    def gpu_specs(self):
        return [self.gpu_options.rows[s].to_spec() for s in self.cleaned_data["gpus"]]


def gpu_choice_label(row) -> str:
    """A GPU as an option, short enough for the form column: "H100 SXM5 80GB · 79.2 GiB · $3.78/h"."""
    parts = [row.name, f"{row.memory_gib:,.1f} GiB"]
    if row.price_per_hour:
        parts.append(f"${row.price_per_hour:,.2f}/h")
    return " · ".join(parts) + ("" if row.is_catalog else " (yours)")


def gpu_choices(options: selectors.ProfileOptions) -> list[tuple[str, str]]:
    return [(slug, gpu_choice_label(row)) for slug, row in options.rows.items()]


def default_compare_gpus(options: selectors.ProfileOptions) -> list[str]:
    """H100 SXM, H200 and A100 80GB when the catalog has them, else the first three GPUs."""
    wanted = ("H100 SXM", "H200", "A100 SXM4 80GB")
    picked = []
    for w in wanted:
        for slug, row in options.rows.items():
            if row.is_catalog and row.name.startswith(w) and slug not in picked:
                picked.append(slug)
                break
    if len(picked) < 2:
        picked = list(options.rows)[:3]
    return picked
