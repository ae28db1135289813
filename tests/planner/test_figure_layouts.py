"""Every chart the pages draw, checked for how it reads on a laptop.

- the title sits in the top margin and the legend at the bottom of the figure (both placed in
  container coordinates), so a legend can never cover the title;
- every axis that shows tick labels has a title, and it says the unit;
- no fixed width (the chart takes its column's width) and no height taller than a laptop screen.
"""

from __future__ import annotations

import re

import pytest

from planner.sizing import figures as sizing_figures
from planner.sizing import services
from planner.sweeps import figures as sweep_figures
from simulator.base.specs import GpuSpec
from tests.planner.test_sizing_services import H100, LLAMA_8B, plan
from tests.planner.test_sweep_figures import POINTS, REPLICA_POINTS, TIER_POINTS, pt

LAPTOP_HEIGHT = 768  # px
# a unit in brackets at the end: "KV cache (tokens)", "TTFT p99 (steps)", "KV usage (%)"; or a bare unit
UNIT = re.compile(r"\([^()]*(tokens?|requests?|blocks|GiB|USD[^()]*|%|steps?|s|ms|instances|GPUs|fraction|x|events/request|"
                  r"tokens/s|tokens/step)\)$|^(events/request|steps|s|tokens|tokens/s|tokens/step|USD per hour)$")


def _sizing():
    o = plan(max_model_len=32768)
    rows = services.compare_gpus(model=LLAMA_8B, gpus=[H100, GpuSpec(name="Tiny", memory_gib=8)],
                                 knobs={"max_model_len": 8192})
    frag = services.fragmentation(o, lengths="const:1024")
    return {
        "memory": sizing_figures.build_memory_figure(o),
        "concurrency": sizing_figures.build_concurrency_figure(services.concurrency_curve(o)),
        "compare": sizing_figures.build_compare_figure(rows),
        "fragmentation": sizing_figures.build_fragmentation_figure(frag, max_model_len=32768, lengths="const:1024"),
    }


def _sweeps():
    two_axes = [pt(i, b, b / 1000, seqs=s) for i, (b, s) in enumerate([(b, s) for b in (100, 200) for s in (8, 16)])]
    return {
        "kv sweep": sweep_figures.build_kv_sweep_figure(POINTS, cliff={"x": 8400, "text": "cliff"},
                                                        base_blocks=26000),
        "timeseries": sweep_figures.build_timeseries_figure(POINTS[0]),
        "prefix": sweep_figures.build_prefix_hit_figure([pt(0, 100, 0, hit=0.2), pt(1, 200, 0, hit=0.6)]),
        "heatmap": sweep_figures.build_heatmap_figure(two_axes, "num_gpu_blocks", "max_num_seqs",
                                                      "preemptions_per_request", unit="events/request"),
        "cost": sweep_figures.build_cost_figure([pt(0, 100, 0, cost=3.0), pt(1, 200, 0, cost=6.0)],
                                                "num_gpu_blocks"),
        "replicas": sweep_figures.build_replicas_figure(REPLICA_POINTS, slo={"ttft_s": 0.5, "itl_s": 0.05},
                                                        answer=4, arrival_unit="s"),
        "cpu tier": sweep_figures.build_tier_figure(TIER_POINTS, arrival_unit="s"),
        "cliff search": sweep_figures.build_cliff_search_figure([[100, 0.5], [200, 0.1], [300, 0.0]],
                                                                param="num_gpu_blocks",
                                                                metric="preemptions_per_request", limit=0.02,
                                                                cliff_x=200),
    }


FIGURES = {**_sizing(), **_sweeps()}


@pytest.mark.parametrize("name", list(FIGURES))
def test_title_on_top_and_legend_at_the_bottom(name):
    layout = FIGURES[name]["layout"]
    title = layout["title"]
    assert title["text"]
    assert title["yref"] == "container" and title["yanchor"] == "top" and title["y"] > 0.95
    legend = layout["legend"]
    shows_legend = layout.get("showlegend", True) and len(FIGURES[name]["data"]) > 1
    if shows_legend:
        assert legend["yref"] == "container" and legend["yanchor"] == "bottom" and legend["y"] < 0.05, legend
        assert layout["margin"]["b"] >= 90, "room for the x axis title and the legend below it"


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_axis_with_ticks_has_a_title_with_its_unit(name):
    layout = FIGURES[name]["layout"]
    axes = {k: v for k, v in layout.items() if re.fullmatch(r"[xy]axis\d*", k)}
    assert axes
    titled = 0
    for key, axis in axes.items():
        hidden = axis.get("visible") is False or axis.get("showticklabels") is False
        shared = key.startswith("xaxis") and axis.get("matches") and not axis.get("title")  # stacked panels
        shared_y = key.startswith("yaxis") and axis.get("matches") and not axis.get("title")
        if hidden or shared or shared_y:
            continue
        text = (axis.get("title") or {}).get("text") or ""
        assert UNIT.search(text) or axis.get("type") == "category", f"{name} {key}: {text!r} has no unit"
        titled += 1
    assert titled


@pytest.mark.parametrize("name", list(FIGURES))
def test_sized_for_a_laptop(name):
    layout = FIGURES[name]["layout"]
    assert "width" not in layout, "a fixed width does not follow the column"
    assert 200 <= layout["height"] <= LAPTOP_HEIGHT - 60
