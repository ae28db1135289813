"""Plotly figures for sweeps and reports: pure ``build_*_figure`` functions returning figure dicts.

No request, no ORM: inputs are the report body's plain dicts (``points`` with
``params``/``metrics``/``series``). Each function returns ``fig.to_plotly_json()``
made JSON-safe (plain lists, no NaN), ready for ``{% plotly_figure %}``.
Axis titles carry units; hover shows the values; legends name the series.
"""

from __future__ import annotations

import json
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from planner.axis_titles import fit_axis_titles
from planner.sweeps.findings import operating_point_of, report_findings
from planner.sweeps.labels import (  # noqa: F401 - also read as figures.<name> by pages and tests
    AXIS_LABELS,
    METRIC_LABELS,
    axis_label,
    axis_title,
    metric_title,
    value_text,
)

COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d", "#4b5563"]
# No named template: loading "plotly_white" costs ~0.1 s per figure; these few keys give the same look.
# The title sits in the top margin and the legend at the bottom of the figure, below the x axis title
# (``yref="container"``), so they cannot overlap; no fixed width: a figure takes its column's width.
LAYOUT = {"paper_bgcolor": "#ffffff", "plot_bgcolor": "#ffffff",
          "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13},
          "margin": {"l": 76, "r": 30, "t": 60, "b": 104}, "hovermode": "x unified",
          "legend": {"orientation": "h", "xanchor": "left", "x": 0, "yanchor": "bottom", "y": 0.01,
                     "yref": "container"}}
TITLE = {"x": 0.01, "xanchor": "left", "y": 0.985, "yanchor": "top", "yref": "container", "font": {"size": 15}}


GRID = {"gridcolor": "#e5e7eb", "zerolinecolor": "#d1d5db", "linecolor": "#9ca3af", "showline": True}


def _plain(fig: go.Figure) -> dict:
    fig.update_xaxes(**GRID)
    fig.update_yaxes(**GRID)
    fit_axis_titles(fig)
    return json.loads(fig.to_json())


def _title(text: str) -> dict:
    return {**TITLE, "text": text}


