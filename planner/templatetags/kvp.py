"""Template helpers: Plotly figures and number formatting with units."""

from __future__ import annotations

from django import template
from django.utils.html import format_html, json_script

register = template.Library()


@register.simple_tag
def plotly_figure(fig: dict, fig_id: str, title: str = "") -> str:
    """A figure container plus its JSON; ``static/js/figures.js`` draws it with Plotly.

    ``fig`` is the dict of a ``build_*_figure`` function (``fig.to_plotly_json()``
    made JSON-safe); it is embedded with ``json_script`` so no markup can escape.
    """
    data_id = f"fig-{fig_id}-data"
    return format_html(
        '<div class="figure" id="fig-{}" data-figure="{}" role="img" aria-label="{}"></div>{}',
        fig_id,
        data_id,
        title,
        json_script(fig, data_id),
    )


@register.filter
def thousands(value) -> str:
    """12345.6 -> '12,346'; non-numbers unchanged."""
    try:
        return f"{float(value):,.0f}"
    except (TypeError, ValueError):
        return value


@register.filter
def gib(value, digits: int = 2) -> str:
    """A GiB figure with fixed digits: 12.3456 -> '12.35'."""
    try:
        return f"{float(value):,.{int(digits)}f}"
    except (TypeError, ValueError):
        return value
