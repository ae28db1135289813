"""Sweeps, one-off simulations and reports over the API.

* ``POST /api/sweeps/`` create (asynchronous; 202 with the status URL), ``GET`` list (own).
* ``GET /api/sweeps/{id}/`` status with progress; ``POST /api/sweeps/{id}/cancel/``;
  ``GET /api/sweeps/{id}/results/`` gathered points (``?series=1`` adds time series).
* ``POST /api/simulations/`` one simulation, capped in requests: answered in the request when priced within
  ``KVP_INLINE_MAX_SECONDS``, else 202 with a job to poll at ``/api/runs/{id}/`` (:mod:`planner.runs.api`).
* ``GET /api/reports/`` own reports; ``GET /api/reports/{slug}/`` public
  (``?format=csv|json``), ``DELETE`` owner only.

Errors are ``{"errors": {field: [messages]}}`` (``planner.api.errors``).
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from config.parsers import CheckedJSONParser
from config.strict_input import refuse_unknown_fields
from planner.api.errors import input_error_as_api_exception
from planner.jobs import QuotaExceeded
from planner.models import Report, Sweep
from planner.runs.api import EXAMPLE_RUN, RunOut
from planner.sampling_words import SOURCES, sampling_answer
from planner.sweeps import definition as defn
from planner.sweeps import disaggregated as disagg
from planner.sweeps import exports, pricing, selectors, services
from simulator.clock.cost_model import DEFAULT_SAMPLER_PATH, SAMPLER_PATHS

EXAMPLE_DEFINITION = {
    "name": "Llama 3.1 8B on one H100: KV cliff",
    "model": "llama-3-1-8b",
    "gpu": "h100-sxm5-80gb",
    "deployment": {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.9},
    "engine": {"max_num_seqs": 256},
    "workload": {"spec": {"n": 500, "prompt": "normal:512,128", "output": "normal:256,64",
                          "arrival": {"kind": "poisson", "rate": 4, "unit": "step"}}, "seed": 0},
    "axes": [{"param": "num_gpu_blocks", "start": 1000, "stop": 20000, "steps": 12, "scale": "log"}],
}


#: A disaggregated deployment (planner.sweeps.disaggregated): one simulation, then a sweep of the pool sizes.
EXAMPLE_DISAGGREGATED_SIMULATION = {
    "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "deployment": {"max_model_len": 4096},
    "workload": {"spec": {"n": 200, "prompt": "normal:2048,512", "output": "normal:256,64",
                          "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
    "disaggregated": disagg.EXAMPLE,
}
EXAMPLE_DISAGGREGATED_SWEEP = {
    **EXAMPLE_DISAGGREGATED_SIMULATION, "name": "Llama 3.1 8B: prefill and decode pool sizes",
    "axes": [{"param": "prefill_instances", "values": [1, 2]}, {"param": "decode_instances", "values": [1, 2, 3]}],
}


class DeploymentKnobsSerializer(serializers.Serializer):
    """A definition's deployment: DeploymentSpec fields (tensor_parallel_size, gpu_memory_utilization, ...) and
    the sampler path the roofline clock charges."""  # schema only: planner.sweeps.definition checks the body

    sampling = serializers.ChoiceField(
        choices=list(SAMPLER_PATHS), required=False, allow_null=True,
        help_text="How the requests sample, for the roofline clock's sampler time. Absent or null (the default): "
                  "the model's own path, what vLLM applies from its generation_config.json "
                  f"({DEFAULT_SAMPLER_PATH} when the planner does not know it); greedy is temperature 0")


#: The sampler fields of an answer (:func:`planner.sampling_words.sampling_answer`), for the schema.
SAMPLING_FIELDS = {
    "sampling": serializers.CharField(allow_null=True, help_text="sampler path the roofline clock timed "
                                                                   "(null without a roofline clock)"),
    "sampling_source": serializers.ChoiceField(
        choices=list(SOURCES), allow_null=True,
        help_text="where that path came from: chosen (deployment.sampling), model (its generation_config.json), "
                  "default (the model's sampling defaults are not known) or calibration (its fit moved the "
                  "sampler's time; the path is the one the fit started from)"),
    "sampling_words": serializers.CharField(help_text="the path and where it came from, in words"),
}


class DefinitionSerializer(serializers.Serializer):
    """A sweep definition (see docs/sweeps.md). Unknown fields are refused."""

    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    mode = serializers.ChoiceField(choices=["grid", "cliff"], required=False)
    model = serializers.JSONField(required=False, help_text="catalog slug, id of your profile, or inline spec")
    gpu = serializers.JSONField(required=False, help_text="catalog slug, id of your profile, or inline spec")
    deployment = DeploymentKnobsSerializer(
        required=False, help_text='deployment knobs (DeploymentSpec fields), e.g. {"tensor_parallel_size": 2, '
                                  '"sampling": "greedy"}; need a model and a GPU')
    engine = serializers.JSONField(
        required=False, help_text='engine knobs (EngineConfig fields), e.g. {"max_num_seqs": 256, "speculative": '
                                  '{"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}} '
                                  '(speculative decoding: docs/speculative_decoding.md)')
    workload = serializers.JSONField(help_text='{"spec": {...}, "seed": 0} or {"trace": "...", "format": "auto" | "csv" | "jsonl" | "mooncake" | "azure" | "burstgpt" | "vllm-bench", "options": {...}}')
    axes = serializers.JSONField(
        required=False, help_text='one or two of {"param": P, "values": [...]} or {"param": P, "start", "stop", '
                                  '"steps", "scale"}; P among docs/sweeps.md\'s axes, e.g. num_gpu_blocks, rate, '
                                  'num_speculative_tokens (0 to 16), acceptance_rate ([0, 1])')
    cliff = serializers.JSONField(required=False)
    cluster = serializers.JSONField(required=False, help_text='replicas behind a router: {"num_instances": 4, '
                                    '"routing": "round-robin", "router_delay_s": 0}')
    slo = serializers.JSONField(required=False, help_text='latency targets for the replicas answer: '
                                '{"ttft_s": 0.5, "itl_s": 0.05, "percentile": "p90"}')
    disaggregated = serializers.JSONField(
        required=False, help_text='prefill and decode pools instead of one engine or replicas (docs/'
        'disaggregated_serving.md): {"prefill_instances": 1, "decode_instances": 3, "routing": "least-loaded", '
        '"link_gbps": 50, "link_latency_s": 0.0001}; both pools run the point\'s engine unless prefill_gpu '
        '(slug, profile id or inline spec) or prefill_tensor_parallel_size give the prefill pool its own; needs '
        'a model and a GPU and arrivals in seconds; sweep axes prefill_instances, decode_instances')


class ProgressSerializer(serializers.Serializer):
    status = serializers.CharField()
    points_done = serializers.IntegerField()
    points_total = serializers.IntegerField()
    fraction = serializers.FloatField()
    elapsed_s = serializers.FloatField()
    eta_s = serializers.FloatField(allow_null=True)
    chunks = serializers.DictField(child=serializers.IntegerField())
    error = serializers.CharField(allow_blank=True)


class SweepOutSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    mode = serializers.CharField()
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    progress = ProgressSerializer(required=False)
    report_url = serializers.CharField(allow_null=True)
    url = serializers.CharField()


_EX_TIME = "2026-05-01T12:00:00Z"
_EX_PROGRESS = {"status": "running", "points_done": 5, "points_total": 12, "fraction": 0.4167,
                "elapsed_s": 31.2, "eta_s": 43.7, "chunks": {"done": 1, "running": 1, "queued": 1}, "error": ""}
EXAMPLE_SWEEP = {
    "id": 42, "name": EXAMPLE_DEFINITION["name"], "mode": "grid", "status": "running",
    "created_at": _EX_TIME, "finished_at": None, "progress": _EX_PROGRESS, "report_url": None,
    "url": "https://example.com/api/sweeps/42/",
}
EXAMPLE_SPECULATIVE_DEFINITION = {
    "name": "Llama 3.1 8B on H100, EAGLE head", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
    "deployment": {"max_model_len": 8192},
    "engine": {"speculative": {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}},
    "workload": {"spec": {"n": 500, "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
    "axes": [{"param": "num_speculative_tokens", "values": [0, 1, 2, 3, 5]},
             {"param": "acceptance_rate", "values": [0.5, 0.7, 0.9]}],
}
EXAMPLE_SWEEP_ITEM = {k: v for k, v in EXAMPLE_SWEEP.items() if k != "progress"}
EXAMPLE_SWEEP_QUEUED = {**EXAMPLE_SWEEP, "status": "queued", "progress": {
    **_EX_PROGRESS, "status": "queued", "points_done": 0, "fraction": 0.0, "elapsed_s": 0.0, "eta_s": None,
    "chunks": {"queued": 3}}}
EXAMPLE_SWEEP_CANCELLED = {**EXAMPLE_SWEEP, "status": "cancelled", "finished_at": "2026-05-01T12:00:40Z",
                           "progress": {**_EX_PROGRESS, "status": "cancelled", "eta_s": None}}
EXAMPLE_POINT = {
    "index": 0, "params": {"num_gpu_blocks": 1000},
    "metrics": {"throughput_tok_s": 1843.2, "ttft_p50_s": 0.21, "ttft_p99_s": 1.94, "preemptions": 37},
}
EXAMPLE_REPORT_ITEM = {"slug": "k3x9q2", "title": EXAMPLE_DEFINITION["name"], "created_at": _EX_TIME,
                       "url": "https://example.com/api/reports/k3x9q2/"}
EXAMPLE_REPORT = {"report": {"slug": "k3x9q2", "title": EXAMPLE_DEFINITION["name"], "created_at": _EX_TIME},
                  "definition": EXAMPLE_DEFINITION, "points": [EXAMPLE_POINT], "cliff_result": None}
EXAMPLE_SIMULATION = {
    "metrics": {"throughput_tok_s": 912.4, "ttft_p50_s": 0.08, "ttft_p99_s": 0.41, "preemptions": 0},
    "totals": {"requests": 200, "prompt_tokens": 102400, "output_tokens": 51200, "steps": 5400},
    "series": {"step": [0, 100, 200], "kv_usage": [0.0, 0.31, 0.48], "running": [0, 12, 19], "waiting": [0, 0, 2]},
    "config": {"num_gpu_blocks": 2000, "block_size": 16, "max_num_seqs": 256},
    "meta": {},
    "sampling": None,
    "sampling_source": None,
    "sampling_words": "",
}


def _ex(name, value, **kw):
    return OpenApiExample(name, value=value, response_only=True, **kw)


def _as_dict(data) -> dict:
    if not isinstance(data, dict):
        raise ValidationError({"non_field_errors": ["The body must be a JSON object."]})
    return dict(data)


def _definition_error(exc: defn.DefinitionError) -> APIException:
    return input_error_as_api_exception(exc)


class QuotaExceededApi(APIException):
    """The owner's queued and running work is at its quota (``KVP_USER_QUEUE_SECONDS``)."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "quota_exceeded"


