"""A named calibration: roofline coefficients fitted for one (model, GPU, TP) on a user's measurements."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class CalibrationProfile(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="calibrations")
    name = models.CharField(max_length=120)
    model = models.ForeignKey("gpuprofiles.ModelProfile", on_delete=models.PROTECT, related_name="+")
    gpu = models.ForeignKey("gpuprofiles.GpuProfile", on_delete=models.PROTECT, related_name="+")
    tensor_parallel_size = models.PositiveIntegerField(default=1)
    deployment = models.JSONField(default=dict, help_text="DeploymentSpec fields the measured run used.")
    source_format = models.CharField(max_length=20, help_text="vllm-bench, csv or prometheus.")
    measurement = models.JSONField(default=dict, help_text="What the file said (run-wide means).")
    coefficients = models.JSONField(default=dict, help_text="RooflineCoefficients after the fit.")
    fit = models.JSONField(default=dict, help_text="Fitted values, errors before/after, measured vs predicted.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="calibration_unique_name_per_owner")]

    def __str__(self) -> str:
        return self.name
