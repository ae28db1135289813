"""Figure builders are pure: tested through their dicts (titles with units, hover, legends, markers)."""

from planner.sweeps import advice, figures


def pt(i, blocks, ppr, seqs=None, hit=0.0, cost=None, tput=100.0):
    params = {"num_gpu_blocks": blocks} | ({"max_num_seqs": seqs} if seqs else {})
    return {"index": i, "params": params, "meta": {},
            "metrics": {"preemptions_per_request": ppr, "ttft_p50_steps": 10 + ppr * 100,
                        "ttft_p99_steps": 50 + ppr * 500, "throughput_tok_per_step": tput, "throughput_tok_s": None,
                        "kv_cache_tokens": (blocks - 1) * 16, "prefix_cache_hit_rate": hit, "mean_kv_usage": 0.7,
                        "cost_per_hour": cost, "cost_per_m_output_tokens": cost and cost * 10,
                        "num_gpu_blocks": blocks, "dropped_unservable": 0, "preemptions": int(ppr * 100),
                        "peak_running": 4, "recomputed_tokens": 0},
            "totals": {"prefix_cache_evictions": 3},
            "series": {"step": [0, 1, 2], "kv_usage": [0.1, 0.5, 0.9], "num_running": [1, 2, 3],
                       "num_waiting": [3, 2, 0]}}


POINTS = [pt(i, b, v) for i, (b, v) in enumerate([(2000, 0.9), (4000, 0.5), (8000, 0.2), (8400, 0.0),
                                                  (16000, 0.0), (26000, 0.0)])]


def test_kv_sweep_figure_has_units_legends_hover_and_the_cliff():
    fig = figures.build_kv_sweep_figure(POINTS, cliff={"x": 8400, "text": "cliff"}, base_blocks=26000)
    names = [t["name"] for t in fig["data"]]
    assert names[:4] == ["Preemptions per request", "TTFT p50", "TTFT p99", "Throughput"]
    # the dashed lines are named in the legend, not labelled on the plot (where they hit the panel titles)
    assert names[4:] == ["cliff: 8,400 blocks", "your deployment: 26,000 blocks"]
    assert all("hovertemplate" in t for t in fig["data"][:4])
    assert fig["layout"]["xaxis3"]["title"]["text"] == "KV blocks (blocks)"
    assert fig["layout"]["yaxis2"]["title"]["text"] == "steps"
    assert fig["layout"]["yaxis3"]["title"]["text"] == "tokens/step"
    assert {s["x0"] for s in fig["layout"]["shapes"]} == {8400, 26000}  # one line per panel
    assert fig["data"][0]["x"] == [2000, 4000, 8000, 8400, 16000, 26000]


def test_cliff_in_words_matches_the_brief():
    body = {"inputs": {"axes": [{"param": "num_gpu_blocks", "values": []}], "engine": {"block_size": 16},
                       "sizing": {"num_gpu_blocks": 26000}}, "points": POINTS}
    assert advice.cliff_sentence(body) == (
        "Below about 8,400 blocks (134 K tokens) preemptions rise sharply; your deployment has about 26,000.")


def test_two_axis_heatmap_fills_the_grid():
    pts = [pt(i, b, b / 1000 + s, seqs=s) for i, (b, s) in enumerate([(b, s) for b in (100, 200, 300)
                                                                     for s in (8, 16)])]
    fig = figures.build_heatmap_figure(pts, "num_gpu_blocks", "max_num_seqs", "preemptions_per_request",
                                       unit="events/request")
    hm = fig["data"][0]
    assert hm["type"] == "heatmap" and hm["x"] == ["100", "200", "300"] and hm["y"] == ["8", "16"]
    assert hm["z"][1][2] == 0.3 + 16
    assert fig["layout"]["yaxis"]["title"]["text"] == "Max running requests (max_num_seqs) (requests)"


def test_timeseries_prefix_and_cost_figures():
    ts = figures.build_timeseries_figure(POINTS[0])
    assert [t["name"] for t in ts["data"]] == ["KV usage (%)", "Running requests", "Waiting requests"]
    assert ts["data"][0]["y"] == [10.0, 50.0, 90.0]
    assert ts["layout"]["xaxis"]["title"]["text"] == "Time (engine steps)"
    pre = figures.build_prefix_hit_figure([pt(0, 100, 0, hit=0.2), pt(1, 200, 0, hit=0.6)])
    assert pre["data"][0]["y"] == [20.0, 60.0] and "tokens" in pre["layout"]["xaxis"]["title"]["text"]
    cost = figures.build_cost_figure([pt(0, 100, 0, cost=3.0), pt(1, 200, 0, cost=6.0)], "num_gpu_blocks")
    assert cost["data"][0]["y"] == [3.0, 6.0] and cost["data"][1]["name"] == "USD per million output tokens"


def test_report_figures_pick_by_axes():
    body = {"inputs": {"axes": [{"param": "num_gpu_blocks", "values": []}], "engine": {"block_size": 16,
                                                                                     "num_gpu_blocks": 26000},
                       "workload": {"arrival_unit": "step"}}, "points": POINTS}
    ids = [f[0] for f in figures.report_figures(body)]
    assert ids == ["sweep", "timeline"]


def test_advice_carries_its_numbers():
    body = {"inputs": {"axes": [{"param": "num_gpu_blocks", "values": []}],
                       "engine": {"block_size": 16, "num_gpu_blocks": 9000, "max_num_seqs": 4,
                                  "enable_prefix_caching": True}},
            "points": [pt(i, b, v, hit=0.7) for i, (b, v) in enumerate([(2000, 0.9), (4000, 0.5), (8400, 0.0),
                                                                        (9000, 0.0)])]}
    for p in body["points"]:
        p["metrics"]["mean_kv_usage"] = 0.3
    got = {a.code: a for a in advice.advise(body)}
    assert "near_cliff" in got and "8,400" in got["near_cliff"].text and got["near_cliff"].numbers["cliff_blocks"]
    assert "cpu_tier" in got and "70%" in got["cpu_tier"].text
    assert "kv_underused" in got and "30%" in got["kv_underused"].text and "max_num_seqs cap of 4" in \
        got["kv_underused"].text
