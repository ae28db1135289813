"""Pages: start a search (signed in), watch it, and its public report (answer, Pareto chart, every deployment)."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from config.form_errors import attach_errors, capitalized
from planner.calibration import fields as calibration_fields
from planner.sampling_words import sampling_answer
from planner.search import definition as search_definition
from planner.search import exports, selectors, services
from planner.search.figures import build_pareto_figure
from planner.search.forms import SearchForm
from planner.search.models import Search
from planner.search.seeds import seed_words
from planner.sweeps import definition as defn


@login_required
@require_http_methods(["GET", "POST"])
def search_new(request):
    form = SearchForm(request.POST or None, user=request.user)
    calibration_fields.attach(form, request.user)
    if request.method == "POST":
        # every problem at once: the form's own checks, then the definition's for the fields still clean
        valid = form.is_valid()
        try:
            definition = calibration_fields.into(form.to_definition(), form)
            if valid:
                search = services.search_create(owner=request.user, definition=definition)
            else:
                search_definition.validate(definition, owner=request.user)
        except defn.DefinitionError as exc:
            errors = dict(exc.errors)
            # the select's own error, at the select (a sentence)
            attach_errors(form, {"calibration": errors.pop("calibration", [])}, by_name=True, paths="never",
                          words=lambda m, _: capitalized(m) + ".")
            form.add_definition_errors(errors)
        except (KeyError, TypeError, ValueError):  # a definition built around fields already in error
            if valid:
                raise
        else:
            if valid:
                return redirect("search:detail", search_id=search.pk)
    searches = selectors.search_list(owner=request.user)[:20]
    return render(request, "planner/search/new.html", {"nav": "search", "form": form, "searches": searches})


@login_required
def search_detail(request, search_id: int):
    search = selectors.search_get(search_id=search_id, user=request.user)
    if search.status == Search.Status.DONE:
        return redirect("search:report", slug=search.slug)
    return render(request, "planner/search/detail.html", {
        "nav": "search", "search": search, "progress": selectors.search_progress(search=search)})


@login_required
@require_POST
def search_cancel(request, search_id: int):
    search = selectors.search_get(search_id=search_id, user=request.user)
    services.search_cancel(search=search, user=request.user)
    return redirect("search:detail", search_id=search.pk)


def report_context(search: Search) -> dict:
    res = search.result
    labels = exports.figure_labels(res)
    rows = []
    for o in res["outcomes"]:
        for t in o["trials"] or [None]:
            status, why = exports.row_status(o, t)
            rows.append({"o": o, "t": t, "values": [exports.trial_figure(t, lab) for lab in labels],
                         "status": status, "why": why})
    launch = res.get("launch") if "launch" in res else exports.search_launch(res, search.snapshot)
    return {"search": search, "result": res, "best": res["best"], "labels": labels, "rows": rows, "launch": launch,
            "figure": build_pareto_figure(res), "title": search.name,
            "sampling_words": sampling_answer(search.snapshot)["sampling_words"],
            "seed_words": seed_words(res, search.snapshot),
            **_xpyd_context(res, [f"{t['metric'].upper()} {t['percentile']}" for t in res["slo"]["targets"]]),
            **_pools_context(res, [f"{t['metric'].upper()} {t['percentile']}" for t in res["slo"]["targets"]])}


def _pools_context(res: dict, labels: list[str]) -> dict:
    """The joint prefill/decode pools search of a search with ``disaggregated.pools``: every pair checked."""
    pools = res.get("disaggregated_pools")
    if pools is None:
        return {}
    rows = [{"name": r["name"], "left_out": r["left_out"]} if r.get("left_out") else
            {"name": r["name"], "num_gpus": r["num_gpus"], "cost": r["cost_per_hour"],
             "prefill": _layout_words(r["prefill"]), "decode": _layout_words(r["decode"]),
             "kv_kib": r["kv_bytes_per_token"] / 1024 if r.get("kv_bytes_per_token") else None,
             "values": [r["values"].get(lab) for lab in labels], "meets": r["meets"], "misses": "; ".join(r["misses"]),
             "transfer_p90_s": r["transfer_p90_s"], "p_util": r["prefill_utilisation"],
             "d_util": r["decode_utilisation"], "chosen": r is pools["best"] or r == pools["best"]}
            for r in pools["pairs"]]
    sized = [{"shape": p["shape"], "prefill": p["instances"],
              "decode": next((d["instances"] for d in pools["decode"] if d["shape"] == p["shape"]), None)}
             for p in pools["prefill"]]
    return {"pools": pools, "pools_rows": rows, "pools_sized": sized, "pools_labels": labels}


def _layout_words(pool: dict) -> str:
    """A pool of a pair as the report's column shows it: ``2 × TP 1`` or ``1 × TP 1 × DP 4 + EP`` (its instances,
    each's TP, PP and DP, and expert parallelism); the instances alone for a pair stored before the layouts."""
    if "tensor_parallel" not in pool:
        return f"{pool['instances']}"
    par = [f"TP {pool['tensor_parallel']}"]
    par += [f"PP {pool['pipeline_parallel']}"] if pool.get("pipeline_parallel", 1) > 1 else []
    par += [f"DP {pool['data_parallel']}"] if pool.get("data_parallel", 1) > 1 else []
    return f"{pool['instances']} × {' × '.join(par)}{' + EP' if pool.get('expert_parallel') else ''}"


def _xpyd_context(res: dict, labels: list[str]) -> dict:
    """The xPyD comparison of a search with ``disaggregated``: the aggregated answer, then every split."""
    if "disaggregated" not in res:
        return {}
    alt = res["disaggregated"]
    if alt is None:
        return {"xpyd_asked": True, "xpyd": None}
    agg = alt["aggregated"]
    rows = [{"name": f"aggregated x{agg['replicas']}", "num_gpus": agg["num_gpus"], "cost": agg["cost_per_hour"],
             "values": [(agg["values"] or {}).get(lab) for lab in labels], "meets": True, "aggregated": True}]
    for r in alt["splits"]:
        rows.append({"name": r["name"], "num_gpus": r["num_gpus"], "cost": r["cost_per_hour"],
                     "values": [r["values"].get(lab) for lab in labels], "meets": r["meets"],
                     "misses": "; ".join(r["misses"]),
                     "transfer_p90_s": r["transfer_p90_s"],
                     "p_util": r["prefill_utilisation"], "d_util": r["decode_utilisation"]})
    return {"xpyd_asked": True, "xpyd": alt, "xpyd_rows": rows, "xpyd_labels": labels}


def search_report(request, slug: str):
    search = selectors.search_report(slug=slug)
    return render(request, "planner/search/report.html", {"nav": "search", **report_context(search)})


def search_report_download(request, slug: str, fmt: str):
    search = selectors.search_report(slug=slug)
    if fmt == "csv":
        resp = HttpResponse(exports.to_csv(search), content_type="text/csv; charset=utf-8")
    elif fmt == "json":
        resp = HttpResponse(exports.to_json(search), content_type="application/json")
    elif fmt == "html":
        ctx = report_context(search)
        ctx["figure_json"] = json.dumps(ctx["figure"])
        resp = HttpResponse(exports.to_html(search, ctx), content_type="text/html; charset=utf-8")
    else:
        raise Http404("Unknown format.")
    resp["Content-Disposition"] = f'attachment; filename="search-{slug}.{fmt}"'
    return resp
