"""Replicas and routing (``simulator.cluster.replicas``, ``simulator.cluster.routing``, ``python -m simulator cluster``).

What is proved here:

* one instance is the plain engine (identical totals and per-request records,
  whatever the policy and delay, sync and async scheduling);
* round-robin sends the k-th arrival to instance ``k mod N``; requests are
  conserved; an instance's ``unfinished`` counts only its own requests; the
  cluster hit rate is token-weighted (idle instances do not dilute it);
* seed 000's scenario (4 instances, Llama 3.1 8B on H100, 100 requests/s, 500
  requests) shows the expected pattern: with one 512-token prefix shared by
  every request, affinity routing gains (almost) nothing in hit rate and
  piles the load onto one instance, while round-robin balances it; with one
  2048-token prefix per tenant (16 tenants), affinity raises the hit rate;
* a router delay changes affinity decisions (exactly, in a constructed case,
  and measurably in the tenant scenario);
* ``smallest_replicas`` finds the smallest count and shows N - 1 failing;
* bad input raises :class:`ClusterError` (a ValueError) naming the field, and
  the CLI exits 2 with one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.base.specs import DeploymentSpec, GpuSpec
from simulator.batch.runner import simulate
from simulator.cli import commands as cli
from simulator.cluster.replicas import ClusterError, simulate_cluster, smallest_replicas
from simulator.cluster.routing import RoutingPolicy, parse_routing
from simulator.engine.config import EngineConfig
from simulator.sizing.closed_form import plan
from simulator.sizing.hf_config import parse_hf_config
from simulator.workload.generators import ArrivalProcess, PrefixGroup, WorkloadSpec, generate_workload
from simulator.workload.requests import Workload

ROOT = Path(__file__).resolve().parents[2]
LLAMA_8B = ROOT / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
H100 = dict(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
            interconnect_gbps=900)
AFFINITY = "weighted:prefix-affinity:3,queue-depth:1"  # seed 000's --routing-scorers


def _wl(n=120, rate=40.0, prefixes=(PrefixGroup(64, 0.8, 3),), seed=1, unit="s"):
    return generate_workload(WorkloadSpec(n=n, prompt="normal:96,32", output="normal:40,15",
                                          arrival=ArrivalProcess("poisson", rate=rate, unit=unit),
                                          prefixes=prefixes), seed)


SMALL = EngineConfig(num_gpu_blocks=120, max_num_seqs=16, max_num_batched_tokens=256)


# ---------------------------------------------------------------- one instance == the plain engine

@pytest.mark.parametrize("routing,delay", [("round-robin", 0.0), ("least-loaded", 0.0),
                                           ("prefix-affinity", 0.0), (AFFINITY, 0.5)])
@pytest.mark.parametrize("async_", [False, True])
def test_one_instance_is_the_plain_engine(routing, delay, async_):
    wl = _wl()
    cfg = EngineConfig(num_gpu_blocks=120, max_num_seqs=16, max_num_batched_tokens=256, async_scheduling=async_)
    plain = simulate(wl, [cfg])[0]
    assert plain.totals["preemptions"] > 0  # the case exercises preemption, not just easy admission
    c = simulate_cluster(wl, cfg, 1, routing=routing, router_delay_s=delay)
    inst = c.instances[0].result
    assert inst.totals == plain.totals
    assert inst.request_records() == plain.request_records()
    for k, v in plain.requests.items():  # the cluster's merged columns too
        floats = isinstance(v, np.ndarray) and v.dtype.kind == "f"
        assert np.array_equal(np.asarray(c.requests[k]), np.asarray(v), equal_nan=floats), k
    assert c.totals["prefix_cache_hit_rate"] == plain.totals["prefix_cache_hit_rate"]
    assert c.totals["preemptions"] == plain.totals["preemptions"]


def test_one_instance_in_engine_steps_with_drops():
    wl = _wl(n=80, rate=0.5, unit="step")
    big = Workload(prompt_len=np.r_[wl.prompt_len, 5000], output_len=np.r_[wl.output_len, 10],
                   arrival=np.r_[wl.arrival, 3.0], prefix_id=np.r_[wl.prefix_id, -1], prefix_len=wl.prefix_len)
    plain = simulate(big, [SMALL])[0]
    assert plain.totals["dropped_unservable"] == 1
    c = simulate_cluster(big, SMALL, 1, routing="prefix-affinity")
    assert c.instances[0].result.totals == plain.totals
    assert c.instances[0].result.request_records() == plain.request_records()
    assert c.latency is None  # latency summaries need arrivals in seconds


# ---------------------------------------------------------------- routing exactness and conservation

def test_round_robin_assignment_is_exact():
    wl = _wl(n=100)
    c = simulate_cluster(wl, SMALL, 3, routing="round-robin")
    order = np.argsort(wl.arrival, kind="stable")
    assert np.array_equal(c.assignment[order], np.arange(100) % 3)
    assert c.load.requests.tolist() == [34, 33, 33]
    # a weighted policy of the round-robin scorer alone is the same policy
    w = simulate_cluster(wl, SMALL, 3, routing="weighted:round-robin:1")
    assert np.array_equal(w.assignment, c.assignment)


@pytest.mark.parametrize("routing", ["round-robin", "least-loaded", "prefix-affinity", "random", AFFINITY,
                                     "weighted:kv-usage:1,running:2"])
def test_requests_are_conserved(routing):
    wl = _wl(n=150, rate=60.0)
    c = simulate_cluster(wl, SMALL, 3, routing=routing)
    idx = np.concatenate([i.request_index for i in c.instances])
    assert np.array_equal(np.sort(idx), np.arange(wl.n))  # every request on exactly one instance
    assert sum(len(i.result.requests["id"]) for i in c.instances) == wl.n
    for i in c.instances:
        assert np.all(c.assignment[i.request_index] == i.index)
        t = i.result.totals
        # requests routed elsewhere are not this instance's unfinished
        assert t["unfinished"] == 0 and t["finished"] == len(i.request_index) > 0
        assert i.latency.num_requests == len(i.request_index)
    assert c.totals["finished"] == wl.n == c.latency.num_completed
    assert c.totals["num_requests"] == wl.n
    assert c.load.request_share.sum() == pytest.approx(1.0)
    assert c.load.tokens.sum() == int((wl.prompt_len + wl.output_len).sum())


def test_unfinished_and_dropped_counted_once():
    wl = _wl(n=60, rate=60.0)
    big = Workload(prompt_len=np.r_[wl.prompt_len, 5000], output_len=np.r_[wl.output_len, 10],
                   arrival=np.r_[wl.arrival, 0.2], arrival_unit="s", prefix_id=np.r_[wl.prefix_id, -1],
                   prefix_len=wl.prefix_len)
    cfg = EngineConfig(num_gpu_blocks=120, max_num_seqs=16, max_num_batched_tokens=256, max_steps=40)
    c = simulate_cluster(big, cfg, 2, routing="round-robin")
    t = c.totals
    assert t["dropped_unservable"] == 1
    assert t["unfinished"] > 0  # max_steps cut the run short
    assert t["finished"] + t["dropped_unservable"] + t["unfinished"] == big.n
    for i in c.instances:
        st = i.result.requests["status"]
        assert i.result.totals["unfinished"] == sum(s not in ("finished", "dropped_unservable") for s in st)
        assert i.result.totals["unfinished"] < len(i.request_index)


def test_cluster_hit_rate_is_token_weighted_not_a_mean_over_instances():
    wl = _wl(n=100, prefixes=(PrefixGroup(128, 1.0, 1),))
    c = simulate_cluster(wl, SMALL, 4, routing="prefix-affinity")
    shares = c.load.request_share
    assert shares.max() == 1.0  # everything follows the first request's prefix: three idle instances
    hits = sum(i.totals["prefix_cache_hits"] for i in c.instances)
    queries = sum(i.totals["prefix_cache_queries"] for i in c.instances)
    assert c.totals["prefix_cache_hit_rate"] == hits / queries
    mean_over_instances = np.mean([i.totals["prefix_cache_hit_rate"] for i in c.instances])
    assert c.totals["prefix_cache_hit_rate"] > 0.5 > mean_over_instances  # BLIS's mean would report < 1/4 of it
    assert c.load.request_imbalance == 4.0


def test_random_policy_is_seeded():
    wl = _wl(n=80)
    a = simulate_cluster(wl, SMALL, 4, routing="random", seed=3).assignment
    b = simulate_cluster(wl, SMALL, 4, routing="random", seed=3).assignment
    c = simulate_cluster(wl, SMALL, 4, routing="random", seed=4).assignment
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(simulate_cluster(wl, SMALL, 4, routing=AFFINITY).assignment,
                          simulate_cluster(wl, SMALL, 4, routing=AFFINITY).assignment)


def test_least_loaded_follows_requests_then_kv_usage():
    # t=0: four requests, two long (200 tokens, about 5 s) and two short (5 tokens, done by 0.2 s)
    wl = Workload(prompt_len=np.full(8, 64), output_len=[200, 200, 5, 5, 5, 5, 5, 5],
                  arrival=np.r_[np.zeros(4), np.full(4, 1.0)], arrival_unit="s")
    c = simulate_cluster(wl, SMALL, 4, routing="least-loaded")
    assert c.assignment[:4].tolist() == [0, 1, 2, 3]  # empty instances: round-robin order
    # t=1: instances 0 and 1 still run their long request, 2 and 3 are empty. Four arrivals:
    # loads (1,1,0,0) -> 2; (1,1,1,0) -> 3; (1,1,1,1) -> lowest KV usage (2, 3 hold no blocks:
    # the new ones only wait), first from k mod 4 = 2 -> 2; (1,1,2,1) -> 3 (no blocks held).
    assert c.assignment[4:].tolist() == [2, 3, 2, 3]


# ---------------------------------------------------------------- seed 000: 4 instances, 8B on H100

@pytest.fixture(scope="module")
def h100_8b_config():
    model_cfg = json.loads(LLAMA_8B.read_text())
    sized = plan(parse_hf_config(model_cfg), GpuSpec(**H100), DeploymentSpec())
    # vLLM defaults on one H100 80GB: about 28,000 blocks of 16 tokens, 8192-token budget, 1024 seqs
    assert 25_000 < sized.num_gpu_blocks < 32_000
    return EngineConfig(num_gpu_blocks=sized.num_gpu_blocks, max_num_batched_tokens=sized.max_num_batched_tokens,
                        max_num_seqs=sized.max_num_seqs,
                        cost_model={"kind": "roofline", "model": model_cfg, "gpu": H100})


def _seed_workload(prefix: PrefixGroup) -> Workload:
    # 500 requests, Poisson 100/s; prompts normal(512, 128) after the prefix, outputs normal(256, 64)
    return generate_workload(WorkloadSpec(n=500, arrival=ArrivalProcess("poisson", rate=100.0, unit="s"),
                                          prefixes=(prefix,)), 0)


@pytest.fixture(scope="module")
def seed_runs(h100_8b_config):
    out = {}
    for name, group in (("global", PrefixGroup(512, 1.0, 1)), ("tenants", PrefixGroup(2048, 1.0, 16))):
        wl = _seed_workload(group)
        for routing in ("round-robin", "prefix-affinity", AFFINITY):
            out[name, routing] = simulate_cluster(wl, h100_8b_config, 4, routing=routing)
    return out


def test_seed_one_global_prefix_affinity_gains_nothing_and_concentrates_load(seed_runs):
    rr = seed_runs["global", "round-robin"]
    # round-robin: every instance gets a quarter and caches the prefix after its first request
    assert rr.load.request_share.tolist() == [0.25] * 4
    assert 0.45 < rr.totals["prefix_cache_hit_rate"] < 0.55  # 512 of about 1024 prompt tokens
    for routing in ("prefix-affinity", AFFINITY):
        aff = seed_runs["global", routing]
        gain = aff.totals["prefix_cache_hit_rate"] - rr.totals["prefix_cache_hit_rate"]
        # only the three first-request misses of instances 1-3 are saved: well under a point
        assert 0 <= gain < 0.01
        # the first instance to cache the prefix wins every later request (affinity 3 outweighs queue depth 1)
        assert aff.load.request_imbalance > 3.5 and rr.load.request_imbalance == 1.0
        assert aff.latency.ttft.p90 > 5 * rr.latency.ttft.p90  # and the crowded instance queues
    assert all(r.totals["finished"] == 500 for r in seed_runs.values())


def test_seed_one_prefix_per_tenant_affinity_raises_the_hit_rate(seed_runs):
    rr = seed_runs["tenants", "round-robin"]
    for routing in ("prefix-affinity", AFFINITY):
        aff = seed_runs["tenants", routing]
        # round-robin computes each tenant's prefix once per instance (4 x 16 misses); affinity about once
        assert aff.totals["prefix_cache_hit_rate"] > rr.totals["prefix_cache_hit_rate"] + 0.04
        assert aff.load.request_imbalance < 1.5  # tenants spread over the instances, not piled up


def test_router_delay_changes_affinity_decisions_measurably(h100_8b_config):
    wl = _seed_workload(PrefixGroup(2048, 1.0, 16))
    live = simulate_cluster(wl, h100_8b_config, 4, routing="prefix-affinity")
    late = simulate_cluster(wl, h100_8b_config, 4, routing="prefix-affinity", router_delay_s=1.0)
    # a 1 s old view misses every prefix cached in the last second: more requests land cold
    assert (late.assignment != live.assignment).mean() > 0.2
    assert late.totals["prefix_cache_hit_rate"] < live.totals["prefix_cache_hit_rate"] - 0.02


def test_router_delay_in_a_constructed_case():
    # A (prefix X) at 0 s runs for about 2.5 s on instance 0; B (prefix X) arrives at 0.5 s.
    wl = Workload(prompt_len=[80, 80], output_len=[100, 5], arrival=[0.0, 0.5], arrival_unit="s",
                  prefix_id=[0, 0], prefix_len=[64])
    got = {d: simulate_cluster(wl, SMALL, 2, routing="prefix-affinity", router_delay_s=d).assignment.tolist()
           for d in (0.0, 0.3, 0.6, 1.0)}
    assert got[0.0] == [0, 0]  # live view: X is on instance 0
    assert got[0.3] == [0, 0]  # view of 0.2 s: A was admitted at 0 s, X already cached
    assert got[0.6] == [0, 1]  # view from before A's arrival: empty caches, a tie, round-robin order
    assert got[1.0] == [0, 1]
    # the hit follows the decision: B hits its 4 prefix blocks only with the fresh view
    live = simulate_cluster(wl, SMALL, 2, routing="prefix-affinity")
    late = simulate_cluster(wl, SMALL, 2, routing="prefix-affinity", router_delay_s=1.0)
    assert live.requests["prefix_hit_tokens"][1] == 64 and late.requests["prefix_hit_tokens"][1] == 0


# ---------------------------------------------------------------- replicas for a rate

def test_smallest_replicas_on_the_seed_rate(h100_8b_config):
    wl = _seed_workload(PrefixGroup(512, 1.0, 1))
    s = smallest_replicas(wl, h100_8b_config, slo_ttft_s=0.05, slo_itl_s=0.015, max_instances=16)
    assert s.percentile == "p90"
    by_n = {t.num_instances: t for t in s.trials}
    assert s.num_instances is not None and s.num_instances > 1
    assert by_n[s.num_instances].meets and not by_n[s.num_instances - 1].meets  # N - 1 simulated and failing
    assert by_n[1].ttft_s > 0.05  # one H100 queues at 100 requests/s
    assert all(not t.meets for t in s.trials if t.num_instances < s.num_instances)
    t = by_n[s.num_instances]
    assert t.ttft_s <= 0.05 and t.itl_s <= 0.015 and t.finished == 500
    none = smallest_replicas(wl, h100_8b_config, slo_ttft_s=0.05, slo_itl_s=0.015, max_instances=1)
    assert none.num_instances is None and "up to 1" in none.reason


def test_smallest_replicas_bad_input():
    wl = _wl(n=20)
    with pytest.raises(ClusterError, match="slo_ttft_s"):
        smallest_replicas(wl, SMALL, slo_ttft_s=None, slo_itl_s=None)
    with pytest.raises(ClusterError, match="percentile"):
        smallest_replicas(wl, SMALL, slo_ttft_s=1.0, slo_itl_s=None, percentile="p95")
    with pytest.raises(ClusterError, match="slo_itl_s"):
        smallest_replicas(wl, SMALL, slo_ttft_s=1.0, slo_itl_s=-1.0)
    with pytest.raises(ClusterError, match="seconds"):
        smallest_replicas(_wl(n=20, unit="step"), SMALL, slo_ttft_s=1.0, slo_itl_s=None)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("text,fragment", [
    ("", "non-empty"),
    ("fastest", "unknown policy 'fastest'"),
    ("weighted:prefix-afinity:3", "unknown scorer 'prefix-afinity'"),
    ("weighted:queue-depth:-1", "weight of 'queue-depth'"),
    ("weighted:queue-depth:x", "weight 'x' of 'queue-depth'"),
    ("weighted:queue-depth:inf", "weight of 'queue-depth'"),
    ("weighted:queue-depth", "'queue-depth' in 'weighted:queue-depth' is not SCORER:WEIGHT"),
    ("weighted:queue-depth:1,queue-depth:2", "given twice"),
    ("weighted", "needs scorers"),
    ("weighted:", "'' in 'weighted:' is not SCORER:WEIGHT"),
    ("weighted:queue-depth:0,running:0", "at least one weight"),
])
def test_bad_routing_names_the_bad_part(text, fragment):
    with pytest.raises(ClusterError, match="^routing: ") as exc:
        parse_routing(text)
    assert fragment in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_policy_objects_validate_on_construction():
    assert RoutingPolicy("prefix-affinity").scorers == (("prefix-affinity", 1.0),)
    with pytest.raises(ClusterError, match="takes no scorers"):
        RoutingPolicy("round-robin", (("running", 1.0),))
    with pytest.raises(ClusterError, match="at least one weight"):
        RoutingPolicy("weighted", ())
    with pytest.raises(ClusterError, match="weight of 'running'"):
        RoutingPolicy("weighted", (("running", -1.0),))


def test_progress_reaches_one():
    seen = []
    simulate_cluster(_wl(n=50), SMALL, 2, routing=AFFINITY, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) > 2


def test_routing_round_trips_and_shorthand():
    p = parse_routing("prefix-affinity:3, queue-depth:1")
    assert p == RoutingPolicy("weighted", (("prefix-affinity", 3.0), ("queue-depth", 1.0)))
    assert str(p) == AFFINITY and parse_routing(str(p)) == p
    for name in ("round-robin", "least-loaded", "prefix-affinity", "random"):
        assert str(parse_routing(name)) == name


@pytest.mark.parametrize("kwargs,fragment", [
    (dict(num_instances=0), "num_instances: must be between 1 and 256, got 0"),
    (dict(num_instances=257), "num_instances: must be between 1 and 256"),
    (dict(num_instances=2.0), "num_instances: must be a whole number"),
    (dict(num_instances=True), "num_instances: must be a whole number"),
    (dict(router_delay_s=-0.1), "router_delay_s: must be >= 0"),
    (dict(router_delay_s=float("nan")), "router_delay_s: must be a finite number"),
    (dict(seed=-1), "seed: must be between"),
    (dict(routing="weighted:bogus:1"), "unknown scorer 'bogus'"),
    (dict(slo_ttft_s=0), "slo_ttft_s: must be > 0"),
])
def test_bad_cluster_input_names_the_field(kwargs, fragment):
    args = dict(num_instances=2)
    args.update(kwargs)
    n = args.pop("num_instances")
    with pytest.raises(ClusterError) as exc:
        simulate_cluster(_wl(n=10), SMALL, n, **args)
    assert fragment in str(exc.value)


def test_router_delay_needs_seconds():
    with pytest.raises(ClusterError, match="router_delay_s: needs arrivals in seconds"):
        simulate_cluster(_wl(n=10, unit="step"), SMALL, 2, router_delay_s=1.0)


# ---------------------------------------------------------------- CLI

@pytest.fixture()
def files(tmp_path):
    wl_path = tmp_path / "wl.json"
    assert cli.main(["workload", "--n", "60", "--arrival", "poisson-time:40", "--prompt", "normal:96,32",
                     "--output", "normal:30,10", "--shared-prefix-len", "64", "--shared-prefix-frac", "0.8",
                     "--num-prefixes", "3", "--out", str(wl_path)]) == 0
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps({"num_gpu_blocks": 200, "max_num_seqs": 16, "max_num_batched_tokens": 256}))
    return str(wl_path), str(cfg_path)


def test_cli_cluster_prints_one_result(files, capsys):
    wl, cfg = files
    assert cli.main(["cluster", "--workload", wl, "--config", cfg, "--instances", "3", "--routing", AFFINITY,
                     "--router-delay-s", "0.1", "--slo-ttft-s", "0.5", "--requests"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["num_instances"] == 3 and d["routing"] == AFFINITY and d["router_delay_s"] == 0.1
    assert sum(d["load"]["requests"]) == 60 == d["totals"]["finished"]
    assert len(d["instances"]) == 3 and d["latency"]["slo_ttft_s"] == 0.5
    assert len(d["requests"]["instance"]) == 60
    assert sorted(r for i in d["instances"] for r in i["request_index"]) == list(range(60))


def test_cli_cluster_sweeps_counts_and_policies(files, capsys):
    wl, cfg = files
    assert cli.main(["cluster", "--workload", wl, "--config", cfg, "--instances", "1,2",
                     "--routing", "round-robin", "--routing", "least-loaded"]) == 0
    out = capsys.readouterr().out
    pts = json.loads(out)["points"]
    assert [(p["num_instances"], p["routing"]) for p in pts] == [
        (1, "round-robin"), (1, "least-loaded"), (2, "round-robin"), (2, "least-loaded")]
    assert "requests" not in pts[0]
    # the points are one simulation batch: spread over two worker processes, the output is the same
    assert cli.main(["cluster", "--workload", wl, "--config", cfg, "--instances", "1,2",
                     "--routing", "round-robin", "--routing", "least-loaded", "--processes", "2"]) == 0
    assert capsys.readouterr().out == out


def test_cli_find_replicas(files, capsys):
    wl, cfg = files
    assert cli.main(["cluster", "--workload", wl, "--config", cfg, "--find-replicas", "--slo-ttft-s", "10",
                     "--max-instances", "4"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["num_instances"] == 1 and d["percentile"] == "p90" and d["trials"][0]["meets"]


@pytest.mark.parametrize("extra,fragment", [
    (["--instances", "0"], "--instances: must be between 1 and 256"),
    (["--instances", "300"], "--instances: must be between 1 and 256"),
    (["--instances", "two"], "--instances 'two'"),
    (["--instances", "2", "--routing", "weighted:nope:1"], "--routing: unknown scorer 'nope'"),
    (["--instances", "2", "--router-delay-s", "-1"], "--router-delay-s: must be >= 0"),
    (["--instances", "2", "--slo-itl-s", "0"], "--slo-itl-s: must be > 0"),
    (["--instances", "2", "--processes", "-1"], "--processes: -1 is not a whole number from 0 to"),
    ([], "give --instances"),
    (["--find-replicas"], "--find-replicas needs --slo-ttft-s or --slo-itl-s"),
    (["--find-replicas", "--slo-ttft-s", "1", "--instances", "2"], "leave out --instances"),
    (["--find-replicas", "--slo-ttft-s", "1", "--max-instances", "0"], "--max-instances: must be between"),
])
def test_cli_bad_input_is_one_line_with_status_2(files, capsys, extra, fragment):
    wl, cfg = files
    assert cli.main(["cluster", "--workload", wl, "--config", cfg, *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], captured.err
    assert captured.out == ""


def test_cli_cluster_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["cluster", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--workload", "--config", "--instances", "--routing", "--router-delay-s", "--seed", "--slo-ttft-s",
                "--slo-itl-s", "--find-replicas", "--max-instances", "--percentile", "--requests", "--output",
                "--indent", "round-robin", "least-loaded", "prefix-affinity", "queue-depth", "kv-usage"):
        assert opt in out
    with pytest.raises(SystemExit) as exc:
        cli.main(["cluster", "--workload", "w.json", "--config", "c.json", "--percentile", "p95"])
    assert exc.value.code == 2
