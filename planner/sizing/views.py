"""Sizing pages: the home page (one deployment) and the GPU comparison.

Both are GET forms, so every answer is a link and works without JavaScript
(the charts need it; the numbers and the summary do not). Views only bind the
form, call the services and pick the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.shortcuts import render

from . import figures, services
from .forms import CompareForm, SizingForm, default_compare_gpus


def home(request):
    """Size one deployment: form on the left, answer and charts on the right."""
    form = SizingForm.from_query(request.GET, user=request.user)
    ctx = {"nav": "sizing", "form": form, "outcome": None}
    if form.is_valid():
        try:
            outcome = services.plan_deployment(model=form.model_spec(), gpu=form.gpu_spec(), knobs=form.knobs())
        except services.PlanInputError as exc:
            form.add_plan_errors(exc.errors)
        else:
            form.add_plan_errors(outcome.field_errors)
            ctx["outcome"] = outcome
            ctx["figures"] = {"memory": figures.build_memory_figure(outcome)}
            if outcome.fits:
                ctx["figures"]["concurrency"] = figures.build_concurrency_figure(
                    services.concurrency_curve(outcome),
                    title=f"Maximum concurrency against context length, {outcome.num_gpus}x {outcome.gpu.name}")
                try:
                    frag = services.fragmentation(outcome, lengths=form.cleaned_data["lengths"])
                except services.PlanInputError as exc:
                    form.add_plan_errors(exc.errors)
                else:
                    ctx["fragmentation"] = frag
                    ctx["figures"]["fragmentation"] = figures.build_fragmentation_figure(
                        frag, max_model_len=outcome.result.max_model_len, lengths=form.cleaned_data["lengths"])
            ctx["compare_query"] = _compare_query(request.GET, form)
    return render(request, "planner/home.html", ctx)


def compare(request):
    """The same model and knobs on 2 to 4 GPUs, side by side, with the deployment price per hour."""
    form = CompareForm.from_query(request.GET, user=request.user)
    ctx = {"nav": "sizing", "form": form, "rows": None}
    if form.is_valid():
        try:
            model = form.model_spec()
            rows = services.compare_gpus(model=model, gpus=form.gpu_specs(), knobs=form.knobs())
        except services.PlanInputError as exc:
            form.add_plan_errors(exc.errors)
        else:
            ctx["rows"] = [CompareLine(gpu=r.gpu, outcome=r.outcome, fits=bool(r.outcome and r.outcome.fits),
                                       reason=no_fit_reason(r)) for r in rows]
            ctx["model_name"] = model.name
            ctx["max_model_len"] = next((r.outcome.result.max_model_len for r in rows if r.outcome), None)
            ctx["figure"] = figures.build_compare_figure(rows)
    return render(request, "planner/sizing_compare.html", ctx)


@dataclass(frozen=True)
class CompareLine:
    """One row of the comparison table: the GPU, its plan, and why it does not fit (if it does not)."""

    gpu: object
    outcome: services.PlanOutcome | None
    fits: bool
    reason: str


def no_fit_reason(row: services.CompareRow) -> str:
    """Why a GPU of a comparison cannot serve the model, in words ("" when it fits)."""
    o = row.outcome
    if o is None:
        return row.error
    if o.fits:
        return ""
    messages = [m for ms in o.field_errors.values() for m in ms] or [o.summary]
    return " ".join(m.removeprefix("Does not fit: ") for m in messages)


def _compare_query(query, form) -> str:
    """The home page's query string turned into the compare page's (same model and knobs)."""
    q = form.data.copy()
    gpu = q.pop("gpu", [None])[0]
    q.pop("lengths", None)
    picked = ([gpu] if gpu else []) + [s for s in default_compare_gpus(form.gpu_options) if s != gpu]
    q.setlist("gpus", picked[:3])
    return q.urlencode()
