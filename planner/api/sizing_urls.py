"""Sizing API: ``POST /api/plan/``."""

from django.urls import path

from .sizing import PlanCreateApi

urlpatterns = [
    path("plan/", PlanCreateApi.as_view(), name="api-plan"),
]
