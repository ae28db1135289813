"""Calibration pages: upload a measurement (``/calibrations/``) and see the fit (``/calibrations/<id>/``)."""

from __future__ import annotations

from django import forms as dj_forms
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from planner.calibration.forms import CalibrationForm
from planner.calibration.models import CalibrationProfile
from planner.calibration.services import create_calibration


@login_required
@require_http_methods(["GET", "POST"])
def calibration_list(request):
    form = CalibrationForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            text = d["file"].read().decode("utf-8")
        except UnicodeDecodeError:
            form.add_error("file", "must be UTF-8 text")
        else:
            try:
                row = create_calibration(request.user, name=d["name"], model=d["model"], gpu=d["gpu"], text=text,
                                         tensor_parallel_size=d["tensor_parallel_size"],
                                         request_rate=d.get("request_rate"), deployment=form.deployment())
            except dj_forms.ValidationError as exc:
                for field, msgs in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, msgs)
            else:
                return redirect("calibration:detail", calibration_id=row.pk)
    rows = CalibrationProfile.objects.filter(owner=request.user).select_related("model", "gpu")[:100]
    return render(request, "planner/calibration/list.html", {"form": form, "rows": rows, "nav": "replicas"})


def _figure(fit: dict) -> dict:
    """Measured against predicted (default clock, fitted clock) for TTFT, ITL and E2E, in ms."""
    from planner.calibration.figures import measured_vs_predicted

    return measured_vs_predicted(fit)


@login_required
def calibration_detail(request, calibration_id: int):
    row = get_object_or_404(CalibrationProfile.objects.select_related("model", "gpu"), pk=calibration_id,
                            owner=request.user)
    fit = row.fit
    rows = [{"metric": label, "measured": fit["measured"][k] * 1e3, "before": fit["predicted_before"][k] * 1e3,
             "after": fit["predicted"][k] * 1e3, "err_before": fit["error_before_pct"][k],
             "err_after": fit["error_pct"][k]} for k, label in (("ttft_s", "TTFT"), ("itl_s", "ITL"),
                                                                 ("e2e_s", "E2E"))]
    return render(request, "planner/calibration/detail.html", {
        "row": row, "fit": fit, "rows": rows, "figure": _figure(fit),
        "fitted": sorted(fit["fitted"].items()), "nav": "replicas"})