def sweep_out(sweep: Sweep, request, *, progress: bool = True) -> dict:
    report = getattr(sweep, "report", None) if sweep.status == Sweep.Status.DONE else None
    out = {
        "id": sweep.pk, "name": sweep.name, "mode": sweep.mode, "status": sweep.status,
        "created_at": sweep.created_at, "finished_at": sweep.finished_at,
        "url": request.build_absolute_uri(f"/api/sweeps/{sweep.pk}/"),
        "report_url": request.build_absolute_uri(f"/reports/{report.slug}/") if report else None,
    }
    if progress:
        out["progress"] = selectors.sweep_progress(sweep=sweep)
    return out


class SweepListCreateApi(GenericAPIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]
    pagination_class = PageNumberPagination
    serializer_class = SweepOutSerializer

    @extend_schema(summary="Your sweeps, newest first", responses=SweepOutSerializer(many=True),
                   examples=[_ex("Sweep list", EXAMPLE_SWEEP_ITEM)])
    def get(self, request):
        pager = self.paginator
        page = pager.paginate_queryset(selectors.sweep_list(owner=request.user), request, view=self)
        return pager.get_paginated_response([sweep_out(s, request, progress=False) for s in page])

    @extend_schema(
        summary="Create a sweep (runs asynchronously on Celery workers)",
        request=DefinitionSerializer, responses={202: SweepOutSerializer},
        examples=[OpenApiExample("KV blocks sweep", value=EXAMPLE_DEFINITION, request_only=True),
                  OpenApiExample("Prefill/decode pool sizes", value=EXAMPLE_DISAGGREGATED_SWEEP, request_only=True),
                  OpenApiExample("Speculative decoding: draft tokens x acceptance", request_only=True,
                                 value=EXAMPLE_SPECULATIVE_DEFINITION),
                  _ex("Sweep accepted", EXAMPLE_SWEEP_QUEUED, status_codes=["202"])],
    )
    def post(self, request):
        data = _as_dict(request.data)
        try:
            sweep = services.sweep_create(owner=request.user, definition=data)
        except QuotaExceeded as exc:
            raise QuotaExceededApi(exc.errors["non_field_errors"][0]) from None
        except defn.DefinitionError as exc:
            raise _definition_error(exc) from None
        return Response(sweep_out(sweep, request), status=status.HTTP_202_ACCEPTED)


class SweepDetailApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(summary="Sweep status with progress (points done of total, elapsed, ETA)",
                   responses=SweepOutSerializer, examples=[_ex("Running sweep", EXAMPLE_SWEEP)])
    def get(self, request, sweep_id: int):
        sweep = selectors.sweep_get(sweep_id=sweep_id, user=request.user)
        return Response(sweep_out(sweep, request))


class SweepCancelApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(summary="Cancel a queued or running sweep", request=None, responses=SweepOutSerializer,
                   examples=[_ex("Cancelled sweep", EXAMPLE_SWEEP_CANCELLED)])
    def post(self, request, sweep_id: int):
        refuse_unknown_fields(request.data, ())  # takes no fields
        sweep = selectors.sweep_get(sweep_id=sweep_id, user=request.user)
        sweep = services.sweep_cancel(sweep=sweep, user=request.user)
        return Response(sweep_out(sweep, request))


class SweepResultsApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(
        summary="Points finished so far, with their metrics",
        parameters=[OpenApiParameter("series", OpenApiTypes.BOOL, description="include KV usage/running/waiting "
                                                                               "time series per point")],
        responses=inline_serializer("SweepResults", {
            "status": serializers.CharField(), "points": serializers.ListField(child=serializers.DictField()),
            "cliff_result": serializers.DictField(allow_null=True)}),
        examples=[_ex("Points so far", {"status": "running", "points": [EXAMPLE_POINT], "cliff_result": None})],
    )
    def get(self, request, sweep_id: int):
        sweep = selectors.sweep_get(sweep_id=sweep_id, user=request.user)
        with_series = request.query_params.get("series", "") in ("1", "true", "yes")
        return Response({"status": sweep.status,
                         "points": selectors.sweep_points(sweep=sweep, with_series=with_series),
                         "cliff_result": sweep.snapshot.get("cliff_result")})