def _num(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def _series_split(points: list[dict], param: str, arrival_unit: str = "step") -> dict[str, list[dict]]:
    """Points grouped by the other axis (for one line per value), sorted along ``param``."""
    groups: dict[str, list[dict]] = {}
    for p in points:
        other = {k: v for k, v in p["params"].items() if k != param}
        label = ", ".join(value_text(k, v, arrival_unit) for k, v in other.items())
        groups.setdefault(label, []).append(p)
    for pts in groups.values():
        pts.sort(key=lambda p: p["params"][param] if not isinstance(p["params"][param], str) else 0)
    return groups


def _group_value(points: list[dict], param: str, arrival_unit: str = "step") -> tuple[str, dict[str, str]]:
    """The legend's title (the other axis, with its unit) and each series label's short value.

    A two-axis figure's legend names one colour per value of the other axis ("64", "128"), under a
    title that says which axis ("Max running requests (requests)"), instead of one long entry per trace.
    """
    others = [k for p in points for k in p["params"] if k != param]
    other = others[0] if others else None
    if other is None:
        return "", {}
    short = {}
    for p in points:
        label = ", ".join(value_text(k, v, arrival_unit) for k, v in p["params"].items() if k != param)
        v = p["params"].get(other)
        short[label] = ("on" if v else "off") if isinstance(v, bool) else (
            f"{v:,}" if isinstance(v, (int, float)) else str(v))
    return axis_title(other, arrival_unit), short


def _time_unit(points: list[dict]) -> str:
    """'s' when latencies in seconds exist (arrivals in seconds), else 'steps': the metrics' suffix."""
    return "s" if any(p["metrics"].get("ttft_p99_s") is not None for p in points) else "steps"


def _shown_unit(tu: str) -> tuple[str, float]:
    """The unit a latency of metric suffix ``tu`` is drawn in, and the factor to it: seconds are drawn in ms
    (as the table, the advice and the targets give them), engine steps as steps."""
    return ("ms", 1000.0) if tu == "s" else ("steps", 1.0)


def _add_ttft_traces(fig: go.Figure, xs: list, pts: list[dict], tu: str, suffix: str, label: str, color: str,
                     hover_x: str = "", legend_name: str | None = None) -> None:
    """TTFT p50 (dotted) and p99 (solid) of ``pts`` in the second row of a two-row sweep figure.

    ``legend_name`` (a two-axis figure) names both traces by their series and hides them from the
    legend (the series' first trace is its entry); hover still says which percentile.
    """
    unit, factor = _shown_unit(tu)
    for q, dash in (("p50", "dot"), ("p99", "solid")):
        full = f"TTFT {q}{suffix}"
        ys = [_num(p["metrics"].get(f"ttft_{q}_{tu}")) for p in pts]
        fig.add_trace(go.Scatter(x=xs, y=[None if y is None else y * factor for y in ys],
                                 name=legend_name or full, mode="lines+markers", legendgroup=label,
                                 showlegend=legend_name is None, line={"color": color, "dash": dash},
                                 hovertemplate=f"{hover_x}%{{y:,.3g}} {unit}<extra>{full}</extra>"),
                      row=2, col=1)


def build_sweep_figure(points: list[dict], param: str, *, cliff: dict | None = None, base_x: float | None = None,
                       arrival_unit: str = "step", title: str = "") -> dict:
    """Preemptions per request, TTFT p50/p99 and throughput against one axis (three stacked panels).

    ``cliff`` (``{"x", "text"}``) draws a vertical marker; ``base_x`` marks the deployment as sized.
    With a second axis the legend has one entry per value of it (a colour), titled with that axis.
    """
    tu = _time_unit(points)
    tput_key, tput_unit = ("throughput_tok_s", "tokens/s") if any(
        p["metrics"].get("throughput_tok_s") is not None for p in points) else ("throughput_tok_per_step",
                                                                                  "tokens/step")
    groups = _series_split(points, param, arrival_unit)
    legend_title, short = _group_value(points, param, arrival_unit)
    ttft_title = f"TTFT ({_shown_unit(tu)[0]}): p99 solid, p50 dotted"
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.09,
                        subplot_titles=("Preemptions per request", ttft_title, f"Throughput ({tput_unit})"))
    for i, (label, pts) in enumerate(groups.items()):
        color = COLORS[i % len(COLORS)]
        xs = [p["params"][param] for p in pts]
        suffix = f" [{label}]" if label else ""
        entry = short.get(label) if len(groups) > 1 else None
        fig.add_trace(go.Scatter(x=xs, y=[_num(p["metrics"].get("preemptions_per_request")) for p in pts],
                                 name=entry or f"Preemptions per request{suffix}", mode="lines+markers",
                                 line={"color": color}, legendgroup=label,
                                 hovertemplate=f"%{{y:.3f}} preemptions/request<extra>Preemptions{suffix}</extra>"),
                      row=1, col=1)
        _add_ttft_traces(fig, xs, pts, tu, suffix, label, color, legend_name=entry)
        fig.add_trace(go.Scatter(x=xs, y=[_num(p["metrics"].get(tput_key)) for p in pts],
                                 name=entry or f"Throughput{suffix}", mode="lines+markers", legendgroup=label,
                                 showlegend=entry is None, line={"color": color, "dash": "dash"},
                                 hovertemplate=f"%{{y:,.4g}} {tput_unit}<extra>Throughput{suffix}</extra>"),
                      row=3, col=1)
    fig.update_xaxes(title_text=axis_title(param, arrival_unit), row=3, col=1)
    fig.update_yaxes(title_text="events/request", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=_shown_unit(tu)[0], rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text=tput_unit, rangemode="tozero", row=3, col=1)
    _, x_unit = axis_label(param, arrival_unit)
    for x, text, color in (((cliff or {}).get("x"), (cliff or {}).get("text", "cliff"), "#dc2626"),
                           (base_x, "your deployment", "#059669")):
        if x is None:
            continue
        # One dashed line through the three panels, named in the legend (labels on the lines would
        # collide with the panel titles).
        fig.add_vline(x=x, line_dash="dash", line_color=color, row="all", col=1)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"color": color, "dash": "dash"},
                                 name=f"{text}: {x:,} {x_unit}".rstrip(), hoverinfo="skip"), row=1, col=1)
    layout = {**LAYOUT, "legend": {**LAYOUT["legend"], "title": {"text": legend_title + ":"}}} \
        if len(groups) > 1 and legend_title else LAYOUT
    fig.update_layout(**layout, height=700, title=_title(title or f"Sweep over {axis_title(param, arrival_unit)}"))
    return _plain(fig)


