"""API serializers: output shapes of catalog rows, and the inputs of writes and filters."""

from __future__ import annotations

from rest_framework import serializers

from config.strict_input import StrictFieldsMixin
from simulator.base import GPU_MEASURED_FIELDS, MAX_LAYERS, SAMPLER_PATHS

from .display import clock_physics
from .models import ATTENTION_CHOICES, GpuProfile, ModelProfile

#: The API's words for a model's default sampling (output and input alike).
SAMPLING_HELP = ("Default sampling: the sampler path vLLM gives requests that set no sampling parameters (the "
                 "model's generation_config.json): " + ", ".join(SAMPLER_PATHS) + "; \"\" (empty) when not "
                 "known (the planner then times top_k_top_p).")

_COMMON = ("slug", "name", "is_catalog", "owner", "sources", "verification", "unverified", "unverified_fields",
           "url")


class _ProfileOutput(serializers.ModelSerializer):
    owner = serializers.SerializerMethodField(help_text="Username of the owner; null for catalog rows.")
    unverified = serializers.BooleanField(source="is_unverified", read_only=True,
                                          help_text="Some value lacks a second source.")
    url = serializers.CharField(source="get_absolute_url", read_only=True, help_text="The catalog page.")

    def get_owner(self, obj) -> str | None:
        return obj.owner.get_username() if obj.owner_id else None


class GpuOutputSerializer(_ProfileOutput):
    class Meta:
        model = GpuProfile
        fields = (*_COMMON, "vendor", "memory_nominal", "memory_type", "memory_mib", "memory_gib",
                  "memory_gib_estimated", "bandwidth_tbps", "bf16_tflops", "fp8_tflops", "fp4_tflops",
                  "interconnect", "pcie", "tdp_w", "price_per_hour", "price_text", "measured", "measured_source",
                  "clock_physics")

    clock_physics = serializers.SerializerMethodField(
        help_text="What the step clock times this GPU with: measured (true when its figures come from a "
                  "measurement), note (their source, or 'timed from data-sheet peaks; not checked against a "
                  "measurement'), figures (name: value) and sources (name: where it comes from).")

    def get_clock_physics(self, obj) -> dict:
        return clock_physics(obj)


class ModelOutputSerializer(_ProfileOutput):
    sampling = serializers.ChoiceField(choices=["", *SAMPLER_PATHS], read_only=True, help_text=SAMPLING_HELP)
    quantization_label = serializers.CharField(read_only=True, help_text="The weights' quantization with its "
                                               "scheme and group size, e.g. 'awq w4a16, group 128', or "
                                               "'none (bf16)'.")

    class Meta:
        model = ModelProfile
        fields = (*_COMMON, "hf_id", "model_type", "num_layers", "hidden_size", "num_attention_heads",
                  "num_kv_heads", "head_dim", "attention", "attention_note", "kv_lora_rank", "qk_rope_head_dim",
                  "q_lora_rank", "qk_nope_head_dim", "v_head_dim", "intermediate_size", "moe_intermediate_size",
                  "num_experts", "num_experts_per_tok", "num_shared_experts", "num_dense_layers", "vocab_size",
                  "tie_word_embeddings", "num_parameters", "num_active_parameters", "params_note",
                  "sliding_window", "layer_pattern", "layers", "num_full_layers", "num_sliding_layers",
                  "num_linear_layers", "max_position_embeddings", "weights_dtype", "quantization",
                  "quant_scheme", "quant_bits", "quant_group_size", "quant_ignore", "quantization_label",
                  "checkpoint_quant_text", "kv_bytes_per_token_bf16", "kv_bytes_per_token_bf16_global",
                  "kv_bytes_per_token_fp8", "sampling")


class ModelDetailOutputSerializer(ModelOutputSerializer):
    class Meta(ModelOutputSerializer.Meta):
        fields = (*ModelOutputSerializer.Meta.fields, "hf_config", "hf_quant_config", "hf_generation_config")


class GpuInputSerializer(StrictFieldsMixin, serializers.Serializer):
    """A user's GPU profile. ``name`` and ``memory_gib`` are required on create."""

    name = serializers.CharField(max_length=200)
    vendor = serializers.CharField(max_length=40, required=False, allow_blank=True)
    memory_gib = serializers.FloatField(min_value=0.01, max_value=100 * 1024,
                                        help_text="Total as torch / vLLM see it, GiB.")
    memory_mib = serializers.FloatField(min_value=1, required=False, allow_null=True,
                                        help_text="Total as nvidia-smi reports it, MiB.")
    bandwidth_tbps = serializers.FloatField(min_value=0.001, required=False, allow_null=True, help_text="TB/s.")
    bf16_tflops = serializers.FloatField(min_value=0.001, required=False, allow_null=True, help_text="Dense.")
    fp8_tflops = serializers.FloatField(min_value=0.001, required=False, allow_null=True, help_text="Dense.")
    fp4_tflops = serializers.FloatField(min_value=0.001, required=False, allow_null=True, help_text="Dense.")
    price_per_hour = serializers.FloatField(min_value=0, required=False, allow_null=True,
                                            help_text="USD per GPU-hour.")
    measured = serializers.DictField(
        child=serializers.FloatField(), required=False, allow_null=True,
        help_text="The clock's figures measured on this GPU, e.g. {\"bandwidth_efficiency\": 0.71, "
                  "\"mfu\": 0.74}: efficiencies as fractions in (0, 1] of the peaks above, *_s fixed times in "
                  "seconds, sampler_scale the sampler's time over the H100's (names: "
                  + ", ".join(GPU_MEASURED_FIELDS) + "). Empty or null: the shipped measurements of a catalog "
                  "GPU of the same name, else the data-sheet peaks, said in every answer.")
    measured_source = serializers.CharField(max_length=2000, required=False, allow_blank=True, allow_null=True,
                                            help_text="Where the measured figures come from.")



