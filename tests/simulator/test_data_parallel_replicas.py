"""Replicas of a DP group (issue 34: a replica is one DP group of TP x PP x DP GPUs): ``simulate_dp(replicas=N)``.

The model's config is tests/data/sizing/hf_configs (copied from the Hugging Face Hub); the H100's figures are
tests/simulator/test_cluster.py's (NVIDIA's data sheet).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.base import DeploymentSpec, GpuSpec
from simulator.clock.expert_parallel import DPClock, DPShape
from simulator.cluster.data_parallel import DPClockGroup, DPError, simulate_dp
from simulator.engine import EngineConfig
from simulator.sizing import parse_hf_config
from simulator.workload import Workload

CONFIGS = Path(__file__).resolve().parents[2] / "tests" / "data" / "sizing" / "hf_configs"
QWEN3_30B = parse_hf_config(json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text()))
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)
CFG = EngineConfig(num_gpu_blocks=600, block_size=16, max_num_seqs=32, max_num_batched_tokens=1024)


def _workload(n: int = 160, seed: int = 3) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload(prompt_len=rng.integers(50, 900, n), output_len=rng.integers(5, 120, n),
                    arrival=np.sort(rng.uniform(0, 8, n)), arrival_unit="s")


@pytest.mark.parametrize("lockstep", [True, False])
def test_each_of_n_groups_runs_every_nth_request_as_a_dp_group_of_its_own(lockstep):
    wl = _workload(50)
    clock = DPClockGroup(DPClock.build(QWEN3_30B, H100, DPShape(DeploymentSpec(
        data_parallel_size=2, enable_expert_parallel=True)))) if lockstep else None
    both = simulate_dp(wl, CFG, 2, clock=clock, lockstep=lockstep, replicas=2)
    assert both.cluster.num_instances == 4 and len(both.ranks) == 4
    order = np.argsort(wl.arrival, kind="stable")
    steps = 0
    for g in range(2):
        idx = np.sort(order[g::2])
        alone = simulate_dp(wl.select(idx), CFG, 2, clock=clock, lockstep=lockstep)
        assert np.array_equal(np.asarray(both.cluster.requests["finish_time_s"])[idx],
                              np.asarray(alone.cluster.requests["finish_time_s"]))
        assert set(np.asarray(both.cluster.requests["instance"])[idx].tolist()) == {2 * g, 2 * g + 1}
        assert [r["dummy_steps"] for r in both.ranks[2 * g:2 * g + 2]] == [r["dummy_steps"] for r in alone.ranks]
        steps += alone.group_steps
    assert both.group_steps == steps and (steps > 0) == lockstep


def test_one_replica_is_the_group_and_a_bad_count_names_the_field():
    wl = _workload(60)
    a, b = simulate_dp(wl, CFG, 2, lockstep=False), simulate_dp(wl, CFG, 2, lockstep=False, replicas=1)
    assert a.cluster.totals == b.cluster.totals
    with pytest.raises(DPError) as exc:
        simulate_dp(wl, CFG, 2, replicas=0)
    assert exc.value.field == "replicas"