def build_kv_sweep_figure(points: list[dict], *, cliff: dict | None = None, base_blocks: int | None = None) -> dict:
    """The KV cliff figure: preemptions, TTFT and throughput against KV blocks."""
    return build_sweep_figure(points, "num_gpu_blocks", cliff=cliff, base_x=base_blocks,
                              title="Preemption cliff: KV blocks")


def build_rate_sweep_figure(points: list[dict], *, arrival_unit: str = "step", cliff: dict | None = None) -> dict:
    """Latency and throughput curves against the request rate."""
    return build_sweep_figure(points, "rate", cliff=cliff, arrival_unit=arrival_unit,
                              title="Latency and throughput against request rate")


def build_timeseries_figure(point: dict) -> dict:
    """KV usage (%, left axis), running and waiting requests (right axis) over time for one point."""
    s = point.get("series") or {}
    x_key = "time_s" if s.get("time_s") else "step"
    xs = s.get(x_key) or []
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=xs, y=[None if v is None else v * 100 for v in s.get("kv_usage") or []],
                             name="KV usage (%)", line={"color": COLORS[0]}, fill="tozeroy",
                             hovertemplate="%{y:.1f}% KV<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=xs, y=s.get("num_running") or [], name="Running requests", line={"color": COLORS[2]},
                             hovertemplate="%{y} running<extra></extra>"), secondary_y=True)
    fig.add_trace(go.Scatter(x=xs, y=s.get("num_waiting") or [], name="Waiting requests", line={"color": COLORS[1]},
                             hovertemplate="%{y} waiting<extra></extra>"), secondary_y=True)
    label = ", ".join(f"{axis_label(k)[0]} = {v:,}" if isinstance(v, (int, float)) and not isinstance(v, bool)
                      else f"{axis_label(k)[0]} = {v}" for k, v in point.get("params", {}).items())
    fig.update_xaxes(title_text="Time (s)" if x_key == "time_s" else "Time (engine steps)")
    fig.update_yaxes(title_text="KV usage (%)", range=[0, 105], secondary_y=False)
    fig.update_yaxes(title_text="Running, waiting (requests)", rangemode="tozero", secondary_y=True, showgrid=False)
    fig.update_layout(**LAYOUT, height=400, title=_title(f"Over time at {label or 'the base point'}"))
    return _plain(fig)


def build_prefix_hit_figure(points: list[dict]) -> dict:
    """Prefix-cache hit rate against KV cache size (tokens), one line per other setting."""
    groups: dict[str, list[dict]] = {}
    for p in points:
        other = {k: v for k, v in p["params"].items() if k not in ("num_gpu_blocks", "gpu_memory_utilization",
                                                                    "block_size", "gpu", "tensor_parallel_size")}
        groups.setdefault(", ".join(f"{k}={v}" for k, v in other.items()), []).append(p)
    fig = go.Figure()
    for i, (label, pts) in enumerate(groups.items()):
        pts = sorted(pts, key=lambda p: p["metrics"]["kv_cache_tokens"])
        fig.add_trace(go.Scatter(x=[p["metrics"]["kv_cache_tokens"] for p in pts],
                                 y=[None if p["metrics"].get("prefix_cache_hit_rate") is None
                                    else p["metrics"]["prefix_cache_hit_rate"] * 100 for p in pts],
                                 name=label or "Prefix-cache hit rate", mode="lines+markers",
                                 line={"color": COLORS[i % len(COLORS)]},
                                 hovertemplate="%{x:,} tokens: %{y:.1f}% hits<extra>%{fullData.name}</extra>"))
    fig.update_xaxes(title_text="KV cache size (tokens)")
    fig.update_yaxes(title_text="Prefix-cache hit rate (%)", range=[0, 100])
    fig.update_layout(**LAYOUT, height=400, title=_title("Prefix-cache hit rate against cache size"))
    return _plain(fig)


