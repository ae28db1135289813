"""``POST /api/plan/``: size one deployment (public, no sign-in needed).

One view with nested input and output serializers (HackSoft style). The input
serializer checks types and caps; the model and GPU are a catalog slug or an
inline spec; the numbers come from :func:`planner.sizing.services.plan_deployment`.
Every problem is a 400 with a message per field in the shape of
:mod:`planner.api.errors`; a deployment that merely does not fit is a 200 with
``fits: false`` and the reason.
"""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from config.strict_input import StrictFieldsMixin
from planner.errors import InputError, field_and_message
from planner.sizing import selectors, services
from planner.sizing.knobs import KNOBS
from simulator.base import GpuSpec, SpecError
from simulator.base.specs import VLLM_BLOCK_SIZES
from simulator.sizing import parse_hf_config
from simulator.speculative import METHODS, DraftSpec

LIMITS = services.LIMITS
MAX_CONFIG_KEYS = 2000  # keys in an inline config.json, all levels together


class FiniteFloatField(serializers.FloatField):
    """A float that refuses NaN and infinities (DRF's FloatField lets ``"nan"`` through)."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


class StrictIntegerField(serializers.IntegerField):
    """A whole number: refuses booleans (DRF would take ``true`` as 1)."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field({"type": "integer", "enum": list(VLLM_BLOCK_SIZES)})
class BlockSizeField(StrictIntegerField):
    """Tokens per KV block, one of vLLM's (:data:`simulator.base.specs.VLLM_BLOCK_SIZES`; the knob's rule)."""


class KnobChoiceField(serializers.ChoiceField):
    """A knob of fixed values (kind "choice" in :mod:`planner.sizing.knobs`): a value off the list gets the knob's
    words, the ones the sizing form shows."""

    def __init__(self, *, knob, **kwargs):
        self.knob = knob
        super().__init__(choices=[value for value, _ in knob.choices], **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or data not in self.choice_strings_to_values:
            raise serializers.ValidationError(self.knob.problem(data))
        return super().to_internal_value(data)


def knob_serializer_field(name: str, **overrides: Any) -> serializers.Field:
    """The API field of a sizing knob (:data:`planner.sizing.knobs.KNOBS`), with the same bounds, values and rule as
    the form's; absent means the knob's default (or null: the service decides, as the help says)."""
    k = KNOBS[name]
    kw: dict[str, Any] = {"help_text": k.api_help()}
    if k.default is not None:
        kw["default"] = k.default
    else:
        kw.update(required=False, allow_null=True)
    if k.kind == "choice":
        return KnobChoiceField(knob=k, **{**kw, **overrides})
    kw["validators"] = k.validators()
    if k.kind == "bool":
        return serializers.BooleanField(**{**kw, **overrides})
    if k.kind == "text":
        return serializers.CharField(**{**kw, "max_length": k.max_length, **overrides})
    if k.choices:  # (a fixed set of whole numbers: the rule says which)
        return BlockSizeField(**{**kw, **overrides})
    kw.update(min_value=k.low, max_value=k.high)
    field = StrictIntegerField if k.kind == "int" else FiniteFloatField
    return field(**{**kw, **overrides})


def _count_keys(obj: Any, limit: int, depth: int = 0) -> int:
    """Keys and items in a JSON value; stops early past ``limit`` or 32 levels deep."""
    if depth > 32:
        return limit + 1
    n = 0
    if isinstance(obj, dict):
        for v in obj.values():
            n += 1 + _count_keys(v, limit, depth + 1)
            if n > limit:
                break
    elif isinstance(obj, list):
        for v in obj:
            n += 1 + _count_keys(v, limit, depth + 1)
            if n > limit:
                break
    return n


class InlineModelSerializer(StrictFieldsMixin, serializers.Serializer):
    config = serializers.DictField(help_text="A Hugging Face config.json, as a JSON object.")
    num_parameters = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=10**15,
                                        help_text="Total parameters, when known (else estimated from the config).")
    name = serializers.CharField(required=False, max_length=200, help_text="Display name.")

    def validate_config(self, value: dict) -> dict:
        if _count_keys(value, MAX_CONFIG_KEYS) > MAX_CONFIG_KEYS:
            raise serializers.ValidationError(f"Too large or too deeply nested: at most {MAX_CONFIG_KEYS} keys.")
        return value


