"""API routes for deployment searches (mounted under ``/api/``)."""

from django.urls import path

from planner.search import api

urlpatterns = [
    path("searches/", api.SearchListCreateApi.as_view(), name="api-searches"),
    path("searches/<int:search_id>/", api.SearchDetailApi.as_view(), name="api-search-detail"),
    path("searches/<int:search_id>/cancel/", api.SearchCancelApi.as_view(), name="api-search-cancel"),
    path("searches/reports/<str:slug>/", api.SearchReportApi.as_view(), name="api-search-report"),
]
