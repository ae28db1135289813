"""Figure builders are pure: tested through their dicts (titles with units, hover, legends, markers)."""

import pytest

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


def rpt(i, n, rate, ttft, itl):
    """A point of a replicas sweep: ``n`` replicas at ``rate`` requests/s, TTFT and ITL p90 in seconds."""
    return {"index": i, "params": {"rate": rate, "num_instances": n}, "meta": {},
            "metrics": {"ttft_p90_s": ttft, "itl_p90_s": itl, "ttft_p99_s": ttft * 2, "ttft_p50_s": ttft / 2,
                        "finished": 100, "requests": 100, "num_instances": n, "preemptions_per_request": 0.0,
                        "kv_cache_tokens": 16000, "prefix_cache_hit_rate": 0.0, "mean_kv_usage": 0.5,
                        "throughput_tok_s": 1000.0, "dropped_unservable": 0, "num_gpu_blocks": 1001},
            "totals": {}, "series": None}


# two rates x 1, 2, 4 replicas: at 5 requests/s 2 replicas meet 0.5 s / 0.05 s, at 20 requests/s 4 do
REPLICA_POINTS = [rpt(0, 1, 5.0, 0.9, 0.04), rpt(1, 2, 5.0, 0.2, 0.03), rpt(2, 4, 5.0, 0.1, 0.02),
                  rpt(3, 1, 20.0, 9.0, 0.09), rpt(4, 2, 20.0, 1.2, 0.06), rpt(5, 4, 20.0, 0.3, 0.04)]


def tpt(i, gib, hit, ttft50, ttft99):
    """A point of a CPU tier sweep (arrivals in seconds)."""
    return {"index": i, "params": {"cpu_tier_gib": gib}, "meta": {},
            "metrics": {"prefix_cache_hit_rate": hit, "ttft_p50_s": ttft50, "ttft_p99_s": ttft99,
                        "cpu_tier_gib": gib, "cpu_tier_hit_tokens": int(gib * 1000), "kv_cache_tokens": 64000,
                        "preemptions_per_request": 0.0, "throughput_tok_s": 900.0, "mean_kv_usage": 0.6,
                        "dropped_unservable": 0, "num_gpu_blocks": 4001},
            "totals": {}, "series": None}


TIER_POINTS = [tpt(0, 0.0, 0.0, 0.5, 0.9), tpt(1, 8.0, 0.4, 0.3, 0.7), tpt(2, 40.0, 0.9, 0.07, 0.2)]


def test_replicas_figure_draws_latency_per_rate_against_replicas_with_the_targets():
    fig = figures.build_replicas_figure(REPLICA_POINTS, slo={"ttft_s": 0.5, "itl_s": 0.05}, arrival_unit="s")
    lines = {t["name"]: t for t in fig["data"] if t.get("x") and t["x"][0] is not None}
    assert set(lines) == {"TTFT p90 [Request rate 5 requests/s]", "ITL p90 [Request rate 5 requests/s]",
                          "TTFT p90 [Request rate 20 requests/s]", "ITL p90 [Request rate 20 requests/s]"}
    assert lines["TTFT p90 [Request rate 20 requests/s]"]["x"] == [1, 2, 4]
    assert lines["TTFT p90 [Request rate 20 requests/s]"]["y"] == pytest.approx([9000, 1200, 300])  # ms
    assert lines["ITL p90 [Request rate 5 requests/s]"]["y"] == pytest.approx([40, 30, 20])
    # the SLOs as dashed horizontal lines, one per panel, named in the legend
    dashed = [s for s in fig["layout"]["shapes"] if s["line"]["dash"] == "dash"]
    assert sorted(s["y0"] for s in dashed) == pytest.approx([50, 500])
    assert {t["name"] for t in fig["data"]} >= {"TTFT target: 500 ms", "ITL target: 50 ms"}
    assert fig["layout"]["xaxis2"]["title"]["text"] == "Replicas (instances)"
    assert fig["layout"]["yaxis"]["title"]["text"] == "TTFT p90 (ms)"
    assert fig["layout"]["yaxis2"]["title"]["text"] == "ITL p90 (ms)"
    assert fig["layout"]["yaxis"]["type"] == "log"  # 100 ms to 9 s: a log axis
    assert fig["layout"]["xaxis"]["tickvals"] == [1, 2, 4]


def test_tier_figure_draws_hits_and_ttft_against_the_tier_size():
    fig = figures.build_tier_figure(TIER_POINTS, arrival_unit="s")
    hits, p50, p99 = fig["data"]
    assert hits["name"] == "Prefix-cache hit rate" and hits["x"] == [0.0, 8.0, 40.0]
    assert hits["y"] == pytest.approx([0.0, 40.0, 90.0])
    assert hits["customdata"] == [[0], [8000], [40000]]  # prefix tokens found in the CPU tier
    # seconds in the points, drawn in ms (as the report's table and advice give latencies)
    assert (p50["name"], p99["name"]) == ("TTFT p50", "TTFT p99") and p99["y"] == pytest.approx([900, 700, 200])
    assert fig["layout"]["xaxis2"]["title"]["text"] == "CPU KV tier (GiB)"
    assert fig["layout"]["yaxis"]["title"]["text"].replace("<br>", " ") == "Prefix-cache hit rate (%)"  # broken to fit
    assert fig["layout"]["yaxis2"]["title"]["text"] == "TTFT (ms)"


