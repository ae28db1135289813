"""Pages: sweeps (owner only) and reports (public permalinks, owner-only delete)."""

from __future__ import annotations

import math
import time

from django import forms as dj_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from config.form_errors import attach_errors
from config.json_input import object_id
from planner.calibration import fields as calibration_fields
from planner.models import Sweep
from planner.sweeps import definition as defn
from planner.sweeps import exports, selectors, services
from planner.sweeps.figures import (
    METRIC_LABELS,
    axis_label,
    axis_title,
    build_timeseries_figure,
    metric_title,
    report_figures,
)
from planner.sweeps.findings import findings_of
from planner.sweeps.forms import SweepForm
from planner.sweeps.labels import cell_text as _cell
from planner.sweeps.labels import display_value
from simulator.base.errors import FieldError

#: Seconds the cancel waits for the running batches to store the points they finished.
CANCEL_WAIT_S = 3.0


@login_required
def sweep_list(request):
    sweeps = selectors.sweep_list(owner=request.user)[:200]
    return render(request, "planner/sweeps/list.html", {"nav": "sweeps", "sweeps": sweeps})


@login_required
@require_http_methods(["GET", "POST"])
def sweep_new(request):
    """The sweep form; ``?from=<sweep id>`` fills it with one of the user's sweeps ("Edit and run again")."""
    initial = None
    if request.method == "GET" and request.GET.get("from", "").isdigit():
        source = selectors.sweep_get(sweep_id=request.GET["from"], user=request.user)
        initial = SweepForm.initial_from(source.definition)
        initial["name"] = _again(source.name or f"Sweep {source.pk}")
    form = SweepForm(request.POST or None, request.FILES or None, user=request.user, initial=initial)
    calibration_fields.attach(form, request.user)
    if request.method == "POST":
        form.is_valid()
        # Every problem at once: the fields' own checks, then the definition's (for the fields still clean).
        definition = calibration_fields.into(form.to_definition(), form)
        try:
            if form.errors:
                defn.validate(definition, owner=request.user)
            else:
                sweep = services.sweep_create(owner=request.user, definition=definition)
        except dj_forms.ValidationError as exc:
            attach_errors(form, exc, by_name=True, paths="never")
        except FieldError as exc:  # the definition's problems, or a point or cliff search over a limit
            form.add_definition_errors(exc.errors)
        except (KeyError, TypeError, ValueError):  # a definition built around fields already in error
            if not form.errors:
                raise
        else:
            if not form.errors:
                n = sweep.num_chunks or 1
                messages.success(request, f"Sweep started: {sweep.total_points} points in {n} "
                                          f"batch{'es' if n != 1 else ''}.")
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
    figures, table = [], None
    if sweep.points_done and not report:
        body = _body_of(sweep)
        figures = report_figures(body)
        if sweep.is_final:  # a cancelled (or failed) sweep: its finished points in a table too
            table = points_table(body, (sweep.snapshot.get("workload") or {}).get("arrival_unit", "step"))
    shown = points_shown(progress, cliff=sweep.mode == Sweep.Mode.CLIFF)
    return render(request, "planner/sweeps/detail.html", {
        "nav": "sweeps", "sweep": sweep, "progress": progress, "report": report, "figures": figures,
        "table": table, "points_shown": progress["points_done"] if sweep.is_final else shown,
        "watch": not sweep.is_final or progress["stopping"]})


def points_shown(progress: dict, *, cliff: bool = False) -> int:
    """The points the bar stands for: finished ones plus the running batches' share (the bar's own count).

    ``static/js/sweep_progress.js`` computes the same while polling. A cliff search counts its
    finished simulations only (its total is an upper bound).
    """
    if cliff:
        return progress["points_done"]
    return max(progress["points_done"], math.floor(progress["fraction"] * progress["points_total"] + 1e-9))


def _again(name: str) -> str:
    return name if name.endswith(" (again)") else f"{name} (again)"[:200]


def runnable_definition(sweep: Sweep) -> dict:
    """The sweep's definition as it can be sent again (a trace's text comes back from the snapshot)."""
    definition = dict(sweep.definition)
    workload = sweep.snapshot.get("workload") or {}
    if workload.get("source") == "trace":
        definition["workload"] = {"trace": workload.get("trace", ""), "format": workload.get("format", "csv")}
    definition["name"] = _again(sweep.name or f"Sweep {sweep.pk}")
    return definition


@login_required
@require_POST
def sweep_rerun(request, sweep_id: int):
    """Run a sweep (a cancelled or failed one, say) again as a new sweep with the same definition."""
    sweep = selectors.sweep_get(sweep_id=sweep_id, user=request.user)
    try:
        again = services.sweep_create(owner=request.user, definition=runnable_definition(sweep))
    except FieldError as exc:
        problems = "; ".join(m for msgs in exc.errors.values() for m in msgs)
        messages.error(request, f"This sweep cannot run again as it was: {problems}. Edit it and run it again.")
        return redirect("sweeps:detail", sweep_id=sweep.pk)
    messages.success(request, f"Running again: {again.total_points} points.")
    return redirect("sweeps:detail", sweep_id=again.pk)


