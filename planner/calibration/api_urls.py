"""API routes of calibrations (mounted under ``/api/``)."""

from django.urls import path

from planner.calibration import api

urlpatterns = [
    path("calibrations/", api.CalibrationListCreateApi.as_view(), name="api-calibrations"),
    path("calibrations/<int:calibration_id>/", api.CalibrationDetailApi.as_view(), name="api-calibration-detail"),
]