def _ms(v):
    """Seconds -> milliseconds (None stays None)."""
    v = _num(v)
    return None if v is None else v * 1000


def _wide(values) -> bool:
    """True when positive values span more than 20x: a log axis reads them better."""
    vs = [v for v in values if v is not None and v > 0]
    return len(vs) > 1 and max(vs) / min(vs) > 20


def build_replicas_figure(points: list[dict], *, slo: dict | None = None, percentile: str = "p90",
                          answer: int | None = None, arrival_unit: str = "s", title: str = "") -> dict:
    """TTFT and ITL at a percentile (ms) against the number of replicas, the SLOs as dashed lines.

    ``points`` are report points (``params.num_instances`` and ``metrics.ttft_<pct>_s`` /
    ``itl_<pct>_s``); one line per value of another axis (e.g. per request rate). ``answer``
    marks the fewest replicas meeting the SLOs.
    """
    slo = slo or {}
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=(f"Time to first token, {percentile}", f"Inter-token latency, {percentile}"))
    ys: dict[int, list] = {1: [], 2: []}
    xs_all: set = set()
    for i, (label, pts) in enumerate(_series_split(points, "num_instances", arrival_unit).items()):
        color = COLORS[i % len(COLORS)]
        xs = [p["params"]["num_instances"] for p in pts]
        xs_all.update(xs)
        suffix = f" [{label}]" if label else ""
        for row, key, name in ((1, "ttft", "TTFT"), (2, "itl", "ITL")):
            y = [_ms(p["metrics"].get(f"{key}_{percentile}_s")) for p in pts]
            ys[row] += y
            fig.add_trace(go.Scatter(x=xs, y=y, name=f"{name} {percentile}{suffix}", mode="lines+markers",
                                     legendgroup=label, line={"color": color, "dash": "solid" if row == 1 else "dot"},
                                     hovertemplate="%{x} replicas: %{y:,.4g} ms<extra>%{fullData.name}</extra>"),
                          row=row, col=1)
    for row, key, name in ((1, "ttft_s", "TTFT"), (2, "itl_s", "ITL")):
        target = _ms(slo.get(key))
        if target is None:
            continue
        ys[row].append(target)
        fig.add_hline(y=target, line_dash="dash", line_color="#6b7280", row=row, col=1)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"color": "#6b7280", "dash": "dash"},
                                 name=f"{name} target: {target:,.4g} ms", hoverinfo="skip"), row=row, col=1)
    if answer is not None:
        fig.add_vline(x=answer, line_dash="dash", line_color="#059669", row="all", col=1)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"color": "#059669", "dash": "dash"},
                                 name=f"fewest meeting the targets: {answer}", hoverinfo="skip"), row=1, col=1)
    ticks = sorted(xs_all)
    fig.update_xaxes(tickmode="array", tickvals=ticks, ticktext=[f"{x:,}" for x in ticks])
    fig.update_xaxes(title_text="Replicas (instances)", row=2, col=1)
    for row, name in ((1, "TTFT"), (2, "ITL")):
        log = _wide(ys[row])
        extra = {"type": "log", "dtick": 1, "tickformat": ",.0f"} if log else {"rangemode": "tozero"}
        fig.update_yaxes(title_text=f"{name} {percentile} (ms)", row=row, col=1, **extra)
    fig.update_layout(**{**LAYOUT, "hovermode": "closest"}, height=560,
                      title=_title(title or f"Latency {percentile} against replicas"))
    return _plain(fig)


