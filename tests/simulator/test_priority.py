"""Priority scheduling (vLLM's ``--scheduling-policy priority``): inputs, shortcuts, and every way in.

vLLM's own decisions are pinned by the recorded cases in ``tests/data/oracle/priority``
(``test_engine_oracle.py``). What is proved here:

* ``EngineConfig.policy`` takes ``fcfs`` or ``priority`` and names anything else; a workload's
  ``priority`` is optional (0), read from workload JSON and CSV/JSONL traces, and a bad one is named;
* the engine equals the scalar reference (``reference_core.py``, vLLM's rules written the obvious way:
  a sorted waiting list, ``max(running, key=...)``) on random priority runs, step series included;
* the shortcuts change no result under priority scheduling (``accelerate=True`` against ``False``,
  JSON byte for byte with the step series, random runs, tiers included), and the ones that assume
  FCFS are not taken;
* a cluster's instance (requests submitted by a router) orders its queue by priority as a plain run does;
* ``python -m simulator run --scheduling-policy priority`` replaces the config's policy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.base import ConfigError
from simulator.batch.runner import simulate
from simulator.cluster.replicas import simulate_cluster
from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.workload.oracle_io import workload_from_dict
from simulator.workload.requests import Workload, WorkloadError
from simulator.workload.traces import parse_trace, workload_to_oracle_dict
from tests.simulator.scalar_reference import simulate_scalar
from tests.simulator.test_accelerate import assert_same, random_config, random_workload
from tests.simulator.test_engine_properties import _same, _workload, configs

ROOT = Path(__file__).resolve().parents[2]


def _with_priorities(rng: np.random.Generator, wl: Workload) -> Workload:
    return replace(wl, priority=rng.integers(-2, 3, wl.n))


def test_policy_is_fcfs_or_priority():
    assert EngineConfig().policy == "fcfs"
    assert EngineConfig(policy="priority").policy == "priority"
    with pytest.raises(ConfigError, match="policy: must be 'fcfs' or 'priority'.*got 'lifo'"):
        EngineConfig(policy="lifo")


def test_workload_priority_defaults_to_zero_and_is_checked():
    wl = workload_from_dict({"requests": [{"prompt_len": 10, "max_tokens": 2},
                                          {"prompt_len": 10, "max_tokens": 2, "priority": -3}]})
    assert wl.priority.tolist() == [0, -3]
    for bad in (1.5, True, "1", 2**40):
        with pytest.raises(WorkloadError, match=r"requests\[0\]\.priority: must be a whole number"):
            workload_from_dict({"requests": [{"prompt_len": 10, "max_tokens": 2, "priority": bad}]})
    with pytest.raises(WorkloadError, match="priority: expected 1 entries"):
        Workload(prompt_len=[3], output_len=[1], arrival=[0.0], priority=[1, 2])


def test_traces_read_and_write_the_priority_column():
    wl = parse_trace("arrival_step,prompt_tokens,output_tokens,priority\n0,10,2,1\n0,12,3,\n", fmt="csv", name="t.csv")
    assert wl.priority.tolist() == [1, 0]
    jl = parse_trace('{"arrival_time": 0.5, "prompt_tokens": 9, "output_tokens": 2, "priority": -7}\n', fmt="jsonl",
                     name="t.jsonl")
    assert jl.priority.tolist() == [-7]
    with pytest.raises(WorkloadError, match="t.csv line 2, column priority: expected a whole number"):
        parse_trace("arrival_step,prompt_tokens,output_tokens,priority\n0,10,2,high\n", fmt="csv", name="t.csv")
    back = workload_from_dict(workload_to_oracle_dict(wl))
    assert back.priority.tolist() == [1, 0]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 25), shared=st.booleans(), unit=st.sampled_from(["step", "s"]),
       config=configs, levels=st.integers(1, 4))
def test_engine_equals_scalar_reference_under_priority(seed, n, shared, unit, config, levels):
    wl = _workload(seed, n, shared, unit)
    wl = replace(wl, priority=np.random.default_rng(seed).integers(0, levels, n))
    # A request longer than the whole KV cache (vLLM refuses such a max_model_len at start-up) makes priority
    # preemption thrash to the step limit: 2,000,000 steps took 80 s in one example. Both sides stop at this
    # limit alike; a run that is not thrashing needs at most ~4,000 steps here.
    config = replace(config, policy="priority", max_steps=20_000)
    fast = simulate(wl, [config], record_steps=True)[0]
    slow = simulate_scalar(wl, config, record_steps=True)
    _same(fast, slow)
    for k, v in fast.steps.items():
        assert np.array_equal(v, slow.steps[k]), k


@pytest.mark.parametrize("tier", [False, True])
def test_shortcuts_change_no_result_under_priority(tier):
    for seed in range(3000 + 10 * tier, 3006 + 10 * tier):
        rng = np.random.default_rng(seed)
        wl = _with_priorities(rng, random_workload(rng, int(rng.integers(5, 80))))
        assert_same(wl, [replace(random_config(rng, tier=tier), policy="priority")])


def test_shortcuts_that_assume_fcfs_are_not_taken():
    rng = np.random.default_rng(7)
    wl = _with_priorities(rng, Workload(prompt_len=rng.integers(20, 200, 40), output_len=rng.integers(5, 60, 40),
                                        arrival=np.zeros(40)))
    fcfs = FastEngine(wl, EngineConfig(num_gpu_blocks=400, block_size=16))
    prio = FastEngine(wl, EngineConfig(num_gpu_blocks=400, block_size=16, policy="priority"))
    assert {"lazy_decoders", "shared_schedules"} <= fcfs.accelerators
    assert not {"lazy_decoders", "shared_schedules"} & prio.accelerators
    assert "decode_jumps" in prio.accelerators


def test_lower_priority_first_and_ties_by_arrival():
    """One request at a time (max_num_seqs=1): the order of first tokens is (priority, arrival, workload order)."""
    prio = np.array([2, 0, 1, 0, 2, 1])
    arrival = np.array([0, 0, 0, 0, 0, 0], float)
    wl = Workload(prompt_len=np.full(6, 20), output_len=np.full(6, 3), arrival=arrival, priority=prio)
    res = simulate(wl, [EngineConfig(max_num_seqs=1, policy="priority")])[0]
    first = res.to_dict()["requests"]
    order = sorted(range(6), key=lambda i: first[i]["first_token_step"])
    assert order == [1, 3, 2, 5, 0, 4]
    fcfs = simulate(wl, [EngineConfig(max_num_seqs=1)])[0].to_dict()["requests"]
    assert sorted(range(6), key=lambda i: fcfs[i]["first_token_step"]) == list(range(6))


def test_a_cluster_instance_orders_its_queue_by_priority():
    """Requests submitted one by one by a router (one instance) give the plain run's result."""
    rng = np.random.default_rng(11)
    n = 60
    wl = Workload(prompt_len=rng.integers(50, 400, n), output_len=rng.integers(5, 80, n),
                  arrival=np.sort(rng.exponential(0.02, n).cumsum()), arrival_unit="s", priority=rng.integers(0, 4, n))
    cfg = EngineConfig(num_gpu_blocks=200, block_size=16, max_num_seqs=16, policy="priority")
    plain = simulate(wl, [cfg])[0].requests
    one = simulate_cluster(wl, cfg, 1).requests
    assert plain["num_preemptions"].sum() > 0
    for k in ("first_token_step", "finish_step", "num_preemptions"):
        assert np.array_equal(plain[k], one[k]), k


def test_cli_scheduling_policy_replaces_the_config_policy(tmp_path):
    wl = {"requests": [{"id": "low", "arrival_step": 0, "prompt_len": 64, "max_tokens": 4, "priority": 5},
                       {"id": "high", "arrival_step": 0, "prompt_len": 64, "max_tokens": 4, "priority": 0}]}
    (tmp_path / "wl.json").write_text(json.dumps(wl))
    (tmp_path / "cfg.json").write_text(json.dumps({"max_num_seqs": 1, "policy": "fcfs"}))
    base = [sys.executable, "-m", "simulator", "run", "--workload", str(tmp_path / "wl.json"),
            "--config", str(tmp_path / "cfg.json")]

    def first_ids(*extra):
        out = subprocess.run([*base, *extra], capture_output=True, text=True, cwd=ROOT, check=True).stdout
        reqs = json.loads(out)["requests"]
        return [r["id"] for r in sorted(reqs, key=lambda r: r["first_token_step"])]

    assert first_ids() == ["low", "high"]
    assert first_ids("--scheduling-policy", "priority") == ["high", "low"]
    bad = subprocess.run([*base, "--scheduling-policy", "lifo"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--scheduling-policy: invalid choice: 'lifo'" in bad.stderr
