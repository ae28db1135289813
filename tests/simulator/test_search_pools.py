"""Prefill and decode pools searched jointly (simulator/search/pools.py): each pool its own shape and count.

Each property is checked by an independent simulation, not by the search's own bookkeeping: the answer's pair
is rebuilt and run again, the prefill counts are the fewest whose first-token cluster meets the TTFT targets
(one fewer misses), and the pairs vLLM's NIXL connector cannot join (its compatibility matrix,
``docs/features/nixl_connector_compatibility.md``) are left out with the reason. The model is Llama 3.1 8B's
shipped config; GPUs are the data-sheet specs of tests/simulator/test_search.py; 120 requests keep each
simulation in milliseconds.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.cluster import DisaggregatedDeployment, KvLink, Pool, simulate_cluster
from simulator.cluster.replicas import smallest_meeting
from simulator.search.disaggregated import as_cluster
from simulator.search.evaluate import default_max_model_len, judge, prepare_candidate
from simulator.search.pools import pair_problem, search_pools
from simulator.search.space import SearchError, SearchSpace, Slo, SloTarget
from simulator.sizing.hf_config import parse_hf_config
from simulator.workload.generators import WorkloadSpec, generate_workload
from tests.simulator.test_search import H100, L40S, LLAMA_8B

WL = generate_workload(WorkloadSpec.from_dict({
    "n": 120, "prompt": "normal:2048,256", "output": "normal:128,32",
    "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}), seed=0)
SPACE = SearchSpace((H100, L40S), tensor_parallel=(1, 2), precisions=("bf16", "fp8"), max_num_seqs=(64,),
                    max_replicas=6)
SLO = Slo((SloTarget("ttft", "p90", 0.4), SloTarget("itl", "p90", 0.05)))


@pytest.fixture(scope="module")
def found():
    return search_pools(WL, LLAMA_8B, SPACE, SLO)


def _prepared(space=SPACE, model=LLAMA_8B):
    mml = space.max_model_len or default_max_model_len(WL, model)
    return {c.label: prepare_candidate(i, c, model, space, mml, WL, SLO) for i, c in enumerate(space.candidates())}


def test_the_counts_are_the_least_that_meet_by_doubling_and_bisection():
    for need in range(1, 20):
        calls: list[int] = []

        def meets(n, need=need, calls=calls):
            calls.append(n)
            return n >= need

        assert smallest_meeting(meets, 16) == (need if need <= 16 else None)
        assert len(calls) <= 2 * 5  # log2(16) doublings and as many halvings
    assert smallest_meeting(lambda n: False, 8) is None


def test_the_answer_is_a_pair_that_meets_when_simulated_again(found):
    best = found["best"]
    assert best is not None and best["meets"] and found["message"].startswith(best["name"])
    prep = _prepared()
    p, d = prep[best["prefill"]["shape"]], prep[best["decode"]["shape"]]
    x, y = best["prefill"]["instances"], best["decode"]["instances"]
    dep = DisaggregatedDeployment(Pool(p.config, x, gpus_per_instance=p.candidate.gpus_per_replica,
                                       cost_per_hour=p.candidate.price_per_replica),
                                  Pool(d.config, y, gpus_per_instance=d.candidate.gpus_per_replica,
                                       cost_per_hour=d.candidate.price_per_replica),
                                  KvLink(50.0, 1e-4 * max(1, p.candidate.tensor_parallel // d.candidate.tensor_parallel)))
    res = dep.run(WL)
    trial = judge(as_cluster(res, x + y), WL, SLO, dep.cost_per_hour)
    assert trial.meets and trial.values == best["values"]
    assert best["cost_per_hour"] == pytest.approx(x * p.candidate.price_per_replica + y * d.candidate.price_per_replica)
    # every pair checked before it was cheaper (or as cheap) and missed
    checked = [r for r in found["pairs"] if r.get("meets") is not None]
    assert checked[-1] is best and all(not r["meets"] and r["cost_per_hour"] <= best["cost_per_hour"] + 1e-9
                                       for r in checked[:-1])


def test_each_prefill_count_is_the_fewest_whose_first_tokens_meet_the_ttft_target(found):
    prep = _prepared()
    first = replace(WL, output_len=np.ones(WL.n, dtype=np.int64))
    ttft = Slo((SLO.targets[0],))
    sized = [r for r in found["prefill"] if r["instances"]]
    assert len(sized) >= 2
    for row in sized:
        p, n = prep[row["shape"]], row["instances"]
        assert judge(simulate_cluster(first, p.config, n), first, ttft, 0.0).meets, row
        if n > 1:
            assert not judge(simulate_cluster(first, p.config, n - 1), first, ttft, 0.0).meets, row


#: The command of docs/disaggregated_serving.md ("Prefill and decode pools searched jointly"), as run there.
DOCS_COMMAND = ["search", "--model", "gpuprofiles/data/hf_configs/meta-llama--Meta-Llama-3.1-8B_config.json",
                "--gpus", "examples/search_gpus.json", "--rate", "20", "--duration", "10",
                "--prompt", "normal:2048,256", "--output", "normal:256,32", "--slo", "ttft:p90:0.4",
                "--slo", "itl:p90:0.05", "--tp", "1", "--precision", "bf16,fp8", "--max-num-seqs", "256",
                "--max-replicas", "6", "--check-seeds", "0", "--disaggregated-pools"]


def test_the_docs_pools_differ_in_gpu_and_beat_the_aggregated_answer(tmp_path, monkeypatch):
    """The docs' example: an H100 prefill pool in front of an A100 decode pool costs less than the aggregated
    answer (one H200); the pools need not share a GPU type, and the verdict says why."""
    from simulator.cli import commands as cli

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    out = tmp_path / "pools.json"
    assert cli.main([*DOCS_COMMAND, "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    best, verdict = res["disaggregated_pools"]["best"], res["disaggregated_pools"]["verdict"]
    assert res["best"]["candidate"]["gpu"] == "H200 SXM 141GB" and res["best"]["replicas"] == 1
    assert "H100" in best["prefill"]["shape"] and "A100 SXM4 80GB" in best["decode"]["shape"]
    assert best["meets"] and best["cost_per_hour"] < res["best"]["cost_per_hour"]
    assert verdict["winner"] == "pools" and "cheaper than 1 aggregated replica at $6.35/h" in verdict["reason"]


def test_pairs_nixl_cannot_join_are_left_out_with_the_reason():
    space = SearchSpace((H100,), tensor_parallel=(1,), precisions=("bf16",), kv_cache_dtypes=("auto", "fp8"),
                        max_num_seqs=(64,), speculative=(None, "eagle:3:0.7"), max_replicas=2)
    prep = list(_prepared(space).values())
    plain_auto = next(p for p in prep if p.candidate.speculative is None and p.candidate.kv_cache_dtype == "auto")
    plain_fp8 = next(p for p in prep if p.candidate.speculative is None and p.candidate.kv_cache_dtype == "fp8")
    eagle_auto = next(p for p in prep if p.candidate.speculative is not None and p.candidate.kv_cache_dtype == "auto")
    assert pair_problem(plain_auto, plain_auto, LLAMA_8B) is None
    assert pair_problem(plain_auto, eagle_auto, LLAMA_8B) == "P and D instances must use the same speculation configuration"
    assert "the blocks move as they are" in pair_problem(plain_auto, plain_fp8, LLAMA_8B)
    configs = Path(__file__).resolve().parents[2] / "gpuprofiles" / "data" / "hf_configs"
    dsv3 = parse_hf_config(json.loads((configs / "deepseek-ai--DeepSeek-V3_config.json").read_text()), name="DSV3")
    tp1, tp2 = (replace(plain_auto, candidate=replace(plain_auto.candidate, tensor_parallel=t)) for t in (1, 2))
    assert "MLA" in pair_problem(tp1, tp2, dsv3) and pair_problem(tp1, tp2, LLAMA_8B) is None


def test_a_decode_rank_reads_from_each_prefill_rank_holding_its_heads(found):
    from simulator.search.pools import _Pools

    prep = _prepared()
    tp2 = next(p for p in prep.values() if p.config is not None and p.candidate.tensor_parallel == 2)
    tp1 = next(p for p in prep.values() if p.config is not None and p.candidate.tensor_parallel == 1)
    run = _Pools(WL, SLO, SPACE, KvLink(50.0, 1e-4), "round-robin")
    assert run.deployment(tp2, 1, tp1, 1).link.latency_s == pytest.approx(2e-4)  # TP 2 prefill -> TP 1 decode
    assert run.deployment(tp1, 1, tp2, 1).link.latency_s == pytest.approx(1e-4)
    # the bytes moved are the decode layout's: TP 2 holds 8 KV heads split in two, the same bytes per token
    assert run.deployment(tp1, 1, tp2, 1).kv_bytes_per_token == run.deployment(tp2, 1, tp1, 1).kv_bytes_per_token


def test_a_slo_without_a_ttft_target_is_refused_naming_it():
    with pytest.raises(SearchError) as e:
        search_pools(WL, LLAMA_8B, SPACE, Slo((SloTarget("itl", "p90", 0.05),)))
    assert e.value.field == "slo" and "TTFT target" in str(e.value)
