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
from plotly.subplots import make_subplots

from planner.axis_titles import fit_axis_titles
from simulator.sizing import FragmentationResult

from .services import CompareRow, PlanOutcome, memory_segment_notes, memory_segments, short_tokens

HEIGHT = 380  # px
_COLORS = {
    "Weights": "#2450a6",
    "Activation": "#f28e2b",
    "Overhead": "#9c755f",
    "LoRA": "#b07aa1",
    "Encoder cache": "#76b7b2",
    "KV cache": "#59a14f",
    "Free": "#d8dde3",
}
#: Shared look. The title sits in the top margin, the legend at the bottom of the figure (below the x axis
#: title, ``yref="container"``), so neither can overlap the other; no fixed width: the figure takes its
#: column's width (``responsive`` in static/js/figures.js), a laptop column is about 760 px.
_LAYOUT = dict(
    height=HEIGHT,
    margin=dict(l=72, r=30, t=56, b=104),
    title=dict(x=0.01, xanchor="left", y=0.985, yanchor="top", yref="container", font=dict(size=15)),
    legend=dict(orientation="h", xanchor="left", x=0, yanchor="bottom", y=0.01, yref="container"),
    font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=13),
    paper_bgcolor="#ffffff",
    plot_bgcolor="#ffffff",
    hoverlabel=dict(namelength=-1),
)
_GRID = dict(gridcolor="#e5e7eb", zerolinecolor="#d1d5db", linecolor="#9ca3af", showline=True)


def _layout(title: str, **changes) -> dict:
    """The shared layout with ``title`` and any key replaced (``margin``, ``height``, ``legend``...)."""
    return {**_LAYOUT, **changes, "title": {**_LAYOUT["title"], "text": title}}


def _as_dict(fig: go.Figure) -> dict:
    """JSON-safe dict of a figure (numpy arrays and numbers made plain), axes with the shared grid."""
    fig.update_xaxes(**_GRID)
    fig.update_yaxes(**_GRID)
    fit_axis_titles(fig)
    return json.loads(fig.to_json())


def build_memory_figure(outcome: PlanOutcome) -> dict:
    """Per-GPU memory budget as one stacked horizontal bar: weights, activation, overhead, KV, free (GiB).

    A dashed line marks ``total x gpu_memory_utilization``, the budget vLLM
    works within.
    """
    r = outcome.result
    fig = go.Figure()
    notes = memory_segment_notes(outcome)
    for name, gib in memory_segments(outcome):
        note = notes.get(name, "")
        fig.add_trace(go.Bar(
            name=f"{name} ({gib:,.1f} GiB)", x=[round(gib, 4)], y=["Per GPU"], orientation="h",
            marker=dict(color=_COLORS[name]),
            hovertemplate=f"{name}: %{{x:,.2f}} GiB" + (f"<br>{note}" if note else "") + "<extra></extra>",
            text=[f"{name} {gib:,.1f} GiB"] if gib >= 0.12 * r.memory_gib.total else [""],
            textposition="inside", insidetextanchor="middle",
        ))
    budget = r.memory_gib.budget
    fig.add_shape(type="line", x0=budget, x1=budget, y0=-0.5, y1=0.5, line=dict(color="#b3261e", dash="dash"))
    fig.add_annotation(x=budget, y=0.5, yanchor="bottom", xanchor="right", showarrow=False,
                       font=dict(color="#b3261e"),
                       text=f"vLLM's budget {budget:,.2f} GiB (× {outcome.deployment.gpu_memory_utilization:g})")
    fig.update_layout(
        **_layout(f"Per-GPU memory, {outcome.gpu.name} ({r.memory_gib.total:,.2f} GiB as vLLM sees it)",
                  height=250, margin=dict(l=20, r=20, t=70, b=100),
                  legend={**_LAYOUT["legend"], "traceorder": "normal"}),
        barmode="stack",
        bargap=0.15,
        xaxis=dict(title=dict(text="Memory per GPU (GiB)"), rangemode="tozero", range=[0, r.memory_gib.total]),
        yaxis=dict(visible=False),
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
        **_layout(title or "Maximum concurrency against context length"),
        xaxis=dict(title=dict(text="Tokens per request (prompt + output, tokens)"), type="log", dtick=1),
        yaxis=dict(title=dict(text="Requests held at once (requests)"), type="log", dtick=1),
    )
    return _as_dict(fig)


