"""Closed-loop load (simulator/cluster/closed_loop.py; issue 35 item 2): clients that send their next request
when the last answer has arrived, sessions whose next turn follows the last one's answer.

Held against laws and against the open-loop simulator, not against itself: Little's law for a closed system
(throughput = N / (R + Z)); never more than N requests in flight; a session's turn k+1 sent at turn k's last
token plus the think time; and a closed loop with a client for every request, paced by the workload, equal
to the open-loop cluster simulation of the same arrivals request for request.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.base import GpuSpec
from simulator.cluster import ClusterError, engine_config_for, simulate_cluster
from simulator.cluster.closed_loop import ClosedLoop, simulate_closed_loop
from simulator.sizing import parse_hf_config
from simulator.workload import WorkloadSpec, generate_workload

CONFIGS = Path(__file__).resolve().parents[2] / "gpuprofiles" / "data" / "hf_configs"
LLAMA_8B = parse_hf_config(json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text()))
H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)
CONFIG, _ = engine_config_for(LLAMA_8B, H100, max_model_len=4096)


def _workload(n: int = 400, rate: float = 10.0, seed: int = 0, **extra):
    return generate_workload(WorkloadSpec.from_dict({
        "n": n, "prompt": "normal:1024,256", "output": "normal:128,32",
        "arrival": {"kind": "poisson", "rate": rate, "unit": "s"}, **extra}), seed=seed)


def _max_overlap(start: np.ndarray, end: np.ndarray) -> int:
    """Most intervals [start, end) open at once (an end at t closes before a start at t)."""
    events = sorted([(float(s), 1) for s in start] + [(float(e), -1) for e in end], key=lambda x: (x[0], x[1]))
    return int(np.max(np.cumsum([d for _, d in events])))


@pytest.mark.parametrize("clients, think, instances", [(16, 2.0, 1), (24, "exponential:3", 2)])
def test_littles_law_holds(clients, think, instances):
    res = simulate_closed_loop(_workload(), CONFIG, ClosedLoop(clients, think, seed=1), num_instances=instances,
                               routing="least-loaded")
    assert res.cluster.totals["finished"] == 400
    req = res.cluster.requests
    arrival, finish = np.asarray(req["arrival"]), np.asarray(req["finish_time_s"])
    assert res.mean_response_s == pytest.approx(np.mean(finish - arrival)) and res.peak_in_flight == clients
    # in the steady part of the run (the middle 80 % of the finishes; a finite run starts with every client
    # sending at once and ends with clients idle), X = N / (R + Z): throughput, response and think times
    # measured here from the requests' own times
    lo, hi = np.percentile(finish, [10, 90])
    x = ((finish >= lo) & (finish < hi)).sum() / (hi - lo)
    inside = (arrival >= lo) & (arrival < hi)
    think = ClosedLoop(clients, think, seed=1).think_sampler(400)
    r, z = np.mean(finish[inside] - arrival[inside]), np.mean(think[inside])
    assert x == pytest.approx(clients / (r + z), rel=0.03)
    assert res.throughput_rps == pytest.approx(res.littles_law_rps, rel=0.05)  # the whole run's, edges included


def test_never_more_requests_in_flight_than_clients_and_each_sent_at_a_finish():
    res = simulate_closed_loop(_workload(n=200), CONFIG, ClosedLoop(8))
    req = res.cluster.requests
    arrival, finish = np.asarray(req["arrival"]), np.asarray(req["finish_time_s"])
    assert _max_overlap(arrival, finish) == 8
    # with no think time every request after the first 8 leaves the moment another one's answer is complete
    later = np.sort(arrival)[8:]
    assert np.isin(later, finish).all()
    assert (arrival[:8] == 0).all()


def test_one_client_sends_each_request_after_the_last_one_plus_its_think_time():
    res = simulate_closed_loop(_workload(n=30), CONFIG, ClosedLoop(1, 0.5))
    req = res.cluster.requests
    order = np.argsort(req["arrival"], kind="stable")
    a, f = np.asarray(req["arrival"])[order], np.asarray(req["finish_time_s"])[order]
    assert a[0] == 0 and np.allclose(a[1:], f[:-1] + 0.5, rtol=0, atol=1e-12)
    assert (order == np.arange(30)).all()  # workload order


def test_a_sessions_next_turn_follows_the_last_answer_and_keeps_its_client():
    wl = _workload(n=120, turns={"turns": {"kind": "const", "value": 4}, "think_time": 1.0})
    assert (wl.parent >= 0).sum() == 90  # 30 conversations of 4 turns
    res = simulate_closed_loop(wl, CONFIG, ClosedLoop(6, "uniform:0.5,1.5", seed=3))
    req = res.cluster.requests
    arrival, finish = np.asarray(req["arrival"]), np.asarray(req["finish_time_s"])
    kids = np.flatnonzero(wl.parent >= 0)
    think = ClosedLoop(6, "uniform:0.5,1.5", seed=3).think_sampler(wl.n)
    assert np.allclose(arrival[kids], finish[wl.parent[kids]] + think[wl.parent[kids]], rtol=0, atol=1e-12)
    assert _max_overlap(arrival, finish) <= 6
    assert res.cluster.totals["prefix_cache_hit_rate"] > 0.3  # each turn re-reads its conversation's context


def test_a_client_for_every_request_paced_by_the_workload_is_the_open_loop_run():
    wl = _workload(n=300, rate=30.0)
    for instances, routing in ((1, "round-robin"), (3, "least-loaded")):
        closed = simulate_closed_loop(wl, CONFIG, ClosedLoop(wl.n, paced=True), num_instances=instances,
                                      routing=routing)
        open_ = simulate_cluster(wl, CONFIG, instances, routing=routing)
        for col in ("arrival", "first_token_time_s", "finish_time_s", "num_preemptions", "instance"):
            assert np.array_equal(np.asarray(closed.cluster.requests[col]), np.asarray(open_.requests[col])), col


def test_paced_requests_never_leave_before_their_own_time():
    wl = _workload(n=200, rate=40.0)
    res = simulate_closed_loop(wl, CONFIG, ClosedLoop(4, paced=True))
    assert (np.asarray(res.cluster.requests["arrival"]) >= wl.arrival).all()
    assert res.peak_in_flight == 4


@pytest.mark.parametrize("kw, message", [
    ({"clients": 0}, "closed_loop.clients: must be a whole number from 1 to 100,000, got 0"),
    ({"clients": 2.5}, "closed_loop.clients"),
    ({"clients": 4, "think_s": -1}, "closed_loop.think_s: must be from 0 to 86,400 seconds, got -1"),
    ({"clients": 4, "think_s": "gamma:2"}, "closed_loop.think_s: 'gamma:2' must be seconds, exponential:MEAN"),
    ({"clients": 4, "think_s": "uniform:3,1"}, "LO <= HI"),
    ({"clients": 4, "think_s": "exponential:x"}, "the parameters must be numbers"),
    ({"clients": 4, "paced": "yes"}, "closed_loop.paced: must be true or false"),
])
def test_bad_settings_name_the_field(kw, message):
    with pytest.raises(ClusterError) as exc:
        ClosedLoop(**kw)
    assert message in str(exc.value)


def test_step_arrivals_are_refused():
    wl = generate_workload(WorkloadSpec.from_dict({"n": 5, "prompt": "const:64", "output": "const:8"}), seed=0)
    with pytest.raises(ClusterError, match="a closed loop needs arrivals in seconds"):
        simulate_closed_loop(wl, CONFIG, ClosedLoop(2))


def test_the_cluster_command_runs_clients_and_names_bad_options(capsys, tmp_path):
    from simulator.cli.commands import main

    wl = tmp_path / "wl.json"
    assert main(["workload", "--n", "40", "--unit", "s", "--arrival", "poisson:5", "--prompt", "const:256",
                 "--output", "const:32", "--out", str(wl)]) == 0
    cfg = Path(__file__).resolve().parents[2] / "examples" / "C.json"
    base = ["cluster", "--workload", str(wl), "--config", str(cfg), "--instances", "1"]
    assert main(base + ["--clients", "4", "--think", "0.25"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["closed_loop"]["clients"] == 4 and out["closed_loop"]["think_s"] == 0.25
    assert out["closed_loop"]["peak_in_flight"] == 4 and out["totals"]["finished"] == 40
    assert main(base + ["--clients", "4", "--think", "gamma:1"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: --think: 'gamma:1' must be seconds")
    assert main(base[:-1] + ["1,2", "--clients", "4"]) == 2
    assert "error: --clients: give one --instances N and one --routing" in capsys.readouterr().err
