"""Pages: plan a day (signed in), watch it run chunk by chunk, and its answer (words, charts, hours, downloads)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from planner.dayplans import definition as ddefn
from planner.dayplans import exports, selectors, services
from planner.dayplans.figures import build_fleet_figure, build_hours_figure
from planner.dayplans.forms import DayPlanForm
from planner.errors import InputError


@login_required
@require_http_methods(["GET", "POST"])
def dayplan_new(request):
    form = DayPlanForm(request.POST or None, user=request.user)
    if request.method == "POST":
        # every problem at once: the form's own checks, then the definition's for the fields still clean
        valid = form.is_valid()
        try:
            if valid:
                plan = services.dayplan_create(owner=request.user, definition=form.to_definition())
            else:
                ddefn.validate(form.to_definition(), owner=request.user)
        except InputError as exc:  # QuotaExceeded too: its message is a non-field one
            form.add_definition_errors(exc.errors)
        else:
            if valid:
                return redirect("dayplans:detail", plan_id=plan.pk)
    plans = selectors.dayplan_list(owner=request.user)[:20]
    return render(request, "planner/dayplans/new.html", {"nav": "dayplans", "form": form, "plans": plans})


def _hours(answer: dict, price: float) -> list[dict]:
    return [{**h, "cost": h["gpu_hours"] * price,
             "attainment_pct": None if h["attainment"] is None else h["attainment"] * 100} for h in answer["hours"]]


@login_required
def dayplan_detail(request, plan_id: int):
    plan = selectors.dayplan_get(plan_id=plan_id, user=request.user)
    day = plan.snapshot["day"]
    ctx = {"nav": "dayplans", "plan": plan, "progress": selectors.dayplan_progress(plan=plan), "day": day,
           "inputs": exports.plan_inputs(plan.snapshot), "slo_words": exports.slo_words(day["slo"])}
    if plan.answer:
        a = plan.answer
        ctx.update(answer=a, attainment_pct=f"{a['attainment'] * 100:.1f}", gpu_hours=exports.amount(a["gpu_hours"]),
                   cost=exports.usd(a["cost"]), fixed=exports.amount(a["fixed_peak_gpu_hours"]), words=exports.answer_words(plan.answer, day),
                   hours=_hours(plan.answer, day["price_per_gpu_hour"]), fleet_figure=build_fleet_figure(plan.answer),
                   hours_figure=build_hours_figure(plan.answer))
    return render(request, "planner/dayplans/detail.html", ctx)


@login_required
@require_POST
def dayplan_cancel(request, plan_id: int):
    plan = selectors.dayplan_get(plan_id=plan_id, user=request.user)
    services.dayplan_cancel(plan=plan, user=request.user)
    return redirect("dayplans:detail", plan_id=plan.pk)


@login_required
def dayplan_download(request, plan_id: int, fmt: str):
    plan = selectors.dayplan_get(plan_id=plan_id, user=request.user)
    if fmt == "csv" and plan.answer:
        resp = HttpResponse(exports.to_csv(plan), content_type="text/csv; charset=utf-8")
    elif fmt == "json":
        resp = HttpResponse(exports.to_json(plan), content_type="application/json")
    else:
        raise Http404("No such download.")
    resp["Content-Disposition"] = f'attachment; filename="day-plan-{plan.pk}.{fmt}"'
    return resp
