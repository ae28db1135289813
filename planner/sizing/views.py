"""Sizing pages: the home page (one deployment) and the GPU comparison.

Both are GET forms, so every answer is a link and works without JavaScript
(the charts need it; the numbers and the summary do not). Views only bind the
form, call the services and pick the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import QueryDict
from django.shortcuts import redirect, render

from planner.calibration import fields as calibration_fields
from simulator.base import ms_against, ms_figure, ms_target
from simulator.base.errors import FieldError

from . import figures, services
from .forms import CompareForm, ReplicasForm, SizingForm, default_compare_gpus


def home(request):
    """Size one deployment: form on the left, answer and charts on the right."""
    form = SizingForm.from_query(request.GET, user=request.user)
    ctx = {"nav": "sizing", "form": form, "outcome": None}
    valid = form.is_valid()
    if not valid and {"model", "gpu"} <= set(form.cleaned_data):
        # every problem at once: the plan's own checks on the knobs that passed the form's
        try:
            services.plan_deployment(model=form.model_spec(), gpu=form.gpu_spec(), knobs=form.knobs())
        except services.PlanInputError as exc:
            form.add_plan_errors(exc.errors)
    if valid:
        model_row = form.model_options.rows[form.cleaned_data["model"]]
        try:
            outcome = services.plan_deployment(model=form.model_spec(), gpu=form.gpu_spec(), knobs=form.knobs())
        except services.PlanInputError as exc:
            form.add_plan_errors(exc.errors)
        else:
            ctx["launch"] = services.plan_launch(outcome, getattr(model_row, "hf_id", ""), form.draft_spec())
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
            ctx["replicas_query"] = _replicas_query(form)
            if not outcome.fits:
                ctx["smallest_tp"] = smallest_fitting_tp(form, outcome)
    return render(request, "planner/home.html", ctx)


def smallest_fitting_tp(form: SizingForm, outcome) -> dict | None:
    """The smallest tensor-parallel size (a power of two, up to 64) at which the deployment fits, with
    the query that sizes it: ``{"tp", "query"}``; ``None`` when none does (or a calibration pins it)."""
    knobs = form.knobs()
    if knobs.get("weights_gib") is not None or knobs.get("available_kv_gib") is not None or knobs.get("vllm_log"):
        return None  # per-GPU figures given by hand do not scale with TP
    tp = outcome.deployment.tensor_parallel_size
    for candidate in (2, 4, 8, 16, 32, 64):
        if candidate <= tp:
            continue
        try:
            trial = services.plan_deployment(model=outcome.model, gpu=outcome.gpu,
                                             knobs={**knobs, "tensor_parallel_size": candidate, "num_gpus": None})
        except services.PlanInputError:
            continue
        if trial.fits:
            query = form.data.copy() if hasattr(form.data, "copy") else dict(form.data)
            query["tensor_parallel_size"] = str(candidate)
            query.pop("num_gpus", None)
            return {"tp": candidate, "num_gpus": trial.num_gpus,
                    "query": urlencode(query, doseq=True) if not hasattr(query, "urlencode") else query.urlencode()}
    return None


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


def _replicas_query(form) -> str:
    """The replicas page's query string for the sized deployment: model, GPU and TP (the form is pre-filled)."""
    q = QueryDict(mutable=True)
    for key in ("model", "gpu", "tensor_parallel_size"):
        if form.data.get(key):
            q[key] = form.data[key]
    return q.urlencode()


def replicas(request):
    """Replicas for this rate: the fewest replicas meeting TTFT/ITL targets.

    GET form (works without JavaScript). An unsubmitted form (no ``rate`` in the query, e.g. the link
    from the sizing page) is only pre-filled; a submitted one is priced (:func:`planner.sweeps.replicas.check_replicas`,
    with the xPyD comparison when asked): within ``KVP_INLINE_MAX_SECONDS`` it is answered while the page loads,
    dearer it runs on a worker and the page redirects to :func:`replicas_run`, which shows its progress and then
    the same answer.
    """

    form, submitted = ReplicasForm.from_query(request.GET, user=request.user)
    calibration_fields.attach(form, request.user)
    ctx = {"nav": "replicas", "form": form, "answer": None, "submitted": submitted}
    owner = request.user if request.user.is_authenticated else None
    if submitted and not form.is_valid():
        # every problem at once: the search's own checks on the fields that passed the form's
        from planner.sweeps.replicas import check_replicas

        try:
            check_replicas(calibration_fields.into(form.to_request(), form), owner=owner)
        except FieldError as exc:
            form.add_definition_errors(exc.errors)
        except (KeyError, TypeError, ValueError):  # a request built around fields already in error
            pass
    elif submitted:
        try:
            found, rows, run = _replicas_priced(request, form, owner)
        except FieldError as exc:
            form.add_definition_errors(exc.errors)
        else:
            if run is not None:
                return redirect(_run_page(run))
            _replicas_context(ctx, request, form, found, rows)
    return render(request, "planner/replicas.html", ctx)