def build_compare_figure(rows: Sequence[CompareRow]) -> dict:
    """The same model on several GPUs, two panels side by side: KV cache tokens and the deployment's price.

    A GPU where the model does not fit gets no bar and no price, only the words "does not fit".
    """
    names, tokens, conc, prices, no_fit = [], [], [], [], []
    for row in rows:
        o = row.outcome
        fits = bool(o and o.fits)
        names.append(f"{o.num_gpus}x {row.gpu.name}" if o else row.gpu.name)
        tokens.append(o.total_kv_cache_tokens if fits else None)
        conc.append(round(o.total_max_concurrency, 3) if fits else None)
        prices.append(round(o.price_per_hour, 2) if fits and o.price_per_hour is not None else None)
        if not fits:
            no_fit.append(names[-1])
    # Horizontal bars, one row per deployment in the table's order (top to bottom), names read level.
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=("KV cache", "Price"))
    fig.add_trace(go.Bar(
        name="KV cache (tokens)", y=names, x=tokens, orientation="h", marker=dict(color="#59a14f"),
        customdata=conc, text=[f"{t:,}" if t is not None else "" for t in tokens], textposition="auto",
        hovertemplate="%{y}<br>%{x:,} tokens of KV cache<br>%{customdata:,.2f} requests of max_model_len at "
                      "once<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Bar(
        name="Price (USD per hour)", y=names, x=prices, orientation="h", marker=dict(color="#2450a6"),
        text=[f"${p:,.2f}/h" if p is not None else "" for p in prices], textposition="auto",
        hovertemplate="%{y}<br>$%{x:,.2f} per hour (deployment)<extra></extra>",
    ), row=1, col=2)
    for name in no_fit:
        for xref, yref in (("x domain", "y"), ("x2 domain", "y2")):
            fig.add_annotation(y=name, yref=yref, x=0.02, xref=xref, xanchor="left", showarrow=False,
                               text="does not fit", font=dict(color="#b3261e", size=13))
    for name, price in zip(names, prices):
        if price is None and name not in no_fit:
            fig.add_annotation(y=name, yref="y2", x=0.02, xref="x2 domain", xanchor="left", showarrow=False,
                               text="no price", font=dict(color="#596270"))
    fig.update_layout(**_layout("The same model on each GPU", height=max(240, 150 + 50 * len(names)),
                                margin=dict(l=150, r=24, t=72, b=56)),
                      showlegend=False, bargap=0.3)
    fig.update_yaxes(type="category", autorange="reversed")
    # Short titles: on a phone each panel is about 75 px wide (the names take the left margin), and longer
    # ones ran into each other; the panels' own titles and the hover say what is measured.
    fig.update_xaxes(title_text="tokens", rangemode="tozero", nticks=4, row=1, col=1)
    fig.update_xaxes(title_text="USD per hour", rangemode="tozero", nticks=4, row=1, col=2)
    return _as_dict(fig)


def build_fragmentation_figure(frag: FragmentationResult, *, max_model_len: int, lengths: str = "") -> dict:
    """Requests that fit: naive pre-allocation of ``max_model_len`` per request vs paged blocks."""
    labels = [f"Naive: reserve {short_tokens(max_model_len)} tokens each", "Paged: ceil(length / block) blocks"]
    values = [frag.naive_requests, frag.paged_requests]
    util = [frag.naive_utilization * 100, frag.paged_utilization * 100]
    fig = go.Figure(go.Bar(
        name="Requests that fit", x=labels, y=values, marker=dict(color=["#9c755f", "#59a14f"]),
        customdata=[[round(u, 2)] for u in util],
        text=[f"{v:,} requests" for v in values], textposition="outside", cliponaxis=False,
        hovertemplate="%{x}<br>%{y:,} requests<br>%{customdata[0]:.1f}% of reserved slots hold tokens"
                      "<extra></extra>",
    ))
    # naive fits none when not even one max_model_len request fits: say that, not "infinitely more"
    gain = "naive allocation fits none" if frag.naive_requests == 0 else f"paging fits {frag.paged_gain:,.1f}x"
    fig.update_layout(
        **_layout(f"Paged vs naive allocation ({lengths or 'chosen lengths'}): {gain}",
                  margin=dict(l=72, r=30, t=56, b=64)),
        showlegend=False,
        xaxis=dict(title=dict(text="Allocation of each request's KV cache"), type="category"),
        yaxis=dict(title=dict(text="Requests held at once (requests)"), rangemode="tozero"),
    )
    return _as_dict(fig)
