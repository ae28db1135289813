"""Numbers as every page and message prints them: one rule, so a sentence and the table beside it agree.

A figure has 3 significant digits below 1,000 and none after the point above, with thousands
separators (``7.6``, ``212``, ``1,234``); latencies are always in milliseconds (``7.6 ms``,
``1,234 ms``, never ``1.23 s``), as the report pages' TTFT/ITL columns are. Used by the search's
messages (``simulator.search_space.format_seconds``) and by the planner's tables and report cells.
"""

from __future__ import annotations

import math


def figure(value: float) -> str:
    """``7.613`` -> ``7.61``; ``212.4`` -> ``212``; ``1234.5`` -> ``1,234`` (3 significant digits below 1,000)."""
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def ms_figure(seconds: float) -> str:
    """Seconds as a figure of milliseconds: ``0.0076`` -> ``7.6``; ``1.2345`` -> ``1,234``; ``inf`` -> ``never``."""
    if not math.isfinite(seconds):
        return "never"
    return figure(seconds * 1000)


def milliseconds(seconds: float) -> str:
    """Seconds as milliseconds with the unit: ``0.212`` -> ``212 ms``; ``7.15`` -> ``7,150 ms``."""
    text = ms_figure(seconds)
    return text if text == "never" else f"{text} ms"
