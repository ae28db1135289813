"""Calibration pages (mounted at ``/``)."""

from django.urls import path

from planner.calibration import views

app_name = "calibration"

urlpatterns = [
    path("calibrations/", views.calibration_list, name="list"),
    path("calibrations/<int:calibration_id>/", views.calibration_detail, name="detail"),
    path("calibrations/runs/<int:run_id>/", views.calibration_run, name="run"),
]
