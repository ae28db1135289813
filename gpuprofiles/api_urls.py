"""Catalog API routes, mounted under ``/api/`` (version 1)."""

from django.urls import path

from . import api

urlpatterns = [
    path("models/", api.ModelListApi.as_view(), name="api-model-list"),
    path("models/import/", api.ModelImportApi.as_view(), name="api-model-import"),
    path("models/<slug:slug>/", api.ModelDetailApi.as_view(), name="api-model-detail"),
    path("models/<slug:slug>/copy/", api.ModelCopyApi.as_view(), name="api-model-copy"),
    path("gpus/", api.GpuListApi.as_view(), name="api-gpu-list"),
    path("gpus/<slug:slug>/", api.GpuDetailApi.as_view(), name="api-gpu-detail"),
    path("gpus/<slug:slug>/copy/", api.GpuCopyApi.as_view(), name="api-gpu-copy"),
]
