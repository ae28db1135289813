"""API routes for day plans (mounted under ``/api/``)."""

from django.urls import path

from planner.dayplans import api

urlpatterns = [
    path("day-plans/", api.DayPlanListCreateApi.as_view(), name="api-day-plans"),
    path("day-plans/<int:plan_id>/", api.DayPlanDetailApi.as_view(), name="api-day-plan-detail"),
    path("day-plans/<int:plan_id>/cancel/", api.DayPlanCancelApi.as_view(), name="api-day-plan-cancel"),
    path("day-plans/<int:plan_id>/export/", api.DayPlanExportApi.as_view(), name="api-day-plan-export"),
]
