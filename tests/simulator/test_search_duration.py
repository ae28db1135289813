"""How much traffic a search simulates when its duration is left out (simulator.search.default_duration).

The rule is the binomial interval of an order statistic: the q-th percentile of n requests lies within
``z sqrt(p (1 - p) / n)`` of the true one at 95 % confidence (z = 1.96); the search asks for a quarter of the
tail, ``(100 - q) / 4`` percentile points. Checked here against that formula and by simulation of the
interval's coverage on a known distribution.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.search import DURATION_BOUNDS_S, Slo, SloTarget, default_duration, requests_for_percentile


@pytest.mark.parametrize("q", [50.0, 90.0, 95.0, 99.0])
def test_the_request_count_is_the_order_statistics_interval(q):
    n = requests_for_percentile(q)
    p, half = q / 100, (1 - q / 100) / 4
    assert 1.96 * math.sqrt(p * (1 - p) / n) <= half * 1.0001 < 1.96 * math.sqrt(p * (1 - p) / (n - 1)) * 1.0001


def test_the_interval_covers_as_it_says():
    """Draw n exponential latencies 2,000 times: the sample p90 falls between the true p87.5 and p92.5 about
    95 % of the time."""
    rng = np.random.default_rng(0)
    n = requests_for_percentile(90)
    samples = np.percentile(rng.exponential(1.0, (2000, n)), 90, axis=1)
    lo, hi = -math.log(1 - 0.875), -math.log(1 - 0.925)
    coverage = float(((samples >= lo) & (samples <= hi)).mean())
    assert 0.93 <= coverage <= 0.98, coverage


def _slo(*pcts: str) -> Slo:
    return Slo(tuple(SloTarget(m, pct, 1.0) for m, pct in zip(("ttft", "itl", "e2e"), pcts)))


def test_the_highest_percentile_sets_the_duration_within_its_bounds():
    seconds, why = default_duration(20.0, _slo("p90"))
    assert seconds == DURATION_BOUNDS_S[0] == 60.0 and why.endswith("at least 60 s, so that a growing queue shows")
    seconds, why = default_duration(20.0, _slo("p90", "p99"))
    assert seconds == pytest.approx(6085 / 20) and why.startswith("6,085 requests put ITL p99 within ±0.25")
    seconds, why = default_duration(1.0, _slo("p90"))
    assert seconds == 554.0 and "(p87.5-p92.5)" in why
    seconds, why = default_duration(20.0, _slo("p99.9"))
    assert seconds == DURATION_BOUNDS_S[1] and "3,070 s at this rate; capped at 600 s" in why
