"""Sizing pages: ``/`` (one deployment) and ``/compare/`` (2 to 4 GPUs side by side)."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("compare/", views.compare, name="sizing-compare"),
]
