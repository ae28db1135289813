"""Sweep and report pages (mounted at ``/``)."""

from django.urls import path

from planner.sweeps import views

app_name = "sweeps"

urlpatterns = [
    path("sweeps/", views.sweep_list, name="list"),
    path("sweeps/new/", views.sweep_new, name="new"),
    path("sweeps/<int:sweep_id>/", views.sweep_detail, name="detail"),
    path("sweeps/<int:sweep_id>/cancel/", views.sweep_cancel, name="cancel"),
    path("sweeps/<int:sweep_id>/run-again/", views.sweep_rerun, name="rerun"),
    path("reports/", views.report_list, name="report-list"),
    path("reports/<str:slug>/", views.report_detail, name="report"),
    path("reports/<str:slug>/download.<str:fmt>", views.report_download, name="report-download"),
    path("reports/<str:slug>/delete/", views.report_delete, name="report-delete"),
    path("reports/<str:slug>/run-again/", views.report_rerun, name="report-rerun"),
]
