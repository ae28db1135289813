"""Plotly's JavaScript, one place: the static path the pages load and the text the HTML downloads inline.

It is plotly.js's cartesian bundle, vendored in ``static/vendor/plotly/`` (its README says where it
comes from and how to update it with plotly.py).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

#: The static path of Plotly's bundle (1.4 MB; the pages draw scatter, bar and heatmap traces only).
PLOTLY_JS = "vendor/plotly/plotly-cartesian.min.js"


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The bundle's text, for inlining in a standalone HTML report."""
    from django.contrib.staticfiles import finders

    return Path(finders.find(PLOTLY_JS)).read_text(encoding="utf-8")
