"""Report downloads: CSV (one row per point and metric), JSON (inputs and results), standalone HTML.

Pure functions over a report body (``Report.snapshot``); the HTML file inlines
Plotly's JavaScript (``planner.plotly_assets``: the vendored cartesian bundle), so it opens offline.
"""

from __future__ import annotations

import io
import json

from planner.csv_cells import csv_writer
from planner.plotly_assets import plotly_js
from planner.sampling_words import sampling_answer

#: Units of the metrics, for the CSV's ``unit`` column and axis titles.
METRIC_UNITS = {
    "requests": "requests", "finished": "requests", "dropped_unservable": "requests",
    "preemptions": "events", "preemptions_per_request": "events/request", "requests_preempted": "requests",
    "recomputed_tokens": "tokens", "prefix_cache_hit_rate": "fraction", "peak_kv_usage": "fraction",
    "mean_kv_usage": "fraction", "peak_running": "requests", "peak_waiting": "requests", "num_steps": "steps",
    "ttft_p50_steps": "steps", "ttft_p99_steps": "steps", "ttft_p50_s": "s", "ttft_p99_s": "s",
    "e2e_p50_s": "s", "e2e_p99_s": "s", "output_tokens": "tokens", "duration_s": "s",
    "throughput_tok_s": "tokens/s", "throughput_tok_per_step": "tokens/step", "num_gpu_blocks": "blocks",
    "kv_cache_tokens": "tokens", "cost_per_hour": "USD/h", "cost_per_m_output_tokens": "USD/M output tokens",
    "request_imbalance": "max/mean", "cpu_tier_gib": "GiB", "cpu_tier_hit_tokens": "tokens",
    "tier_bytes_onboarded": "bytes", "num_instances": "instances", "data_parallel_size": "ranks",
    "dp_group_steps": "steps", "dp_dummy_steps": "steps", "kv_cache_tokens_per_deployment": "tokens",
}
#: Name endings that say a metric's unit, for the metrics :data:`METRIC_UNITS` does not list.
_SUFFIX_UNITS = (("_s", "s"), ("_steps", "steps"), ("_tokens", "tokens"), ("_rate", "fraction"),
                 ("_gib", "GiB"), ("_bytes", "bytes"))


def metric_unit(name: str) -> str:
    """The unit of a stored metric (its value as stored: latencies in seconds), "" for a count or a label."""
    if name in METRIC_UNITS:
        return METRIC_UNITS[name]
    return next((unit for end, unit in _SUFFIX_UNITS if name.endswith(end)), "")


def to_csv(body: dict) -> str:
    """``point,<axis params...>,metric,value,unit``: one row per point and metric."""
    points = body.get("points") or []
    params = []
    for p in points:
        for k in p["params"]:
            if k not in params:
                params.append(k)
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    w.writerow(["point", *params, "metric", "value", "unit"])
    for p in points:
        head = [p["index"], *[p["params"].get(k, "") for k in params]]
        for name, value in p["metrics"].items():
            w.writerow([*head, name, "" if value is None else value, metric_unit(name)])
    return buf.getvalue()


def to_json(body: dict, *, slug: str | None = None, title: str | None = None, findings: dict | None = None) -> str:
    """The whole report: inputs (profiles and parameters as used), points with metrics, cliff, advice, the
    sampler path the clock timed in words (``sampling_words``) and, when given, the report's findings
    (``planner.sweeps.findings``: cliff, operating point, replicas, saturation, headline)."""
    doc = {"report": {"slug": slug, "title": title}, **body,
           "sampling_words": sampling_answer(body.get("inputs"))["sampling_words"]}
    if findings is not None:
        doc["findings"] = findings
    return json.dumps(doc, indent=1, sort_keys=False, allow_nan=False, default=str)


def to_html(*, title: str, body: dict, figures: list[tuple[str, dict]], sentences: list[str]) -> str:
    """A standalone HTML file: Plotly inlined, figures, the cliff in words, advice and a table."""
    from django.template.loader import render_to_string

    figs = [{"id": f"f{i}", "title": t, "json": json.dumps(f, allow_nan=False, default=str).replace("</", "<\\/")}
            for i, (t, f) in enumerate(figures)]
    return render_to_string("planner/reports/standalone.html", {
        "title": title, "body": body, "figures": figs, "sentences": sentences,
        "advice": body.get("advice") or [], "plotly_js": plotly_js(),
        "rows": table_rows(body),
    })


def table_rows(body: dict, metrics: tuple[str, ...] = (
        "preemptions_per_request", "ttft_p50_steps", "ttft_p99_steps", "ttft_p99_s", "throughput_tok_s",
        "mean_kv_usage", "prefix_cache_hit_rate", "cost_per_m_output_tokens")) -> dict:
    """Header and rows for the results table (params then key metrics)."""
    points = body.get("points") or []
    params: list[str] = []
    for p in points:
        for k in p["params"]:
            if k not in params:
                params.append(k)
    shown = [m for m in metrics if any(p["metrics"].get(m) is not None for p in points)]
    rows = []
    for p in points:
        rows.append([p["index"], *[p["params"].get(k, "") for k in params],
                     *[_fmt(p["metrics"].get(m)) for m in shown]])
    header = ["#", *params, *[f"{m} ({metric_unit(m)})" for m in shown]]
    return {"header": header, "rows": rows}


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)
