"""Disaggregated prefill and decode (``simulator.cluster.disaggregated``).

What is proved here:

* the prefill pool is the plain engine (a cluster of them) running every request with
  ``max_tokens = 1``: its first-token times are the handoffs, exactly;
* 1P1D with an infinite link and zero latency gives, for requests that never meet, the closed form
  of the linear step clock ``step(tokens, reqs) = b + t*tokens + r*reqs``:
  ``TTFT = (b + t*P + r) + max(b, x) + (b + t*tail + r)`` where ``x`` is the transfer time (0 here;
  the decode instance's first schedule call allocates the blocks and starts the transfer, an empty call
  costing ``b``; the next call, once the KV is there, computes the ``tail = P - floor((P-1)/B)*B``
  prompt tokens no whole block holds) and ``E2E = TTFT + (O - 1)(b + t + r)``;
* the transfer time is ``latency + blocks x B x kv_bytes_per_token / bandwidth`` per request, it
  scales with bytes / bandwidth, and TTFT grows by it once it exceeds an empty call;
* a decode pool whose KV holds one request at a time serialises the transfers (a transfer starts
  only when the previous request has finished and freed its blocks) and queues requests, while a
  large one does not;
* per-pool figures add up (requests, instances, busy time, bytes, outcomes);
* bad input raises :class:`DisaggError` naming the field.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.batch.runner import simulate
from simulator.cluster.disaggregated import (
    DisaggError,
    DisaggregatedDeployment,
    KvLink,
    Pool,
    deployment_from_dict,
    simulate_disaggregated,
)
from simulator.cluster.replicas import simulate_cluster
from simulator.engine.config import EngineConfig, StepTimeModel
from simulator.workload.generators import ArrivalProcess, PrefixGroup, WorkloadSpec, generate_workload
from simulator.workload.requests import Workload

B, T, R = 0.004, 2e-5, 1e-4  # the linear clock: base s, s per token, s per request
CFG = EngineConfig(num_gpu_blocks=2000, block_size=16, max_num_seqs=64, max_num_batched_tokens=2048,
                   step_time_model=StepTimeModel(base_s=B, per_token_s=T, per_req_s=R))
KVBPT = 131072  # bytes per token (Llama 3.1 8B in bf16: 32 layers x 8 KV heads x 128 x 2 x 2 bytes)


def _busy(n=200, rate=30.0, seed=3, prefixes=()):
    return generate_workload(WorkloadSpec(n=n, prompt="normal:400,150", output="normal:60,20",
                                          arrival=ArrivalProcess("poisson", rate=rate, unit="s"),
                                          prefixes=prefixes), seed)


def _lonely(prompts, outputs, gap=10.0):
    """Requests ``gap`` seconds apart: each one alone in the deployment."""
    n = len(prompts)
    return Workload(prompt_len=np.array(prompts), output_len=np.array(outputs),
                    arrival=1.0 + gap * np.arange(n), arrival_unit="s")


def _dep(np_=1, nd=1, link=KvLink(math.inf, 0.0), pre=CFG, dec=CFG, routing="round-robin", holds=True):
    return DisaggregatedDeployment(Pool(pre, np_, routing), Pool(dec, nd, routing), link, kv_bytes_per_token=KVBPT,
                                   prefill_holds_kv=holds)


# ---------------------------------------------------------------- engine-derived and closed-form expectations

def test_prefill_pool_is_the_plain_engine_with_one_output_token():
    """Without holding the KV after the handoff the prefill pool is the plain engine; with it (the default)
    the same while blocks are plenty, with more KV in use (the held blocks)."""
    wl = _busy()
    res = simulate_disaggregated(wl, _dep(2, 2, KvLink(50.0, 1e-4), holds=False))
    one_token = Workload(prompt_len=wl.prompt_len, output_len=np.ones(wl.n, np.int64), arrival=wl.arrival,
                         arrival_unit="s")
    ref = simulate_cluster(one_token, CFG, 2)
    np.testing.assert_array_equal(res.requests["handoff_s"], ref.requests["first_token_time_s"])
    np.testing.assert_array_equal(res.requests["prefill_instance"], ref.assignment)
    assert res.prefill.totals == ref.totals
    held = simulate_disaggregated(wl, _dep(2, 2, KvLink(50.0, 1e-4)))
    np.testing.assert_array_equal(held.requests["handoff_s"], ref.requests["first_token_time_s"])
    assert held.prefill.totals["peak_kv_usage"] > ref.totals["peak_kv_usage"]
    alone = simulate(one_token, [CFG])[0]
    res1 = simulate_disaggregated(wl, _dep(1, 1))
    np.testing.assert_array_equal(res1.requests["handoff_s"], alone.requests["first_token_time_s"])


def test_a_slow_link_holds_prefill_kv_and_delays_prefill_admission():
    """vLLM's NIXL connector frees a finished prefill's blocks when the decode side has read them: the prefill
    instance holds them ``latency + blocks x block_bytes / bandwidth`` after the handoff. A prefill instance of
    120 blocks fits about four 400-token prompts: over a 0.05 GB/s link (a request's 25 blocks of 2 MiB take
    about 1 s to read) its next prompts wait for those blocks; over 50 GB/s (1 ms) or without the hold, not."""
    wl = _busy(n=60, rate=20.0)
    small = EngineConfig(**{**CFG.to_dict(), "num_gpu_blocks": 120})
    runs = {name: simulate_disaggregated(wl, _dep(1, 2, link, pre=small, holds=holds)) for name, link, holds in (
        ("slow", KvLink(0.05, 1e-4), True), ("fast", KvLink(50.0, 1e-4), True), ("off", KvLink(0.05, 1e-4), False))}
    q = {name: r.pools["prefill"]["queueing_p90_s"] for name, r in runs.items()}
    assert q["slow"] > 10 * max(q["fast"], 1e-3) and q["slow"] > 0.5, q
    assert q["off"] == pytest.approx(q["fast"], abs=0.05), q  # the slow link alone does not delay prefill
    for name in ("slow", "fast"):
        assert runs[name].totals["finished"] == wl.n
    p90 = {name: r.prefill_ttft["p90_s"] for name, r in runs.items()}
    assert p90["slow"] > p90["fast"] + 0.5, p90
    assert runs["slow"].prefill.totals["peak_kv_usage"] > runs["off"].prefill.totals["peak_kv_usage"]


def test_1p1d_infinite_link_matches_the_closed_form():
    prompts, outputs = [100, 96, 17, 1000, 5], [30, 1, 7, 64, 3]
    res = simulate_disaggregated(_lonely(prompts, outputs), _dep())
    P, out = np.array(prompts), np.array(outputs)
    tail = P - (P - 1) // 16 * 16
    prefill = B + T * P + R
    ttft = prefill + B + (B + T * tail + R)
    np.testing.assert_allclose(res.requests["handoff_s"] - (1.0 + 10.0 * np.arange(5)), prefill, rtol=0, atol=1e-9)
    lat = res.decode.requests
    arrival = 1.0 + 10.0 * np.arange(5)
    np.testing.assert_allclose(lat["first_token_time_s"] - arrival, ttft, rtol=0, atol=1e-9)
    np.testing.assert_allclose(lat["finish_time_s"] - arrival, ttft + (out - 1) * (B + T + R), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(res.requests["transfer_s"], 0.0)
    np.testing.assert_array_equal(res.requests["transfer_blocks"], -(-P // 16))
    assert res.totals["finished"] == 5 and res.transfer["requests"] == 5


@pytest.mark.parametrize("gbps,latency", [(1.0, 0.0), (0.25, 0.0), (2.0, 0.003), (0.05, 0.001)])
def test_transfer_time_is_latency_plus_bytes_over_bandwidth(gbps, latency):
    prompts, outputs = [100, 1000, 2000, 37], [5, 5, 5, 5]
    res = simulate_disaggregated(_lonely(prompts, outputs), _dep(link=KvLink(gbps, latency)))
    P = np.array(prompts)
    nbytes = -(-P // 16) * 16 * KVBPT
    x = latency + nbytes / (gbps * 1e9)
    np.testing.assert_allclose(res.requests["transfer_bytes"], nbytes)
    np.testing.assert_allclose(res.requests["transfer_s"], x, rtol=1e-12)  # alone: no wait for the link
    tail = P - (P - 1) // 16 * 16
    ttft = (B + T * P + R) + np.maximum(B, x) + (B + T * tail + R)
    arrival = 1.0 + 10.0 * np.arange(4)
    np.testing.assert_allclose(res.decode.requests["first_token_time_s"] - arrival, ttft, rtol=0, atol=1e-9)
    assert res.transfer["mean_s"] == pytest.approx(x.mean())
    assert res.transfer["p90_s"] == pytest.approx(np.percentile(x, 90))


def test_transfer_time_scales_with_bytes_over_bandwidth_under_load():
    wl = _busy()
    xs = {}
    for gbps in (5.0, 10.0, 20.0):
        res = simulate_disaggregated(wl, _dep(1, 2, KvLink(gbps, 0.0)))
        wire = res.requests["transfer_wire_s"]
        np.testing.assert_allclose(wire, res.requests["transfer_bytes"] / (gbps * 1e9))
        xs[gbps] = wire.mean()
        assert np.all(res.requests["transfer_s"] >= wire - 1e-15)  # the link may make a transfer wait
    assert xs[5.0] == pytest.approx(2 * xs[10.0]) and xs[10.0] == pytest.approx(2 * xs[20.0])


# ---------------------------------------------------------------- the decode pool's KV limits admission

def test_a_tiny_decode_pool_serialises_transfers_and_queues():
    P, out = 200, 50
    wl = Workload(prompt_len=np.full(12, P), output_len=np.full(12, out), arrival=np.linspace(0.0, 0.05, 12),
                  arrival_unit="s")
    one = -(-(P + out) // 16) + 1  # blocks: one request's whole context, plus the null block
    tiny = EngineConfig(**{**CFG.to_dict(), "num_gpu_blocks": one})
    small = simulate_disaggregated(wl, _dep(dec=tiny, link=KvLink(10.0, 1e-4)))
    big = simulate_disaggregated(wl, _dep(link=KvLink(10.0, 1e-4)))
    for res in (small, big):
        assert res.totals["finished"] == 12 and res.totals["preemptions"] == 0
    req = small.requests
    order = np.argsort(req["transfer_start_s"])
    start, finish = req["transfer_start_s"][order], small.decode.requests["finish_time_s"][order]
    assert np.all(start[1:] >= finish[:-1] - 1e-12), "a transfer started before the previous request freed its KV"
    dq, bq = small.pools["decode"], big.pools["decode"]
    assert dq["queueing_mean_s"] > 5 * (out * B)  # requests wait whole decodes for room
    assert bq["queueing_p90_s"] < B + 1e-9  # room for all: admitted at the first schedule call
    assert dq["peak_kv_usage"] == pytest.approx(1.0) and bq["peak_kv_usage"] < 0.1
    assert small.latency.ttft.p90 > 3 * big.latency.ttft.p90


# ---------------------------------------------------------------- per-pool figures add up

def test_per_pool_figures_add_up():
    wl = _busy(n=300, rate=60.0, prefixes=(PrefixGroup(128, 0.5, 2),))
    dec = EngineConfig(**{**CFG.to_dict(), "num_gpu_blocks": 400})
    res = simulate_disaggregated(wl, _dep(2, 3, KvLink(20.0, 5e-4), dec=dec, routing="least-loaded"))
    pre, de = res.pools["prefill"], res.pools["decode"]
    assert pre["requests"] == wl.n == sum(i["requests"] for i in pre["instances"])
    assert de["requests"] == sum(i["requests"] for i in de["instances"]) == pre["finished"]
    assert de["busy_s"] == pytest.approx(sum(i["busy_s"] for i in de["instances"]))
    assert pre["preemptions"] + de["preemptions"] == res.totals["preemptions"]
    assert de["preemptions"] == sum(i["preemptions"] for i in de["instances"])
    t = res.totals
    assert t["finished"] + t["dropped_unservable"] + t["unfinished"] == wl.n
    assert t["finished"] == de["finished"] == res.latency.num_completed
    assert res.transfer["bytes"] == pytest.approx(res.transfer["blocks"] * 16 * KVBPT)
    assert res.transfer["bytes"] == pytest.approx(res.requests["transfer_bytes"].sum())
    for pool in (pre, de):
        assert 0 < pool["utilisation"] <= 1 and 0 < pool["mean_kv_usage"] <= pool["peak_kv_usage"] <= 1
    assert t["num_gpus"] == 5
    # local prefix hits on the decode instance shrink what moves: fewer blocks than the prompts hold
    assert res.transfer["blocks"] < int((-(-wl.prompt_len // 16)).sum())
    assert np.all(res.decode.requests["first_token_time_s"] >= res.requests["transfer_end_s"])


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("data,field", [
    ({"prefill": {"config": {}, "num_instances": 0}, "decode": {"config": {}}}, "prefill.num_instances"),
    ({"prefill": {"config": {}}, "decode": {"config": {}, "num_instances": 300}}, "decode.num_instances"),
    ({"prefill": {"config": {}}, "decode": {"config": {}}, "link": {"bandwidth_gbps": 0}}, "link.bandwidth_gbps"),
    ({"prefill": {"config": {}}, "decode": {"config": {}}, "link": {"latency_s": -1}}, "link.latency_s"),
    ({"prefill": {"config": {}}, "decode": {"config": {}}, "link": {"gbps": 1}}, "link.gbps"),
    ({"prefill": {"config": {"block_size": 0}}, "decode": {"config": {}}}, "prefill.config.block_size"),
    ({"prefill": {"config": {}}, "decode": {"config": {"enable_prefix_caching": False}}},
     "decode.config.enable_prefix_caching"),
    ({"prefill": {"config": {}}, "decode": {"config": {}, "routing": "fastest"}}, "decode.routing"),
    ({"prefill": {"config": {}}}, "decode"),
    ({"prefill": {"config": {}}, "decode": {"config": {}}}, "kv_bytes_per_token"),
    ({"prefill": {"config": {}}, "decode": {"config": {}}, "kv_bytes_per_token": 0}, "kv_bytes_per_token"),
    ({"prefill": {"config": {}}, "decode": {"config": {}}, "kv_bytes_per_token": 8, "pools": 2}, "pools"),
])
def test_bad_input_names_the_field(data, field):
    with pytest.raises(DisaggError) as exc:
        deployment_from_dict(data)
    assert str(exc.value).startswith(field + ":"), str(exc.value)


def test_bad_workloads_are_refused():
    steps = Workload(prompt_len=np.array([10]), output_len=np.array([3]), arrival=np.array([0]))
    with pytest.raises(DisaggError, match="^workload: .*seconds"):
        simulate_disaggregated(steps, _dep())
    chat = Workload(prompt_len=np.array([10, 30]), output_len=np.array([3, 3]), arrival=np.array([0.0, 1.0]),
                    arrival_unit="s", parent=np.array([-1, 0]))
    with pytest.raises(DisaggError, match="^workload: multi-turn"):
        simulate_disaggregated(chat, _dep())


# ---------------------------------------------------------------- accelerators and async scheduling

@pytest.mark.parametrize("async_scheduling,shared", [(False, True), (True, True), (False, False), (True, False)])
def test_accelerators_change_no_result(async_scheduling, shared):
    """The decode engine parks requests whose KV is in flight in the waiting queue; the lazy decoders,
    jumps and windows (2,000 lazy steps, 80 window steps a decode instance in the sync shared case) must
    still stop for them, and with own keys a finished transfer is kept without a lookup. Same result with
    every accelerator off, under KV pressure (preemptions in the decode pool), with a shared prefix (local
    hits shrink the transfers) and without (own keys)."""
    wl = _busy(n=250, rate=50.0, prefixes=(PrefixGroup(96, 0.6, 3),) if shared else ())
    cfg = EngineConfig(**{**CFG.to_dict(), "async_scheduling": async_scheduling})
    dec = EngineConfig(**{**cfg.to_dict(), "num_gpu_blocks": 140})
    dep = _dep(2, 2, KvLink(5.0, 2e-4), pre=cfg, dec=dec, routing="least-loaded")
    fast, slow = dep.run(wl), dep.run(wl, accelerate=False)
    assert fast.totals == slow.totals and fast.transfer == slow.transfer and fast.pools == slow.pools
    for k, v in fast.requests.items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(slow.requests[k]), err_msg=k)
    np.testing.assert_array_equal(fast.decode.requests["finish_time_s"], slow.decode.requests["finish_time_s"])
    assert fast.pools["decode"]["preemptions"] > 0 and fast.totals["finished"] == wl.n


def test_each_pool_runs_on_its_own_clock_and_kv():
    """Heterogeneous pools (another GPU type or TP): the prefill pool's config times the prefill and the
    handoff, the decode pool's config times the tail, the decode steps and holds the KV."""
    b2, t2, r2 = 0.010, 5e-5, 3e-4
    dec = EngineConfig(num_gpu_blocks=900, block_size=16, max_num_seqs=64, max_num_batched_tokens=2048,
                       step_time_model=StepTimeModel(base_s=b2, per_token_s=t2, per_req_s=r2))
    prompts, outputs = [100, 640, 33], [12, 4, 40]
    res = simulate_disaggregated(_lonely(prompts, outputs), _dep(dec=dec))
    P, out = np.array(prompts), np.array(outputs)
    tail = P - (P - 1) // 16 * 16
    arrival = 1.0 + 10.0 * np.arange(3)
    prefill = B + T * P + R
    ttft = prefill + b2 + (b2 + t2 * tail + r2)  # the empty call that starts the transfer is the decode GPU's
    np.testing.assert_allclose(res.requests["handoff_s"] - arrival, prefill, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.decode.requests["first_token_time_s"] - arrival, ttft, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.decode.requests["finish_time_s"] - arrival, ttft + (out - 1) * (b2 + t2 + r2),
                               rtol=0, atol=1e-9)
    assert res.decode.instances[0].totals["peak_kv_blocks_used"] <= 899
    assert res.pools["decode"]["peak_kv_usage"] == pytest.approx(
        max(-(-(p + o - 1) // 16) for p, o in zip(prompts, outputs)) / 899)
