"""Deployment searches over the API.

* ``POST /api/searches/`` create (asynchronous on the workers; 202 with the status URL); ``GET`` own list.
* ``GET /api/searches/{id}/`` status, progress and, once done, the result and the report link.
* ``POST /api/searches/{id}/cancel/``.
* ``GET /api/searches/reports/{slug}/`` public report (``?format=csv|json``).

Errors are ``{"errors": {field: [messages]}}`` (``planner.api.errors``).
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from config.parsers import CheckedJSONParser
from config.strict_input import refuse_unknown_fields
from planner.api.sweeps import QuotaExceededApi
from planner.jobs import QuotaExceeded
from planner.sampling_words import sampling_answer
from planner.search import disaggregated as sdis
from planner.search import exports, selectors, services
from planner.search.models import Search
from planner.search.seeds import seed_words
from planner.sweeps import definition as defn
from simulator.clock.cost_model import DEFAULT_SAMPLER_PATH, SAMPLER_PATHS

EXAMPLE_SEARCH = {
    "name": "Llama 3.1 8B at 20 requests/s",
    "model": "llama-3-1-8b",
    "workload": {"spec": {"n": 2000, "prompt": "normal:1024,256", "output": "normal:256,64",
                          "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
    "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5},
                        {"metric": "itl", "percentile": "p90", "max_s": 0.05}], "min_goodput": 0.9},
    "space": {"gpus": ["h100-sxm5-80gb", "l40s", "l4"], "tensor_parallel": [1, 2],
              "precisions": ["bf16", "fp8", "int4"], "max_num_seqs": [64, 256], "max_replicas": 16},
}
#: The same search that also compares the answer with its prefill/decode (xPyD) splits.
EXAMPLE_SEARCH_XPYD = {
    "name": "Llama 3.1 8B at 20 requests/s: aggregated or xPyD?",
    "model": "llama-3-1-8b",
    "workload": {"spec": {"n": 600, "prompt": "normal:2048,512", "output": "normal:256,64",
                          "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
    "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.3},
                        {"metric": "itl", "percentile": "p90", "max_s": 0.012}]},
    "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "precisions": ["bf16"], "max_replicas": 8,
              "routing": "least-loaded"},
    "disaggregated": sdis.EXAMPLE,
}


class SearchDefinitionSerializer(serializers.Serializer):
    """A search definition (docs/search.md)."""

    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    model = serializers.JSONField(help_text="catalog slug, id of your profile, or inline spec")
    workload = serializers.JSONField(help_text='{"spec": {...}, "seed": 0} (arrivals in seconds) or {"trace": "..."}')
    slo = serializers.JSONField(help_text='{"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}], '
                                '"min_goodput": 0.9}')
    space = serializers.JSONField(required=False, help_text="GPUs, TP/PP, precisions, KV dtypes, max_num_seqs, "
                                  "max_replicas (default: every priced catalog GPU, TP 1-8, bf16); speculative: settings to try, each "
                                  "null (without), \"eagle:3:0.7\" or {method, num_speculative_tokens, "
                                  "acceptance_rate} (methods eagle, eagle3, mtp, ngram); sampling: the "
                                  f"requests' sampler path, one of {', '.join(SAMPLER_PATHS)} (absent or null, the "
                                  "default: the model's own, from its generation_config.json; "
                                  f"{DEFAULT_SAMPLER_PATH} when the planner does not know it); data_parallel "
                                  "(DP sizes, default [1]) and expert_parallel ([false, true], default [false]): a "
                                  "replica is one DP group of TP x PP x DP GPUs; max_gpus: the GPUs there are (an "
                                  "answer's replicas x GPUs per replica within it). A DP / EP dimension vLLM would "
                                  "refuse for the model is a 400 at its field (docs/moe_parallelism.md)")
    check_seeds = serializers.IntegerField(
        required=False, help_text="how many more traffic seeds the answer, and one replica fewer, are simulated on "
        "once the search is done (default 3; 0 to skip; at most 10); the result's 'seed_check' says on how many each "
        "meets the SLO ('stable', 'words'); a trace workload is one draw and is not checked. docs/search.md")
    disaggregated = serializers.JSONField(
        required=False, help_text="optional: true or {\"link_gbps\": 50 (GB/s per decode instance, > 0), "
        "\"link_latency_s\": 0.0001 (0 to 10), \"routing\": both pools' router (default space.routing), "
        "\"prefill_instances\": [1, 2], \"decode_instances\": [2, 3] (pool sizes to try, each 1 to "
        "space.max_replicas - 1; default every split)}. After the answer (N replicas of one shape), its N and N - 1 "
        "instances are split into x prefill and y decode instances and judged against the same SLO; the result's "
        "'disaggregated' holds the aggregated answer, every split, the best split and a verdict (which wins at "
        "equal GPUs and cost, and why); \"pools\": true also searches a prefill pool and a decode pool of their own "
        "shapes and counts among the space (needs a TTFT target; the result's 'disaggregated_pools': each pair "
        "checked, the best and a verdict against the aggregated answer). docs/disaggregated_serving.md")


def search_out(search: Search, request, *, result: bool = True) -> dict:
    done = search.status == Search.Status.DONE
    out = {"id": search.pk, "name": search.name, "status": search.status, "created_at": search.created_at,
           "finished_at": search.finished_at, "url": request.build_absolute_uri(f"/api/searches/{search.pk}/"),
           "report_url": request.build_absolute_uri(f"/searches/r/{search.slug}/") if done else None,
           "progress": selectors.search_progress(search=search), **sampling_answer(search.snapshot)}
    if result:
        out["result"] = exports.result_with_launch(search) if done else None
        out["seed_check_words"] = seed_words(search.result, search.snapshot) if done else None
    return out


class SearchListCreateApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(summary="Your deployment searches, newest first", responses=None, operation_id="searches_list")
    def get(self, request):
        return Response([search_out(s, request, result=False) for s in selectors.search_list(owner=request.user)[:200]])

    @extend_schema(summary="Search the cheapest deployment meeting an SLO (asynchronous on the workers)",
                   request=SearchDefinitionSerializer, responses={202: None},
                   examples=[OpenApiExample("Search", value=EXAMPLE_SEARCH, request_only=True),
                             OpenApiExample("Search with prefill/decode splits (xPyD)", value=EXAMPLE_SEARCH_XPYD,
                                            request_only=True)])
    def post(self, request):
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        try:
            search = services.search_create(owner=request.user, definition=dict(request.data))
        except QuotaExceeded as exc:
            raise QuotaExceededApi(exc.errors["non_field_errors"][0]) from None
        except defn.DefinitionError as exc:
            raise ValidationError(exc.errors) from None
        return Response(search_out(search, request), status=status.HTTP_202_ACCEPTED)


class SearchDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Search status, progress and (when done) the answer", responses=None)
    def get(self, request, search_id: int):
        return Response(search_out(selectors.search_get(search_id=search_id, user=request.user), request))


class SearchCancelApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(summary="Cancel a queued or running search", request=None, responses=None)
    def post(self, request, search_id: int):
        refuse_unknown_fields(request.data, ())  # takes no fields
        search = selectors.search_get(search_id=search_id, user=request.user)
        return Response(search_out(services.search_cancel(search=search, user=request.user), request))


class _IgnoreFormatParam(DefaultContentNegotiation):
    """``?format=csv|json`` names a download here, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class SearchReportApi(APIView):
    permission_classes = [AllowAny]
    content_negotiation_class = _IgnoreFormatParam

    @extend_schema(summary="A finished search's report (public; ?format=csv|json)", responses=None)
    def get(self, request, slug: str):
        search = selectors.search_report(slug=slug)
        fmt = request.query_params.get("format", "json")
        if fmt == "csv":
            resp = HttpResponse(exports.to_csv(search), content_type="text/csv; charset=utf-8")
            resp["Content-Disposition"] = f'attachment; filename="search-{slug}.csv"'
            return resp
        if fmt != "json":
            raise ValidationError({"format": ["must be 'json' or 'csv'"]})
        return HttpResponse(exports.to_json(search), content_type="application/json")