def _replicas_priced(request, form: ReplicasForm, owner):
    """``(found, xPyD rows, None)`` answered here when the page's runs are priced within the inline bound, else
    ``(None, None, run)``: a run sent to the workers. Raises the one input error (:class:`FieldError`: the
    definition's problems, ``OverBudget``, ``QuotaExceeded``)."""
    from planner.runs.api import hand_over
    from planner.runs.services import runs_inline
    from planner.sweeps import disaggregated_compare
    from planner.sweeps.replicas import answer_replicas, check_replicas

    body = calibration_fields.into(form.to_request(), form)
    checked = check_replicas(body, owner=owner)
    dis = form.disaggregated()
    price = checked["price"]
    if dis is not None:
        try:
            for *_, p in disaggregated_compare.prepare(body, dis, owner=owner, inline=False):
                price = price + p
        except FieldError:
            dis = None  # shown as a form error when answered here; a worker's run leaves it out
    if runs_inline(price.seconds):
        return answer_replicas(checked, inline=True), _disaggregated_rows(form, owner), None
    run = hand_over(request, kind="replicas-page", price=price, what=f"This replicas search (up to "
                    f"{checked['max_n']} instances){' and its xPyD comparison' if dis else ''}",
                    advice="use fewer or shorter requests or a lower max_instances",
                    definition={"request": body, "disaggregated": dis, "query": request.GET.urlencode()})
    return None, None, run


def _run_page(run) -> str:
    from django.urls import reverse

    path = reverse("replicas-run", kwargs={"run_id": run.pk})
    return path if run.owner_id is not None else f"{path}?token={run.token}"


def _replicas_context(ctx: dict, request, form: ReplicasForm, found: dict, rows: list[dict] | None) -> None:
    """The answer's part of the page: words, table, figure, launch, and the xPyD rows when asked."""
    from planner.sweeps.figures import build_replicas_figure

    answer = replicas_answer(found, form)
    answer["calibration"] = calibration_fields.name_of(request.user, calibration_fields.chosen(form))
    ctx["answer"] = answer
    ctx["launch"] = found.get("launch")
    ctx["disaggregated"] = None if rows is None else _rows_shown(rows)
    points = [{"params": {"num_instances": t["num_instances"]},
               "metrics": {f"ttft_{found['percentile']}_s": t["ttft_s"],
                           f"itl_{found['percentile']}_s": t["itl_s"]}} for t in found["trials"]]
    ctx["figure"] = build_replicas_figure(
        points, slo={"ttft_s": found["slo_ttft_s"], "itl_s": found["slo_itl_s"]},
        percentile=found["percentile"], answer=found["num_instances"],
        title=f"TTFT and ITL {found['percentile']} against replicas at {answer['rate']} requests/s")


def replicas_run(request, run_id: int):
    """A replicas search the page sent to the workers: its progress while it runs (the box polls
    ``/api/runs/{id}/`` and reloads when it ends), then the same answer as a search answered in the page; the
    form is bound again to the query it was made from. A run made without signing in needs its ``token``."""
    from planner.runs import selectors as run_selectors

    run = run_selectors.run_get(run_id=run_id, user=request.user, token=request.GET.get("token"))
    form, submitted = ReplicasForm.from_query(QueryDict(run.definition.get("query", "")), user=request.user)
    calibration_fields.attach(form, request.user)
    ctx = {"nav": "replicas", "form": form, "answer": None, "submitted": submitted, "run": run,
           "progress": run_selectors.run_progress(run), "status_url": run_selectors.status_path(run)}
    if form.is_valid() and run.status == run.Status.DONE:
        _replicas_context(ctx, request, form, run.result["found"], run.result["disaggregated"])
    return render(request, "planner/replicas.html", ctx)


def _disaggregated_rows(form: ReplicasForm, owner) -> list[dict] | None:
    """The xPyD deployment against as many aggregated replicas, when the form asks (None otherwise)."""
    from planner.sweeps.disaggregated_compare import compare

    dis = form.disaggregated()
    if dis is None:
        return None
    try:
        return compare(calibration_fields.into(form.to_request(), form), dis, owner=owner)
    except FieldError as exc:
        form.add_definition_errors(exc.errors)
        return None


def _rows_shown(rows: list[dict]) -> list[dict]:
    """The comparison's rows as the page shows them (milliseconds, percentages)."""
    pct = lambda v: "–" if v is None else f"{v * 100:,.0f}"  # noqa: E731
    return [{**r, "ttft_p50": _ms(r["ttft_p50_s"]), "ttft_p90": _ms(r["ttft_p90_s"]), "itl_p90": _ms(r["itl_p90_s"]),
             "transfer_p90": _ms(r["transfer_p90_s"]), "prefill_util": pct(r["prefill_utilisation"]),
             "decode_util": pct(r["decode_utilisation"])} for r in rows]


