"""Numbers as every page and message prints them: one rule, so a sentence and the table beside it agree.

A figure has 3 significant digits below 1,000 and none after the point above, with thousands
separators (``7.6``, ``212``, ``1,234``); latencies are always in milliseconds (``7.6 ms``,
``1,234 ms``, never ``1.23 s``), as the report pages' TTFT/ITL columns are. Used by the search's
messages (``simulator.search.space.format_seconds``) and by the planner's tables and report cells.
"""

from __future__ import annotations

import math


def figure(value: float, digits: int = 3) -> str:
    """``7.613`` -> ``7.61``; ``212.4`` -> ``212``; ``1234.5`` -> ``1,234`` (3 significant digits below 1,000;
    ``digits`` more when asked: ``figure(500.4, 4)`` -> ``500.4``, ``figure(1234.5, 5)`` -> ``1,234.5``)."""
    if abs(value) < 1000:
        return f"{value:,.{digits}g}"
    return f"{value:,.{max(0, digits - 4)}f}"


def ms_figure(seconds: float) -> str:
    """Seconds as a figure of milliseconds: ``0.0076`` -> ``7.6``; ``1.2345`` -> ``1,234``; ``inf`` -> ``never``."""
    if not math.isfinite(seconds):
        return "never"
    return figure(seconds * 1000)


def ms_target(seconds: float) -> str:
    """A target as the person gave it, in milliseconds (up to 6 significant digits): ``0.01225`` -> ``12.25``."""
    return f"{seconds * 1000:,.6g}"


def ms_against(seconds: float, target_s: float) -> tuple[str, str]:
    """A measured latency and its target as figures of milliseconds that compare as the values do.

    Three significant digits by the rule above, more where three would make a miss look like a pass or
    like its target (500.4 ms against 500 ms: ``("500.4", "500")``, not ``("500", "500")``).
    """
    target = ms_target(target_s)
    if not math.isfinite(seconds):
        return "never", target
    value_ms, target_ms = seconds * 1000, float(target.replace(",", ""))
    for digits in range(3, 9):
        value = figure(value_ms, digits)
        shown = float(value.replace(",", ""))
        if (shown > target_ms) == (value_ms > target_ms) and (shown < target_ms) == (value_ms < target_ms):
            break
    return value, target


def milliseconds(seconds: float) -> str:
    """Seconds as milliseconds with the unit: ``0.212`` -> ``212 ms``; ``7.15`` -> ``7,150 ms``."""
    text = ms_figure(seconds)
    return text if text == "never" else f"{text} ms"
