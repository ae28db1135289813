"""A report's findings, computed once when the report is made and stored with it (``Report.findings``).

Before, one report's cliff was detected three times (its advice, its figures, its page's headline) and its
operating point and replicas answer twice, from the same snapshot; now :func:`report_findings` computes

* ``cliff``: where preemptions rise sharply (:func:`planner.sweeps.advice.detect_cliff`), or None;
* ``operating_point``: the index of the point closest to the deployment as sized (its over-time figure);
* ``replicas``: the fewest replicas meeting the targets, per request rate (:func:`~planner.sweeps.advice.replicas_for_rate`);
* ``saturation``: the points where the deployment is saturated, and its capacity
  (:func:`planner.sweeps.saturation.detect_saturation`);
* ``headline``: the report's sentence about the cliff, ``{"text", "level"}`` (:func:`cliff_headline`);

and the advice (kept in the snapshot, ``snapshot["advice"]``, as before), the figures, the page and the
downloads read them. A report made before findings were stored (``findings`` null, or an older ``version``)
gets them computed from its snapshot the first time it is read, by the same functions, then stored.

Pure functions over a report body, except :func:`findings_of`, which stores.
"""

from __future__ import annotations

from planner.sweeps.advice import (
    PREEMPTION_LIMIT,
    advise,
    cliff_sentence,
    detect_cliff,
    operating_point,
    replicas_for_rate,
)
from planner.sweeps.labels import axis_label, cell_text, metric_title
from planner.sweeps.saturation import detect_saturation

#: The shape of the stored findings; a report whose findings carry another version gets them anew.
FINDINGS_VERSION = 1
_UNSET = object()


def report_findings(body: dict) -> dict:
    """Every finding of a report body, each computed once (see the module's docstring)."""
    unit = ((body.get("inputs") or {}).get("workload") or {}).get("arrival_unit", "step")
    cliff = detect_cliff(body)
    op = operating_point(body)
    return {"version": FINDINGS_VERSION, "cliff": cliff, "operating_point": op["index"] if op else None,
            "replicas": replicas_for_rate(body), "saturation": detect_saturation(body),
            "headline": cliff_headline(body, unit, cliff=cliff)}


def advice_from(body: dict, findings: dict) -> list[dict]:
    """The report's advice (as stored in its snapshot), from its findings."""
    points = {p["index"]: p for p in body.get("points") or []}
    return [a.to_dict() for a in advise(body, cliff=findings["cliff"], op=points.get(findings["operating_point"]),
                                        replicas=findings["replicas"], saturation=findings["saturation"])]


def findings_of(report) -> dict:
    """The report's stored findings; for a report made before they were stored, computed and stored now."""
    found = report.findings
    if not isinstance(found, dict) or found.get("version") != FINDINGS_VERSION:
        found = report_findings(report.snapshot)
        report.findings = found
        type(report).objects.filter(pk=report.pk).update(findings=found)
    return found


def operating_point_of(body: dict, findings: dict) -> dict | None:
    """The point the findings name as the operating point (None for a report without points)."""
    return next((p for p in body.get("points") or [] if p["index"] == findings.get("operating_point")), None)


#: A deployment this many times the cliff's KV blocks (or below this share of the cliff's rate) is safe.
SAFE_MARGIN = 1.2


def _range_text(param: str, lo, hi, arrival_unit: str) -> str:
    _, unit = axis_label(param, arrival_unit)
    return f"{cell_text(lo)} and {cell_text(hi)} {unit}".rstrip()


