"""Axis titles that fit their axis: a title longer than its axis is broken before its unit.

A y axis title is drawn along the plot's height: on a 400 px figure with its margins a
title like "Preemptions per request (events/request)" (about 290 px) runs past the plot
into the chart's title. An x title of a narrow subplot (two side by side on a phone)
runs under its neighbour's tick labels. Both are broken onto two lines, the name and then
its unit in brackets, and the axis gets Plotly's ``automargin`` so the margin makes room
for the second line. Used by every figure builder before it serializes a figure.
"""

from __future__ import annotations

import plotly.graph_objects as go

#: Mean width of a title character at the shared 13-14 px title font.  # px
PX_PER_CHAR = 7.5
#: Plot width assumed for x titles: a phone's (390 px) less the margins; figures are as wide as their box.  # px
NARROW_PLOT_PX = 280.0


def _broken(text: str) -> str:
    """``"Name (unit)"`` as ``"Name<br>(unit)"``; a title without a unit is kept."""
    if "<br>" in text or " (" not in text:
        return text
    name, unit = text.rsplit(" (", 1)
    return f"{name}<br>({unit}"


def fit_axis_titles(fig: go.Figure) -> None:
    """Break the titles of ``fig``'s axes that are longer than their axis (see the module docstring)."""
    layout = fig.layout
    margin = layout.margin
    height = (layout.height or 450) - (margin.t if margin.t is not None else 100) - (
        margin.b if margin.b is not None else 80)

    def fit(axis, room: float) -> None:
        text = axis.title.text if axis.title else None
        if text and len(text) * PX_PER_CHAR > room and _broken(text) != text:
            axis.update(title_text=_broken(text), automargin=True)

    fig.for_each_yaxis(lambda ax: fit(ax, height * (ax.domain[1] - ax.domain[0] if ax.domain else 1.0)))
    fig.for_each_xaxis(lambda ax: fit(ax, NARROW_PLOT_PX * (ax.domain[1] - ax.domain[0] if ax.domain else 1.0)))
