"""Page forms: list filters, config.json import, GPU and model profile edits.

The filter forms also validate the API's query parameters, so pages and API
accept the same filters with the same messages.
"""

from __future__ import annotations

import json

from django import forms

from config.json_input import MAX_JSON_VALUES, loads_checked

from .display import MODEL_SAMPLING_CHOICES, SAMPLING_UNKNOWN
from .models import ATTENTION_CHOICES
from .services import MAX_CONFIG_BYTES, MAX_CONFIG_WORDS

SCOPE_CHOICES = [("", "Catalog and mine"), ("catalog", "Catalog only"), ("mine", "Mine only")]
BOOL_CHOICES = [("", "Any"), ("true", "Yes"), ("false", "No")]


def _bool(value: str):
    return {"true": True, "false": False}.get(value)


class GpuFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=100, label="Name contains")
    vendor = forms.CharField(required=False, max_length=40, help_text="NVIDIA, AMD, Intel.")
    memory_type = forms.CharField(required=False, max_length=40, label="Memory type", help_text="e.g. HBM3e, GDDR6.")
    min_memory_gib = forms.FloatField(required=False, min_value=0, label="Memory at least (GiB)",
                                      help_text="Total as torch / vLLM see it, GiB.")
    max_memory_gib = forms.FloatField(required=False, min_value=0, label="Memory at most (GiB)")
    scope = forms.ChoiceField(required=False, choices=SCOPE_CHOICES, label="Show")

    def clean(self):
        data = super().clean()
        lo, hi = data.get("min_memory_gib"), data.get("max_memory_gib")
        if lo is not None and hi is not None and lo > hi:
            self.add_error("max_memory_gib", "must be at least min_memory_gib")
        return data


class ModelFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=100, label="Name contains",
                        help_text="Matches the name or the Hugging Face id.")
    attention = forms.ChoiceField(required=False, choices=[("", "Any"), *ATTENTION_CHOICES])
    architecture = forms.CharField(required=False, max_length=60,
                                   help_text="model_type, e.g. llama, qwen3_moe, deepseek_v3.")
    moe = forms.TypedChoiceField(required=False, choices=BOOL_CHOICES, coerce=_bool, empty_value=None,
                                 label="Mixture of experts")
    hybrid = forms.TypedChoiceField(required=False, choices=BOOL_CHOICES, coerce=_bool, empty_value=None,
                                    label="Sliding-window or linear layers")
    min_params_b = forms.FloatField(required=False, min_value=0, label="Parameters at least (B)",
                                    help_text="Total parameters, billions.")
    max_params_b = forms.FloatField(required=False, min_value=0, label="Parameters at most (B)")
    scope = forms.ChoiceField(required=False, choices=SCOPE_CHOICES, label="Show")


class ConfigImportForm(forms.Form):
    """Paste or upload a Hugging Face config.json."""

    config_text = forms.CharField(
        required=False, label="config.json (paste)", widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        help_text=f"The model's config.json from Hugging Face. At most {MAX_CONFIG_BYTES // 2**10} KiB.")
    config_file = forms.FileField(required=False, label="or upload config.json",
                                  help_text=f"A .json file, at most {MAX_CONFIG_BYTES // 2**10} KiB.")
    name = forms.CharField(required=False, max_length=200, help_text="Display name; defaults to the config's.")
    num_parameters = forms.IntegerField(
        required=False, min_value=1, label="Parameters (total)",
        help_text="Total parameter count, e.g. 70553706496; estimated from the config when empty.")
    generation_config = forms.CharField(
        required=False, label="generation_config.json (optional)",
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text="The model's generation_config.json: its temperature, top_k, top_p, min_p and repetition_penalty "
                  "give the sampling vLLM applies to requests that set none. Empty: known models get their "
                  f"shipped defaults, others '{SAMPLING_UNKNOWN}'. At most {MAX_CONFIG_BYTES // 2**10} KiB.")

    def clean_generation_config(self) -> dict | None:
        """The pasted generation_config.json as a JSON object; None when left empty."""
        text = self.cleaned_data.get("generation_config") or ""
        if not text.strip():
            return None
        if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
            raise forms.ValidationError(f"The text is larger than the limit of {MAX_CONFIG_WORDS}.")
        return json_object(text, "generation_config.json")

    def clean(self):
        data = super().clean()
        upload = data.get("config_file")
        text = data.get("config_text") or ""
        if upload is not None:
            if upload.size > MAX_CONFIG_BYTES:
                self.add_error("config_file", f"The file is {upload.size:,} bytes; the limit is "
                                              f"{MAX_CONFIG_WORDS}.")
                return data
            raw = upload.read()
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                self.add_error("config_file", "The file is not UTF-8 text.")
                return data
            field = "config_file"
        else:
            field = "config_text"
            if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
                self.add_error("config_text", f"The text is larger than the limit of {MAX_CONFIG_WORDS}.")
                return data
        if not text.strip():
            self.add_error("config_text", "Paste a config.json or upload one.")
            return data
        try:
            data["config"] = json_object(text, "config.json")
        except forms.ValidationError as exc:
            self.add_error(field, exc)
            return data
        data["config_field"] = field
        return data


def json_object(text: str, what: str) -> dict:
    """``text`` parsed as a JSON object (deep nesting, NUL characters, lone surrogates and infinite numbers refused:
    :func:`config.json_input.loads_checked`); a ValidationError saying what is wrong with ``what`` otherwise."""
    try:
        value = loads_checked(text, max_values=MAX_JSON_VALUES)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.") from None
    except ValueError as exc:
        raise forms.ValidationError(f"Not accepted: {exc}.") from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f"{what} must hold a JSON object ({{...}}), not a {type(value).__name__}.")
    return value


