"""What a day plan says and downloads: the answer in words, the hours as CSV, the whole plan as JSON.

Pure functions of the stored plan (its snapshot and answer dicts); no request.
"""

from __future__ import annotations

import io
import json

from planner.csv_cells import csv_writer

CSV_COLUMNS = ("hour", "requests", "attainment", "ttft_p90_s", "tpot_p90_s", "mean_ready_replicas", "gpu_hours",
               "cost_usd")


def _ms(s: float) -> str:
    return f"{s * 1000:,.4g} ms" if s < 1 else f"{s:,.4g} s"


def slo_words(slo: dict) -> str:
    """``TTFT <= 2 s and TPOT <= 50 ms`` (or ``finished`` without targets)."""
    parts = [f"{name} <= {_ms(slo[k])}" for name, k in (("TTFT", "ttft_s"), ("TPOT", "tpot_s")) if slo.get(k)]
    return " and ".join(parts) if parts else "finished (no latency target given)"


def amount(v: float) -> str:
    """GPU-hours with the digits that matter: 421, 42.1, 0.831."""
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}" if v >= 10 else f"{v:,.3g}"


def usd(v: float) -> str:
    return f"${v:,.0f}" if v >= 100 else f"${v:,.2f}"


def _pct(share: float) -> str:
    return f"{share * 100:.1f} %"


def answer_words(answer: dict, day: dict) -> list[str]:
    """The answer as sentences: GPU-hours and cost against the fixed peak, attainment, the worst hours."""
    if not answer:
        return []
    saving = answer["saving"]
    saved = f"{saving * 100:.0f} % saved" if saving >= 0 else f"{-saving * 100:.0f} % more"
    peak = answer["peak_replicas"]
    head = (f"{amount(answer['gpu_hours'])} GPU-hours ({usd(answer['cost'])}) against "
            f"{amount(answer['fixed_peak_gpu_hours'])} fixed at the peak of {peak} replica{'s' if peak != 1 else ''}: "
            f"{saved}")
    out = [head, f"{_pct(answer['attainment'])} of {answer['requests']:,} requests met {slo_words(day['slo'])}"]
    hours = {h["hour"]: h for h in answer["hours"]}
    worst = [hours[h] for h in answer.get("worst_hours") or [] if h in hours and hours[h]["attainment"] < 1]
    if worst:
        out.append("worst hour" + ("s" if len(worst) > 1 else "") + " " +
                   ", ".join(f"{h['hour']}: {_pct(h['attainment'])}" for h in worst))
    elif answer.get("worst_hours"):
        out.append("no hour missed a request")
    if answer.get("unfinished"):
        out.append(f"{answer['unfinished']:,} requests never finished (counted as missed)")
    return out


def hour_rows(answer: dict, price: float) -> list[list]:
    return [[h["hour"], h["requests"], h["attainment"], h["ttft_p90_s"], h["tpot_p90_s"], h["mean_replicas"],
             h["gpu_hours"], h["gpu_hours"] * price] for h in answer.get("hours") or []]


def to_csv(plan) -> str:
    """One row per hour of the answer (by arrival; a cancelled plan: its finished hours)."""
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(CSV_COLUMNS)
    w.writerows(hour_rows(plan.answer or {}, plan.snapshot["day"]["price_per_gpu_hour"]))
    return buf.getvalue()


def plan_inputs(snapshot: dict) -> dict:
    """The resolved inputs a reader needs beside the answer (no trace text, no oracle rate curve)."""
    day = {k: v for k, v in snapshot["day"].items() if k not in ("plans", "chunk_requests")}
    if day.get("policy_resolved"):
        day["policy_resolved"] = {k: v for k, v in day["policy_resolved"].items() if k != "rates"}
    wl = {k: v for k, v in snapshot["workload"].items() if k != "trace"}
    return {"model": (snapshot.get("model") or {}).get("spec", {}).get("name"),
            "gpu": (snapshot.get("gpu") or {}).get("spec", {}).get("name"), "deployment": snapshot.get("deployment"),
            "engine": snapshot["point"]["config"], "workload": wl, **day}


def to_json(plan) -> str:
    return json.dumps({"id": plan.pk, "name": plan.name, "status": plan.status, "definition": plan.definition,
                       "inputs": plan_inputs(plan.snapshot), "answer": plan.answer,
                       "words": answer_words(plan.answer, plan.snapshot["day"])}, indent=1, default=str)
