"""``/api/calibrations/``: upload a measurement, get the clock fitted for a (model, GPU, TP); list and read them."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from config.json_input import MAX_JSON_VALUES, JsonInputError, loads_checked, object_id
from config.parsers import CheckedJSONParser
from config.strict_input import FORM_KEYS, StrictFieldsMixin, refuse_unknown_fields
from planner.calibration.handover import calibration_or_run
from planner.calibration.models import CalibrationProfile
from planner.calibration.services import calibration_dict
from planner.runs.api import EXAMPLE_RUN, RunOut
from planner.runs.models import Run

#: What a stored calibration looks like (GET one, GET the list's rows, and the answer to POST).
EXAMPLE_CALIBRATION = {
    "id": 3, "name": "h100-qwen-prod", "model": "qwen2-5-7b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 1,
    "deployment": {"max_num_batched_tokens": 8192, "max_num_seqs": 256}, "source_format": "vllm-bench",
    "measurement": {"source": "vllm-bench", "model": "Qwen/Qwen2.5-7B-Instruct", "requests": 500,
                    "mean_prompt_tokens": 751.0, "mean_output_tokens": 251.0, "mean_ttft_s": 0.027,
                    "mean_itl_s": 0.007, "mean_e2e_s": 1.77, "request_rate": 6.0, "per_request": False, "notes": []},
    "coefficients": {"bandwidth_efficiency": 0.78, "mfu": 0.52, "serve_request_s": 0.006},
    "fit": {"fitted": {"bandwidth_efficiency": 0.78, "mfu": 0.52, "serve_request_s": 0.006},
            "measured": {"ttft_s": 0.027, "itl_s": 0.007, "e2e_s": 1.77},
            "predicted": {"ttft_s": 0.028, "itl_s": 0.0071, "e2e_s": 1.79},
            "error_pct": {"ttft_s": 3.7, "itl_s": 1.4, "e2e_s": 1.1}, "simulated_requests": 300, "evaluations": 20},
    "created_at": "2026-11-26T12:00:00+00:00"}


class CalibrationInSerializer(StrictFieldsMixin, serializers.Serializer):
    name = serializers.CharField(help_text="your name for this calibration (unique among yours)")
    model = serializers.CharField(help_text="catalog slug or id of your model profile")
    gpu = serializers.CharField(help_text="catalog slug or id of your GPU profile")
    tensor_parallel_size = serializers.IntegerField(required=False, default=1)
    file = serializers.FileField(required=False, help_text="the measurement (multipart upload)")
    text = serializers.CharField(required=False, help_text="the measurement as text (JSON bodies)")
    format = serializers.ChoiceField(["vllm-bench", "csv", "prometheus"], required=False,
                                     help_text="default: guessed from the file's first characters")
    request_rate = serializers.FloatField(required=False, help_text="requests/s the measured run used, when the "
                                                                     "file has no arrival times (a /metrics scrape)")
    deployment = serializers.DictField(required=False, help_text="max_num_batched_tokens, max_num_seqs, "
                                                                 "max_model_len, gpu_memory_utilization")


def _text(request) -> str | None:
    upload = request.FILES.get("file")
    if upload is not None:
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise serializers.ValidationError({"file": ["must be UTF-8 text"]}) from None
    text = request.data.get("text")
    return text if isinstance(text, str) else None


class CalibrationListCreateApi(APIView):
    permission_classes = [IsAuthenticated]
    heavy_throttle = True  # POST fits the clock inside the request: THROTTLE_HEAVY per user (GET is not counted)
    parser_classes = [CheckedJSONParser, MultiPartParser, FormParser]

    @extend_schema(tags=["calibrations"], summary="Your calibrations", operation_id="calibrations_list",
                   responses=inline_serializer("CalibrationList",
                                               {"results": serializers.ListField(child=serializers.DictField())}),
                   examples=[OpenApiExample("Your calibrations", response_only=True,
                                            value={"results": [EXAMPLE_CALIBRATION]})])
    def get(self, request):
        rows = CalibrationProfile.objects.filter(owner=request.user).select_related("model", "gpu")[:200]
        return Response({"results": [calibration_dict(r) for r in rows]})

    @extend_schema(
        tags=["calibrations"],
        summary="Fit the step clock to your measurements and store it as a named calibration",
        description="Upload the JSON of `vllm bench serve --save-result`, a CSV of requests (arrival_time, "
                    "prompt_tokens, output_tokens, ttft_s, e2e_s) or a Prometheus scrape of vLLM's /metrics. "
                    "The fit (scipy least squares, bounded) moves bandwidth_efficiency, mfu and serve_request_s. "
                    "A bad file gets a 400 naming the row and field, and nothing is stored. The fit is priced "
                    "before it runs: within `KVP_INLINE_MAX_SECONDS` (1 s) it runs in the request (stopped past the "
                    "wall clock), dearer it runs on a worker and the answer is a 202 with a job to poll at "
                    "`GET /api/runs/{id}/`, whose `result` is then this 201's body; one estimated past the chunk "
                    "limit is a 400 on `file` with the estimate. It counts against the `heavy` rate limit. Use the calibration "
                    "in a sweep, simulation or replicas definition as `\"calibration\": <id or name>`.",
        request=CalibrationInSerializer,
        responses={201: inline_serializer("Calibration", {"id": serializers.IntegerField(),
                                                          "coefficients": serializers.DictField(),
                                                          "fit": serializers.DictField()}),
                   202: RunOut},
        examples=[OpenApiExample("A vllm bench result as text", request_only=True, value={
            "name": "h100-qwen-prod", "model": "qwen2-5-7b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 1,
            "text": "{\"completed\": 500, \"request_rate\": 6, \"mean_ttft_ms\": 27, \"mean_itl_ms\": 7.0, "
                    "\"mean_e2el_ms\": 1770, \"total_input_tokens\": 375500, \"total_output_tokens\": 125500}"}),
                  OpenApiExample("The stored calibration", response_only=True, status_codes=["201"],
                                 value=EXAMPLE_CALIBRATION),
                  OpenApiExample("Sent to a worker", response_only=True, status_codes=["202"],
                                 value={**EXAMPLE_RUN, "kind": "calibration"})],
    )
    def post(self, request):
        data = request.data
        if not hasattr(data, "get"):  # a JSON list or scalar
            raise serializers.ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        refuse_unknown_fields(data, CalibrationInSerializer().fields, ignore=FORM_KEYS)
        from planner.api.sweeps import QuotaExceededApi
        from planner.jobs import QuotaExceeded
        from planner.runs.api import accepted

        fields = {"name": data.get("name"), "model": data.get("model"), "gpu": data.get("gpu"), "text": _text(request),
                  "tensor_parallel_size": _int(data.get("tensor_parallel_size", 1)), "file_format": data.get("format"),
                  "request_rate": data.get("request_rate"), "deployment": _dict(data.get("deployment"))}
        try:
            made = calibration_or_run(request, fields)
        except QuotaExceeded as exc:
            raise QuotaExceededApi(exc.errors["non_field_errors"][0]) from None
        if isinstance(made, Run):  # priced over KVP_INLINE_MAX_SECONDS: the fit runs on a worker
            return accepted(made, request)
        return Response(calibration_dict(made), status=status.HTTP_201_CREATED)


def _int(v):
    return object_id(v) if object_id(v) is not None else v


def _dict(v):
    if isinstance(v, str) and v.strip():
        try:
            v = loads_checked(v, max_values=MAX_JSON_VALUES)  # the body's checks: depth, NUL, numbers, values
        except JsonInputError as exc:
            raise serializers.ValidationError({"deployment": [f"{exc}"]}) from None
        except ValueError:
            raise serializers.ValidationError({"deployment": ["must be a JSON object"]}) from None
    if v is not None and v != "" and not isinstance(v, dict):
        raise serializers.ValidationError({"deployment": ["must be an object"]})
    return v or None


class CalibrationDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(tags=["calibrations"], summary="One of your calibrations", operation_id="calibrations_retrieve",
                   responses=inline_serializer("CalibrationDetail", {"id": serializers.IntegerField()}),
                   examples=[OpenApiExample("A calibration", response_only=True, value=EXAMPLE_CALIBRATION)])
    def get(self, request, calibration_id: int):
        row = get_object_or_404(CalibrationProfile.objects.select_related("model", "gpu"), pk=calibration_id,
                                owner=request.user)
        return Response(calibration_dict(row))
