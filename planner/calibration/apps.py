from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    """Step-clock coefficients fitted on a user's own measurements (app label ``calibration``)."""

    name = "planner.calibration"
    label = "calibration"
    verbose_name = "Clock calibrations"
    default_auto_field = "django.db.models.BigAutoField"
