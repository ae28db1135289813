"""Calibration pages: upload a measurement (``/calibrations/``), a fit running on a worker
(``/calibrations/runs/<id>/``) and the fit (``/calibrations/<id>/``)."""

from __future__ import annotations

from django import forms as dj_forms
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from config.form_errors import attach_errors
from planner.calibration.forms import CalibrationForm
from planner.calibration.handover import calibration_or_run
from planner.calibration.models import CalibrationProfile
from planner.runs.models import Run
from simulator.base.errors import FieldError


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
                made = calibration_or_run(request, {
                    "name": d["name"], "model": d["model"], "gpu": d["gpu"], "text": text,
                    "tensor_parallel_size": d["tensor_parallel_size"], "request_rate": d.get("request_rate"),
                    "deployment": form.deployment()})
            except (dj_forms.ValidationError, FieldError) as exc:  # also the queue quota, a fit over the limit
                attach_errors(form, exc, by_name=True, paths="never")
            else:
                if isinstance(made, Run):  # priced over KVP_INLINE_MAX_SECONDS: fitted on a worker
                    return redirect("calibration:run", run_id=made.pk)
                return redirect("calibration:detail", calibration_id=made.pk)
    rows = CalibrationProfile.objects.filter(owner=request.user).select_related("model", "gpu")[:100]
    return render(request, "planner/calibration/list.html", {"form": form, "rows": rows, "nav": "replicas"})


@login_required
def calibration_run(request, run_id: int):
    """A fit sent to a worker: its progress (the box polls ``/api/runs/{id}/`` and reloads when it ends), then the
    calibration's page once it is stored, or its error."""
    from planner.runs import selectors as run_selectors

    run = run_selectors.run_get(run_id=run_id, user=request.user, token=None)
    if run.kind != Run.Kind.CALIBRATION:
        raise Http404("No such calibration run.")
    if run.status == Run.Status.DONE:
        return redirect("calibration:detail", calibration_id=run.result["id"])
    return render(request, "planner/calibration/run.html", {
        "run": run, "progress": run_selectors.run_progress(run), "status_url": run_selectors.status_path(run),
        "name": run.definition.get("name"), "nav": "replicas"})


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
