"""A request-rate sweep that saturates its deployment (issue 33 item 8): the report's advice says where it is
saturated and where its capacity lies, and its cheapest point per token is one that keeps up, not the flat,
queueing rate the old advice named. Run in this process (no worker), Llama 3.1 8B on one H100.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import _grid_report_here


def test_a_saturated_rate_is_never_the_cheapest_advice(page, user, monkeypatch):
    report = _grid_report_here(user, monkeypatch, {
        "name": "Rates up to saturation", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
        "workload": {"spec": {"n": 200, "prompt": "normal:2000,200", "output": "normal:256,32",
                              "arrival": {"kind": "poisson", "rate": 4.0, "unit": "s"}}, "seed": 0},
        "axes": [{"param": "rate", "values": [2, 8, 32, 128]}]})
    page.goto(f"/reports/{report.slug}/")
    saturated = page.locator('.advice li[data-code="saturated"]')
    expect(saturated).to_contain_text("The deployment is saturated at request rates of")
    expect(saturated).to_contain_text("128")
    expect(saturated).to_contain_text("TTFT p99")
    cheapest = page.locator('.advice li[data-code="cheapest"]')
    expect(cheapest).to_contain_text("among the points that keep up")
    expect(cheapest).not_to_contain_text("Cheapest per output token among the points that keep up: Request rate 128")
    expect(cheapest).to_contain_text("Request rate 128 requests/s looks cheaper")
