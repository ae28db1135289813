"""Disaggregated pools whose instances are DP groups (issue 34, item 5): ``Pool(group=DPRun(...))`` runs each
pool's instance as a DP group (``simulate_dp``: its ranks balanced, an MoE model's in lockstep), the joint pools
search and the xPyD splits pool the search's DP-group shapes, and the KV moved is what a decode rank holds.

Qwen3-30B-A3B (gpuprofiles/data/hf_configs, the catalog's config) and Llama 3.1 8B on H100s (examples/)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.base import GpuSpec
from simulator.cluster import DisaggError, DisaggregatedDeployment, DPRun, KvLink, Pool
from simulator.search import SearchSpace, Slo, parse_slo_target, search_deployments, xpyd_alternatives
from simulator.search.evaluate import prepare_candidate
from simulator.search.pools import kv_bytes_per_token, search_pools
from simulator.sizing import parse_hf_config
from simulator.workload import WorkloadSpec, generate_workload

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "gpuprofiles" / "data" / "hf_configs"
QWEN = parse_hf_config(json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text()))
LLAMA = parse_hf_config(json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text()))
H100 = GpuSpec.from_dict(json.loads((ROOT / "examples" / "search_gpus_h100.json").read_text())[0])
SLO = Slo((parse_slo_target("ttft:p90:0.3"), parse_slo_target("itl:p90:0.03")), 0.0)


def traffic(n=60, rate=20.0, output="normal:32,8"):
    return generate_workload(WorkloadSpec.from_dict({"n": n, "prompt": "normal:1024,256", "output": output,
                                                     "arrival": {"kind": "poisson", "rate": rate, "unit": "s"}}),
                             seed=0)


def prepared(model, wl, **space):
    sp = SearchSpace((H100,), tensor_parallel=(1,), precisions=("bf16",), max_replicas=4, **space)
    return sp, [prepare_candidate(i, c, model, sp, 4096, wl, SLO) for i, c in enumerate(sp.candidates())]


def columns(res):
    return {k: np.asarray(res.requests[k], float) for k in ("handoff_s", "transfer_start_s", "transfer_end_s",
                                                             "first_token_time_s", "finish_time_s")}


def same(a, b):
    for k in a:
        assert np.allclose(a[k], b[k], rtol=1e-12, atol=1e-12, equal_nan=True), k


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_one_rank_lockstep_group_is_the_plain_pool(role):
    """A lockstep DP 1 group on its own config's clock steps as one engine does: the same handoffs, transfers
    (the decode rank waits for its KV: the group moves to the transfer's end, as one engine idles to it) and
    finishes as a pool of one plain engine, on either side."""
    wl = traffic()
    _, (p,) = prepared(QWEN, wl)
    plain = Pool(p.config, 1, gpus_per_instance=1, cost_per_hour=3.78)
    group = replace(plain, group=DPRun(1, False, "vllm", lockstep=True))
    link = KvLink(5.0, 1e-3)  # a slow link: the decode side waits for the KV
    a = DisaggregatedDeployment(plain, plain, link).run(wl)
    b = DisaggregatedDeployment(**{"prefill": plain, "decode": plain, role: group}, link=link).run(wl)
    assert a.transfer["requests"] == wl.n and a.transfer["p90_s"] > 0.01
    same(columns(a), columns(b))


def test_a_dense_models_group_is_its_ranks_as_instances():
    """A dense model's DP group runs independent ranks (no collective): one group of 2 ranks balanced
    round-robin is a pool of two engines behind a round-robin router, request by request."""
    wl = traffic()
    _, (p,) = prepared(LLAMA, wl)
    two = Pool(p.config, 2, gpus_per_instance=1, cost_per_hour=3.78)
    group = Pool(p.config, 1, gpus_per_instance=2, cost_per_hour=7.56,
                 group=DPRun(2, False, "round-robin", lockstep=False))
    a = DisaggregatedDeployment(two, two, KvLink(10.0, 1e-3)).run(wl)
    b = DisaggregatedDeployment(group, group, KvLink(10.0, 1e-3)).run(wl)
    same(columns(a), columns(b))
    assert np.array_equal(a.requests["decode_instance"], b.requests["decode_instance"])
    assert b.deployment.num_gpus == 4 and b.deployment.cost_per_hour == pytest.approx(15.12)
    assert b.deployment.to_dict()["decode"]["group"] == {"data_parallel_size": 2, "enable_expert_parallel": False,
                                                         "routing": "round-robin", "lockstep": False}
    assert "group" not in a.deployment.to_dict()["decode"]  # (a plain pool's dict as before)


def test_a_group_pool_is_routed_round_robin():
    wl = traffic(n=4)
    _, (p,) = prepared(QWEN, wl)
    with pytest.raises(DisaggError, match="decode.routing: DP groups are routed round-robin"):
        DisaggregatedDeployment(Pool(p.config), Pool(p.config, 2, routing="least-loaded",
                                                     group=DPRun(2, True, lockstep=True)))


def test_the_pools_search_pools_dp_groups_with_their_layouts():
    wl = traffic(n=80, rate=30.0)
    space = SearchSpace((H100,), tensor_parallel=(1, 2), precisions=("bf16",), data_parallel=(1, 2),
                        expert_parallel=(True,), max_replicas=3, max_gpus=8)
    pools = search_pools(wl, QWEN, space, SLO)
    shapes = [r["shape"] for r in pools["prefill"]]
    assert "2x H100 SXM5 80GB (TP 1 x DP 2 + EP), bf16 weights, KV auto, max_num_seqs 256" in shapes
    assert any("DP 2 + EP" in r["shape"] and r["instances"] for r in pools["decode"]), pools["decode"]
    checked = [r for r in pools["pairs"] if not r.get("left_out")]
    assert checked and pools["best"] is not None
    for r in checked:  # each pool's own TP / DP / EP, and its GPUs: instances x TP x DP
        for side in ("prefill", "decode"):
            s = r[side]
            assert s["gpus"] == s["instances"] * s["tensor_parallel"] * s["pipeline_parallel"] * s["data_parallel"]
            assert f"TP {s['tensor_parallel']}" in s["shape"] and (s["data_parallel"] > 1) == ("DP" in s["shape"])
        assert r["num_gpus"] <= 8
    # the KV moved is what one decode rank holds: 48 layers x 4 KV heads x 128 x 2 (K and V) x 2 bytes on TP 1
    _, prep = prepared(QWEN, wl, data_parallel=(2,), expert_parallel=(True,))
    assert kv_bytes_per_token(prep[0]) == 48 * 4 * 128 * 2 * 2


def test_the_xpyd_splits_of_a_dp_group_answer():
    wl = traffic(n=80, rate=40.0)
    space = SearchSpace((H100,), tensor_parallel=(1,), precisions=("bf16",), data_parallel=(2,),
                        expert_parallel=(True,), max_replicas=4)
    result = search_deployments(wl, QWEN, space, Slo((parse_slo_target("ttft:p90:0.2"),), 0.0))
    # a DP group can be the answer: its trials count replicas (DP groups), not ranks
    assert result.best is not None and result.best.status == "answer" and result.best.candidate["data_parallel"] == 2
    assert {t.num_instances for t in result.best.trials} >= {result.best.replicas}
    result = replace(result, best=replace(result.best, replicas=max(2, result.best.replicas)))
    alt = xpyd_alternatives(result, wl, QWEN, space, Slo((parse_slo_target("ttft:p90:0.2"),), 0.0))
    assert alt is not None and alt["splits"], "a DP group's answer is split too"
    one = alt["splits"][0]
    # every instance of either pool is one DP 2 group of 2 GPUs
    assert one["num_gpus"] == 2 * (one["prefill_instances"] + one["decode_instances"])
    assert alt["shape"].startswith("2x H100 SXM5 80GB (TP 1 x DP 2 + EP)")
