"""API routes for sweeps, simulations and reports (mounted under ``/api/``)."""

from django.urls import path

from planner.api import sweeps as api

urlpatterns = [
    path("sweeps/", api.SweepListCreateApi.as_view(), name="api-sweeps"),
    path("sweeps/<int:sweep_id>/", api.SweepDetailApi.as_view(), name="api-sweep-detail"),
    path("sweeps/<int:sweep_id>/cancel/", api.SweepCancelApi.as_view(), name="api-sweep-cancel"),
    path("sweeps/<int:sweep_id>/results/", api.SweepResultsApi.as_view(), name="api-sweep-results"),
    path("simulations/", api.SimulationApi.as_view(), name="api-simulations"),
    path("replicas/", api.ReplicasApi.as_view(), name="api-replicas"),
    path("reports/", api.ReportListApi.as_view(), name="api-reports"),
    path("reports/<str:slug>/", api.ReportDetailApi.as_view(), name="api-report-detail"),
]