def build_tier_figure(points: list[dict], *, arrival_unit: str = "step") -> dict:
    """Prefix-cache hit rate (%) and TTFT p50/p99 (s) against the CPU KV tier size (GiB).

    One line per value of another axis; hover adds the prefix tokens found in the CPU tier.
    """
    tu = _time_unit(points)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=("Prefix-cache hit rate", f"Time to first token ({_shown_unit(tu)[0]})"))
    for i, (label, pts) in enumerate(_series_split(points, "cpu_tier_gib", arrival_unit).items()):
        color = COLORS[i % len(COLORS)]
        xs = [p["params"]["cpu_tier_gib"] for p in pts]
        suffix = f" [{label}]" if label else ""
        hits = [p["metrics"].get("prefix_cache_hit_rate") for p in pts]
        fig.add_trace(go.Scatter(
            x=xs, y=[None if h is None else h * 100 for h in hits], name=f"Prefix-cache hit rate{suffix}",
            mode="lines+markers", legendgroup=label, line={"color": color},
            customdata=[[p["metrics"].get("cpu_tier_hit_tokens") or 0] for p in pts],
            hovertemplate="%{x:,} GiB: %{y:.1f}% hits (%{customdata[0]:,} tokens from the CPU tier)"
                          "<extra>%{fullData.name}</extra>"), row=1, col=1)
        _add_ttft_traces(fig, xs, pts, tu, suffix, label, color, hover_x="%{x:,} GiB: ")
    fig.update_xaxes(title_text=axis_title("cpu_tier_gib", arrival_unit), row=2, col=1)
    fig.update_yaxes(title_text="Prefix-cache hit rate (%)", range=[0, 100], row=1, col=1)
    fig.update_yaxes(title_text=f"TTFT ({_shown_unit(tu)[0]})", rangemode="tozero", row=2, col=1)
    fig.update_layout(**LAYOUT, height=560, title=_title("Prefix-cache hits and TTFT against CPU KV tier size"))
    return _plain(fig)


def build_heatmap_figure(points: list[dict], x_param: str, y_param: str, metric: str, *,
                         unit: str = "", arrival_unit: str = "step", factor: float = 1.0) -> dict:
    """A two-axis sweep as a heatmap of ``metric`` (times ``factor``: seconds drawn in ms)."""
    xs = sorted({p["params"][x_param] for p in points}, key=_sort_key)
    ys = sorted({p["params"][y_param] for p in points}, key=_sort_key)
    z = [[None for _ in xs] for _ in ys]
    for p in points:
        v = _num(p["metrics"].get(metric))
        z[ys.index(p["params"][y_param])][xs.index(p["params"][x_param])] = None if v is None else v * factor
    vals = [v for row in z for v in row if v is not None]
    same = bool(vals) and min(vals) == max(vals)
    fig = go.Figure(go.Heatmap(
        x=[str(x) for x in xs], y=[str(y) for y in ys], z=z, colorscale="Viridis",
        # every cell equal: write the value in the cells instead of a flat colour that says nothing
        texttemplate="%{z:,.4g}" if same else None, showscale=not same,
        colorbar={"title": {"text": unit or metric}},
        hovertemplate=f"{axis_label(x_param, arrival_unit)[0]} %{{x}}<br>{axis_label(y_param, arrival_unit)[0]} "
                      f"%{{y}}<br>{METRIC_LABELS.get(metric, (metric,))[0]}: %{{z:,.4g}} {unit}<extra></extra>"))
    fig.update_xaxes(title_text=axis_title(x_param, arrival_unit), type="category")
    # a long vertical title would run up into the figure's title: two lines
    fig.update_yaxes(title_text=_two_lines(axis_title(y_param, arrival_unit)), type="category")
    name = METRIC_LABELS.get(metric, (metric.replace("_", " "),))[0]
    title = f"{name} ({unit})" if unit else name
    if same:
        title += f": {vals[0]:,.4g} at every point"
    fig.update_layout(**{**LAYOUT, "hovermode": "closest"}, height=460, title=_title(title))
    return _plain(fig)


def _two_lines(text: str, width: int = 26) -> str:
    """``text`` broken at the space nearest its middle when longer than ``width`` (Plotly's ``<br>``)."""
    if len(text) <= width or " " not in text:
        return text
    mid = len(text) // 2
    cut = min((i for i, ch in enumerate(text) if ch == " "), key=lambda i: abs(i - mid))
    return f"{text[:cut]}<br>{text[cut + 1:]}"