class MeasuredFiguresField(forms.CharField):
    """A JSON object of the clock's measured figures (``GpuSpec.measured``), checked as the API checks it."""

    widget = forms.Textarea(attrs={"rows": 4, "spellcheck": "false"})

    def prepare_value(self, value):
        if isinstance(value, dict):
            return json.dumps(value, indent=1) if value else ""
        return value

    def to_python(self, value):
        from simulator.base import SpecError, check_measured

        text = (super().to_python(value) or "").strip()
        if not text:
            return {}
        try:
            data = loads_checked(text, max_values=MAX_JSON_VALUES)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        if not isinstance(data, dict):
            raise forms.ValidationError('must be a JSON object such as {"bandwidth_efficiency": 0.71}')
        try:
            return dict(check_measured(data))
        except SpecError as exc:
            raise forms.ValidationError(str(exc)) from None


class GpuProfileForm(forms.Form):
    name = forms.CharField(max_length=200)
    vendor = forms.CharField(max_length=40, required=False)
    memory_gib = forms.FloatField(min_value=0.01, max_value=100 * 1024, label="Memory (GiB)",
                                  help_text="Total as torch / vLLM see it (torch.cuda.mem_get_info), GiB. "
                                            "About nvidia-smi MiB / 1024 - 0.5.")
    memory_mib = forms.FloatField(min_value=1, required=False, label="Memory (nvidia-smi MiB)",
                                  help_text="Total as nvidia-smi reports it, MiB (optional).")
    bandwidth_tbps = forms.FloatField(min_value=0.001, required=False, label="Memory bandwidth (TB/s)")
    bf16_tflops = forms.FloatField(min_value=0.001, required=False, label="BF16 dense (TFLOPS)")
    fp8_tflops = forms.FloatField(min_value=0.001, required=False, label="FP8 dense (TFLOPS)")
    fp4_tflops = forms.FloatField(min_value=0.001, required=False, label="FP4 dense (TFLOPS)")
    price_per_hour = forms.FloatField(min_value=0, required=False, label="Price (USD per GPU-hour)")
    measured = MeasuredFiguresField(
        required=False, max_length=20_000, label="Measured clock figures (JSON, optional)",
        help_text='What you measured on this GPU, e.g. {"bandwidth_efficiency": 0.71, "mfu": 0.74}: efficiencies '
                  "as fractions of the peaks above (0 to 1), *_s fixed times in seconds, sampler_scale the "
                  "sampler's time over an H100's. Empty: a catalog GPU of the same name keeps its shipped "
                  "measurements; any other is timed from its data-sheet peaks, and the answers say so.")
    measured_source = forms.CharField(required=False, max_length=2000, label="Source of the measured figures",
                                      help_text="A benchmark, a profile run, a paper.")


class ModelProfileForm(forms.Form):
    name = forms.CharField(max_length=200)
    num_layers = forms.IntegerField(min_value=1, label="Layers", help_text="num_hidden_layers.")
    hidden_size = forms.IntegerField(min_value=1, label="Hidden size")
    num_attention_heads = forms.IntegerField(min_value=1, label="Attention heads", help_text="Query heads.")
    num_kv_heads = forms.IntegerField(min_value=1, label="KV heads", help_text="num_key_value_heads (1 for MLA).")
    head_dim = forms.IntegerField(min_value=1, label="Head dim", help_text="Values per head.")
    intermediate_size = forms.IntegerField(min_value=0, label="Intermediate size", help_text="Dense MLP width.")
    num_experts = forms.IntegerField(min_value=0, label="Routed experts", help_text="0 for a dense model.")
    num_experts_per_tok = forms.IntegerField(min_value=0, label="Experts per token")
    moe_intermediate_size = forms.IntegerField(min_value=0, required=False, label="Expert intermediate size")
    kv_lora_rank = forms.IntegerField(min_value=1, required=False, label="MLA kv_lora_rank")
    qk_rope_head_dim = forms.IntegerField(min_value=0, required=False, label="MLA qk_rope_head_dim")
    vocab_size = forms.IntegerField(min_value=0, label="Vocabulary size")
    tie_word_embeddings = forms.BooleanField(required=False, label="Tied embeddings")
    num_parameters = forms.IntegerField(min_value=1, required=False, label="Parameters (total)",
                                        help_text="Whole count, e.g. 8030261248.")
    num_active_parameters = forms.IntegerField(min_value=1, required=False, label="Active parameters per token")
    max_position_embeddings = forms.IntegerField(min_value=1, required=False, label="Max positions (tokens)")
    weights_dtype = forms.ChoiceField(choices=[(d, d) for d in ("bf16", "fp16", "fp32")], label="Weights dtype")
    quantization = forms.ChoiceField(
        required=False, label="Checkpoint quantization",
        choices=[("", "none"), *((q, q) for q in ("fp8", "int8", "awq", "gptq", "int4", "mxfp4", "nvfp4", "fp4",
                                                  "compressed-tensors", "bitsandbytes"))],
        help_text="The weights' format; the KV cache stays in the activation dtype unless you pick an fp8 KV cache.")
    sampling = forms.ChoiceField(
        required=False, label="Default sampling", choices=MODEL_SAMPLING_CHOICES,
        error_messages={"invalid_choice": "%(value)s is not a sampler path: choose one of "
                                          + ", ".join(f"{k} ({w})" for k, w in MODEL_SAMPLING_CHOICES if k)
                                          + ", or leave it blank (not known)."},
        help_text="The sampler path vLLM gives requests that set no sampling parameters (the model's "
                  "generation_config.json); not known is timed as top-k / top-p.")