def _ms(seconds) -> str:
    """A table cell in milliseconds by the reports' rule (:mod:`simulator.base.readable`); "–" where there is none."""
    return "–" if seconds is None else ms_figure(seconds)


def replicas_answer(found: dict, form: ReplicasForm) -> dict:
    """What the replicas page shows: the answer in words, its cost and one table row per count tried."""
    pct = found["percentile"]
    targets = " and ".join(t for t in (
        None if found["slo_ttft_s"] is None else f"TTFT {pct} ≤ {ms_target(found['slo_ttft_s'])} ms",
        None if found["slo_itl_s"] is None else f"ITL {pct} ≤ {ms_target(found['slo_itl_s'])} ms") if t)
    gpu = form.gpu_options.rows[form.cleaned_data["gpu"]]
    per = found.get("gpus_per_replica") or form.cleaned_data["tensor_parallel_size"]
    rate = f"{form.cleaned_data['rate']:,.4g}"
    n = found["num_instances"]
    shape = f" ({found['deployment_shape']})" if found.get("deployment_shape") else ""  # a replica: a DP group
    if n is not None:
        headline = (f"{n} replica{'s' if n != 1 else ''} of {per}× {gpu.name}{shape} meet{'s' if n == 1 else ''} "
                    f"{targets} at {rate} requests/s")
    else:
        headline = f"No replica count up to {found['max_instances']} meets {targets} at {rate} requests/s"
    rows = [{"n": t["num_instances"], "ttft": _ms(t["ttft_s"]), "itl": _ms(t["itl_s"]), "meets": t["meets"],
             "hit": f"{t['prefix_cache_hit_rate'] * 100:,.1f}", "imbalance": f"{t['request_imbalance']:,.2f}",
             "finished": t["finished"], "dropped": t["dropped"] + t["unfinished"]} for t in found["trials"]]
    return {"headline": headline, "ok": n is not None, "num_instances": n, "percentile": pct, "rate": rate,
            "reason": found["reason"], "cost_per_hour": found.get("cost_per_hour"),
            "price_per_gpu_hour": gpu.price_per_hour, "gpus_total": (n or 0) * per, "gpus_per_replica": per,
            "gpu_name": gpu.name, "rows": rows, "any_not_served": any(r["dropped"] for r in rows), "requests": found["requests"], "routing": found["routing"],
            "num_gpu_blocks": found["num_gpu_blocks"], "clock": found["clock"],
            "advice": found.get("advice", []), "clock_note": found.get("clock_note"),
            "sampling": found.get("sampling_words"),
            "flattened": latency_flattened(found["trials"]), "why": _why_not(found),
            "speculative": form.speculative()}


def _why_not(found: dict) -> str:
    """Why no replica count met the targets, in milliseconds like the rest of the page."""
    trials = sorted(found["trials"], key=lambda t: t["num_instances"])
    if not trials:
        return found.get("reason") or ""
    last, pct = trials[-1], found["percentile"]
    if last.get("dropped"):
        return "Requests are dropped as unservable: a prompt does not fit one replica's KV cache"
    n = last["num_instances"]
    parts = [_against(f"{name} {pct}", last[key], found[slo])
             for name, key, slo in (("TTFT", "ttft_s", "slo_ttft_s"), ("ITL", "itl_s", "slo_itl_s"))
             if found.get(slo) is not None]
    return f"With {n} replica{'s' if n != 1 else ''}, " + " and ".join(parts)


def _against(metric: str, seconds: float | None, target_s: float) -> str:
    """``TTFT p90 is 500.4 ms (target ≤ 500 ms)``: digits enough that a miss never reads as its target."""
    if seconds is None or not math.isfinite(seconds):
        return f"{metric}: no request finished (target ≤ {ms_target(target_s)} ms)"
    value, target = ms_against(seconds, target_s)
    return f"{metric} is {value} ms (target ≤ {target} ms)"


def latency_flattened(trials: list[dict], gain: float = 0.1) -> bool:
    """True when the most replicas tried barely helped: TTFT and ITL fell by less than ``gain`` (10%)
    from the second most. More replicas would not meet the targets then; the page says so."""
    tried = sorted((t for t in trials if t.get("ttft_s") is not None), key=lambda t: t["num_instances"])
    if len(tried) < 2:
        return False
    before, last = tried[-2], tried[-1]
    return all(last[k] is None or before[k] is None or last[k] > before[k] * (1 - gain) for k in ("ttft_s", "itl_s"))
