"""Catalog API (v1): ``/api/models/`` and ``/api/gpus/``.

Reads are public; writes need a signed-in user (session or token). Catalog
rows are read-only (403; ``POST .../copy/`` makes an owned copy). A user's
profiles are private: to anyone else they answer 404, like an unknown slug,
whether read, changed, deleted or copied. Anonymous writes get
401 with a ``WWW-Authenticate: Token`` challenge. Errors use the project's
shape ``{"errors": {field: [messages]}}``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from accounts.authentication import ApiTokenAuthentication
from config.parsers import CheckedJSONParser
from config.strict_input import FORM_KEYS, refuse_unknown_fields

from . import selectors, services
from .serializers import (
    GpuFilterSerializer,
    GpuInputSerializer,
    GpuOutputSerializer,
    ModelDetailOutputSerializer,
    ModelFilterSerializer,
    ModelImportSerializer,
    ModelInputSerializer,
    ModelOutputSerializer,
)

# -- examples ---------------------------------------------------------------

GPU_EXAMPLE = {
    "slug": "h100-sxm5-80gb", "name": "H100 SXM5 80GB", "is_catalog": True, "owner": None,
    "sources": "ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/h100_sxm.yaml; ...",
    "verification": "verified (2 sources); MiB from nvidia-smi logs", "unverified": False,
    "unverified_fields": [], "url": "/catalog/gpus/h100-sxm5-80gb/", "vendor": "NVIDIA",
    "memory_nominal": "80 GB", "memory_type": "HBM3", "memory_mib": 81559.0, "memory_gib": 79.18,
    "memory_gib_estimated": False, "bandwidth_tbps": 3.35, "bf16_tflops": 989.0, "fp8_tflops": 1979.0,
    "fp4_tflops": None, "interconnect": "NVLink4 900 GB/s total (450/dir), NVSwitch",
    "pcie": "Gen5 x16 (64 GB/s/dir)", "tdp_w": 700.0, "price_per_hour": 3.78,
    "price_text": "Lambda 1x H100 SXM $3.78; Modal H100 $3.9492; Replicate H100 $5.49 (...)",
}
GPU_INPUT_EXAMPLE = {"name": "My H100 (MIG 3g.40gb)", "vendor": "NVIDIA", "memory_gib": 39.5,
                     "bandwidth_tbps": 1.675, "price_per_hour": 1.9}
GPU_OWN_SLUG = "alice-my-h100-mig-3g-40gb-3f9c2a7d5e01b846"  # private slugs end in 64 random bits
GPU_OWN_EXAMPLE = {**GPU_EXAMPLE, "slug": GPU_OWN_SLUG, "name": "My H100 (MIG 3g.40gb)",
                   "is_catalog": False, "owner": "alice", "sources": "entered by the user", "verification": "",
                   "url": f"/catalog/gpus/{GPU_OWN_SLUG}/", "memory_gib": 39.5, "memory_mib": None,
                   "memory_nominal": "", "memory_type": "", "bandwidth_tbps": 1.675, "bf16_tflops": None,
                   "fp8_tflops": None, "interconnect": "", "pcie": "", "tdp_w": None, "price_per_hour": 1.9,
                   "price_text": ""}
MODEL_EXAMPLE = {
    "slug": "llama-3-1-8b", "name": "Llama 3.1 8B", "is_catalog": True, "owner": None,
    "sources": "raw_configs/ (HF config.json copied from ai-dynamo/aiconfigurator model_configs)",
    "verification": "verified from config.json (head_dim implicit = hidden/heads = 128); ...",
    "unverified": False, "unverified_fields": [], "url": "/catalog/models/llama-3-1-8b/",
    "hf_id": "meta-llama/Llama-3.1-8B", "model_type": "llama", "num_layers": 32, "hidden_size": 4096,
    "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128, "attention": "GQA", "attention_note": "GQA",
    "kv_lora_rank": None, "qk_rope_head_dim": None, "q_lora_rank": None, "qk_nope_head_dim": None,
    "v_head_dim": None, "intermediate_size": 14336, "moe_intermediate_size": None, "num_experts": 0,
    "num_experts_per_tok": 0, "num_shared_experts": 0, "num_dense_layers": 0, "vocab_size": 128256,
    "tie_word_embeddings": False, "num_parameters": 8030000000, "num_active_parameters": 8030000000,
    "params_note": "computed from config", "sliding_window": None, "layer_pattern": "32 x full", "layers": [],
    "num_full_layers": 32, "num_sliding_layers": 0, "num_linear_layers": 0, "max_position_embeddings": 131072,
    "weights_dtype": "bf16", "quantization": "", "checkpoint_quant_text": "", "kv_bytes_per_token_bf16": 131072,
    "kv_bytes_per_token_bf16_global": 131072, "kv_bytes_per_token_fp8": 65536, "sampling": "top_k_top_p",
}
#: The verbatim files of a detail answer, none (a row entered field by field).
NO_CONFIGS = {"hf_config": None, "hf_quant_config": None, "hf_generation_config": None}
MODEL_INPUT_EXAMPLE = {"name": "Tiny GQA", "num_layers": 16, "hidden_size": 2048, "num_attention_heads": 32,
                       "num_kv_heads": 8, "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256,
                       "num_parameters": 1235814400, "max_position_embeddings": 131072}
MODEL_OWN_SLUG = "alice-tiny-gqa-9b1e04c7a2d35f60"
MODEL_OWN_EXAMPLE = {**MODEL_EXAMPLE, "slug": MODEL_OWN_SLUG, "name": "Tiny GQA", "is_catalog": False,
                     "owner": "alice", "sources": "entered by the user", "verification": "",
                     "url": f"/catalog/models/{MODEL_OWN_SLUG}/", "hf_id": "", "model_type": "",
                     "num_layers": 16, "hidden_size": 2048, "head_dim": 64, "intermediate_size": 8192,
                     "num_parameters": 1235814400, "num_active_parameters": None, "layer_pattern": "",
                     "num_full_layers": 16, "attention_note": "", "params_note": "",
                     "kv_bytes_per_token_bf16": None, "kv_bytes_per_token_bf16_global": None,
                     "kv_bytes_per_token_fp8": None, "sampling": ""}
IMPORT_EXAMPLE = {
    "name": "My Llama", "num_parameters": 8030261248,
    "config": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
               "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
               "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
               "torch_dtype": "bfloat16", "tie_word_embeddings": False},
    "generation_config": {"bos_token_id": 128000, "do_sample": True, "eos_token_id": 128001, "temperature": 0.6,
                          "top_p": 0.9, "transformers_version": "4.43.0.dev0"},
}


def _page(results):
    return {"count": len(results), "next": None, "previous": None, "results": results}


def _errors(summary, body):
    return OpenApiResponse(description=summary, examples=[OpenApiExample(summary, value=body)])


ERR_400_FILTER = _errors("Bad filter", {"errors": {"min_memory_gib": ["A valid number is required."]}})
ERR_400_GPU = _errors("Bad input", {"errors": {"memory_gib": ["This field is required."]}})
ERR_400_MODEL = _errors("Bad input", {"errors": {"num_kv_heads": ["7 does not divide num_attention_heads 32"]}})
ERR_400_IMPORT = _errors("Bad config", {"errors": {"config": [
    "num_key_value_heads: 7 does not divide num_attention_heads 32"]}})
ERR_401 = _errors("Not signed in", {"errors": {"non_field_errors": [
    "Authentication credentials were not provided."]}})
ERR_403 = _errors("Not yours", {"errors": {"non_field_errors": [
    "Catalog rows are read-only: copy this one to your profiles to edit it."]}})
ERR_404 = _errors("Unknown slug, or another user's profile",
                  {"errors": {"non_field_errors": ["No GpuProfile matches the given query."]}})


def _validate(serializer_class, data, **kwargs):
    s = serializer_class(data=data, **kwargs)
    s.is_valid(raise_exception=True)
    return s.validated_data


def _filters(serializer_class, params):
    """Validated list filters; an unknown query parameter is a 400 (the schema lists the known ones)."""
    known = set(serializer_class().fields) | {"page"}
    unknown = sorted(k for k in params if k not in known)
    if unknown:
        raise ValidationError({unknown[0] or "query": [
            f"unknown query parameter {unknown[0]!r} (known: {', '.join(sorted(known))})"]})
    blank = sorted(k for k in params if k != "page" and not params.get(k, "").strip())
    if blank:  # (DRF would read an empty value as absent; the schema asks for a value)
        raise ValidationError({blank[0]: ["give a value, or leave the parameter out"]})
    return _validate(serializer_class, params)


class _CatalogApi(GenericAPIView):
    # Token first: an anonymous write is answered 401 with a "WWW-Authenticate: Token" challenge.
    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    parser_classes = [CheckedJSONParser]  # the catalog API speaks JSON only (depth, NUL, surrogates checked)


# -- GPUs -------------------------------------------------------------------


class GpuListApi(_CatalogApi):
    serializer_class = GpuOutputSerializer

    @extend_schema(
        operation_id="gpus_list", tags=["catalog"], parameters=[GpuFilterSerializer],
        summary="List GPUs (catalog and yours)",
        responses={200: GpuOutputSerializer(many=True), 400: ERR_400_FILTER},
        examples=[OpenApiExample("H100", value=_page([GPU_EXAMPLE]), response_only=True)],
    )
    def get(self, request):
        filters = _filters(GpuFilterSerializer, request.query_params)
        qs = selectors.gpu_profile_list(filters=filters, user=request.user)
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(GpuOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="gpus_create", tags=["catalog"], summary="Create your GPU profile",
        request=GpuInputSerializer,
        responses={201: GpuOutputSerializer, 400: ERR_400_GPU, 401: ERR_401},
        examples=[OpenApiExample("A MIG slice", value=GPU_INPUT_EXAMPLE, request_only=True),
                  OpenApiExample("Created", value=GPU_OWN_EXAMPLE, response_only=True, status_codes=["201"])],
    )
    def post(self, request):
        data = _validate(GpuInputSerializer, request.data)
        profile = services.gpu_profile_create(owner=request.user, data=dict(data))
        return Response(GpuOutputSerializer(profile).data, status=status.HTTP_201_CREATED)


class GpuDetailApi(_CatalogApi):
    serializer_class = GpuOutputSerializer

    @extend_schema(operation_id="gpus_retrieve", tags=["catalog"], summary="One GPU by slug",
                   responses={200: GpuOutputSerializer, 404: ERR_404},
                   examples=[OpenApiExample("H100", value=GPU_EXAMPLE, response_only=True)])
    def get(self, request, slug):
        profile = selectors.gpu_profile_get(slug=slug, user=request.user)
        return Response(GpuOutputSerializer(profile).data)

    @extend_schema(
        operation_id="gpus_partial_update", tags=["catalog"], summary="Change your GPU profile",
        request=GpuInputSerializer(partial=True),
        responses={200: GpuOutputSerializer, 400: ERR_400_GPU, 401: ERR_401, 403: ERR_403, 404: ERR_404},
        examples=[OpenApiExample("New price", value={"price_per_hour": 1.9}, request_only=True),
                  OpenApiExample("Updated", value=GPU_OWN_EXAMPLE, response_only=True)],
    )
    def patch(self, request, slug):
        profile = selectors.gpu_profile_get(slug=slug, user=request.user)
        services.profile_check_editable(profile=profile, user=request.user)
        data = _validate(GpuInputSerializer, request.data, partial=True)
        profile = services.gpu_profile_update(profile=profile, user=request.user, data=dict(data))
        return Response(GpuOutputSerializer(profile).data)

    @extend_schema(operation_id="gpus_destroy", tags=["catalog"], summary="Delete your GPU profile",
                   request=None, responses={204: None, 401: ERR_401, 403: ERR_403, 404: ERR_404},
                   examples=[OpenApiExample("No body", value=None, request_only=True),
                             OpenApiExample("Deleted", value=None, response_only=True, status_codes=["204"])])
    def delete(self, request, slug):
        profile = selectors.gpu_profile_get(slug=slug, user=request.user)
        services.profile_delete(profile=profile, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GpuCopyApi(_CatalogApi):
    serializer_class = GpuOutputSerializer
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="gpus_copy", tags=["catalog"], summary="Copy a GPU to your profiles",
                   request=None, responses={201: GpuOutputSerializer, 401: ERR_401, 404: ERR_404},
                   examples=[OpenApiExample("No body", value={}, request_only=True),
                             OpenApiExample("Copied", value={**GPU_OWN_EXAMPLE, "name": "H100 SXM5 80GB (copy)"},
                                            response_only=True, status_codes=["201"])])
    def post(self, request, slug):
        refuse_unknown_fields(request.data, (), ignore=FORM_KEYS)  # takes no fields
        profile = selectors.gpu_profile_get(slug=slug, user=request.user)
        copy = services.profile_copy(profile=profile, owner=request.user)
        return Response(GpuOutputSerializer(copy).data, status=status.HTTP_201_CREATED)


# -- models -----------------------------------------------------------------


class ModelListApi(_CatalogApi):
    serializer_class = ModelOutputSerializer

    @extend_schema(
        operation_id="models_list", tags=["catalog"], parameters=[ModelFilterSerializer],
        summary="List models (catalog and yours)",
        responses={200: ModelOutputSerializer(many=True), 400: ERR_400_FILTER},
        examples=[OpenApiExample("Llama", value=_page([MODEL_EXAMPLE]), response_only=True)],
    )
    def get(self, request):
        filters = _filters(ModelFilterSerializer, request.query_params)
        qs = selectors.model_profile_list(filters=filters, user=request.user)
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(ModelOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="models_create", tags=["catalog"], summary="Create your model profile field by field",
        request=ModelInputSerializer,
        responses={201: ModelDetailOutputSerializer, 400: ERR_400_MODEL, 401: ERR_401},
        examples=[OpenApiExample("A small GQA model", value=MODEL_INPUT_EXAMPLE, request_only=True),
                  OpenApiExample("Created", value={**MODEL_OWN_EXAMPLE, **NO_CONFIGS},
                                 response_only=True, status_codes=["201"])],
    )
    def post(self, request):
        data = _validate(ModelInputSerializer, request.data)
        profile = services.model_profile_create(owner=request.user, data=dict(data))
        return Response(ModelDetailOutputSerializer(profile).data, status=status.HTTP_201_CREATED)


class ModelImportApi(_CatalogApi):
    serializer_class = ModelImportSerializer
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="models_import", tags=["catalog"], summary="Create your model profile from a config.json",
        request=ModelImportSerializer,
        responses={201: ModelDetailOutputSerializer, 400: ERR_400_IMPORT, 401: ERR_401},
        examples=[OpenApiExample("Llama 3.1 8B config", value=IMPORT_EXAMPLE, request_only=True),
                  OpenApiExample("Imported", value={**MODEL_EXAMPLE, "slug": "alice-my-llama-5d20e8f1b7c94a36",
                                                    "name": "My Llama",
                                                    "is_catalog": False, "owner": "alice",
                                                    "num_parameters": 8030261248,
                                                    "sources": "config.json imported by the user",
                                                    "hf_config": IMPORT_EXAMPLE["config"], "hf_quant_config": None,
                                                    "hf_generation_config": IMPORT_EXAMPLE["generation_config"]},
                                 response_only=True, status_codes=["201"])],
    )
    def post(self, request):
        size = int(request.META.get("CONTENT_LENGTH") or 0)
        if size > services.MAX_CONFIG_BYTES:
            raise ValidationError({"config": [f"The request is {size:,} bytes; a config.json import is limited to "
                                              f"{services.MAX_CONFIG_WORDS}."]})
        data = _validate(ModelImportSerializer, request.data)
        profile = services.model_profile_import(owner=request.user, config=data["config"],
                        name=data.get("name"), num_parameters=data.get("num_parameters"),
                        quant_config=data.get("quant_config"), generation_config=data.get("generation_config"))
        return Response(ModelDetailOutputSerializer(profile).data, status=status.HTTP_201_CREATED)


class ModelDetailApi(_CatalogApi):
    serializer_class = ModelDetailOutputSerializer

    @extend_schema(operation_id="models_retrieve", tags=["catalog"], summary="One model by slug (with its config)",
                   responses={200: ModelDetailOutputSerializer, 404: ERR_404},
                   examples=[OpenApiExample("Llama 3.1 8B", value={**MODEL_EXAMPLE, **NO_CONFIGS,
                                                                    "hf_config": {"...": "..."}},
                                            response_only=True)])
    def get(self, request, slug):
        profile = selectors.model_profile_get(slug=slug, user=request.user)
        return Response(ModelDetailOutputSerializer(profile).data)

    @extend_schema(
        operation_id="models_partial_update", tags=["catalog"], summary="Change your model profile",
        request=ModelInputSerializer(partial=True),
        responses={200: ModelDetailOutputSerializer, 400: ERR_400_MODEL, 401: ERR_401, 403: ERR_403,
                   404: ERR_404},
        examples=[OpenApiExample("Parameter count", value={"num_parameters": 1300000000}, request_only=True),
                  OpenApiExample("Updated", value={**MODEL_OWN_EXAMPLE, "num_parameters": 1300000000,
                                                   **NO_CONFIGS},
                                 response_only=True)],
    )
    def patch(self, request, slug):
        profile = selectors.model_profile_get(slug=slug, user=request.user)
        services.profile_check_editable(profile=profile, user=request.user)
        data = _validate(ModelInputSerializer, request.data, partial=True)
        profile = services.model_profile_update(profile=profile, user=request.user, data=dict(data))
        return Response(ModelDetailOutputSerializer(profile).data)

    @extend_schema(operation_id="models_destroy", tags=["catalog"], summary="Delete your model profile",
                   request=None, responses={204: None, 401: ERR_401, 403: ERR_403, 404: ERR_404},
                   examples=[OpenApiExample("No body", value=None, request_only=True),
                             OpenApiExample("Deleted", value=None, response_only=True, status_codes=["204"])])
    def delete(self, request, slug):
        profile = selectors.model_profile_get(slug=slug, user=request.user)
        services.profile_delete(profile=profile, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ModelCopyApi(_CatalogApi):
    serializer_class = ModelDetailOutputSerializer
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="models_copy", tags=["catalog"], summary="Copy a model to your profiles",
                   request=None, responses={201: ModelDetailOutputSerializer, 401: ERR_401, 404: ERR_404},
                   examples=[OpenApiExample("No body", value={}, request_only=True),
                             OpenApiExample("Copied", value={**MODEL_OWN_EXAMPLE, "name": "Llama 3.1 8B (copy)",
                                                             **NO_CONFIGS},
                                            response_only=True, status_codes=["201"])])
    def post(self, request, slug):
        refuse_unknown_fields(request.data, (), ignore=FORM_KEYS)  # takes no fields
        profile = selectors.model_profile_get(slug=slug, user=request.user)
        copy = services.profile_copy(profile=profile, owner=request.user)
        return Response(ModelDetailOutputSerializer(copy).data, status=status.HTTP_201_CREATED)
