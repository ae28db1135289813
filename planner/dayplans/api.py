"""Day plans over the API (docs/autoscaling.md, "In the planner").

* ``POST /api/day-plans/`` create (asynchronous on the workers, one chunk after another; 202 with the status
  URL); ``GET`` your plans, newest first.
* ``GET /api/day-plans/{id}/`` status, progress (chunks and simulated hours) and, once answered, the answer:
  GPU-hours and cost against the fixed peak, attainment overall and per hour, the worst hours, the fleet over
  time. A cancelled plan answers the hours of its finished chunks (``answer.partial``).
* ``POST /api/day-plans/{id}/cancel/``.
* ``GET /api/day-plans/{id}/export/?format=csv|json``: the hours as CSV, or the whole plan as JSON.

Errors are ``{"errors": {field: [messages]}}`` (``planner.api.errors``).
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from config.parsers import CheckedJSONParser
from config.strict_input import refuse_unknown_fields
from planner.api.sweeps import QuotaExceededApi
from planner.dayplans import exports, selectors, services
from planner.dayplans.models import DayPlan
from planner.errors import InputError
from planner.jobs import QuotaExceeded
from planner.search.api import _IgnoreFormatParam

#: The request of docs/autoscaling.md's "In the planner" (examples/C.json's engine, a burst of traffic).
EXAMPLE_DAY_PLAN = {
    "name": "A burst on an HPA",
    "engine": {"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 128, "max_num_batched_tokens": 2048,
               "enable_prefix_caching": True, "enable_chunked_prefill": True,
               "step_time_model": {"base_s": 0.012, "per_token_s": 2.1e-05, "per_req_s": 0.0001}},
    "workload": {"spec": {"n": 3000, "prompt": "normal:256,64", "output": "normal:128,32",
                          "arrival": {"kind": "piecewise", "segments": [[3, 300], [20, 120], [3, 300]], "unit": "s"}},
                 "seed": 0},
    "policy": {"kind": "hpa", "metric": "running", "target": 32, "max_replicas": 6},
    "cold_start": {"seconds": 45},
    "gpus_per_replica": 1, "price_per_gpu_hour": 2.0,
    "slo": {"ttft_s": 2, "tpot_s": 0.05},
    "chunk_s": 300, "overlap_s": 120,
}
#: A model on a catalog GPU over a day of hourly rates (requests per hour), its price from the catalog.
EXAMPLE_DAY_PLAN_MODEL = {
    "name": "Llama 3.1 8B on an H100 over a day",
    "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
    "deployment": {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.9},
    "workload": {"spec": {"n": 200000, "prompt": "normal:1024,256", "output": "normal:256,64",
                          "arrival": "hourly:" + ",".join(str(r) for r in [3000] * 7 + [12000] * 12 + [3000] * 5)},
                 "seed": 0},
    "policy": {"kind": "scheduled", "replicas": [1] * 7 + [3] * 12 + [1] * 5, "lead_s": 180},
    "slo": {"ttft_s": 2, "tpot_s": 0.05},
}


class DayPlanSerializer(serializers.Serializer):
    """A day plan definition (docs/autoscaling.md, "In the planner")."""

    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    model = serializers.JSONField(required=False, help_text="catalog slug, id of your profile, or inline spec "
                                  "(with gpu; or give engine)")
    gpu = serializers.JSONField(required=False, help_text="catalog slug, id of your profile, or inline spec")
    deployment = serializers.JSONField(required=False, help_text="tensor_parallel_size, pipeline_parallel_size, "
                                       "gpu_memory_utilization, max_num_seqs, ... (as for a sweep)")
    engine = serializers.JSONField(required=False, help_text="an engine configuration (examples/C.json) instead of "
                                   "a model and a GPU, or knobs over the sized one")
    workload = serializers.JSONField(help_text='{"spec": {"n": ..., "arrival": "hourly:R0,...,R23"}, "seed": 0} '
                                     '(arrivals in seconds; hourly rates in requests per hour) or {"trace": "...", '
                                     '"format": "auto"}')
    policy = serializers.JSONField(help_text='{"kind": "fixed" | "scheduled" | "hpa" | "oracle", ...} '
                                   "(docs/autoscaling.md, Policies)")
    cold_start = serializers.JSONField(required=False, help_text='{"seconds": 110} or {"weights_gib": 35, '
                                       '"container_s": 25, "storage_gib_per_s": 1, "compile_s": 30, '
                                       '"graph_capture_s": 20} (default: the model\'s weights per GPU)')
    routing = serializers.ChoiceField(choices=["least-loaded", "round-robin"], required=False)
    gpus_per_replica = serializers.IntegerField(required=False, help_text="default: TP x PP")
    price_per_gpu_hour = serializers.FloatField(required=False, help_text="USD (default: the catalog GPU's price)")
    slo = serializers.JSONField(required=False, help_text='{"ttft_s": 2, "tpot_s": 0.05}')
    chunk_s = serializers.FloatField(required=False, help_text="seconds per chunk (default 3600)")
    overlap_s = serializers.FloatField(required=False, help_text="warm-up and cool-down of a chunk (default 300, or the policy's longest stabilization window)")
    speculate = serializers.BooleanField(required=False, help_text="a second chain of chunks from the middle of "
                                         "the day, kept where it meets the first (default true; same answer)")


def plan_out(plan: DayPlan, request, *, answer: bool = True) -> dict:
    base = f"/api/day-plans/{plan.pk}/"
    out = {"id": plan.pk, "name": plan.name, "status": plan.status, "created_at": plan.created_at,
           "finished_at": plan.finished_at, "url": request.build_absolute_uri(base),
           "page_url": request.build_absolute_uri(f"/plans/day/{plan.pk}/"),
           "progress": selectors.dayplan_progress(plan=plan)}
    if answer:
        out["csv_url"] = request.build_absolute_uri(f"{base}export/?format=csv") if plan.answer else None
        out["answer"] = plan.answer
        out["words"] = exports.answer_words(plan.answer, plan.snapshot["day"])
        out["inputs"] = exports.plan_inputs(plan.snapshot)
    return out


class DayPlanListCreateApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(summary="Your day plans, newest first", responses=None, operation_id="day_plans_list")
    def get(self, request):
        return Response([plan_out(p, request, answer=False) for p in selectors.dayplan_list(owner=request.user)[:200]])

    @extend_schema(summary="Replay a day of traffic against an autoscaling policy and price it (asynchronous, "
                   "in chunks)", request=DayPlanSerializer, responses={202: None},
                   examples=[OpenApiExample("A burst on an HPA", value=EXAMPLE_DAY_PLAN, request_only=True),
                             OpenApiExample("A day of hourly rates on a schedule", value=EXAMPLE_DAY_PLAN_MODEL,
                                            request_only=True)])
    def post(self, request):
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        try:
            plan = services.dayplan_create(owner=request.user, definition=dict(request.data))
        except QuotaExceeded as exc:
            raise QuotaExceededApi(exc.errors["non_field_errors"][0]) from None
        except InputError:
            raise  # 400 (or 404 for a profile the user may not see), in the error shape
        return Response(plan_out(plan, request), status=status.HTTP_202_ACCEPTED)


class DayPlanDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Day plan status, progress and (when answered) the answer", responses=None)
    def get(self, request, plan_id: int):
        return Response(plan_out(selectors.dayplan_get(plan_id=plan_id, user=request.user), request))


class DayPlanCancelApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(summary="Cancel a queued or running day plan (finished chunks are kept)", request=None,
                   responses=None)
    def post(self, request, plan_id: int):
        refuse_unknown_fields(request.data, ())  # takes no fields
        plan = selectors.dayplan_get(plan_id=plan_id, user=request.user)
        return Response(plan_out(services.dayplan_cancel(plan=plan, user=request.user), request))


class DayPlanExportApi(APIView):
    permission_classes = [IsAuthenticated]
    content_negotiation_class = _IgnoreFormatParam

    @extend_schema(summary="A day plan's hours as CSV (?format=csv) or the whole plan as JSON (?format=json)",
                   responses=None)
    def get(self, request, plan_id: int):
        plan = selectors.dayplan_get(plan_id=plan_id, user=request.user)
        fmt = request.query_params.get("format", "json")
        if fmt not in ("csv", "json"):
            raise ValidationError({"format": ["must be 'json' or 'csv'"]})
        if fmt == "csv":
            if not plan.answer:
                raise ValidationError({"format": [f"the plan has no hours to download yet (status: {plan.status})"]})
            resp = HttpResponse(exports.to_csv(plan), content_type="text/csv; charset=utf-8")
        else:
            resp = HttpResponse(exports.to_json(plan), content_type="application/json")
        resp["Content-Disposition"] = f'attachment; filename="day-plan-{plan.pk}.{fmt}"'
        return resp
