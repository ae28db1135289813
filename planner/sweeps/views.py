"""Pages: sweeps (owner only) and reports (public permalinks, owner-only delete)."""

from __future__ import annotations

import math

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
from planner.sweeps.figures import (
    METRIC_LABELS,
    axis_label,
    axis_title,
    build_timeseries_figure,
    metric_title,
    report_figures,
)
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
    # An invalid form is shown again with its errors at the fields, as a normal page (200): a 4xx on a
    # page the person is looking at would be logged by the browser as a failed load.
    return render(request, "planner/sweeps/new.html", {"nav": "sweeps", "form": form})


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


#: The report page's points table: these metrics, where any point has them.
TABLE_METRICS = ("preemptions_per_request", "ttft_p50_steps", "ttft_p99_steps", "ttft_p99_s", "throughput_tok_s",
                 "mean_kv_usage", "prefix_cache_hit_rate", "cost_per_m_output_tokens")
_PERCENT = {"mean_kv_usage", "peak_kv_usage", "prefix_cache_hit_rate"}  # fractions shown as %


def _cell(value, *, percent: bool = False) -> str:
    """A table cell for reading: thousands separators, 3 significant digits below 1,000, fractions as %."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str):
        return value
    if percent:
        return f"{value * 100:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def points_table(body: dict, arrival_unit: str = "step") -> dict:
    """The report page's table: a column per swept knob and per metric, each ``{"label", "unit"}``.

    Rows are ``{"index", "cells"}`` with numbers formatted for reading (fractions as %).
    """
    points = body.get("points") or []
    inputs = body.get("inputs") or {}
    params: list[str] = []
    for p in points:
        params.extend(k for k in p["params"] if k not in params)
    wanted = list(TABLE_METRICS)
    if inputs.get("slo") or "num_instances" in params:  # the latencies the targets are about, and the balance
        pct = (inputs.get("slo") or {}).get("percentile", "p90")
        at = wanted.index("ttft_p99_s") + 1
        wanted[at:at] = [f"ttft_{pct}_s", f"itl_{pct}_s", "request_imbalance"]
    if "cpu_tier_gib" in params:
        wanted.append("cpu_tier_hit_tokens")
    wanted = list(dict.fromkeys(wanted))
    metrics = [m for m in wanted if any(p["metrics"].get(m) is not None for p in points)]
    header = [dict(zip(("label", "unit"), axis_label(k, arrival_unit))) for k in params]
    header += [dict(zip(("label", "unit"), METRIC_LABELS.get(m, (m, "")))) for m in metrics]
    rows = [{"index": p["index"],
             "cells": [_cell(p["params"].get(k)) for k in params]
             + [_cell(p["metrics"].get(m), percent=m in _PERCENT) for m in metrics]} for p in points]
    return {"header": header, "rows": rows}


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
    inputs = body.get("inputs", {})
    arrival_unit = (inputs.get("workload") or {}).get("arrival_unit", "step")
    axes = [{"title": axis_title(a["param"], arrival_unit),
             "values": ", ".join(_cell(v) for v in a.get("values") or [])} for a in inputs.get("axes") or []]
    cliff = inputs.get("cliff")
    cliff_titles = {"param": axis_title(cliff["param"], arrival_unit), "metric": metric_title(cliff["metric"])} \
        if cliff else None
    return render(request, "planner/reports/detail.html", {
        "nav": "reports", "report": report, "body": body, "figures": figures, "cliff_sentence": sentence,
        "advice": body.get("advice") or [],
        "table": points_table(body, arrival_unit), "axes": axes, "cliff_titles": cliff_titles,
        "is_owner": request.user.is_authenticated and request.user.pk == report.owner_id,
        "inputs": body.get("inputs", {}),
        "slo_ms": {k: f"{v * 1000:,.4g}" for k, v in ((k.removesuffix("_s"), v) for k, v in (
            inputs.get("slo") or {}).items() if k.endswith("_s")) if v is not None},
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
