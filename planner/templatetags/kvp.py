"""Template helpers: Plotly figures (and loading Plotly only where one is drawn), numbers with units."""

from __future__ import annotations

from django import template
from django.templatetags.static import static
from django.utils.html import format_html, json_script

from planner.plotly_assets import PLOTLY_JS
from planner.sampling_words import sampling_answer
from planner.sweeps.views import points_table

register = template.Library()

#: Render-context key set by ``{% plotly_figure %}``; read by ``{% plotly_scripts %}`` at the end of base.html.
_NEEDS_PLOTLY = "kvp_needs_plotly"
DEFAULT_FIGURE_HEIGHT = 380  # px, when a figure's layout gives none


def _root(context) -> dict:
    """The render context's bottom dict: shared by a page, the template it extends and its includes."""
    return context.render_context.dicts[0]


@register.simple_tag(takes_context=True)
def plotly_figure(context, fig: dict, fig_id: str, title: str = "") -> str:
    """A figure container plus its JSON; ``static/js/figures.js`` draws it with Plotly.

    ``fig`` is the dict of a ``build_*_figure`` function (``fig.to_plotly_json()``
    made JSON-safe); it is embedded with ``json_script`` so no markup can escape.
    The box is as high as the figure's layout says (no empty band, no jump when
    Plotly draws), and says what it shows when JavaScript is off (base.html's
    ``no-js`` class; the text is hidden as soon as scripts run). Using the tag
    marks the page as one that needs Plotly's JavaScript (``{% plotly_scripts %}``).

    The box is a ``role="figure"`` named by the title, not ``role="img"``: Plotly puts its toolbar's
    buttons inside it, and an image may not hold controls (axe's ``nested-interactive``); ``figures.js``
    hides the drawn SVG from screen readers (its tick labels read as noise; the numbers are in the tables).
    """
    _root(context)[_NEEDS_PLOTLY] = True
    data_id = f"fig-{fig_id}-data"
    try:
        height = int((fig.get("layout") or {}).get("height") or DEFAULT_FIGURE_HEIGHT)
    except (AttributeError, TypeError, ValueError):
        height = DEFAULT_FIGURE_HEIGHT
    return format_html(
        '<div class="figure" id="fig-{}" data-figure="{}" role="figure" aria-label="{}" style="height: {}px">'
        '<p class="figure-fallback">Chart: {} (needs JavaScript; the numbers are in the tables).</p>'
        "</div>{}",
        fig_id,
        data_id,
        title,
        height,
        title or "figure",
        json_script(fig, data_id),
    )


@register.simple_tag(takes_context=True)
def plotly_scripts(context) -> str:
    """Plotly and ``figures.js``, only when the page drew a figure (Plotly's bundle is 1.4 MB); else nothing."""
    if not _root(context).get(_NEEDS_PLOTLY):
        return ""
    return format_html(
        '<script src="{}" defer></script>\n  <script src="{}" defer></script>',
        static(PLOTLY_JS),
        static("js/figures.js"),
    )


@register.simple_tag
def form_sections(form, basic=(), exclude=()) -> dict:
    """A form's fields split for a short first screen: ``{"basic", "more", "set", "wrong", "open"}``.

    ``basic``: the bound fields named in ``basic``, in that order; ``more``: the others but ``exclude``
    (shown behind a "More options" disclosure); ``set``: the labels of those ``more`` fields whose value is not
    their default (``form.defaults()`` where the form has one, else the field's initial; empty counts as unset);
    ``wrong``: the labels of those with errors; ``open``: whether the disclosure starts open (something in it
    is set or wrong, so no value and no error is ever hidden behind a closed "More options").
    """
    defaults = {}
    if hasattr(type(form), "defaults"):
        try:
            defaults = type(form).defaults(model_default=None, gpu_default=None)
        except TypeError:
            defaults = {}
    out = {"basic": [], "more": [], "set": [], "wrong": []}
    for field in form:
        if field.name in exclude:
            continue
        if field.name in basic:
            out["basic"].append(field)
            continue
        out["more"].append(field)
        if field.errors:
            out["wrong"].append(field.label)
        value = field.value()
        default = defaults.get(field.name, form.fields[field.name].initial)
        if value not in (None, "", [], False) and str(value) != str(default if default is not None else ""):
            out["set"].append(field.label)
    order = {name: i for i, name in enumerate(basic)}
    out["basic"].sort(key=lambda f: order[f.name])
    out["open"] = bool(out["set"] or out["wrong"])
    return out


@register.simple_tag
def report_points_table(body: dict) -> dict:
    """The points table of a report body as the report page shows it (human headers with units).

    For templates rendered outside a view, such as the standalone HTML download.
    """
    unit = ((body.get("inputs") or {}).get("workload") or {}).get("arrival_unit", "step")
    return points_table(body, unit)


@register.filter
def sampling_timed(snapshot) -> str:
    """The sampler path a snapshot's clock timed and why, in words (:func:`planner.sampling_words.sampling_answer`):
    'top-k / top-p sampling (chosen)'; '' without one."""
    return sampling_answer(snapshot if isinstance(snapshot, dict) else None)["sampling_words"]


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


@register.simple_tag
def computed_kv_bytes_per_token(profile, kv_dtype: str = "bf16") -> str:
    """A model profile's KV bytes per token (all attention layers), computed from its layers as the
    sizing does: for profiles imported from a config.json, which have no catalog cell for it."""
    from simulator.sizing import kv_bytes_per_token

    try:
        return f"{kv_bytes_per_token(profile.to_spec(), kv_dtype):,.0f}"
    except Exception:  # noqa: BLE001 - an incomplete profile: nothing to show
        return ""


@register.filter
def per_price(amount, price) -> str:
    """``amount`` per US dollar of ``price`` (per hour), for reading: 452,656 tokens at $3.78/h -> '119,750'.

    Empty when there is no price.
    """
    try:
        price = float(price)
        return f"{float(amount) / price:,.0f}" if price > 0 else ""
    except (TypeError, ValueError):
        return ""


@register.filter
def ms(seconds) -> str:
    """Seconds as a figure of milliseconds, as the search's messages print them (one rule:
    :func:`simulator.base.readable.ms_figure`): 0.0076 -> '7.6'; 1.2345 -> '1,234'; non-numbers unchanged."""
    from simulator.base import ms_figure

    try:
        return ms_figure(float(seconds))
    except (TypeError, ValueError):
        return seconds
