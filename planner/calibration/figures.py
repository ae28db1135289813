"""Plotly figure of a calibration: measured against predicted (the sizing page's shared look)."""

from __future__ import annotations

import plotly.graph_objects as go

from planner.sizing.figures import _as_dict, _layout

METRICS = (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("e2e_s", "E2E"))


def measured_vs_predicted(fit: dict) -> dict:
    """Grouped bars per metric (log scale, ms): measured, the default clock, the fitted clock."""
    fig = go.Figure()
    for name, src, color in (("measured", fit["measured"], "#4e79a7"),
                             ("default clock", fit["predicted_before"], "#bab0ac"),
                             ("fitted clock", fit["predicted"], "#59a14f")):
        fig.add_trace(go.Bar(name=name, x=[label for _, label in METRICS], y=[src[k] * 1e3 for k, _ in METRICS],
                             marker=dict(color=color), hovertemplate=f"{name}: %{{y:,.2f}} ms<extra></extra>"))
    fig.update_layout(**_layout("Mean latency: measured against predicted", barmode="group"))
    fig.update_yaxes(title_text="ms (log scale)", type="log")
    return _as_dict(fig)