def test_report_figures_add_replicas_and_tier_figures_for_those_axes():
    body = {"inputs": {"axes": [{"param": "rate", "values": [5.0, 20.0]},
                                {"param": "num_instances", "values": [1, 2, 4]}],
                       "slo": {"ttft_s": 0.5, "itl_s": 0.05, "percentile": "p90"},
                       "engine": {"block_size": 16, "num_gpu_blocks": 1001},
                       "workload": {"arrival_unit": "s", "source": "spec",
                                    "spec": {"arrival": {"kind": "poisson", "rate": 5.0}}}},
            "points": REPLICA_POINTS}
    figs = {f[0]: f[2] for f in figures.report_figures(body)}
    assert "replicas" in figs
    # two rates, two answers: no single "fewest" marker, both SLO lines
    assert sorted(s["y0"] for s in figs["replicas"]["layout"]["shapes"]) == pytest.approx([50, 500])
    # the advice names the fewest replicas per rate, in words
    texts = [a.text for a in advice.advise(body) if a.code == "replicas"]
    assert texts == ["At 5 requests/s, 2 replicas are the fewest that meet TTFT p90 ≤ 500 ms and ITL p90 ≤ 50 ms "
                     "(TTFT p90 200 ms, ITL p90 30.0 ms).",
                     "At 20 requests/s, 4 replicas are the fewest that meet TTFT p90 ≤ 500 ms and ITL p90 ≤ 50 ms "
                     "(TTFT p90 300 ms, ITL p90 40.0 ms)."]
    tier = {"inputs": {"axes": [{"param": "cpu_tier_gib", "values": [0.0, 8.0, 40.0]}],
                       "engine": {"block_size": 16, "num_gpu_blocks": 4001},
                       "workload": {"arrival_unit": "s"}}, "points": TIER_POINTS}
    assert [f[0] for f in figures.report_figures(tier)] == ["tier", "sweep"]


def test_advice_names_knobs_by_their_labels():
    body = {"inputs": {"axes": [{"param": "num_gpu_blocks", "values": []}],
                       "engine": {"block_size": 16, "num_gpu_blocks": 2400, "enable_prefix_caching": True}},
            "points": [pt(0, 2400, 0.0, hit=0.7)]}
    text = next(a.text for a in advice.advise(body) if a.code == "cpu_tier")
    assert "(at 2,400 KV blocks)" in text and "num_gpu_blocks" not in text
    assert advice.params_text({"rate": 4.0, "num_instances": 1, "cpu_tier_gib": 0.0}, "s") == \
        "request rate 4 requests/s, 1 replica, no CPU KV tier"
    assert advice.params_text({"enable_prefix_caching": False, "gpu_memory_utilization": 0.85}) == \
        "prefix caching off, GPU memory utilization 0.85"
    assert figures.value_text("num_instances", 2) == "2 replicas"
    assert figures.value_text("routing", "least-loaded") == "least-loaded routing"


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
    assert fig["layout"]["yaxis"]["title"]["text"] == "Max running requests<br>(max_num_seqs) (requests)"


def test_a_heatmap_of_equal_values_writes_the_value_instead_of_a_flat_colour():
    pts = [pt(i, b, 0.0, seqs=s) for i, (b, s) in enumerate([(b, s) for b in (100, 200) for s in (8, 16)])]
    for p in pts:
        p["metrics"]["preemptions_per_request"] = 0.0
    fig = figures.build_heatmap_figure(pts, "num_gpu_blocks", "max_num_seqs", "preemptions_per_request",
                                       unit="events/request")
    hm = fig["data"][0]
    assert hm["texttemplate"] == "%{z:,.4g}" and hm["showscale"] is False
    assert "0 at every point" in fig["layout"]["title"]["text"]
    varied = figures.build_heatmap_figure([pt(0, 100, 0.1, seqs=8), pt(1, 200, 0.2, seqs=8)], "num_gpu_blocks",
                                          "max_num_seqs", "preemptions_per_request")
    assert varied["data"][0].get("showscale", True) is True and "every point" not in \
        varied["layout"]["title"]["text"]


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


def test_two_axis_cost_figure_groups_bars_and_never_stacks_them():
    pts = [{"index": i, "params": {"rate": r, "max_num_seqs": s},
            "metrics": {"cost_per_hour": 3.78, "cost_per_m_output_tokens": 20.0 / r}}
           for i, (r, s) in enumerate([(1.0, 64), (1.0, 128), (4.0, 64), (4.0, 128)])]
    fig = figures.build_cost_figure(pts, "rate", arrival_unit="s")
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    lines = [t for t in fig["data"] if t["type"] == "scatter"]
    assert fig["layout"]["barmode"] == "group"
    assert [b["y"] for b in bars] == [[3.78, 3.78], [3.78, 3.78]], "one bar per point, never a sum"
    assert [b["name"] for b in bars] == ["64", "128"]
    assert [line["y"] for line in lines] == [[20.0, 5.0], [20.0, 5.0]]
    assert "Max running requests" in fig["layout"]["legend"]["title"]["text"]
