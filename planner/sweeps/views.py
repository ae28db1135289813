"""Pages: sweeps (owner only) and reports (public permalinks, owner-only delete)."""

from __future__ import annotations

from django import forms as dj_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from planner.models import Sweep
from planner.sweeps import definition as defn
from planner.sweeps import exports, selectors, services
from planner.sweeps.advice import cliff_sentence, detect_cliff
from planner.sweeps.figures import build_timeseries_figure, report_figures
from planner.sweeps.forms import SweepForm


@login_required
def sweep_list(request):
    sweeps = selectors.sweep_list(owner=request.user)[:200]
    return render(request, "planner/sweeps/list.html", {"nav": "sweeps", "sweeps": sweeps})


@login_required
@require_http_methods(["GET", "POST"])
def sweep_new(request):
    form = SweepForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            definition = form.to_definition()
            sweep = services.sweep_create(owner=request.user, definition=definition)
        except dj_forms.ValidationError as exc:
            for field, msgs in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, msgs)
        except defn.DefinitionError as exc:
            form.add_definition_errors(exc.errors)
        else:
            messages.success(request, f"Sweep started: {sweep.total_points} points in {sweep.num_chunks or 1} "
                                      f"batch(es).")
            return redirect("sweeps:detail", sweep_id=sweep.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "planner/sweeps/new.html", {"nav": "sweeps", "form": form}, status=status)


def _body_of(sweep: Sweep) -> dict:
    return {"inputs": sweep.snapshot, "points": selectors.sweep_points(sweep=sweep),
            "cliff_result": sweep.snapshot.get("cliff_result")}


@login_required
def sweep_detail(request, sweep_id: int):
    sweep = selectors.sweep_get(sweep_id=sweep_id, user=request.user)
    progress = selectors.sweep_progress(sweep=sweep)
    report = getattr(sweep, "report", None) if sweep.status == Sweep.Status.DONE else None
    figures = []
    if sweep.points_done and not report:
        figures = report_figures(_body_of(sweep))
    return render(request, "planner/sweeps/detail.html", {
        "nav": "sweeps", "sweep": sweep, "progress": progress, "report": report, "figures": figures})


@login_required
@require_POST
def sweep_cancel(request, sweep_id: int):
    sweep = selectors.sweep_get(sweep_id=sweep_id, user=request.user)
    services.sweep_cancel(sweep=sweep, user=request.user)
    messages.info(request, "Sweep cancelled.")
    return redirect("sweeps:detail", sweep_id=sweep.pk)


@login_required
def report_list(request):
    return render(request, "planner/reports/list.html", {"nav": "reports",
                                                         "reports": selectors.report_list(owner=request.user)})


def _point_index(request) -> int | None:
    try:
        return int(request.GET.get("point", ""))
    except ValueError:
        return None


def report_detail(request, slug: str):
    report = selectors.report_get(slug=slug)
    body = report.snapshot
    figures = services.report_figures_cached(report)
    point = _point_index(request)
    if point is not None:  # the over-time figure of another point, built on demand
        chosen = next((p for p in body.get("points") or [] if p["index"] == point), None)
        if chosen and chosen.get("series"):
            figures = [f for f in figures if f[0] != "timeline"] + [
                ["timeline", "Over time", build_timeseries_figure(chosen)]]
    sentence = cliff_sentence(body, detect_cliff(body))
    return render(request, "planner/reports/detail.html", {
        "nav": "reports", "report": report, "body": body, "figures": figures, "cliff_sentence": sentence,
        "advice": body.get("advice") or [], "table": exports.table_rows(body),
        "is_owner": request.user.is_authenticated and request.user.pk == report.owner_id,
        "inputs": body.get("inputs", {}),
    })


def report_download(request, slug: str, fmt: str):
    report = selectors.report_get(slug=slug)
    body = report.snapshot
    if fmt == "csv":
        resp = HttpResponse(exports.to_csv(body), content_type="text/csv; charset=utf-8")
    elif fmt == "json":
        resp = HttpResponse(exports.to_json(body, slug=report.slug, title=report.title),
                            content_type="application/json")
    else:
        sentence = cliff_sentence(body)
        html = exports.to_html(title=report.title, body=body,
                               figures=[(t, f) for _, t, f in services.report_figures_cached(report)],
                               sentences=[sentence] if sentence else [])
        resp = HttpResponse(html, content_type="text/html; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="report-{report.slug}.{fmt}"'
    return resp


@login_required
@require_POST
def report_delete(request, slug: str):
    report = selectors.report_get(slug=slug)
    services.report_delete(report=report, user=request.user)  # PermissionDenied -> 403 for others
    messages.info(request, "Report deleted.")
    return redirect("sweeps:report-list")
