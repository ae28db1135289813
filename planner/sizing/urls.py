"""Sizing pages: ``/`` (one deployment), ``/compare/`` (2 to 4 GPUs side by side), ``/replicas/`` (replicas
for a request rate; ``/replicas/runs/{id}/`` one that ran on a worker)."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("compare/", views.compare, name="sizing-compare"),
    path("replicas/", views.replicas, name="replicas"),
    path("replicas/runs/<int:run_id>/", views.replicas_run, name="replicas-run"),
]