class InlineGpuSerializer(StrictFieldsMixin, serializers.Serializer):
    memory_gib = FiniteFloatField(min_value=0.001, max_value=102_400,
                                  help_text="Total memory as torch / vLLM see it, GiB (2^30 bytes).")
    name = serializers.CharField(required=False, max_length=200, default="Custom GPU")
    price_per_hour = FiniteFloatField(required=False, allow_null=True, min_value=0, max_value=1_000_000,
                                      help_text="USD per GPU-hour.")


class _CatalogRefField(serializers.Field):
    """A catalog slug (string) or an inline object validated by ``inline_serializer``."""

    inline_serializer: type[serializers.Serializer]

    def to_internal_value(self, data):
        if isinstance(data, str):
            slug = data.strip()
            if not slug or len(slug) > 120:
                raise serializers.ValidationError("A catalog slug of 1 to 120 characters.")
            return {"slug": slug}
        if isinstance(data, dict):
            s = self.inline_serializer(data=data)
            if not s.is_valid():
                raise serializers.ValidationError(s.errors)
            return dict(s.validated_data)
        self.fail("invalid")

    def to_representation(self, value):
        return value


@extend_schema_field({
    "oneOf": [
        {"type": "string", "description": "Catalog slug (GET /api/models/)", "example": "llama-3-1-8b"},
        {"type": "object", "properties": {
            "config": {"type": "object", "description": "Hugging Face config.json"},
            "num_parameters": {"type": "integer", "minimum": 1},
            "name": {"type": "string"}}, "required": ["config"]},
    ]
})
class ModelRefField(_CatalogRefField):
    """A catalog slug, or ``{"config": {...}, "num_parameters": N}``."""

    inline_serializer = InlineModelSerializer
    default_error_messages = {"invalid": "Give a catalog slug (string) or an object with a 'config' (config.json)."}


@extend_schema_field({
    "oneOf": [
        {"type": "string", "description": "Catalog slug (GET /api/gpus/)", "example": "h100-sxm5-80gb"},
        {"type": "object", "properties": {
            "memory_gib": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "name": {"type": "string"}, "price_per_hour": {"type": "number"}}, "required": ["memory_gib"]},
    ]
})
class GpuRefField(_CatalogRefField):
    """A catalog slug, or ``{"memory_gib": 79.18, "name": ...}``."""

    inline_serializer = InlineGpuSerializer
    default_error_messages = {"invalid": "Give a catalog slug (string) or an object with 'memory_gib'."}


class SpeculativeInputSerializer(StrictFieldsMixin, serializers.Serializer):
    """Speculative decoding: the drafter whose weights and KV come out of the memory budget."""

    method = serializers.ChoiceField(choices=list(METHODS), default="eagle",
                                     help_text="vLLM's speculative method: eagle, eagle3, mtp, draft_model or ngram.")
    num_speculative_tokens = knob_serializer_field("num_speculative_tokens", required=True, allow_null=False,
                                                   help_text=KNOBS["num_speculative_tokens"].help)
    draft_model = ModelRefField(required=False, allow_null=True,
                                help_text="method draft_model only: the draft model (catalog slug or inline config); "
                                          "smaller than the target, same vocabulary.")
    draft_vocab_size = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=10_000_000,
                                          help_text="EAGLE-3's draft vocabulary (default 32000).")


class SpeculativeOutputSerializer(serializers.Serializer):
    method = serializers.CharField()
    num_speculative_tokens = serializers.IntegerField()
    num_lookahead_tokens = serializers.IntegerField(help_text="KV slots each decoding request holds beyond its tokens")
    draft = serializers.CharField(help_text="The drafter sized")
    draft_weights_gib = serializers.FloatField(help_text="GiB per GPU (included in memory_gib.weights)")
    draft_kv_bytes_per_token_per_gpu = serializers.FloatField(help_text="bytes its layers add to every token's KV")
    num_gpu_blocks_without_draft = serializers.IntegerField(help_text="blocks per GPU without speculative decoding")
    num_gpu_blocks = serializers.IntegerField(help_text="blocks per GPU with the drafter loaded")