@login_required
@require_POST
def sweep_cancel(request, sweep_id: int):
    sweep = selectors.sweep_get(sweep_id=sweep_id, user=request.user)
    services.sweep_cancel(sweep=sweep, user=request.user)
    # The running batches stop at their next progress check and store the points they finished: wait a
    # moment for them, so that the page shows those points (it keeps watching if one is slower).
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline and selectors.sweep_progress(sweep=sweep)["stopping"]:
        time.sleep(0.2)
    messages.info(request, "Sweep cancelled: every point it had finished is kept below.")
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
    if any(p["metrics"].get("deployment_shape") for p in points):  # DP groups: "DP 8 + EP 8" (data_parallel.py)
        wanted.insert(0, "deployment_shape")
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
             + [_cell(display_value(m, p["metrics"].get(m)), percent=m in _PERCENT) for m in metrics]}
            for p in points]
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
    inputs = body.get("inputs", {})
    arrival_unit = (inputs.get("workload") or {}).get("arrival_unit", "step")
    headline = findings_of(report)["headline"]
    axes = [{"title": axis_title(a["param"], arrival_unit),
             "values": ", ".join(_cell(v) for v in a.get("values") or [])} for a in inputs.get("axes") or []]
    cliff = inputs.get("cliff")
    cliff_titles = {"param": axis_title(cliff["param"], arrival_unit), "metric": metric_title(cliff["metric"])} \
        if cliff else None
    return render(request, "planner/reports/detail.html", {
        "nav": "reports", "report": report, "body": body, "figures": figures, "cliff_headline": headline,
        "advice": body.get("advice") or [],
        "table": points_table(body, arrival_unit), "axes": axes, "cliff_titles": cliff_titles,
        "is_owner": request.user.is_authenticated and request.user.pk == report.owner_id,
        "calibration": _calibration_words(report),
        "inputs": body.get("inputs", {}),
        "slo_ms": {k: f"{v * 1000:,.4g}" for k, v in ((k.removesuffix("_s"), v) for k, v in (
            inputs.get("slo") or {}).items() if k.endswith("_s")) if v is not None},
    })


def _calibration_words(report) -> str | None:
    """The calibration whose coefficients timed the report (its name while it exists; else its number)."""
    ref = (report.snapshot.get("definition") or {}).get("calibration")
    if ref is None:
        return None
    if object_id(ref) is not None:
        return calibration_fields.name_of(report.owner, object_id(ref)) or f"#{ref} (since deleted)"
    return str(ref)


def report_download(request, slug: str, fmt: str):
    report = selectors.report_get(slug=slug)
    body = report.snapshot
    if fmt == "csv":
        resp = HttpResponse(exports.to_csv(body), content_type="text/csv; charset=utf-8")
    elif fmt == "json":
        resp = HttpResponse(exports.to_json(body, slug=report.slug, title=report.title, findings=findings_of(report)),
                            content_type="application/json")
    else:
        sentence = (findings_of(report)["headline"] or {}).get("text")
        html = exports.to_html(title=report.title, body=body,
                               figures=[(t, f) for _, t, f in services.report_figures_cached(report)],
                               sentences=[sentence] if sentence else [])
        resp = HttpResponse(html, content_type="text/html; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="report-{report.slug}.{fmt}"'
    return resp


@login_required
@require_POST
def report_rerun(request, slug: str):
    """Run a report's sweep again as a new sweep of the signed-in user (the same definition)."""
    report = selectors.report_get(slug=slug)
    definition = dict(report.snapshot.get("definition") or {})
    if not definition:
        messages.error(request, "This report does not keep its definition, so it cannot be run again.")
        return redirect("sweeps:report", slug=slug)
    definition["name"] = f"{report.title} (again)"[:200]
    try:
        sweep = services.sweep_create(owner=request.user, definition=definition)
    except FieldError as exc:
        problems = "; ".join(f"{m}" for msgs in exc.errors.values() for m in msgs)
        messages.error(request, f"This sweep cannot run again as it was: {problems}")
        return redirect("sweeps:report", slug=slug)
    messages.success(request, f"Running again: {sweep.total_points} points.")
    return redirect("sweeps:detail", sweep_id=sweep.pk)


@login_required
@require_http_methods(["GET", "POST"])
def report_delete(request, slug: str):
    """GET: the confirmation page (what deleting loses: the shared link too); POST, from its button: delete.

    Only the owner sees either (others: 403)."""
    report = selectors.report_get(slug=slug)
    if report.owner_id != request.user.pk:
        raise PermissionDenied("Only the owner can delete this report.")
    if request.method == "GET":
        return render(request, "confirm.html", {
            "nav": "reports", "title": f"Delete {report.title}?", "heading": f"Delete the report “{report.title}”?",
            "consequences": [
                f"Its {len(report.snapshot.get('points') or [])} simulated points, charts and downloads go.",
                "Its link stops working for everyone you shared it with.",
                "The sweep it came from stays in your sweeps list." if report.sweep_id else
                "Its sweep is gone already, so it cannot be made again from there.",
            ],
            "action": request.path, "button": "Delete the report", "back": reverse("sweeps:report", args=[slug])})
    services.report_delete(report=report, user=request.user)
    messages.info(request, f"Report “{report.title}” deleted.")
    return redirect("sweeps:report-list")