def _sort_key(v):
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def build_cost_figure(points: list[dict], param: str, *, arrival_unit: str = "step") -> dict:
    """Cost per hour (bars) and per million output tokens (lines) at each point, where GPUs have a price.

    With a second axis there is one bar and one line per value of that axis, side by side (never
    stacked: a bar is one deployment's cost, not a sum) and a line never jumps between series.
    """
    groups = _series_split(points, param, arrival_unit)
    legend_title, short = _group_value(points, param, arrival_unit)
    many = len(groups) > 1
    cats = sorted({p["params"].get(param) for p in points}, key=_sort_key)
    labels = [str(c) for c in cats]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for i, (label, pts) in enumerate(groups.items()):
        by_x = {str(p["params"].get(param)): p["metrics"] for p in pts}
        color = COLORS[i % len(COLORS)] if len(groups) > 1 else COLORS[5]
        suffix = f" [{label}]" if label else ""
        fig.add_trace(go.Bar(x=labels, y=[_num((by_x.get(x) or {}).get("cost_per_hour")) for x in labels],
                             name=short.get(label) if many else "USD per hour", marker_color=color,
                             legendgroup=label, offsetgroup=str(i),
                             hovertemplate=f"$%{{y:,.2f}}/h<extra>USD per hour{suffix}</extra>"),
                      secondary_y=False)
        fig.add_trace(go.Scatter(x=labels, y=[_num((by_x.get(x) or {}).get("cost_per_m_output_tokens"))
                                              for x in labels],
                                 name=short.get(label) if many else "USD per million output tokens",
                                 mode="lines+markers", legendgroup=label, showlegend=not many,
                                 line={"color": color if many else COLORS[3]},
                                 hovertemplate=f"$%{{y:,.2f}} per M tokens<extra>USD per M tokens{suffix}</extra>"),
                      secondary_y=True)
    fig.update_xaxes(title_text=axis_title(param, arrival_unit), type="category")
    fig.update_yaxes(title_text="Cost per hour (USD per hour)", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="Cost per output (USD per million tokens)", rangemode="tozero", secondary_y=True)
    layout = {**LAYOUT, "legend": {**LAYOUT["legend"], "title": {"text": legend_title + ":"}}} if many else LAYOUT
    fig.update_layout(**layout, height=400, barmode="group",
                      title=_title("Cost per hour (bars) and per million output tokens (lines)"))
    return _plain(fig)


def build_cliff_search_figure(history: list[list[float]], *, param: str, metric: str, limit: float,
                              cliff_x: float | None, status: str = "found", arrival_unit: str = "step") -> dict:
    """The probes of a cliff search: metric against the searched parameter, the limit and the cliff.

    A search that found no crossing (``status`` ``all_good`` / ``all_bad``) draws its probes as points
    only (a line between the two ends would invent the values in between) and says so in the title.
    """
    hist = sorted(history, key=lambda h: h[0])
    found = status == "found"
    fig = go.Figure(go.Scatter(x=[h[0] for h in hist], y=[_num(h[1]) for h in hist],
                               mode="markers+lines" if found else "markers", marker={"size": 9},
                               name=metric_title(metric), line={"color": COLORS[0]},
                               hovertemplate=f"{axis_title(param, arrival_unit)}: %{{x:,}}<br>{metric_title(metric)}: "
                                             "%{y:,.4g}<extra></extra>"))
    fig.add_hline(y=limit, line_dash="dot", line_color="#6b7280", annotation_text=f"limit {limit:,.3g}")
    if cliff_x is not None:
        fig.add_vline(x=cliff_x, line_dash="dash", line_color="#dc2626", annotation_text="cliff")
    fig.update_xaxes(title_text=axis_title(param, arrival_unit))
    fig.update_yaxes(title_text=metric_title(metric), rangemode="tozero")
    n = len(history)
    title = f"Cliff search: {n} simulation{'s' if n != 1 else ''}"
    if status == "all_good":
        title += ", no cliff in this range"
    elif status == "all_bad":
        title += ", past the limit across the range"
    fig.update_layout(**{**LAYOUT, "hovermode": "closest"}, height=400, title=_title(title))
    return _plain(fig)