class PlanCreateApi(APIView):
    """Size the KV cache of one deployment the way vLLM does at start-up."""

    permission_classes = [AllowAny]

    class InputSerializer(StrictFieldsMixin, serializers.Serializer):
        model = ModelRefField(help_text="Catalog slug, or {config: <config.json>, num_parameters?: int}.")
        gpu = GpuRefField(help_text="Catalog slug, or {memory_gib: number, name?, price_per_hour?}.")
        tensor_parallel_size = knob_serializer_field("tensor_parallel_size")
        pipeline_parallel_size = knob_serializer_field("pipeline_parallel_size")
        data_parallel_size = knob_serializer_field("data_parallel_size")
        enable_expert_parallel = knob_serializer_field("enable_expert_parallel")
        num_gpus = knob_serializer_field("num_gpus")
        dtype = knob_serializer_field("dtype")
        kv_cache_dtype = knob_serializer_field("kv_cache_dtype")
        block_size = knob_serializer_field("block_size")
        gpu_memory_utilization = knob_serializer_field("gpu_memory_utilization")
        max_model_len = knob_serializer_field("max_model_len")
        max_num_batched_tokens = knob_serializer_field("max_num_batched_tokens")
        max_num_seqs = StrictIntegerField(required=False, allow_null=True, min_value=1,
                                          max_value=LIMITS["max_num_seqs"])
        vllm_version = knob_serializer_field("vllm_version")
        cpu_tier_gib = knob_serializer_field("cpu_tier_gib")
        weights_gib = knob_serializer_field("weights_gib")
        available_kv_gib = knob_serializer_field("available_kv_gib")
        activation_gib = FiniteFloatField(required=False, allow_null=True, min_value=0,
                                          max_value=LIMITS["activation_gib"],
                                          help_text="Calibration: the log's peak activation (per GPU); replaces the "
                                                    "modelled forward pass and sampler warm-up.")
        non_torch_gib = FiniteFloatField(required=False, allow_null=True, min_value=0,
                                         max_value=LIMITS["non_torch_gib"],
                                         help_text="Calibration: the log's non-torch memory (per GPU).")
        cudagraph_gib = FiniteFloatField(required=False, allow_null=True, min_value=-LIMITS["cudagraph_gib"],
                                         max_value=LIMITS["cudagraph_gib"],
                                         help_text="Calibration: the log's CUDA graph memory (per GPU; can be "
                                                   "negative, as vLLM prints it).")
        quantization = knob_serializer_field("quantization")
        quant_group_size = StrictIntegerField(required=False, allow_null=True, min_value=-1, max_value=1_000_000,
                                              help_text="Weights per quantization scale (-1: per channel).")
        max_loras = knob_serializer_field("max_loras")
        max_lora_rank = knob_serializer_field("max_lora_rank")
        lora_target_modules = serializers.ListField(
            child=serializers.CharField(max_length=40), required=False, allow_null=True, max_length=16,
            help_text="Projections with adapters (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj); "
                      "default all.")
        speculative = SpeculativeInputSerializer(
            required=False, allow_null=True,
            help_text="Speculative decoding (vLLM --speculative-config): the drafter's weights and KV per block "
                      "come out of the KV cache budget.")
        subtract_cudagraph = serializers.BooleanField(
            required=False, allow_null=True, default=None,
            help_text="Subtract the CUDA-graph estimate before sizing; default as the vLLM version does "
                      "(subtracted since 0.21).")

    class MemorySerializer(serializers.Serializer):
        total = serializers.FloatField(help_text="GiB")
        budget = serializers.FloatField(help_text="total x gpu_memory_utilization, GiB")
        weights = serializers.FloatField(help_text="GiB")
        activation = serializers.FloatField(help_text="GiB")
        non_torch = serializers.FloatField(help_text="GiB")
        cudagraph = serializers.FloatField(help_text="GiB (estimate; not subtracted by default)")
        kv = serializers.FloatField(help_text="Available KV cache memory, GiB")
        kv_used = serializers.FloatField(help_text="Allocated blocks, GiB")
        free = serializers.FloatField(help_text="GiB")
        lora = serializers.FloatField(help_text="LoRA adapter slots, GiB")
        encoder_cache = serializers.FloatField(help_text="Multimodal encoder cache, GiB")
        kv_shortfall = serializers.FloatField(help_text="GiB missing for the KV cache (0 when it fits)")

    class OutputSerializer(serializers.Serializer):
        summary = serializers.CharField()
        model = serializers.CharField()
        gpu = serializers.CharField()
        fits = serializers.BooleanField()
        reason = serializers.CharField()
        tensor_parallel_size = serializers.IntegerField()
        pipeline_parallel_size = serializers.IntegerField()
        data_parallel_size = serializers.IntegerField(help_text="DP ranks, each an engine with its own KV pool")
        enable_expert_parallel = serializers.BooleanField()
        expert_parallel_size = serializers.IntegerField(help_text="EP size: TP x DP with expert parallelism, else 1")
        local_experts = serializers.IntegerField(
            allow_null=True, help_text="routed experts on the fullest GPU (whole with EP, slices without); null: dense")
        num_gpus = serializers.IntegerField(help_text="TP x PP x DP x replicas")
        replicas = serializers.IntegerField()
        kv_cache_dtype = serializers.CharField()
        block_size = serializers.IntegerField(help_text="tokens")
        max_model_len = serializers.IntegerField(help_text="tokens")
        max_num_batched_tokens = serializers.IntegerField(help_text="tokens")
        max_num_seqs = serializers.IntegerField(help_text="requests")
        kv_bytes_per_token = serializers.FloatField(help_text="bytes, whole model")
        kv_bytes_per_token_per_gpu = serializers.FloatField(help_text="bytes")
        bytes_per_block = serializers.FloatField(help_text="bytes per block per GPU (same as bytes_per_block_per_gpu)")
        bytes_per_block_per_gpu = serializers.FloatField(help_text="bytes")
        num_gpu_blocks = serializers.IntegerField(help_text="blocks per GPU")
        kv_cache_tokens = serializers.IntegerField(help_text="tokens per engine = per DP rank (vLLM's 'GPU KV cache "
                                                             "size')")
        max_concurrency = serializers.FloatField(help_text="requests of max_model_len per engine (DP rank)")
        kv_cache_tokens_per_deployment = serializers.IntegerField(help_text="tokens, all DP ranks of one replica")
        max_concurrency_per_deployment = serializers.FloatField(help_text="requests, all DP ranks of one replica")
        total_kv_cache_tokens = serializers.IntegerField(help_text="tokens, all replicas and DP ranks")
        total_max_concurrency = serializers.FloatField(help_text="requests, all replicas and DP ranks")
        shape_comparison = serializers.CharField(
            help_text="MoE models: KV tokens under DP + EP against TP on the same GPUs, in words ('' otherwise)")
        min_blocks_unservable = serializers.IntegerField(help_text="blocks")
        last_block_waste_tokens = serializers.IntegerField(help_text="tokens")
        kv_bytes_per_request = serializers.FloatField(help_text="bytes of one max_model_len request")
        cpu_tier_blocks = serializers.IntegerField(allow_null=True)
        price_per_hour = serializers.FloatField(allow_null=True, help_text="USD per hour, whole deployment")
        weights_source = serializers.CharField()
        available_kv_source = serializers.CharField()
        num_parameters = serializers.IntegerField(allow_null=True)
        quantization = serializers.CharField(help_text="The weights' quantization, e.g. 'awq w4a16, group 128'")
        activation_dtype = serializers.CharField(help_text="What kv_cache_dtype auto resolves to")
        kv_shortfall_gib = serializers.FloatField(help_text="GiB missing for the KV cache (0 when it fits)")
        vllm_rule = serializers.CharField(help_text="The vLLM version rules this answer followed")
        memory_gib = serializers.SerializerMethodField()
        memory_terms = serializers.ListField(
            child=serializers.DictField(), required=False,
            help_text="Every memory term per GPU: key, label, gib, source ('modelled' or 'given': a figure from your "
                      "log wins), formula, vllm_source (the vLLM file and function), rule (the version rule used), "
                      "subtracted (taken off the KV budget)")
        notes = serializers.ListField(child=serializers.CharField())
        speculative = SpeculativeOutputSerializer(required=False, help_text="Present when speculative decoding is on")
        launch = serializers.JSONField(
            allow_null=True, help_text="What to run (null when the plan does not fit): vllm_serve (one shell command "
                                       "line with vLLM's flags), kubernetes (Deployment + Service YAML), notes")

        @extend_schema_field(inline_serializer("PlanMemoryGib", fields={
            f: serializers.FloatField() for f in ("total", "budget", "weights", "activation", "non_torch",
                                                  "cudagraph", "kv", "kv_used", "free", "lora", "encoder_cache",
                                                  "kv_shortfall")}))
        def get_memory_gib(self, obj) -> dict:
            return PlanCreateApi.MemorySerializer(obj["memory_gib"]).data

    @extend_schema(
        operation_id="plan_create",
        summary="Size one deployment (KV cache blocks, tokens, concurrency)",
        description="Public. `model` and `gpu` are catalog slugs or inline specs. A plan that does not fit is a "
                    "200 with `fits: false` and `reason`; bad input is a 400 with a message per field.",
        request=InputSerializer,
        responses={200: OutputSerializer, 400: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT},
        auth=[],
        examples=[
            OpenApiExample(
                "Llama 3.1 8B on one H100 SXM",
                request_only=True,
                value={"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 1,
                       "gpu_memory_utilization": 0.9, "max_model_len": 131072},
            ),
            OpenApiExample(
                "Inline config, calibrated with a vLLM log",
                request_only=True,
                value={"model": {"config": {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                            "hidden_size": 4096, "num_hidden_layers": 32,
                                            "num_attention_heads": 32, "num_key_value_heads": 8,
                                            "intermediate_size": 14336, "vocab_size": 128256,
                                            "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
                                 "num_parameters": 8030261248},
                       "gpu": {"memory_gib": 39.39, "name": "A100 40GB"}, "dtype": "fp16",
                       "max_model_len": 131072, "weights_gib": 14.9889, "available_kv_gib": 19.25},
            ),
            OpenApiExample(
                "Answer",
                response_only=True,
                status_codes=["200"],
                value={"summary": "Llama 3.1 8B on 1x H100 SXM5 80GB at TP 1: 452,656 tokens of KV cache, room for "
                                  "about 3.5 requests of 128K tokens at once.",
                       "fits": True, "kv_bytes_per_token": 131072.0, "kv_bytes_per_token_per_gpu": 131072.0,
                       "bytes_per_block_per_gpu": 2097152.0, "num_gpu_blocks": 28291, "kv_cache_tokens": 452656,
                       "max_concurrency": 3.45, "min_blocks_unservable": 8192,
                       "memory_gib": {"total": 79.18, "budget": 71.26, "weights": 14.96, "activation": 0.92,
                                      "non_torch": 0.13, "cudagraph": 0.5, "kv": 55.26, "kv_used": 55.26,
                                      "free": 7.92}},
            ),
            OpenApiExample(
                "DeepSeek-V3 on 8 x H200: data parallel attention with expert parallelism",
                request_only=True,
                value={"model": "deepseek-v3", "gpu": "h200-sxm-141gb", "max_model_len": 32768,
                       "data_parallel_size": 8, "enable_expert_parallel": True},
            ),
            OpenApiExample(
                "Speculative decoding with an EAGLE head (k = 3)",
                request_only=True,
                value={"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "max_model_len": 8192,
                       "speculative": {"method": "eagle", "num_speculative_tokens": 3}},
            ),
            OpenApiExample(
                "Drafter's memory in the answer",
                response_only=True,
                status_codes=["200"],
                value={"num_gpu_blocks": 27199, "speculative": {
                    "method": "eagle", "num_speculative_tokens": 3, "num_lookahead_tokens": 3,
                    "draft": "Llama 3.1 8B eagle head", "draft_weights_gib": 0.47,
                    "draft_kv_bytes_per_token_per_gpu": 4096.0, "num_gpu_blocks_without_draft": 28289,
                    "num_gpu_blocks": 27199}},
            ),
            OpenApiExample(
                "AWQ checkpoint with LoRA slots (KV cache stays bf16)",
                request_only=True,
                value={"model": "qwen3-8b-awq", "gpu": "l40s", "max_model_len": 32768, "max_loras": 4,
                       "max_lora_rank": 64, "vllm_version": "0.28.0"},
            ),
            OpenApiExample(
                "A start-up that failed (negative KV memory in the log)",
                request_only=True,
                value={"model": "llama-3-1-8b", "gpu": "l4", "max_model_len": 32768, "weights_gib": 14.99,
                       "available_kv_gib": -0.42},
            ),
            OpenApiExample(
                "Bad input",
                response_only=True,
                status_codes=["400"],
                value={"errors": {"tensor_parallel_size": ["3 does not divide num_attention_heads 32"],
                                  "gpu_memory_utilization": ["Must be more than 0 and at most 1."]}},
            ),
        ],
    )
    def post(self, request):
        try:
            data = request.data
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None
        return Response(plan_answer(data, user=request.user), status=status.HTTP_200_OK)


def plan_answer(body: Any, *, user) -> dict:
    """The answer of ``POST /api/plan/`` for ``body``: the one place it is shaped (``manage.py plan`` too).

    Raises DRF's ``ValidationError`` for bad input and :class:`planner.errors.InputError`
    (400, or 404 for a model or GPU slug ``user`` may not see) from the sizing service.
    """
    if not isinstance(body, dict):
        raise ValidationError({"non_field_errors": ["Send a JSON object."]})
    s = PlanCreateApi.InputSerializer(data=body)
    s.is_valid(raise_exception=True)
    v = dict(s.validated_data)
    ref = v.pop("model")
    model_id: list[str] = []
    model = _model_spec(ref, user=user, hf_id=model_id)
    gpu = _gpu_spec(v.pop("gpu"), user=user)
    v["speculative"] = _draft_spec(v.pop("speculative", None), user=user)
    outcome = services.plan_deployment(model=model, gpu=gpu, knobs=v)
    out = outcome.to_dict()
    out.update(
        bytes_per_block=out["bytes_per_block_per_gpu"],
        total_kv_cache_tokens=outcome.total_kv_cache_tokens,
        total_max_concurrency=outcome.total_max_concurrency,
        launch=services.plan_launch(outcome, (model_id or [""])[0], v["speculative"]),
    )
    return dict(PlanCreateApi.OutputSerializer(out).data)


def _config_model_id(cfg) -> str:
    """A config.json's ``_name_or_path`` when it is a repository id (no spaces), else ""."""
    name = cfg.get("_name_or_path") if isinstance(cfg, dict) else None
    return name if isinstance(name, str) and name.strip() and not any(c.isspace() for c in name) else ""


def _model_spec(ref: dict, *, user, hf_id: list | None = None):
    """The model asked for; ``hf_id`` (a list) receives its Hugging Face repository id ("" when unknown)."""
    if "slug" in ref:
        row = selectors.model_profile_get(slug=ref["slug"], user=user)
        if row is None:
            raise InputError.one("model", f"No model {ref['slug']!r} in the catalog or your profiles "
                                          "(see GET /api/models/).", not_found=True)
        if hf_id is not None:
            hf_id.append(getattr(row, "hf_id", "") or "")
        return row.to_spec()
    if hf_id is not None:
        hf_id.append(_config_model_id(ref.get("config")))
    try:
        return parse_hf_config(ref["config"], name=ref.get("name"), num_parameters=ref.get("num_parameters"))
    except SpecError as exc:
        raise ValidationError({"model.config": [str(exc)]}) from None
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError, RecursionError) as exc:
        raise ValidationError({"model.config": [f"Not a usable config.json: {type(exc).__name__}: {exc}"[:500]]}) \
            from None


