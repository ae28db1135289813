"""A fleet over a day (simulator/day): replicas an autoscaling policy starts and stops, and what it costs.

Checked against the cluster (a fleet that never changes is the cluster, request for request), against arrivals
counted by hand (the queue at the router while no replica is ready), and against each replica's own life (no
request after its stop, billed until its last request ends).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from simulator.autoscale import FixedPolicy, HpaPolicy, OraclePolicy, ScheduledPolicy, rate_curve
from simulator.base import ConfigError
from simulator.cluster import simulate_cluster
from simulator.day import (
    DayChunk,
    Handover,
    answer_day,
    chunk_plans,
    join_chunks,
    simulate_chunk,
    simulate_day,
    simulate_day_in_chunks,
)
from simulator.day.fleet_day import MAX_ENGINE_BYTES
from simulator.engine import EngineConfig
from simulator.workload import WorkloadSpec, generate_workload, parse_arrival

CONFIG = EngineConfig(num_gpu_blocks=3000, block_size=16, max_num_seqs=64, max_num_batched_tokens=2048,
                      enable_prefix_caching=True,
                      step_time_model={"base_s": 0.012, "per_token_s": 2.1e-5, "per_req_s": 1e-4})


def workload(n: int, arrival: str, seed: int = 0, unit: str = "s"):
    return generate_workload(WorkloadSpec(n=n, prompt="normal:512,128", output="normal:128,32",
                                          arrival=parse_arrival(arrival, unit)), seed)


@pytest.mark.parametrize("routing", ["least-loaded", "round-robin"])
def test_a_fleet_that_never_changes_is_the_cluster(routing):
    wl = workload(1500, "poisson-time:30")
    cluster = simulate_cluster(wl, CONFIG, 3, routing=routing)
    day = simulate_day(wl, CONFIG, FixedPolicy(3), routing=routing)
    assert np.array_equal(day.requests["pod"], cluster.requests["instance"])
    for col in ("first_token_time_s", "finish_time_s"):
        assert np.array_equal(day.requests[col], cluster.requests[col], equal_nan=True), col
    assert len(day.pods) == 3 and all(p.stop_s is None for p in day.pods)
    assert day.billed_replica_s() == pytest.approx(3 * day.end_s)


def test_with_no_replica_ready_requests_queue_at_the_router_until_the_cold_start_ends():
    """One replica until 90 s, none from 90 s to 180 s, two asked for at 180 s and ready at 180 + c (the policy
    acts at its syncs, every 15 s)."""
    c = 40.0
    wl = workload(900, "poisson-time:3", seed=3)
    policy = ScheduledPolicy(replicas=(1, 0, 2, 2, 2, 2, 2, 2, 2, 2), period_s=90.0)
    day = simulate_day(wl, CONFIG, policy, cold_start_s=c)
    arrival = np.asarray(wl.arrival)
    for s in day.samples:
        if 90.0 < s.time_s < 180.0 + c:
            assert s.router_queue == int(((arrival >= 90.0) & (arrival < s.time_s)).sum()), s
    queued = (arrival >= 90.0) & (arrival < 180.0 + c)
    assert queued.sum() > 100
    first = day.requests["first_token_time_s"]
    assert np.all(first[queued] > 180.0 + c)  # nobody served before the new replicas were ready
    assert set(day.requests["pod"][queued].tolist()) <= {1, 2}
    pods = day.pods
    assert (pods[0].asked_s, pods[0].stop_s) == (0.0, 90.0)
    assert [(p.asked_s, p.ready_s) for p in pods[1:]] == [(180.0, 180.0 + c)] * 2


def test_a_stopped_replica_takes_nothing_new_and_is_billed_until_its_last_request_ends():
    wl = workload(5000, "stages:5x300,25x120,5x300")
    day = simulate_day(wl, CONFIG, HpaPolicy(metric="running", target=32, max_replicas=6), cold_start_s=45.0)
    arrival, pod, fin = np.asarray(wl.arrival), day.requests["pod"], day.requests["finish_time_s"]
    stopped = [p for p in day.pods if p.stop_s is not None]
    assert stopped, "the HPA never scaled down after the burst"
    for p in stopped:
        mine = pod == p.index
        assert np.all(arrival[mine] <= p.stop_s)
        if p.ready_s <= p.stop_s:
            assert p.gone_s == pytest.approx(max(p.stop_s, float(np.nanmax(fin[mine], initial=p.stop_s))))
        else:
            assert p.gone_s == p.stop_s and not mine.any()  # stopped while starting
    assert max(s.ready + s.starting for s in day.samples) <= 6
    ready = [s.ready for s in day.samples]
    assert max(ready) > ready[0] and ready[-1] < max(ready)


def test_the_answer_adds_up():
    wl = workload(5000, "stages:5x300,25x120,5x300")
    day = simulate_day(wl, CONFIG, HpaPolicy(metric="running", target=32, max_replicas=6), cold_start_s=45.0)
    a = answer_day(day, gpus_per_replica=4, price_per_gpu_hour=2.5, slo_ttft_s=2.0, slo_tpot_s=0.05)
    billed = sum(((p.gone_s if p.gone_s is not None else day.end_s) - p.asked_s) for p in day.pods)
    assert a.gpu_hours == pytest.approx(billed * 4 / 3600)
    assert a.cost == pytest.approx(a.gpu_hours * 2.5)
    assert a.fixed_peak_gpu_hours == pytest.approx(a.peak_replicas * day.end_s * 4 / 3600)
    assert a.gpu_hours < a.fixed_peak_gpu_hours
    assert sum(h.requests for h in a.hours) == wl.n
    assert sum(h.gpu_hours for h in a.hours) == pytest.approx(a.gpu_hours)
    ttft = day.requests["first_token_time_s"] - np.asarray(wl.arrival)
    gaps = (day.requests["finish_time_s"] - day.requests["first_token_time_s"]) / (
        day.requests["num_output_tokens"] - 1)
    met = (ttft <= 2.0) & ~(gaps > 0.05)
    assert a.attainment == pytest.approx(met.mean())


def test_the_oracle_that_knows_the_rate_costs_less_than_the_peak_and_meets_as_often():
    wl = workload(5000, "stages:5x300,25x120,5x300")
    cold = 45.0
    fixed = answer_day(simulate_day(wl, CONFIG, FixedPolicy(4), cold_start_s=cold), slo_ttft_s=2.0)
    oracle = OraclePolicy(rates=rate_curve(wl.arrival, 60.0), period_s=60.0, capacity_per_replica=7.0,
                          lead_s=cold + 15.0, max_replicas=6)
    ans = answer_day(simulate_day(wl, CONFIG, oracle, cold_start_s=cold), slo_ttft_s=2.0)
    assert ans.gpu_hours < fixed.gpu_hours
    assert ans.attainment >= fixed.attainment - 0.01


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"routing": "prefix-affinity"}, "routing: must be one of"),
    ({"cold_start_s": -1.0}, "cold_start_s: must be 0 to 86,400"),
    ({"cold_start_s": math.nan}, "cold_start_s"),
])
def test_bad_input_names_the_field(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        simulate_day(workload(20, "poisson-time:1"), CONFIG, FixedPolicy(1), **kwargs)


def test_arrivals_in_steps_and_too_much_engine_state_are_refused():
    with pytest.raises(ConfigError, match="arrivals in seconds"):
        simulate_day(workload(20, "poisson:1", unit="step"), CONFIG, FixedPolicy(1))
    big = generate_workload(WorkloadSpec.from_dict({"n": 1_000_000, "prompt": "const:8", "output": "const:2",
                                                    "arrival": "poisson-time:1000"}), 0)
    with pytest.raises(ConfigError, match=f"more than the {MAX_ENGINE_BYTES // 1024 ** 3} GiB limit"):
        simulate_day(big, CONFIG, HpaPolicy(max_replicas=64))


def test_answer_bad_prices_name_the_field():
    day = simulate_day(workload(50, "poisson-time:5"), CONFIG, FixedPolicy(1))
    with pytest.raises(ConfigError, match="price_per_gpu_hour"):
        answer_day(day, price_per_gpu_hour=-1)
    with pytest.raises(ConfigError, match="slo_tpot_s"):
        answer_day(day, slo_tpot_s=0)


# --------------------------------------------------------------------------- in chunks

BURSTY = "stages:3x300,30x240,3x300"


def test_one_chunk_longer_than_the_run_is_the_run_itself():
    wl = workload(4000, BURSTY)
    policy = HpaPolicy(metric="running", target=24, max_replicas=6)
    whole = simulate_day(wl, CONFIG, policy, cold_start_s=45.0)
    one = simulate_day_in_chunks(wl, CONFIG, policy, chunk_s=7200, overlap_s=600, cold_start_s=45.0)
    for col in ("first_token_time_s", "finish_time_s", "pod"):
        assert np.array_equal(one.requests[col], whole.requests[col], equal_nan=True), col
    assert [p.to_dict() for p in one.pods] == [p.to_dict() for p in whole.pods]
    assert one.samples == whole.samples and one.started == whole.started


def test_chunks_with_an_overlap_give_the_day_s_answer_within_two_percent():
    wl = workload(9000, BURSTY)
    policy = HpaPolicy(metric="running", target=24, max_replicas=8)
    whole = answer_day(simulate_day(wl, CONFIG, policy, cold_start_s=45.0), slo_ttft_s=1.0, slo_tpot_s=0.04)
    res = simulate_day_in_chunks(wl, CONFIG, policy, chunk_s=600, overlap_s=300, cold_start_s=45.0)
    chunked = answer_day(res, slo_ttft_s=1.0, slo_tpot_s=0.04)
    assert whole.peak_replicas >= 3, "the day should make the policy scale"
    assert chunked.gpu_hours == pytest.approx(whole.gpu_hours, rel=0.02)
    assert chunked.attainment == pytest.approx(whole.attainment, abs=0.01)
    assert chunked.requests == whole.requests and chunked.unfinished == 0
    t = [s.time_s for s in res.samples]
    assert t == sorted(t) and len(set(t)) == len(t)  # each sync reported by exactly one chunk
    assert sorted(p.index for p in res.pods) == list(range(len(res.pods)))
    assert set(res.requests["pod"].tolist()) <= set(range(len(res.pods)))


def test_a_handover_survives_json():
    wl = workload(3000, BURSTY)
    policy = HpaPolicy(metric="running", target=24, max_replicas=6)
    plans = chunk_plans(float(wl.arrival.max()), 600, 300, policy.sync_s)
    first = simulate_chunk(wl, CONFIG, policy, plans[0], cold_start_s=45.0, routing="least-loaded", handover=None,
                           next_plan=plans[1])
    again = Handover.from_dict(json.loads(json.dumps(first.handover.to_dict())))
    assert again == first.handover and again.ready_s and min(again.script) > plans[1].lo_s


def test_a_chunk_tells_the_next_one_s_handover_before_its_cool_down_is_simulated():
    wl = workload(3000, BURSTY)
    policy = HpaPolicy(metric="running", target=24, max_replicas=6)
    plans = chunk_plans(float(wl.arrival.max()), 300, 120, policy.sync_s)
    assert len(plans) >= 3
    handover = None
    for i, plan in enumerate(plans):
        told = []
        nxt = plans[i + 1] if i + 1 < len(plans) else None
        chunk = simulate_chunk(wl, CONFIG, policy, plan, cold_start_s=45.0, routing="least-loaded",
                               handover=handover, next_plan=nxt, on_handover=lambda h, t, told=told: told.append((h, t)))
        if nxt is None:
            assert told == [] and chunk.handover is None
            break
        # told once, the handover the chunk returns, at the last sync before the next chunk starts
        assert told == [(chunk.handover, nxt.start_s - policy.sync_s)], i
        assert told[0][1] < plan.end_s < plan.hi_s  # before the cool-down [end_s, hi_s)
        handover = chunk.handover


@pytest.mark.parametrize(("chunk_s", "overlap_s", "words"), [
    (610, 300, "chunk_s: must be a whole number of the policy's syncs"),
    (600, 900, "overlap_s: at most chunk_s"),
    (0, 0, "chunk_s: must be > 0"),
    (600, -15, "overlap_s: must be a number of seconds >= 0"),
])
def test_bad_chunks_name_the_field(chunk_s, overlap_s, words):
    with pytest.raises(ConfigError, match=words):
        simulate_day_in_chunks(workload(50, "poisson-time:5"), CONFIG, FixedPolicy(1), chunk_s=chunk_s,
                               overlap_s=overlap_s)


def test_a_finished_chunk_survives_json_and_joins_to_the_same_day():
    wl = workload(3000, BURSTY)
    policy = HpaPolicy(metric="running", target=24, max_replicas=6)
    plans = chunk_plans(float(wl.arrival.max()), 300, 120, policy.sync_s)
    chunks, handover = [], None
    for i, plan in enumerate(plans):
        c = simulate_chunk(wl, CONFIG, policy, plan, cold_start_s=45.0, routing="least-loaded", handover=handover,
                           next_plan=plans[i + 1] if i + 1 < len(plans) else None)
        chunks.append(c)
        handover = DayChunk.from_dict(json.loads(json.dumps(c.to_dict()))).handover
    again = [DayChunk.from_dict(json.loads(json.dumps(c.to_dict()))) for c in chunks]
    a = join_chunks(wl, chunks, policy, cold_start_s=45.0, routing="least-loaded")
    b = join_chunks(wl, again, policy, cold_start_s=45.0, routing="least-loaded")
    direct = simulate_day_in_chunks(wl, CONFIG, policy, chunk_s=300, overlap_s=120, cold_start_s=45.0)
    for res in (b, direct):
        for col in ("first_token_time_s", "finish_time_s", "pod", "num_output_tokens"):
            assert np.array_equal(res.requests[col], a.requests[col], equal_nan=True), col
        assert answer_day(res).to_dict() == answer_day(a).to_dict()


def test_the_default_overlap_covers_the_policy_s_stabilization_window():
    from simulator.day import default_overlap_s

    assert default_overlap_s(FixedPolicy(2)) == 300.0
    assert default_overlap_s(HpaPolicy(scale_down_window_s=600)) == 600.0
    assert default_overlap_s(HpaPolicy(scale_down_window_s=310, sync_s=20)) == 320.0  # whole syncs