def report_figures(body: dict, *, findings: dict | None = None,
                   point_index: int | None = None) -> list[tuple[str, str, dict]]:
    """The figures a report shows, as ``(id, title, figure)``; which ones depends on the axes.

    ``findings``: the report's (:mod:`planner.sweeps.findings`: its cliff, operating point and replicas),
    computed here when not given. ``point_index`` picks the point of the over-time figure (default: the
    operating point).
    """
    inputs = body.get("inputs", {})
    points = body.get("points") or []
    if not points:
        return []
    findings = findings or report_findings(body)
    unit = (inputs.get("workload") or {}).get("arrival_unit", "step")
    figs: list[tuple[str, str, dict]] = []
    cliff = findings["cliff"]
    cliff_mark = None
    if cliff:
        cliff_mark = {"x": cliff["x"], "text": "cliff"}
    base_blocks = (inputs.get("sizing") or {}).get("num_gpu_blocks") or inputs.get("engine", {}).get("num_gpu_blocks")
    axes = [a["param"] for a in inputs.get("axes") or []]
    if inputs.get("cliff"):
        c = inputs["cliff"]
        cr = body.get("cliff_result") or {}
        figs.append(("cliff-search", "Cliff search", build_cliff_search_figure(
            cr.get("history") or [], param=c["param"], metric=c["metric"], limit=cr.get("limit", c["threshold"]),
            cliff_x=cr.get("cliff"), status=cr.get("status", "found"), arrival_unit=unit)))
        axes = [c["param"]]
    numeric = [a for a in axes if a not in ("gpu", "enable_prefix_caching", "routing")]  # not numbers
    slo = inputs.get("slo") or {}
    pct = slo.get("percentile", "p90")
    if "num_instances" in axes and any(p["metrics"].get(f"ttft_{pct}_s") is not None for p in points):
        answers = [r["num_instances"] for r in findings["replicas"]]
        figs.append(("replicas", "Latency against replicas", build_replicas_figure(
            points, slo=slo, percentile=pct, answer=answers[0] if len(answers) == 1 else None,
            arrival_unit=unit)))
    if "cpu_tier_gib" in axes:
        figs.append(("tier", "CPU KV tier", build_tier_figure(points, arrival_unit=unit)))
    if len(axes) == 2:
        x, y = axes
        figs.append(("heat-preempt", "Preemptions per request", build_heatmap_figure(
            points, x, y, "preemptions_per_request", unit="events/request", arrival_unit=unit)))
        tu = _time_unit(points)
        shown, factor = _shown_unit(tu)
        figs.append(("heat-ttft", "TTFT p99", build_heatmap_figure(
            points, x, y, f"ttft_p99_{tu}", unit=shown, arrival_unit=unit, factor=factor)))
    if numeric:
        param = numeric[0]
        title = {"num_gpu_blocks": "Preemption cliff: KV blocks", "rate": "Latency and throughput against rate"}.get(
            param, f"Sweep over {axis_title(param, unit)}")
        figs.append(("sweep", title, build_sweep_figure(
            points, param, cliff=cliff_mark if cliff and cliff["param"] == param else None,
            base_x=base_blocks if param == "num_gpu_blocks" else None, arrival_unit=unit, title=title)))
    elif axes:
        figs.append(("sweep", "Comparison", build_sweep_figure(points, axes[0], arrival_unit=unit,
                                                               title=f"Comparison by {axis_title(axes[0])}")))
    kv_sizes = {p["metrics"].get("kv_cache_tokens") for p in points}
    if len(kv_sizes) > 1 and any((p["metrics"].get("prefix_cache_hit_rate") or 0) > 0 for p in points):
        figs.append(("prefix", "Prefix-cache hit rate", build_prefix_hit_figure(points)))
    if any(p["metrics"].get("cost_per_m_output_tokens") for p in points) and axes:
        figs.append(("cost", "Cost", build_cost_figure(points, axes[0], arrival_unit=unit)))
    chosen = None
    if point_index is not None:
        chosen = next((p for p in points if p["index"] == point_index), None)
    chosen = chosen or operating_point_of(body, findings)
    if chosen and chosen.get("series"):
        figs.append(("timeline", "Over time", build_timeseries_figure(chosen)))
    return figs
