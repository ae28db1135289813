"""Every accelerator held against the scalar reference kernel, not against the engine with it switched off.

``test_accelerate.py`` proves each shortcut equal to the engine's general path; this file proves the runs that
take them equal to :mod:`tests.simulator.scalar_reference` (vLLM's rules one request and one step at a time, its
own block pool and its own KV tiers, :mod:`tests.simulator.reference_tiers`), JSON byte for byte with the step
series, and checks that each accelerator of :data:`simulator.engine.accelerators.ACCELERATORS` was taken and did
its work on these runs: a shortcut can only be right here by giving vLLM's answer.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.batch.sharing import covers, shared_pool_factory
from simulator.engine.accelerators import ACCELERATORS
from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.engine.results import assemble_result
from simulator.workload.requests import Workload
from tests.simulator.scalar_reference import simulate_scalar
from tests.simulator.test_accelerate import parents_workload, random_config, random_workload

#: What shows an accelerator did work on a run (beyond being taken): a counter of the engine or its tiers.
WORK = {"release_runs": lambda sim: sim.shortcuts["hit_runs"] + sim.shortcuts["kept_loads"],
        "lazy_decoders": lambda sim: sim.shortcuts["lazy_steps"],
        "decode_jumps": lambda sim: sim.shortcuts["jumped_steps"],
        "lazy_windows": lambda sim: sim.shortcuts["window_steps"],
        "sure_checks": lambda sim: sim.tiers.sure_reads if sim.tiers is not None else 0}


def _reference(wl: Workload, cfg: EngineConfig) -> str:
    return simulate_scalar(wl, cfg, record_steps=True).to_json(steps=True)


def _spread_workload(rng, n: int, seconds: bool) -> Workload:
    """Arrivals spread out: decode-only stretches between them (where jumps and windows act)."""
    arrival = np.cumsum(rng.exponential(3.0, n))
    return Workload(prompt_len=rng.integers(1, 300, n), output_len=rng.integers(1, 250, n),
                    arrival=arrival * 0.02 if seconds else np.floor(arrival), arrival_unit="s" if seconds else "step")


def _cases():
    """Random runs (plain and with tiers: test_accelerate.py's generators) and runs made for the shortcuts."""
    for seed in range(24):
        rng = np.random.default_rng(5000 + seed)
        wl = random_workload(rng, int(rng.integers(5, 60)))
        # the reference kernel models vLLM's prefix cache (not SGLang's radix) and times steps by the linear model
        cfg = replace(random_config(rng, tier=seed % 2 == 1), cost_model=None)
        if cfg.prefix_cache == "vllm":
            yield wl, cfg
    for seed in range(6):
        rng = np.random.default_rng(seed)
        yield (_spread_workload(rng, 80, seconds=seed % 2 == 1),
               EngineConfig(num_gpu_blocks=int(rng.integers(60, 2000)), block_size=int(rng.choice([4, 16])),
                            max_num_seqs=int(rng.integers(4, 64)), async_scheduling=seed % 3 == 2))
    for seed in range(4):
        rng = np.random.default_rng(seed)
        wl = Workload(prompt_len=rng.integers(50, 400, 50), output_len=rng.integers(1, 200, 50),
                      arrival=np.sort(rng.integers(0, 30, 50)).astype(float))
        yield wl, EngineConfig(num_gpu_blocks=int(rng.integers(40, 120)), block_size=16,
                               max_num_seqs=int(rng.integers(8, 64)), cpu_tier={"num_blocks": 400, "read_gbps": 1.0},
                               kv_bytes_per_block=2**20, async_scheduling=seed % 2 == 1)
    for seed in range(4):
        # a trace's shared prefixes (parents inside their prompts): deferred publication, lazy decoders with
        # asynchronous scheduling
        rng = np.random.default_rng(7000 + seed)
        tier = dict(cpu_tier={"num_blocks": 300, "read_gbps": 1.0}, kv_bytes_per_block=2**20) if seed % 2 else {}
        yield (parents_workload(rng, 50, into_outputs=False),
               EngineConfig(num_gpu_blocks=int(rng.integers(60, 400)), block_size=16, max_num_seqs=int(rng.integers(4, 32)),
                            max_num_batched_tokens=256, async_scheduling=True, **tier))


def test_runs_taking_each_accelerator_equal_the_scalar_reference():
    taken = dict.fromkeys((a.name for a in ACCELERATORS if a.name != "shared_schedules"), 0)
    worked = dict.fromkeys(WORK, 0)
    for i, (wl, cfg) in enumerate(_cases()):
        sim = FastEngine(wl, cfg, record_steps=True)
        sim.run_all()
        assert assemble_result(sim, True, None).to_json(steps=True) == _reference(wl, cfg), i
        for name in sim.accelerators & taken.keys():
            taken[name] += 1
        for name, work in WORK.items():
            worked[name] += work(sim) > 0
    assert all(taken.values()), taken
    assert all(worked.values()), worked


def test_schedules_shared_across_a_batch_equal_the_scalar_reference_of_each_configuration():
    """``shared_schedules``: one leader's run gives other block counts and caps their results (its shadow
    pools, their tiers); each such derived result equals the reference kernel run on that configuration."""
    derived = shadowed_tiers = 0
    for seed in range(8):
        rng = np.random.default_rng(7000 + seed)
        wl = _spread_workload(rng, 60, seconds=seed % 2 == 1)
        tier = seed % 3 == 2
        lead = EngineConfig(num_gpu_blocks=int(rng.integers(300, 900)), block_size=16, max_num_seqs=64,
                            **({"cpu_tier": {"num_blocks": 200}, "kv_bytes_per_block": 2**20} if tier else {}))
        others = [replace(lead, num_gpu_blocks=int(rng.integers(150, 1200))) for _ in range(4)]
        others.append(replace(lead, max_num_seqs=int(rng.integers(40, 128))))
        sim = FastEngine(wl, lead, record_steps=True, accelerate=True,
                         pool_factory=shared_pool_factory(sorted({c.num_gpu_blocks for c in others}
                                                                 - {lead.num_gpu_blocks})))
        sim.run_all()
        assert "shared_schedules" in sim.accelerators
        for cfg in others:
            got = covers(sim, cfg, sim._unservable)
            if got is None:
                continue  # the runner runs this one alone
            derived += 1
            shadowed_tiers += tier and cfg.num_gpu_blocks != lead.num_gpu_blocks  # a shadow pool's own tiers
            assert assemble_result(sim, True, None, *got).to_json(steps=True) == _reference(wl, cfg), (seed, cfg)
    assert derived >= 10 and shadowed_tiers > 0, (derived, shadowed_tiers)
