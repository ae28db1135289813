"""Catalog pages, mounted at ``/catalog/`` (namespace ``gpuprofiles``)."""

from django.urls import path

from . import views

app_name = "gpuprofiles"

urlpatterns = [
    path("", views.index, name="index"),
    path("mine/", views.mine, name="mine"),
    path("models/", views.model_list, name="model-list"),
    path("models/import/", views.model_import, name="model-import"),
    path("models/<slug:slug>/", views.model_detail, name="model-detail"),
    path("models/<slug:slug>/edit/", views.model_edit, name="model-edit"),
    path("models/<slug:slug>/delete/", views.model_delete, name="model-delete"),
    path("models/<slug:slug>/copy/", views.model_copy, name="model-copy"),
    path("gpus/", views.gpu_list, name="gpu-list"),
    path("gpus/new/", views.gpu_create, name="gpu-create"),
    path("gpus/<slug:slug>/", views.gpu_detail, name="gpu-detail"),
    path("gpus/<slug:slug>/edit/", views.gpu_edit, name="gpu-edit"),
    path("gpus/<slug:slug>/delete/", views.gpu_delete, name="gpu-delete"),
    path("gpus/<slug:slug>/copy/", views.gpu_copy, name="gpu-copy"),
]