class SimulationApi(APIView):
    permission_classes = [IsAuthenticated]
    heavy_throttle = True  # simulates inside the request: THROTTLE_HEAVY per user
    parser_classes = [CheckedJSONParser]

    @extend_schema(
        summary="One simulation: answered at once within 1 s of estimated work, else a job on a worker (202)",
        request=DefinitionSerializer,
        description="Priced first: within `KVP_INLINE_MAX_SECONDS` (1 s) it runs in the request and answers 200; "
                    "dearer, it runs on a worker and answers 202 with a job to poll at `GET /api/runs/{id}/` (its "
                    "`url`), whose `result` is then the 200's body.",
        responses={200: inline_serializer("SimulationResult", {
            "metrics": serializers.DictField(), "totals": serializers.DictField(),
            "series": serializers.DictField(allow_null=True), "config": serializers.DictField(),
            "meta": serializers.DictField(),
            **SAMPLING_FIELDS}), 202: RunOut},
        examples=[OpenApiExample("Engine only", request_only=True, value={
            "engine": {"num_gpu_blocks": 2000},
            "workload": {"spec": {"n": 200, "arrival": "poisson:4"}, "seed": 0}}),
                  OpenApiExample("1P3D on H100", request_only=True, value=EXAMPLE_DISAGGREGATED_SIMULATION),
                  _ex("Simulation result", EXAMPLE_SIMULATION, status_codes=["200"]),
                  _ex("Sent to a worker", EXAMPLE_RUN, status_codes=["202"])],
    )
    def post(self, request):
        from planner.runs.api import accepted, hand_over
        from planner.runs.services import runs_inline
        from planner.sweeps import simulation

        data = _as_dict(request.data)
        try:
            prepared = simulation.prepare(data, owner=request.user)
            price = prepared["price"]
            if not runs_inline(price.seconds):
                run = hand_over(request, kind="simulation", definition=data, price=price, what="This simulation",
                                advice="use fewer or shorter requests, or a sweep at /api/sweeps/ (its points run "
                                       "in parallel)")
                return accepted(run, request)
            pricing.check_sync(prepared["snapshot"], prepared["point"])
            return Response(simulation.answer(prepared, inline=True))
        except QuotaExceeded as exc:
            raise QuotaExceededApi(exc.errors["non_field_errors"][0]) from None
        except defn.DefinitionError as exc:
            raise _definition_error(exc) from None


