"""The day plan's charts: the fleet over time (replicas desired, ready and starting; the router queue) and
attainment and GPU-hours per hour. Pure functions of the stored answer dict, with the sweeps' look
(:mod:`planner.sweeps.figures`)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from planner.sweeps.figures import COLORS, LAYOUT, _plain, _title

#: Most points per line of the chart over time (a day at a 15 s sync has 5,760 syncs).
MAX_POINTS = 2000


def _thin(cols: dict) -> dict:
    n = len(cols.get("time_s") or [])
    step = max(1, -(-n // MAX_POINTS))
    return {k: v[::step] for k, v in cols.items()} if step > 1 else cols


def build_fleet_figure(answer: dict) -> dict:
    """Replicas (left axis) and the router queue (right axis) against the hour of the day."""
    cols = _thin(answer.get("fleet") or {})
    hours = [t / 3600 for t in cols.get("time_s") or []]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for key, name, color, dash in (("desired", "Desired replicas", COLORS[3], "dot"),
                                   ("ready", "Ready replicas", COLORS[0], "solid"),
                                   ("starting", "Starting replicas", COLORS[2], "dash")):
        fig.add_trace(go.Scatter(x=hours, y=cols.get(key) or [], name=name, mode="lines",
                                 line={"color": color, "dash": dash, "shape": "hv"},
                                 hovertemplate="%{y} " + name.split()[0].lower() + "<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=hours, y=cols.get("router_queue") or [], name="Router queue", mode="lines",
                             line={"color": COLORS[1]}, fill="tozeroy", fillcolor="rgba(220,38,38,0.12)",
                             hovertemplate="%{y} queued<extra></extra>"), secondary_y=True)
    fig.update_xaxes(title_text="Time (hours from the start)", rangemode="tozero")
    fig.update_yaxes(title_text="Replicas (instances)", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="Router queue (requests)", rangemode="tozero", secondary_y=True, showgrid=False)
    fig.update_layout(**LAYOUT, height=420, title=_title("Replicas and router queue over time"))
    return _plain(fig)


def build_hours_figure(answer: dict) -> dict:
    """SLO attainment (%, bars) and GPU-hours (line, right axis) per hour."""
    hours = answer.get("hours") or []
    xs = [h["hour"] for h in hours]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=xs, y=[None if h["attainment"] is None else h["attainment"] * 100 for h in hours],
                         name="SLO attainment (%)", marker={"color": COLORS[2]},
                         hovertemplate="hour %{x}: %{y:.1f} % met<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=xs, y=[h["gpu_hours"] for h in hours], name="GPU-hours", mode="lines+markers",
                             line={"color": COLORS[4]}, hovertemplate="hour %{x}: %{y:.3g} GPU-hours<extra></extra>"),
                  secondary_y=True)
    fig.update_xaxes(title_text="Hour of the day (by arrival)", dtick=1 if len(xs) <= 24 else None)
    fig.update_yaxes(title_text="SLO attainment (%)", range=[0, 105], secondary_y=False)
    fig.update_yaxes(title_text="GPU-hours (per hour)", rangemode="tozero", secondary_y=True, showgrid=False)
    fig.update_layout(**LAYOUT, height=380, title=_title("Attainment and GPU-hours per hour"))
    return _plain(fig)