class ModelInputSerializer(StrictFieldsMixin, serializers.Serializer):
    """A user's model profile entered field by field (``POST /api/models/import/`` takes a config.json)."""

    name = serializers.CharField(max_length=200)
    num_layers = serializers.IntegerField(min_value=1, max_value=MAX_LAYERS)
    hidden_size = serializers.IntegerField(min_value=1, max_value=10_000_000)
    num_attention_heads = serializers.IntegerField(min_value=1, max_value=100_000)
    num_kv_heads = serializers.IntegerField(min_value=1, max_value=100_000)
    head_dim = serializers.IntegerField(min_value=1, max_value=100_000)
    intermediate_size = serializers.IntegerField(min_value=0, max_value=100_000_000, required=False, default=0)
    num_experts = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False, default=0)
    num_experts_per_tok = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False, default=0)
    moe_intermediate_size = serializers.IntegerField(min_value=0, max_value=100_000_000, required=False,
                                                     allow_null=True)
    kv_lora_rank = serializers.IntegerField(min_value=1, max_value=1_000_000, required=False, allow_null=True)
    qk_rope_head_dim = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False, allow_null=True)
    vocab_size = serializers.IntegerField(min_value=0, max_value=100_000_000, required=False, default=0)
    tie_word_embeddings = serializers.BooleanField(required=False, default=False)
    num_parameters = serializers.IntegerField(min_value=1, max_value=10**15, required=False, allow_null=True)
    num_active_parameters = serializers.IntegerField(min_value=1, max_value=10**15, required=False,
                                                     allow_null=True)
    max_position_embeddings = serializers.IntegerField(min_value=1, max_value=100_000_000, required=False,
                                                       allow_null=True)
    weights_dtype = serializers.ChoiceField(choices=["bf16", "fp16", "fp32"], required=False, default="bf16")
    quantization = serializers.ChoiceField(
        choices=["", "fp8", "int8", "awq", "gptq", "int4", "mxfp4", "nvfp4", "fp4", "compressed-tensors",
                 "bitsandbytes"], required=False, allow_null=True, allow_blank=True)
    sampling = serializers.ChoiceField(
        choices=["", *SAMPLER_PATHS], required=False, allow_null=True, allow_blank=True,
        help_text=SAMPLING_HELP + " null or \"\" sets it to not known.",
        error_messages={"invalid_choice": f"\"{{input}}\" is not a sampler path: choose one of "
                                          f"{', '.join(SAMPLER_PATHS)}, or \"\" (not known)."})



class ModelImportSerializer(StrictFieldsMixin, serializers.Serializer):
    config = serializers.JSONField(help_text="The Hugging Face config.json, as a JSON object.")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, allow_null=True)
    num_parameters = serializers.IntegerField(min_value=1, max_value=10**15, required=False, allow_null=True,
                                              help_text="Total parameters; estimated from the config when absent.")
    quant_config = serializers.JSONField(required=False, allow_null=True,
                                         help_text="Optional ModelOpt hf_quant_config.json (NVIDIA FP8/FP4).")
    generation_config = serializers.JSONField(
        required=False, allow_null=True,
        help_text="Optional generation_config.json, as a JSON object: its temperature, top_k, top_p, min_p and "
                  "repetition_penalty give the default sampling (kept verbatim in hf_generation_config). Absent: "
                  "a model known by name or by the config's _name_or_path gets its shipped defaults.")


class GpuFilterSerializer(serializers.Serializer):
    q = serializers.CharField(required=False, max_length=100, help_text="Name contains.")
    vendor = serializers.CharField(required=False, max_length=40, help_text="NVIDIA, AMD, Intel (any case).")
    memory_type = serializers.CharField(required=False, max_length=40, help_text="e.g. HBM3e.")
    min_memory_gib = serializers.FloatField(required=False, min_value=0, max_value=10**6)
    max_memory_gib = serializers.FloatField(required=False, min_value=0, max_value=10**6)
    scope = serializers.ChoiceField(required=False, choices=["catalog", "mine"])

    def validate(self, attrs):
        lo, hi = attrs.get("min_memory_gib"), attrs.get("max_memory_gib")
        if lo is not None and hi is not None and lo > hi:
            raise serializers.ValidationError({"max_memory_gib": ["must be at least min_memory_gib"]})
        return attrs


class ModelFilterSerializer(serializers.Serializer):
    q = serializers.CharField(required=False, max_length=100, help_text="Name or Hugging Face id contains.")
    attention = serializers.ChoiceField(required=False, choices=[c for c, _ in ATTENTION_CHOICES])
    architecture = serializers.CharField(required=False, max_length=60,
                                         help_text="model_type contains, e.g. llama, qwen3_moe.")
    moe = serializers.BooleanField(required=False, allow_null=True, default=None)
    hybrid = serializers.BooleanField(required=False, allow_null=True, default=None,
                                      help_text="Sliding-window or linear layers present.")
    min_params_b = serializers.FloatField(required=False, min_value=0, max_value=10**6, help_text="Billions.")
    max_params_b = serializers.FloatField(required=False, min_value=0, max_value=10**6, help_text="Billions.")
    scope = serializers.ChoiceField(required=False, choices=["catalog", "mine"])