class ReplicasSerializer(DefinitionSerializer):
    max_instances = serializers.IntegerField(required=False, min_value=1, max_value=64,
                                             help_text="largest replica count tried (default 16)")


class ReplicasApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]
    heavy_throttle = True  # simulates inside the request: THROTTLE_HEAVY per user

    @extend_schema(
        tags=["simulations"],
        summary="Replicas for this rate: the fewest instances meeting TTFT/ITL targets",
        description="A one-simulation definition (model + GPU, a generated workload with arrivals in seconds) "
                    "with `slo` (`ttft_s`, `itl_s`, `percentile` p50/p90/p99) and optionally `cluster` (routing, "
                    "router delay) and `max_instances`. Tries 1, 2, 4 ... then bisects; every count tried is "
                    "in `trials`. At most 2,000 requests. Priced first: within `KVP_INLINE_MAX_SECONDS` (1 s) "
                    "it runs in the request (200), dearer on a worker (202 with a job to poll at `GET /api/runs/{id}/`, "
                    "whose `result` is then the 200's body).",
        request=ReplicasSerializer,
        responses={200: inline_serializer("ReplicasResult", {
            "num_instances": serializers.IntegerField(allow_null=True), "percentile": serializers.CharField(),
            "trials": serializers.ListField(child=serializers.DictField()), "reason": serializers.CharField(),
            "num_gpu_blocks": serializers.IntegerField(), "cost_per_hour": serializers.FloatField(allow_null=True),
            **SAMPLING_FIELDS}), 202: RunOut},
        examples=[OpenApiExample("Llama 3.1 8B on H100 at 20 requests/s", request_only=True, value={
            "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
            "workload": {"spec": {"n": 400, "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
            "slo": {"ttft_s": 0.5, "itl_s": 0.05}, "max_instances": 8}),
                  _ex("Replicas answer", {"num_instances": 2, "percentile": "p90", "slo_ttft_s": 0.5,
                                          "slo_itl_s": 0.05, "routing": "round-robin", "max_instances": 8,
                                          "reason": "2 instances meet the SLOs; 1 does not", "trials": [],
                                          "requests": 400, "rate_per_s": 20, "num_gpu_blocks": 28276,
                                          "gpus_per_replica": 1, "cost_per_hour": None,
                                          "clock": "cost_model", "sampling": "top_k_top_p",
                                          "sampling_source": "model",
                                          "sampling_words": "top-k / top-p sampling (Llama 3.1 8B's "
                                                            "generation_config.json)"}, status_codes=["200"]),
                  _ex("Sent to a worker", {**EXAMPLE_RUN, "kind": "replicas"}, status_codes=["202"])],
    )
    def post(self, request):
        from planner.runs.api import accepted, hand_over
        from planner.runs.services import runs_inline
        from planner.sweeps.replicas import answer_replicas, check_replicas

        data = _as_dict(request.data)
        try:
            checked = check_replicas(data, owner=request.user)
            if runs_inline(checked["price"].seconds):
                return Response(answer_replicas(checked, inline=True))
            run = hand_over(request, kind="replicas", definition=data, price=checked["price"],
                            what=f"This replicas search (up to {checked['max_n']} instances)",
                            advice="use fewer or shorter requests or a lower max_instances")
            return accepted(run, request)
        except QuotaExceeded as exc:
            raise QuotaExceededApi(exc.errors["non_field_errors"][0]) from None
        except defn.DefinitionError as exc:
            raise _definition_error(exc) from None


class ReportListApi(GenericAPIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]
    pagination_class = PageNumberPagination

    @extend_schema(summary="Your reports", responses=inline_serializer("ReportItem", {
        "slug": serializers.CharField(), "title": serializers.CharField(), "created_at": serializers.DateTimeField(),
        "url": serializers.CharField()}, many=True), examples=[_ex("Report list", EXAMPLE_REPORT_ITEM)])
    def get(self, request):
        pager = self.paginator
        page = pager.paginate_queryset(selectors.report_list(owner=request.user), request, view=self)
        return pager.get_paginated_response([
            {"slug": r.slug, "title": r.title, "created_at": r.created_at,
             "url": request.build_absolute_uri(f"/api/reports/{r.slug}/")} for r in page])


class _IgnoreFormatParam(DefaultContentNegotiation):
    """``?format=csv|json`` names a download here, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ReportDetailApi(APIView):
    permission_classes = [AllowAny]
    parser_classes = [CheckedJSONParser]
    content_negotiation_class = _IgnoreFormatParam

    def get_permissions(self):
        return [IsAuthenticated()] if self.request.method == "DELETE" else [AllowAny()]

    @extend_schema(
        summary="A report (public): JSON by default, or ?format=csv|json as a download",
        parameters=[OpenApiParameter("format", OpenApiTypes.STR, enum=["csv", "json"])],
        responses={(200, "application/json"): OpenApiTypes.OBJECT, (200, "text/csv"): OpenApiTypes.STR},
        examples=[_ex("Report (JSON)", EXAMPLE_REPORT, media_type="application/json"),
                  _ex("Report (CSV)", "index,num_gpu_blocks,throughput_tok_s,ttft_p50_s\n0,1000,1843.2,0.21\n",
                      media_type="text/csv")],
    )
    def get(self, request, slug: str):
        report = selectors.report_get(slug=slug)
        fmt = request.query_params.get("format", "json")
        if fmt == "csv":
            resp = HttpResponse(exports.to_csv(report.snapshot), content_type="text/csv; charset=utf-8")
            resp["Content-Disposition"] = f'attachment; filename="report-{report.slug}.csv"'
            return resp
        if fmt != "json":
            raise ValidationError({"format": ["must be csv or json"]})
        if "format" in request.query_params:
            resp = HttpResponse(exports.to_json(report.snapshot, slug=report.slug, title=report.title),
                                content_type="application/json")
            resp["Content-Disposition"] = f'attachment; filename="report-{report.slug}.json"'
            return resp
        return Response({"report": {"slug": report.slug, "title": report.title, "created_at": report.created_at},
                         **report.snapshot,
                         "sampling_words": sampling_answer(report.snapshot.get("inputs"))["sampling_words"]})

    @extend_schema(summary="Delete your report", responses={204: None})
    def delete(self, request, slug: str):
        report = selectors.report_get(slug=slug)
        services.report_delete(report=report, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


__all__ = ["Report"]
