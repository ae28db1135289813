"""Reports that never contradict themselves: chart values read back from the page's Plotly data.

Each report is built in the test's process (no worker) and opened signed out, as a shared permalink is.
"""

from __future__ import annotations

import json

import pytest


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
