"""The Pareto chart of a deployment search: cost per hour against the SLO's first metric.

A pure function of the stored result dict (no request, no ORM), tested through the dict.
"""

from __future__ import annotations

import plotly.graph_objects as go

from simulator.search import SLO_METRIC_LABELS

PARETO_HEIGHT = 460  # px


def _points(result: dict, label: str):
    for o in result["outcomes"]:
        for t in o["trials"]:
            v = (t.get("values") or {}).get(label)
            if v is not None:
                yield o, t, v


def build_pareto_figure(result: dict) -> dict:
    """Every simulated deployment (meets / misses), the frontier, the target and the answer."""
    primary = result["slo"]["targets"][0]
    label = f"{SLO_METRIC_LABELS[primary['metric']]} {primary['percentile']}"
    fig = go.Figure()
    for meets, name, color, symbol in ((True, "meets the SLO", "#1b7f3b", "circle"),
                                       (False, "misses the SLO", "#b42318", "x")):
        pts = [(o, t, v) for o, t, v in _points(result, label) if t["meets"] == meets]
        fig.add_trace(go.Scatter(
            x=[t["cost_per_hour"] for _, t, _ in pts], y=[v * 1000 for *_, v in pts], mode="markers", name=name,
            marker={"color": color, "symbol": symbol, "size": 8},
            text=[f"{t['num_instances']} x {o['candidate']['label']}" for o, t, _ in pts],
            hovertemplate="%{text}<br>$%{x:.2f}/h, %{y:.0f} ms<extra></extra>"))
    # the frontier of the first target (results stored before one frontier per target: their only one)
    front = [p for p in result.get("frontier") or [] if "metric" not in p or p["label"] == label]
    fig.add_trace(go.Scatter(x=[p["cost_per_hour"] for p in front], y=[p["value_s"] * 1000 for p in front],
                             mode="lines", name="Pareto frontier", line={"color": "#444", "shape": "hv"},
                             hoverinfo="skip"))
    best = result.get("best")
    if best:
        v = next(t["values"].get(label) for t in best["trials"] if t["num_instances"] == best["replicas"])
        fig.add_trace(go.Scatter(x=[best["cost_per_hour"]], y=[v * 1000], mode="markers", name="answer",
                                 marker={"symbol": "star", "size": 16, "color": "#f5a300",
                                         "line": {"color": "#000", "width": 1}}))
    fig.add_hline(y=primary["max_s"] * 1000, line={"dash": "dash", "color": "#555"},
                  annotation_text=f"target {label} {primary['max_s'] * 1000:g} ms")
    fig.update_layout(height=PARETO_HEIGHT, margin={"l": 70, "r": 20, "t": 30, "b": 60},
                      legend={"orientation": "h", "y": -0.2},
                      xaxis={"title": {"text": "Cost (USD per hour, all replicas)"}, "rangemode": "tozero"},
                      yaxis={"title": {"text": f"{label} (ms)"}, "type": "log"})
    return fig.to_plotly_json()
