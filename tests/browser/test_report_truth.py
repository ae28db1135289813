"""Reports that never contradict themselves: chart values read back from the page's Plotly data.

Each report is built in the test's process (no worker) and opened signed out, as a shared permalink is.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect


def _run_sweep(user, monkeypatch, definition: dict):
    from planner.models import Report
    from planner.sweeps import services

    monkeypatch.setattr(services, "sweep_enqueue", lambda sweep_id: None)
    sweep = services.sweep_create(owner=user, definition=definition)
    if sweep.mode == "cliff":
        assert services.cliff_run(sweep_id=sweep.pk) == "done"
    for index in range(sweep.num_chunks):
        services.chunk_run(sweep_id=sweep.pk, index=index)
    return Report.objects.get(sweep=sweep)


def _figure(page, fig_id: str) -> dict:
    """The figure as Plotly drew it (its data and layout after drawing)."""
    page.wait_for_function(f"document.getElementById('fig-{fig_id}') && "
                           f"document.getElementById('fig-{fig_id}').data !== undefined")
    return page.evaluate(f"""() => {{ const g = document.getElementById('fig-{fig_id}');
        return {{data: g.data, layout: {{barmode: g._fullLayout.barmode}}}}; }}""")


def _report_json(page, slug: str) -> dict:
    return json.loads(page.request.get(f"/reports/{slug}/download.json").text())


@pytest.fixture
def priced_two_axis_report(user, monkeypatch):
    """Llama 3.1 8B on one H100 SXM ($3.78/h), request rate x max running requests: every point costs $3.78/h."""
    return _run_sweep(user, monkeypatch, {
        "name": "Cost over two axes", "model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb",
        "workload": {"spec": {"n": 40, "prompt": "normal:512,64", "output": "normal:64,16",
                              "arrival": {"kind": "poisson", "rate": 2.0, "unit": "s"}}, "seed": 0},
        "axes": [{"param": "rate", "values": [1.0, 4.0]}, {"param": "max_num_seqs", "values": [64, 128, 256]}]})


def test_two_axis_cost_chart_shows_each_points_cost_side_by_side(page, priced_two_axis_report, screenshot):
    slug = priced_two_axis_report.slug
    page.goto(f"/reports/{slug}/")
    fig = _figure(page, "cost")
    body = _report_json(page, slug)
    points = body["points"]
    assert fig["layout"]["barmode"] == "group", "bars of one category must stand side by side, never stacked"
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    lines = [t for t in fig["data"] if t["type"] == "scatter"]
    assert len(bars) == 3 and len(lines) == 3, "one bar and one line per max_num_seqs value"
    drawn = {}
    for bar, line in zip(bars, lines):
        for x, y_hour, y_m in zip(bar["x"], bar["y"], line["y"]):
            drawn[(float(x), int(bar["name"].replace(",", "")))] = (y_hour, y_m)
    expected = {(p["params"]["rate"], p["params"]["max_num_seqs"]):
                (p["metrics"]["cost_per_hour"], p["metrics"]["cost_per_m_output_tokens"]) for p in points}
    assert drawn.keys() == expected.keys()
    for key, (hour, per_m) in expected.items():
        assert drawn[key][0] == pytest.approx(hour) and drawn[key][1] == pytest.approx(per_m), key
    assert max(y for b in bars for y in b["y"]) == pytest.approx(3.78), "a one-GPU deployment costs $3.78/h"
    # each line stays within its own series (no zig-zag between series): its x values are the two rates
    assert all(sorted(map(float, line["x"])) == [1.0, 4.0] for line in lines)
    # the legend names the other axis once, one short entry per value
    legend_entries = [t["name"] for t in fig["data"] if t.get("showlegend", True)]
    assert legend_entries == ["64", "128", "256"]
    screenshot(page, "report-two-axis-cost")


LLAMA_ON_H100 = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}


@pytest.fixture
def no_cliff_report(user, monkeypatch):
    """A rate cliff search from 1 to 20 requests/s on a workload that never preempts: two simulations."""
    return _run_sweep(user, monkeypatch, {
        "name": "No cliff in range", "mode": "cliff", **LLAMA_ON_H100,
        "workload": {"spec": {"n": 40, "prompt": "normal:512,64", "output": "normal:64,16",
                              "arrival": {"kind": "poisson", "rate": 2.0, "unit": "s"}}, "seed": 0},
        "cliff": {"param": "rate", "metric": "preemptions_per_request", "lo": 1, "hi": 20, "resolution": 1,
                  "threshold": 0.02}})


@pytest.fixture
def safe_deployment_report(user, monkeypatch):
    """A KV-blocks cliff search well below the deployment as sized (28,291 blocks of Llama 8B on an H100)."""
    return _run_sweep(user, monkeypatch, {
        "name": "Cliff far below the deployment", "mode": "cliff", **LLAMA_ON_H100,
        "workload": {"spec": {"n": 60, "prompt": "normal:256,32", "output": "normal:512,64",
                              "arrival": {"kind": "poisson", "rate": 20.0, "unit": "s"}}, "seed": 0},
        "cliff": {"param": "num_gpu_blocks", "metric": "preemptions_per_request", "lo": 60, "hi": 4000,
                  "resolution": 100, "threshold": 0.02}})


def test_cliff_search_without_a_cliff_says_so_and_a_safe_deployment_is_not_red(
        page, no_cliff_report, safe_deployment_report, screenshot):
    # No cliff: the search stopped after its two ends, and the page says why in words.
    page.goto(f"/reports/{no_cliff_report.slug}/")
    body = _report_json(page, no_cliff_report.slug)
    assert body["cliff_result"]["status"] == "all_good" and body["cliff_result"]["evaluations"] == 2
    headline = page.locator("#cliff-sentence")
    expect(headline).to_contain_text("No cliff between 1 and 20 requests/s")
    expect(headline).to_contain_text("2 simulations")
    assert headline.get_attribute("data-level") == "good"
    fig = page.evaluate("() => { const g = document.getElementById('fig-cliff-search');"
                        " return {mode: g.data[0].mode, n: g.data[0].x.length, title: g.layout.title.text}; }")
    assert fig["n"] == 2 and "lines" not in fig["mode"], "two probes are two points, not a line between them"
    assert "no cliff in this range" in fig["title"]
    screenshot(page, "report-no-cliff")

    # A cliff far below the deployment as sized: found, stated, and not red.
    page.goto(f"/reports/{safe_deployment_report.slug}/")
    body = _report_json(page, safe_deployment_report.slug)
    cliff, mine = body["cliff_result"]["cliff"], body["inputs"]["sizing"]["num_gpu_blocks"]
    assert body["cliff_result"]["status"] == "found" and mine / cliff > 4
    headline = page.locator("#cliff-sentence")
    expect(headline).to_contain_text(f"Below about {cliff:,.0f} blocks")
    expect(headline).to_contain_text(f"{mine / cliff:,.1f}× the cliff: safe")
    assert headline.get_attribute("data-level") == "good"
    color = headline.evaluate("e => getComputedStyle(e).borderLeftColor")
    assert color == "rgb(27, 127, 59)", f"a safe deployment's headline is green, not {color}"
    drawn = page.evaluate("() => document.getElementById('fig-cliff-search').data[0].x.length")
    assert drawn == body["cliff_result"]["evaluations"]
    screenshot(page, "report-safe-cliff")
