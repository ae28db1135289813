"""The search's Pareto chart (planner/search/figures.py), checked through the figure dict."""

from __future__ import annotations

from planner.search.figures import build_pareto_figure
from simulator.search.deployments import search_deployments
from simulator.search.space import SearchSpace, Slo, SloTarget
from tests.simulator.test_search import H100, L4, L40S, LLAMA_8B, _workload


def test_pareto_figure_has_titled_axes_with_units_the_target_and_the_answer():
    wl = _workload(n=30)
    space = SearchSpace((H100, L40S, L4), tensor_parallel=(1,), precisions=("bf16", "fp8"), max_num_seqs=(16,),
                        max_replicas=3)
    res = search_deployments(wl, LLAMA_8B, space, Slo((SloTarget("ttft", "p90", 0.3),
                                                        SloTarget("itl", "p90", 0.05)))).to_dict()
    fig = build_pareto_figure(res)
    lay = fig["layout"]
    assert lay["xaxis"]["title"]["text"] == "Cost (USD per hour, all replicas)"
    assert lay["yaxis"]["title"]["text"] == "TTFT p90 (ms)"
    names = [t["name"] for t in fig["data"]]
    assert names == ["meets the SLO", "misses the SLO", "Pareto frontier", "answer"]
    star = fig["data"][3]
    assert star["x"][0] == res["best"]["cost_per_hour"]
    simulated = sum(len(o["trials"]) for o in res["outcomes"])
    assert len(fig["data"][0]["x"]) + len(fig["data"][1]["x"]) == simulated
    assert any(s.get("y0") == 300.0 for s in lay["shapes"])  # the target, dashed, in ms
    front = fig["data"][2]
    assert list(front["x"]) == sorted(front["x"]) and list(front["y"]) == sorted(front["y"], reverse=True)
