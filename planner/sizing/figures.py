"""Plotly figures of the sizing page: pure ``build_*_figure(...) -> dict`` functions.

No request, no ORM: each takes a service result and returns the figure as a
JSON-safe dict (``{"data": [...], "layout": {...}}``), which the page embeds
with ``{% plotly_figure %}`` and ``static/js/figures.js`` draws. Every axis
has a title with its unit, every trace a hover template with units; figures
are sized for a laptop screen (about 360-400 px high, full column width).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import plotly.graph_objects as go

from simulator.sizing import FragmentationResult

from .services import CompareRow, PlanOutcome, memory_segments, short_tokens

HEIGHT = 380  # px
_COLORS = {
    "Weights": "#2450a6",
    "Activation": "#f28e2b",
    "Overhead": "#9c755f",
    "KV cache": "#59a14f",
    "Free": "#d8dde3",
}
_LAYOUT = dict(
    height=HEIGHT,
    margin=dict(l=70, r=30, t=50, b=60),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=13),
    paper_bgcolor="#ffffff",
    plot_bgcolor="#ffffff",
    hoverlabel=dict(namelength=-1),
)


def _as_dict(fig: go.Figure) -> dict:
    """JSON-safe dict of a figure (numpy arrays and numbers made plain)."""
    return json.loads(fig.to_json())


def build_memory_figure(outcome: PlanOutcome) -> dict:
    """Per-GPU memory budget as one stacked horizontal bar: weights, activation, overhead, KV, free (GiB).

    A dashed line marks ``total x gpu_memory_utilization``, the budget vLLM
    works within.
    """
    r = outcome.result
    fig = go.Figure()
    for name, gib in memory_segments(outcome):
        fig.add_trace(go.Bar(
            name=name, x=[round(gib, 4)], y=["Per GPU"], orientation="h",
            marker=dict(color=_COLORS[name]),
            hovertemplate=f"{name}: %{{x:,.2f}} GiB<extra></extra>",
            text=[f"{gib:,.1f}"] if gib >= 0.05 * r.memory_gib.total else [""],
            textposition="inside",
        ))
    budget = r.memory_gib.budget
    fig.add_shape(type="line", x0=budget, x1=budget, y0=-0.5, y1=0.5, line=dict(color="#b3261e", dash="dash"))
    fig.add_annotation(x=budget, y=0.5, yanchor="bottom", showarrow=False,
                       text=f"budget {budget:,.2f} GiB (× {outcome.deployment.gpu_memory_utilization:g})")
    fig.update_layout(
        **{**_LAYOUT, "height": 260},
        barmode="stack",
        title=dict(text=f"Per-GPU memory, {outcome.gpu.name} ({r.memory_gib.total:,.2f} GiB)", x=0),
        xaxis=dict(title=dict(text="Memory per GPU (GiB)"), rangemode="tozero"),
        yaxis=dict(title=dict(text="")),
    )
    return _as_dict(fig)


def build_concurrency_figure(curve: dict, *, title: str = "") -> dict:
    """Maximum concurrent requests against context length per request (log x axis).

    ``curve`` is :func:`planner.sizing.services.concurrency_curve`'s output;
    the chosen ``max_model_len`` is marked.
    """
    xs, ys, mml = curve["context_tokens"], curve["max_concurrency"], curve["max_model_len"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        name="Max concurrency", x=xs, y=[round(y, 3) for y in ys], mode="lines+markers",
        line=dict(color="#2450a6"),
        hovertemplate="%{x:,} tokens per request: %{y:,.2f} requests at once<extra></extra>",
    ))
    if mml in xs:
        y = ys[xs.index(mml)]
        fig.add_trace(go.Scatter(
            name=f"max_model_len = {short_tokens(mml)}", x=[mml], y=[round(y, 3)], mode="markers",
            marker=dict(size=12, color="#b3261e", symbol="diamond"),
            hovertemplate="max_model_len %{x:,} tokens: %{y:,.2f} requests<extra></extra>",
        ))
    fig.add_hline(y=1, line=dict(color="#5b6470", dash="dot"), annotation_text="1 request",
                  annotation_position="bottom left")
    fig.update_layout(
        **_LAYOUT,
        title=dict(text=title or "Maximum concurrency against context length", x=0),
        xaxis=dict(title=dict(text="Tokens per request (prompt + output, tokens)"), type="log"),
        yaxis=dict(title=dict(text="Requests held at once (requests)"), type="log"),
    )
    return _as_dict(fig)


def build_compare_figure(rows: Sequence[CompareRow]) -> dict:
    """The same model on several GPUs: KV cache tokens (bars, left axis) and deployment price (right axis)."""
    names, tokens, conc, prices, hover = [], [], [], [], []
    for row in rows:
        o = row.outcome
        names.append(f"{o.num_gpus}x {row.gpu.name}" if o else row.gpu.name)
        tokens.append(o.total_kv_cache_tokens if o and o.fits else 0)
        conc.append(round(o.total_max_concurrency, 3) if o and o.fits else 0)
        prices.append(round(o.price_per_hour, 2) if o and o.price_per_hour is not None else None)
        hover.append((o.summary if o else row.error)[:300])
    fig = go.Figure()
    fig.add_trace(go.Bar(
        name="KV cache (tokens)", x=names, y=tokens, marker=dict(color="#59a14f"), customdata=list(zip(conc, hover)),
        hovertemplate="%{x}<br>%{y:,} tokens of KV cache<br>%{customdata[0]:,.2f} requests of max_model_len at "
                      "once<extra></extra>",
        yaxis="y",
    ))
    if any(p is not None for p in prices):
        fig.add_trace(go.Scatter(
            name="Price (USD per hour)", x=names, y=prices, mode="markers+text", yaxis="y2",
            marker=dict(size=12, color="#2450a6", symbol="diamond"),
            text=[f"${p:,.2f}/h" if p is not None else "no price" for p in prices], textposition="top center",
            hovertemplate="%{x}<br>$%{y:,.2f} per hour (deployment)<extra></extra>",
        ))
    fig.update_layout(
        **_LAYOUT,
        title=dict(text="Same model, several GPUs", x=0),
        xaxis=dict(title=dict(text="Deployment (GPUs x GPU)")),
        yaxis=dict(title=dict(text="KV cache (tokens)"), rangemode="tozero"),
        yaxis2=dict(title=dict(text="Deployment price (USD per hour)"), overlaying="y", side="right",
                    rangemode="tozero", showgrid=False),
    )
    return _as_dict(fig)


def build_fragmentation_figure(frag: FragmentationResult, *, max_model_len: int, lengths: str = "") -> dict:
    """Requests that fit: naive pre-allocation of ``max_model_len`` per request vs paged blocks."""
    labels = [f"Naive: reserve {short_tokens(max_model_len)} tokens each", "Paged: ceil(length / block) blocks"]
    values = [frag.naive_requests, frag.paged_requests]
    util = [frag.naive_utilization * 100, frag.paged_utilization * 100]
    fig = go.Figure(go.Bar(
        name="Requests that fit", x=labels, y=values, marker=dict(color=["#9c755f", "#59a14f"]),
        customdata=[[round(u, 2)] for u in util],
        text=[f"{v:,}" for v in values], textposition="outside",
        hovertemplate="%{x}<br>%{y:,} requests<br>%{customdata[0]:.1f}% of reserved slots hold tokens"
                      "<extra></extra>",
    ))
    gain = "∞" if frag.naive_requests == 0 else f"{frag.paged_gain:,.1f}x"
    fig.update_layout(
        **_LAYOUT,
        showlegend=False,
        title=dict(text=f"Paged vs naive allocation ({lengths or 'chosen lengths'}): paging fits {gain}", x=0),
        xaxis=dict(title=dict(text="Allocation")),
        yaxis=dict(title=dict(text="Requests in the KV cache at once (requests)"), rangemode="tozero"),
    )
    return _as_dict(fig)