def _search_headline(body: dict, arrival_unit: str) -> dict | None:
    """What a cliff search that found no crossing means, in words (``None`` when it found one)."""
    c = (body.get("inputs") or {}).get("cliff") or {}
    cr = body.get("cliff_result") or {}
    if not c or cr.get("status") not in ("all_good", "all_bad"):
        return None
    metric = metric_title(c["metric"]).split(" (")[0]
    metric = metric[:1].lower() + metric[1:] if metric[1:2].islower() else metric
    between = _range_text(c["param"], c["lo"], c["hi"], arrival_unit)
    n = cr.get("evaluations") or len(cr.get("history") or [])
    if cr["status"] == "all_good":
        return {"level": "good", "text": (
            f"No cliff between {between}: {metric} stays within the limit ({cr['limit']:,.3g}) even at the "
            f"hard end of the range, so the search stopped after {n} simulations. The cliff, if any, lies "
            "outside this range.")}
    return {"level": "bad", "text": (
        f"Past the limit across the whole range: {metric} is above {cr['limit']:,.3g} even at the easy end "
        f"of {between} ({n} simulations). The cliff lies outside this range.")}


def _deployment_x(inputs: dict, param: str):
    """The deployment's own value of the cliff's parameter: its KV blocks as sized, or its request rate."""
    if param == "num_gpu_blocks":
        return (inputs.get("sizing") or {}).get("num_gpu_blocks")
    if param == "rate":
        spec = (inputs.get("workload") or {}).get("spec") or {}
        return (spec.get("arrival") or {}).get("rate")
    return None


def cliff_headline(body: dict, arrival_unit: str = "step", *, cliff=_UNSET) -> dict | None:
    """The report's headline about the cliff: ``{"text", "level"}``, level ``good``, ``warn`` or ``bad``.

    Red only when the deployment is at or past the cliff; a deployment well clear of it is ``good``
    and says by how much; a search or a grid that found no cliff says so instead of nothing.
    ``cliff``: :func:`planner.sweeps.advice.detect_cliff`'s answer when the caller has it.
    """
    searched = _search_headline(body, arrival_unit)
    if searched:
        return searched
    cliff = detect_cliff(body) if cliff is _UNSET else cliff
    sentence = cliff_sentence(body, cliff) if cliff else None  # (given None it would look for the cliff again)
    if not cliff or not sentence:
        return _grid_headline(body)
    x, mine = cliff["x"], _deployment_x(body.get("inputs") or {}, cliff["param"])
    if mine is None or not x:
        return {"level": "warn", "text": sentence}
    if cliff["param"] == "num_gpu_blocks":
        ratio = mine / x
        if ratio >= SAFE_MARGIN:
            return {"level": "good", "text": f"{sentence} That is {ratio:,.1f}× the cliff: safe for this workload."}
        if ratio >= 1:
            return {"level": "warn", "text": f"{sentence} Only {100 * (ratio - 1):.0f}% above the cliff."}
        return {"level": "bad", "text": f"{sentence} Your deployment is below the cliff."}
    ratio = x / mine
    unit = "requests/s" if arrival_unit == "s" else "requests/step"
    if ratio >= SAFE_MARGIN:
        return {"level": "good", "text": f"{sentence} Your workload's {cell_text(mine)} {unit} is {ratio:,.1f}× "
                                         "below it: safe."}
    return {"level": "bad" if ratio < 1 else "warn",
            "text": f"{sentence} Your workload's {cell_text(mine)} {unit} is at or near it."}


def _grid_headline(body: dict) -> dict | None:
    """A one-axis KV-blocks or rate grid with no crossing: say the whole range is clear."""
    axes = (body.get("inputs") or {}).get("axes") or []
    if len(axes) != 1 or axes[0]["param"] not in ("num_gpu_blocks", "gpu_memory_utilization", "rate"):
        return None
    vals = [p["metrics"].get("preemptions_per_request") for p in body.get("points") or []]
    vals = [v for v in vals if v is not None]
    if len(vals) < 2 or any(v > PREEMPTION_LIMIT for v in vals):
        return None
    return {"level": "good", "text": f"No preemption cliff in the swept range: preemptions per request stay at "
                                     f"or under {PREEMPTION_LIMIT:g} at every point."}
