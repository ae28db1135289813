"""API routes for runs handed to the workers (mounted under ``/api/``)."""

from django.urls import path

from planner.runs import api

urlpatterns = [
    path("runs/<int:run_id>/", api.RunDetailApi.as_view(), name="api-run-detail"),
    path("runs/<int:run_id>/cancel/", api.RunCancelApi.as_view(), name="api-run-cancel"),
]
