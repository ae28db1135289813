"""Runs handed to the workers over the API (issue 37; docs/api.md, "Long runs: 202 and a job to poll").

* ``POST /api/simulations/``, ``POST /api/replicas/`` and ``POST /api/calibrations/`` answer 202 with a job
  (:func:`accepted`) when the run is priced over ``KVP_INLINE_MAX_SECONDS``;
* ``GET /api/runs/{id}/``: the job's status and progress, and once done its ``result``, the body the
  synchronous answer would have had (``?token=`` for a run made without signing in, from its ``url``);
* ``POST /api/runs/{id}/cancel/`` (the owner).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from config.parsers import CheckedJSONParser
from config.strict_input import refuse_unknown_fields
from config.throttling import client_key
from planner.runs import selectors, services
from planner.sweeps import pricing

EXAMPLE_RUN = {
    "id": 7, "kind": "simulation", "status": "queued",
    "progress": {"status": "queued", "fraction": 0.0, "elapsed_s": None, "eta_s": 4.2, "price_s": 4.2,
                 "attempts": 0, "error": ""},
    "created_at": "2026-05-01T12:00:00Z", "finished_at": None, "url": "https://example.com/api/runs/7/",
    "result": None, "error": None}

RunOut = inline_serializer("RunOut", {
    "id": serializers.IntegerField(), "kind": serializers.CharField(), "status": serializers.CharField(),
    "progress": serializers.DictField(), "created_at": serializers.DateTimeField(),
    "finished_at": serializers.DateTimeField(allow_null=True), "url": serializers.CharField(),
    "result": serializers.DictField(allow_null=True, help_text="once done: the body the synchronous answer "
                                                               "would have had"),
    "error": serializers.CharField(allow_null=True)})


def hand_over(request, *, kind: str, definition: Any, price: pricing.Price, what: str, advice: str,
              field: str = "workload"):
    """Check a run priced over the inline bound against the chunk limit, store it and send it to the workers;
    raises :class:`simulator.batch.OverBudget` (the one input error: 400 at ``field``) or
    :class:`planner.jobs.QuotaExceeded`."""
    pricing.check_worker_run(price, what=what, advice=advice, field=field)
    user = request.user if request.user.is_authenticated else None
    return services.run_create(kind=kind, definition=definition, price_s=price.seconds, owner=user,
                               client=client_key(request))


def accepted(run, request) -> Response:
    """202 with the job (and its status URL in ``Location``)."""
    body = selectors.run_out(run, request)
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


class RunDetailApi(APIView):
    permission_classes = [AllowAny]  # a run made without signing in is reached by its token

    @extend_schema(
        summary="A run handed to the workers: status, progress and, once done, its result",
        parameters=[OpenApiParameter("token", str, description="a run made without signing in: the token in "
                                                                  "its url")],
        responses=RunOut, tags=["simulations"],
        examples=[OpenApiExample("Queued", value=EXAMPLE_RUN, response_only=True)])
    def get(self, request, run_id: int):
        run = selectors.run_get(run_id=run_id, user=request.user, token=request.query_params.get("token"))
        return Response(selectors.run_out(run, request))


class RunCancelApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [CheckedJSONParser]

    @extend_schema(summary="Cancel a queued or running run", request=None, responses=RunOut, tags=["simulations"],
                   examples=[OpenApiExample("Cancelled", response_only=True, value={
                       **EXAMPLE_RUN, "status": "cancelled", "finished_at": "2026-05-01T12:00:03Z",
                       "progress": {**EXAMPLE_RUN["progress"], "status": "cancelled", "eta_s": None}})])
    def post(self, request, run_id: int):
        refuse_unknown_fields(request.data, ())  # takes no fields
        run = selectors.run_get(run_id=run_id, user=request.user, token=None)
        return Response(selectors.run_out(services.run_cancel(run=run, user=request.user), request))
