"""Numbers as the pages print them (``simulator.base.readable``): a measured latency beside its target never
reads as meeting it when it misses, nor as its target when it differs."""

from __future__ import annotations

import pytest

from simulator.base.readable import figure, ms_against, ms_figure, ms_target


@pytest.mark.parametrize(("value", "digits", "text"), [
    (7.613, 3, "7.61"), (212.4, 3, "212"), (1234.5, 3, "1,234"), (500.4, 4, "500.4"), (1234.5, 5, "1,234.5"),
])
def test_figure_has_three_significant_digits_unless_asked_for_more(value, digits, text):
    assert figure(value, digits) == text


def test_a_target_is_echoed_as_given():
    assert [ms_target(s) for s in (0.5, 0.01225, 1.5)] == ["500", "12.25", "1,500"]
    assert ms_figure(0.01225) == "12.2"  # a measured value keeps the rule


@pytest.mark.parametrize(("measured_s", "target_s", "expected"), [
    (0.5004, 0.5, ("500.4", "500")),      # a miss that three digits would print as its target
    (0.4996, 0.5, ("499.6", "500")),      # a pass that three digits would print as its target
    (0.5, 0.5, ("500", "500")),           # equal is equal
    (0.0123, 0.01225, ("12.3", "12.25")),  # three digits already compare right
    (0.012244, 0.01224, ("12.244", "12.24")),  # "12.2" would read as a pass
    (1.0004, 1.0, ("1,000.4", "1,000")),
    (float("inf"), 0.5, ("never", "500")),
])
def test_a_measured_latency_compares_with_its_target_as_the_values_do(measured_s, target_s, expected):
    assert ms_against(measured_s, target_s) == expected
