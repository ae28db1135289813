"""A DP group of engines (issue 34, item 3): simulator/cluster/data_parallel.py.

The models' configs are tests/data/sizing/hf_configs (copied from the Hugging Face Hub); the H100's figures are
tests/simulator/test_cluster.py's (NVIDIA's data sheet).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.base import StepTimeModel
from simulator.cli.commands import main
from simulator.clock.expert_parallel import RankBatch
from simulator.cluster.data_parallel import (
    DPClockGroup,
    DPError,
    LinearGroupClock,
    choose_rank,
    dp_run_from_config,
    simulate_dp,
)
from simulator.engine import EngineConfig, FastEngine, assemble_result
from simulator.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "sizing" / "hf_configs"
QWEN3_30B = json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text())
LLAMA_8B = json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text())
H100 = dict(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
            interconnect_gbps=900)
CFG = EngineConfig(num_gpu_blocks=400, block_size=16, max_num_seqs=32, max_num_batched_tokens=1024)


def _workload(n: int = 200, seed: int = 1, span: float = 15.0) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload(prompt_len=rng.integers(50, 900, n), output_len=rng.integers(5, 200, n),
                    arrival=np.sort(rng.uniform(0, span, n)), arrival_unit="s")


def _same_columns(a: dict, b: dict, keys=None) -> None:
    for k in keys or a:
        va, vb = a[k], b[k]
        if isinstance(va, tuple):
            assert va == tuple(vb), k
        else:
            assert np.array_equal(np.asarray(va), np.asarray(vb), equal_nan=True), k


def _plain(wl: Workload, cfg: EngineConfig):
    e = FastEngine(wl, cfg)
    e.run_all()
    return assemble_result(e, False, None)


# -- the plumbing -----------------------------------------------------------------------------------------------

ROOFLINE_8B = EngineConfig(num_gpu_blocks=400, block_size=16, max_num_seqs=32, max_num_batched_tokens=1024,
                           cost_model={"kind": "roofline", "model": LLAMA_8B, "gpu": H100})


@pytest.mark.parametrize("cfg", [CFG, replace(CFG, async_scheduling=True), replace(CFG, num_gpu_blocks=120),
                                 ROOFLINE_8B, replace(ROOFLINE_8B, async_scheduling=True)],
                         ids=["sync", "async", "preempting", "roofline", "roofline-async"])
def test_dp_1_through_the_group_is_the_plain_engine(cfg):
    wl = _workload()
    plain = _plain(wl, cfg)
    group = simulate_dp(wl, cfg, 1)
    _same_columns(plain.requests, group.cluster.requests)
    for k in ("finished", "preemptions", "num_steps", "total_scheduled_tokens", "peak_running"):
        assert plain.totals[k] == group.totals[k], k
    if cfg.async_scheduling and cfg.cost_model is not None:
        # (known gap: the run's last schedule call is an empty 0 s step; the rank then idles to the group step's
        # one-call bound, 1 ulp past the plain engine's clock)
        assert group.totals["duration_s"] == pytest.approx(plain.totals["duration_s"], rel=1e-15, abs=0)
    else:
        assert plain.totals["duration_s"] == group.totals["duration_s"]
    assert group.ranks[0]["dummy_steps"] == 0
    if cfg.num_gpu_blocks == 120:
        assert plain.totals["preemptions"] > 0


def test_dp_n_in_lockstep_on_equal_ranks_is_n_independent_engines():
    """Each request copied 3 times at the same arrival, round-robin: every rank gets one copy of the workload, its
    batches are the others', so the linear group clock without sync is each rank's own clock."""
    base, N = _workload(120, seed=4), 3
    wl = Workload(prompt_len=np.repeat(base.prompt_len, N), output_len=np.repeat(base.output_len, N),
                  arrival=np.repeat(base.arrival, N), arrival_unit="s")
    plain = _plain(base, CFG)
    group = simulate_dp(wl, CFG, N, routing="round-robin", clock=LinearGroupClock(CFG.step_time_model))
    assert group.lockstep and group.group_steps == plain.totals["num_steps"]
    for r, inst in enumerate(group.cluster.instances):
        assert inst.request_index.tolist() == list(range(r, wl.n, N))
        cols = {k: (tuple(v[i] for i in inst.request_index) if isinstance(v, tuple) else np.asarray(v)[inst.request_index])
                for k, v in group.cluster.requests.items() if k in plain.requests and k != "id"}
        _same_columns(plain.requests, cols, list(cols))
        assert group.ranks[r]["dummy_steps"] == 0
        assert inst.totals["preemptions"] == plain.totals["preemptions"]


# -- balancing --------------------------------------------------------------------------------------------------

def test_the_balancing_rule_is_vllms_waiting_x4_plus_running_first_minimum():
    # scores 2x4+30 = 38, 0x4+40 = 40, 5x4+10 = 30
    assert choose_rank([2, 0, 5], [30, 40, 10]) == 2
    assert choose_rank([1, 0, 0], [0, 4, 4]) == 0  # 4, 4, 4: the first from the start
    assert choose_rank([1, 0, 0], [0, 4, 4], start=2) == 2
    assert choose_rank([0, 1], [9, 0]) == 1  # one waiting (4) beats nine running (9)


def test_a_group_routes_each_arrival_by_the_ranks_queues_at_that_moment():
    # three prompts at 0: rank 0 (0) -> rank 1 (rank 0 has 1 waiting: 4 > 0) -> rank 0 (4 = 4: the first);
    # at 5 s the first two are running on ranks 0 and 1 and rank 0 has one more: rank 1 (1 running < 2)
    wl = Workload(prompt_len=[64, 64, 64, 64], output_len=[2000, 2000, 2000, 10], arrival=[0.0, 0.0, 0.0, 5.0],
                  arrival_unit="s")
    res = simulate_dp(wl, replace(CFG, num_gpu_blocks=2000), 2)
    assert res.cluster.assignment.tolist() == [0, 1, 0, 1]
    assert [r["requests"] for r in res.ranks] == [2, 2]


# -- time -------------------------------------------------------------------------------------------------------

def test_throughput_scales_with_the_ranks_and_littles_law_holds():
    wl = _workload(400, seed=2, span=2.0)  # saturating: 200 requests/s
    one = simulate_dp(wl, CFG, 1)
    four = simulate_dp(wl, CFG, 4)
    assert one.totals["finished"] == four.totals["finished"] == wl.n
    speedup = one.totals["duration_s"] / four.totals["duration_s"]
    assert 2.5 < speedup <= 4.0 + 1e-9, speedup
    # Little's law over the run: mean requests in the system = throughput x mean time in the system
    req = four.cluster.requests
    end = np.asarray(req["finish_time_s"], float)
    sojourn = end - wl.arrival
    T = four.totals["duration_s"]
    grid = np.linspace(0.0, T, 20_001)
    in_system = ((wl.arrival[None, :] <= grid[:, None]) & (end[None, :] > grid[:, None])).sum(1).mean()
    assert in_system == pytest.approx(wl.n / T * sojourn.mean(), rel=0.02)


def test_an_idle_rank_runs_a_dummy_step_and_the_busy_ranks_step_costs_more_than_its_own():
    wl = Workload(prompt_len=[512], output_len=[32], arrival=[0.0], arrival_unit="s")
    cfg = EngineConfig(num_gpu_blocks=2000, max_num_seqs=32, max_num_batched_tokens=1024,
                       cost_model={"kind": "roofline", "model": QWEN3_30B, "gpu": H100})
    run = dp_run_from_config({"data_parallel_size": 2, "enable_expert_parallel": True},
                             {"kind": "roofline", "model": QWEN3_30B, "gpu": H100}, cfg)
    assert run.lockstep and isinstance(run.clock, DPClockGroup)
    res = run.simulate(wl, cfg)
    busy, idle = (0, 1) if res.ranks[0]["requests"] else (1, 0)
    assert res.ranks[idle]["dummy_steps"] == res.group_steps == res.cluster.instances[busy].totals["num_steps"]
    alone = _plain(wl, cfg)  # the same rank on its own (TP 1, no exchange)
    assert res.totals["duration_s"] > alone.totals["duration_s"]
    assert res.ranks[idle]["dummy_s"] == pytest.approx(res.totals["duration_s"])
    # the linear group clock charges the dummy pass and the sync too
    lin = LinearGroupClock(StepTimeModel(0.01, 1e-4, 0.0), sync_s=0.002)
    b = RankBatch(decode_tokens=3.0, decode_context_tokens=300.0, num_reqs=3.0)
    assert lin.seconds([b, None]) == pytest.approx(0.01 + 3e-4 + 0.002)
    assert lin.seconds([None, None]) == 0.0


# -- refusals ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, cost_model, field, words", [
    ({"data_parallel_size": 2, "enable_expert_parallel": True}, {"kind": "roofline", "model": LLAMA_8B, "gpu": H100},
     "enable_expert_parallel", "MoE layers only"),
    ({"data_parallel_size": 256, "enable_expert_parallel": True},
     {"kind": "roofline", "model": QWEN3_30B, "gpu": H100}, "enable_expert_parallel", "determine_expert_map"),
    ({"data_parallel_size": 2, "enable_expert_parallel": True}, None, "enable_expert_parallel", "MoE layers only"),
    ({"data_parallel_size": 0}, None, "data_parallel_size", "whole number"),
    ({"data_parallel_size": 2, "all2all_backend": "nccl"}, None, "all2all_backend", "all2all_backend"),
    ({"data_parallel_size": 2, "data_parallel_routing": "random"}, None, "data_parallel_routing", "vllm"),
])
def test_shapes_vllm_refuses_are_field_errors_naming_its_rule(fields, cost_model, field, words):
    with pytest.raises(DPError) as err:
        dp_run_from_config(fields, cost_model, CFG)
    assert err.value.field == field and words in str(err.value)


def test_a_dense_models_dp_ranks_are_independent_and_dp_1_is_the_plain_run():
    assert not dp_run_from_config({"data_parallel_size": 1}, None, CFG).active
    run = dp_run_from_config({"data_parallel_size": 2}, {"kind": "roofline", "model": LLAMA_8B, "gpu": H100}, CFG)
    assert run.active and not run.lockstep


def test_the_cli_runs_a_dp_group_and_refuses_a_bad_shape(tmp_path, capsys):
    wl = tmp_path / "w.csv"
    wl.write_text("arrival_time,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.05},{200 + i},{20}\n" for i in range(12)))
    cfg = {"num_gpu_blocks": 2000, "block_size": 16, "max_num_seqs": 32, "max_num_batched_tokens": 1024,
           "enable_prefix_caching": True, "enable_chunked_prefill": True, "async_scheduling": False,
           "max_model_len": 4096, "data_parallel_size": 2, "enable_expert_parallel": True,
           "cost_model": {"kind": "roofline", "model": QWEN3_30B, "gpu": H100}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["run", "--config", str(path), "--workload", str(wl)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["totals"]["finished"] == 12 and out["data_parallel"]["lockstep"]
    assert sum(r["requests"] for r in out["data_parallel"]["ranks"]) == 12
    assert min(r["requests"] for r in out["data_parallel"]["ranks"]) >= 4
    path.write_text(json.dumps({**cfg, "cost_model": {"kind": "roofline", "model": LLAMA_8B, "gpu": H100}}))
    assert main(["run", "--config", str(path), "--workload", str(wl)]) == 2
    assert "enable_expert_parallel: LlamaForCausalLM has no experts" in capsys.readouterr().err


def test_the_cli_with_dp_1_and_ep_off_is_todays_run(tmp_path, capsys):
    wl = tmp_path / "w.csv"
    wl.write_text("arrival_time,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.05},{200 + i},{20}\n" for i in range(12)))
    cfg = {"num_gpu_blocks": 400, "block_size": 16, "max_num_seqs": 32, "max_num_batched_tokens": 1024,
           "enable_prefix_caching": True, "enable_chunked_prefill": True, "async_scheduling": False,
           "max_model_len": 4096}
    outs = []
    for extra in ({}, {"data_parallel_size": 1, "enable_expert_parallel": False}):
        path = tmp_path / "c.json"
        path.write_text(json.dumps({**cfg, **extra}))
        assert main(["run", "--config", str(path), "--workload", str(wl)]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "data_parallel" not in outs[0]


def test_the_cli_sizes_a_ranks_pool_when_asked_and_refuses_auto_without_a_model(tmp_path, capsys):
    """``"num_gpu_blocks": "auto"``: one rank's pool as the sizing page sizes it for that shape (per GPU, the
    planner's ``plan``); without a roofline model to size from, or with a pool that cannot start, an error."""
    from simulator.base import DeploymentSpec, GpuSpec
    from simulator.sizing import parse_hf_config, plan

    wl = tmp_path / "w.csv"
    wl.write_text("arrival_time,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.05},{200 + i},{20}\n" for i in range(8)))
    cfg = {"num_gpu_blocks": "auto", "block_size": 16, "max_num_seqs": 32, "max_num_batched_tokens": 1024,
           "max_model_len": 4096, "data_parallel_size": 4, "enable_expert_parallel": True,
           "gpu_memory_utilization": 0.85, "cost_model": {"kind": "roofline", "model": QWEN3_30B, "gpu": H100}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["run", "--config", str(path), "--workload", str(wl)]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    want = plan(parse_hf_config(QWEN3_30B), GpuSpec.from_dict(H100),
                DeploymentSpec(data_parallel_size=4, enable_expert_parallel=True, max_model_len=4096,
                               gpu_memory_utilization=0.85))
    assert out["sizing"]["num_gpu_blocks"] == want.num_gpu_blocks > 0
    assert out["sizing"]["shape"] == "TP 1 x DP 4 + EP on H100 SXM5 80GB"
    assert f"num_gpu_blocks auto: {want.num_gpu_blocks:,} blocks a rank" in captured.err
    assert out["totals"]["finished"] == 8 and len(out["data_parallel"]["ranks"]) == 4
    for bad, words in (({"cost_model": {"kind": "linear", "base_s": 0.01, "per_token_s": 0, "per_req_s": 0},
                         "enable_expert_parallel": False}, 'num_gpu_blocks: "auto" sizes the pool from a roofline'),
                       ({"num_gpu_blocks": 500}, "gpu_memory_utilization: only with"),
                       ({"gpu_memory_utilization": 0.01}, "num_gpu_blocks: one rank of this shape does not start")):
        path.write_text(json.dumps({**cfg, **bad}))
        assert main(["run", "--config", str(path), "--workload", str(wl)]) == 2
        assert words in capsys.readouterr().err


def _shared_step_starts(res) -> float:
    starts = [set(np.asarray(inst.result.steps["time_s"]).tolist()) for inst in res.cluster.instances]
    return len(starts[0] & starts[1]) / min(len(starts[0]), len(starts[1]))


def test_in_lockstep_the_ranks_steps_start_together_and_independent_ranks_do_not():
    wl = _workload(60)
    lock = simulate_dp(wl, CFG, 2, record_steps=True)
    free = simulate_dp(wl, CFG, 2, record_steps=True, lockstep=False)
    assert all(len(inst.result.steps["time_s"]) > 10 for inst in lock.cluster.instances)
    assert _shared_step_starts(lock) > 0.9
    assert _shared_step_starts(free) < 0.1