def _draft_spec(data: dict | None, *, user) -> DraftSpec | None:
    """The validated ``speculative`` object as a :class:`DraftSpec` (None when absent or k = 0)."""
    if not data or not data.get("num_speculative_tokens"):
        return None
    ref = data.get("draft_model")
    draft = None
    if ref is not None:
        try:
            draft = _model_spec(ref, user=user)
        except ValidationError as exc:
            raise ValidationError({"speculative.draft_model": exc.detail.get("model.config", exc.detail)}) from None
        except InputError as exc:
            raise InputError.one("speculative.draft_model", exc.errors["model"][0], not_found=exc.not_found) from None
    try:
        return DraftSpec(method=data["method"], num_speculative_tokens=data["num_speculative_tokens"],
                         draft_model=draft, draft_vocab_size=data.get("draft_vocab_size"))
    except SpecError as exc:
        field, message = field_and_message(exc)
        raise ValidationError({field or "speculative": [message]}) from None


def _gpu_spec(ref: dict, *, user):
    if "slug" in ref:
        row = selectors.gpu_profile_get(slug=ref["slug"], user=user)
        if row is None:
            raise InputError.one("gpu", f"No GPU {ref['slug']!r} in the catalog or your profiles "
                                        "(see GET /api/gpus/).", not_found=True)
        return row.to_spec()
    try:
        return GpuSpec(name=ref.get("name") or "Custom GPU", memory_gib=ref["memory_gib"],
                       price_per_hour=ref.get("price_per_hour"))
    except SpecError as exc:
        raise ValidationError({"gpu": [str(exc)]}) from None
