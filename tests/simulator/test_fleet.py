"""Instances along an axis (``simulator.cluster.fleet``) and deployments in a simulation batch.

What is proved here:

* the fleet's arrays over the instance axis (time, busy, waiting, running,
  free blocks, the hash-table matrix) are the engines' own state at every
  routing decision, and ``held_prefix`` equals asking each engine's cache;
* a :class:`Deployment` in ``simulate``'s batch gives exactly what
  ``simulate_cluster`` gives alone, beside plain configurations, in one
  process or two, with step series;
* the radix cache's router view reads token keys (affinity routes by the
  prefix a radix instance holds, as it does for vLLM's block cache);
* bad deployments raise ``ClusterError`` naming the field, before anything runs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator.batch.runner import simulate
from simulator.cluster.fleet import Fleet
from simulator.cluster.replicas import ClusterError, Deployment, simulate_cluster
from simulator.cluster.routing import Router, parse_routing
from simulator.engine.config import EngineConfig
from simulator.engine.core import WorkloadPrep
from simulator.workload.generators import ArrivalProcess, PrefixGroup, WorkloadSpec, generate_workload
from simulator.workload.requests import Workload

SMALL = EngineConfig(num_gpu_blocks=120, max_num_seqs=16, max_num_batched_tokens=256)


def _wl(n=150, rate=60.0, unit="s", seed=1):
    return generate_workload(WorkloadSpec(n=n, prompt="normal:96,32", output="normal:40,15",
                                          arrival=ArrivalProcess("poisson", rate=rate, unit=unit),
                                          prefixes=(PrefixGroup(64, 0.8, 3),)), seed)


def _as_json(r) -> str:
    d = r.to_dict(requests=True) if hasattr(r, "load") else r.to_dict()
    return json.dumps(d, sort_keys=True, default=str)


@pytest.mark.parametrize("cfg", [SMALL, EngineConfig(num_gpu_blocks=800, max_num_seqs=8, prefix_cache="radix",
                                                     max_num_batched_tokens=256)])
def test_fleet_arrays_are_the_engines_state_at_every_decision(cfg):
    wl = _wl()
    prep = WorkloadPrep(wl)
    fleet = Fleet(wl, cfg, 4, prep=prep)
    fleet.start()
    router = Router(parse_routing("weighted:prefix-affinity:2,queue-depth:1,kv-usage:1"), fleet,
                    prompt_len=wl.prompt_len)
    busy_seen = 0
    for p, q in enumerate(prep.order.tolist()):
        t = float(prep.arrival_sorted[p])
        fleet.advance(t)
        for i, e in enumerate(fleet.engines):
            assert fleet.now[i] == e.now and fleet.busy[i] == e.busy
            assert fleet.waiting[i] == len(e.requests.waiting) and fleet.running[i] == e.num_running
            assert fleet.free[i] == e.pool.num_free()
            assert fleet.kblock[i] is e.pool.kblock or np.shares_memory(fleet.kblock[i], e.pool.kblock)
            if e.busy:
                assert e.now >= t  # a busy instance is at its first step boundary at or after the arrival
        busy_seen += int(fleet.busy.sum())
        keys = router._keys(q)
        held = fleet.held_prefix(keys)
        for i, e in enumerate(fleet.engines):
            hit = e.pool.kblock[keys] >= 0
            assert held[i] == (keys.size if hit.all() else int(np.argmin(hit)))
        router.observe(q)
        i = router.choose(q)
        fleet.submit(i, q, t)
        assert fleet.waiting[i] == len(fleet.engines[i].requests.waiting)
    fleet.finish()
    assert busy_seen > wl.n  # instances were busy at many decisions: the comparisons above were not all idle
    assert not fleet.busy.any() and int(fleet.running.sum()) == 0
    assert sum(int(e.t["finished"]) for e in fleet.engines) == wl.n


@pytest.mark.parametrize("processes", [1, 2])
def test_deployments_in_a_batch_equal_their_runs_alone(processes):
    wl = _wl()
    items = [SMALL,
             Deployment(SMALL, 2),
             Deployment(SMALL, 3, "prefix-affinity", router_delay_s=0.1),
             EngineConfig(num_gpu_blocks=200, max_num_seqs=16, max_num_batched_tokens=256),
             Deployment(SMALL, 4, "weighted:prefix-affinity:3,queue-depth:1", slo_ttft_s=0.5),
             Deployment(SMALL, 3, "random", seed=7)]
    got = simulate(wl, items, processes=processes, record_steps=True, max_step_points=50)
    for item, res in zip(items, got):
        if isinstance(item, Deployment):
            alone = simulate_cluster(wl, item.config, item.num_instances, routing=item.routing,
                                     router_delay_s=item.router_delay_s, seed=item.seed,
                                     slo_ttft_s=item.slo_ttft_s, record_steps=True, max_step_points=50)
            assert res.num_instances == item.num_instances and res.routing == item.routing
            assert all(i.result.steps is not None for i in res.instances)
        else:
            alone = simulate(wl, [item], record_steps=True, max_step_points=50)[0]
        assert _as_json(res) == _as_json(alone)
    assert got[4].latency.slo_ttft_s == 0.5


def test_a_batch_progress_counts_deployments():
    seen: list[float] = []
    simulate(_wl(n=60), [SMALL, Deployment(SMALL, 2), Deployment(SMALL, 3, "least-loaded")], progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) > 3


def test_radix_affinity_reads_token_keys():
    # 8 tenants, one 256-token prefix each; one request a second (each is done before the next arrives)
    n = 40
    pid = np.random.default_rng(0).integers(0, 8, n)
    wl = Workload(prompt_len=np.full(n, 300), output_len=np.full(n, 4), arrival=np.arange(n) * 1.0,
                  arrival_unit="s", prefix_id=pid, prefix_len=np.full(8, 256))
    out = {}
    for pc in ("vllm", "radix"):
        cfg = EngineConfig(num_gpu_blocks=400, prefix_cache=pc)
        out[pc] = simulate_cluster(wl, cfg, 4, routing="prefix-affinity")
        rr = simulate_cluster(wl, cfg, 4, routing="round-robin")
        assert out[pc].totals["prefix_cache_hit_rate"] > rr.totals["prefix_cache_hit_rate"] + 0.2
    # every prefix is block-aligned (256 = 16 x 16): both caches hold the same prefixes, so the router
    # sees the same holders and routes every request alike
    assert np.array_equal(out["radix"].assignment, out["vllm"].assignment)
    # each tenant's requests after its first go where its prefix is: one instance per tenant
    for tenant in range(8):
        assert np.unique(out["radix"].assignment[pid == tenant]).size == 1


@pytest.mark.parametrize("kwargs,fragment", [
    (dict(num_instances=0), "num_instances: must be between 1 and 256"),
    (dict(num_instances=2.5), "num_instances: must be a whole number"),
    (dict(routing="weighted:nope:1"), "unknown scorer 'nope'"),
    (dict(router_delay_s=-1), "router_delay_s: must be >= 0"),
    (dict(seed=-1), "seed: must be between"),
    (dict(slo_ttft_s=0), "slo_ttft_s: must be > 0"),
])
def test_bad_deployment_names_the_field(kwargs, fragment):
    with pytest.raises(ClusterError, match=fragment):
        Deployment(SMALL, **kwargs)
    with pytest.raises(ClusterError, match="config: must be an EngineConfig"):
        Deployment({"num_gpu_blocks": 100})


def test_a_batch_rejects_what_a_deployment_cannot_run_before_running_anything():
    steps = _wl(n=30, rate=1.0, unit="step")
    with pytest.raises(ClusterError, match="router_delay_s: needs arrivals in seconds"):
        simulate(steps, [SMALL, Deployment(SMALL, 2, "prefix-affinity", router_delay_s=0.5)])
    with pytest.raises(ValueError, match="step_time, step_cost: not supported"):
        simulate(steps, [SMALL, Deployment(SMALL, 2)], step_time=[None, None])
    with pytest.raises(Exception, match=r"configs\[1\]: must be an EngineConfig or a simulator.cluster.replicas.Deployment"):
        simulate(steps, [SMALL, "four replicas"])
    assert Deployment(SMALL, 2, " least-loaded ").routing == "least-loaded"  # canonical policy string


def test_a_cluster_too_large_for_its_cache_tables_is_refused_before_anything_runs(monkeypatch):
    import simulator.cluster.replicas as cluster

    wl = _wl(n=100)
    nkeys = WorkloadPrep(wl).keys(SMALL.block_size).num_keys
    monkeypatch.setattr(cluster, "MAX_CACHE_TABLE_BYTES", 3 * nkeys * 8)  # room for three instances' tables
    assert simulate_cluster(wl, SMALL, 3).totals["finished"] == wl.n
    with pytest.raises(ClusterError, match=r"num_instances: 4 instances x [\d,]+ content keys .* GiB of prefix-cache "
                                           r"tables, more than the .* limit; use fewer instances"):
        simulate_cluster(wl, SMALL, 4)
    with pytest.raises(ClusterError, match="num_instances: 4 instances"):
        simulate(wl, [SMALL, Deployment(SMALL, 4)])
    # without prefix caching there are no tables
    plain = EngineConfig(num_gpu_blocks=120, max_num_seqs=16, max_num_batched_tokens=256, enable_prefix_caching=False)
    assert simulate_cluster(wl, plain, 4).totals["finished"] == wl.n
