"""Planner API routes (sizing, simulations, sweeps, reports)."""

from django.urls import include, path

urlpatterns = [
    path("", include("planner.api.sizing_urls")),
    path("", include("planner.api.sweep_urls")),
    path("", include("planner.search.api_urls")),
    path("", include("planner.calibration.api_urls")),
    path("", include("planner.dayplans.api_urls")),
    path("", include("planner.runs.api_urls")),
]
