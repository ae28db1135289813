"""Which accelerators a run takes (simulator/engine/accelerators.py): each says the runs it supports."""

from __future__ import annotations

import numpy as np

from simulator.engine.accelerators import ACCELERATORS, RunFacts, choose
from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.workload.requests import Workload

ALL = frozenset(a.name for a in ACCELERATORS)


def facts(config: EngineConfig | None = None, **kw) -> RunFacts:
    base = dict(config=config or EngineConfig(), own_keys=True, outputs_shared=False, max_model_len_binds=False,
                has_tiers=False, batched_cost_hook=False)
    return RunFacts(**{**base, **kw})


def test_accelerate_false_takes_none():
    assert choose(facts(), accelerate=False) == frozenset()


def test_a_plain_run_takes_all_but_the_tier_ones():
    assert choose(facts()) == ALL - {"release_runs"}


def test_release_runs_need_a_tier_the_whole_prompt_rule_and_chunked_prefill():
    tier = {"num_blocks": 100, "read_gbps": 10, "write_gbps": 10}
    assert "release_runs" in choose(facts(EngineConfig(cpu_tier=tier), has_tiers=True))
    assert "release_runs" not in choose(facts(EngineConfig(cpu_tier=tier, enable_chunked_prefill=False),
                                              has_tiers=True))
    offload = EngineConfig(cpu_tier=tier, kv_offload_threshold=0.5)
    taken = choose(facts(offload, has_tiers=True))
    assert not taken & {"release_runs", "decode_jumps", "lazy_windows", "shared_schedules"}


def test_async_scheduling_keeps_lazy_decoders_only_with_deferred_publication():
    cfg = EngineConfig(async_scheduling=True)
    assert choose(facts(cfg)) == ALL - {"release_runs", "decode_jumps", "lazy_windows"}
    taken = choose(facts(cfg, own_keys=False, outputs_shared=True))
    assert "lazy_decoders" not in taken and "own_keys" not in taken and "shared_schedules" not in taken


def test_a_binding_max_model_len_or_a_batched_clock_turn_off_their_shortcuts():
    assert "lazy_decoders" not in choose(facts(max_model_len_binds=True))
    assert not choose(facts(batched_cost_hook=True)) & {"decode_jumps", "lazy_windows"}
    assert "shared_schedules" not in choose(facts(EngineConfig(watermark=0.01)))


def test_the_engine_takes_what_choose_says():
    rng = np.random.default_rng(3)
    n = 40
    wl = Workload(prompt_len=rng.integers(1, 300, n), output_len=rng.integers(1, 50, n),
                  arrival=np.sort(rng.integers(0, 30, n)).astype(float))
    cfg = EngineConfig(num_gpu_blocks=200, async_scheduling=True)
    for accelerate in (True, False):
        engine = FastEngine(wl, cfg, accelerate=accelerate)
        assert engine.accelerators == choose(facts(cfg), accelerate)
        assert engine.jumps_ok is False and engine.lazy_ok is accelerate


def test_the_decode_jumps_part_exists_only_where_the_run_takes_it():
    """``engine.jumps`` (:class:`DecodeJumps`) is held only for a run ``choose`` gives ``decode_jumps``: a
    synchronous run with accelerators, not an asynchronous one nor one with ``accelerate=False``."""
    from simulator.engine.decode_jumps import DecodeJumps

    wl = Workload(prompt_len=np.full(8, 40), output_len=np.full(8, 30), arrival=np.zeros(8))
    for cfg, accelerate, held in ((EngineConfig(num_gpu_blocks=200), True, True),
                                  (EngineConfig(num_gpu_blocks=200), False, False),
                                  (EngineConfig(num_gpu_blocks=200, async_scheduling=True), True, False)):
        engine = FastEngine(wl, cfg, accelerate=accelerate)
        assert ("decode_jumps" in engine.accelerators) is held
        assert isinstance(engine.jumps, DecodeJumps) if held else engine.jumps is None
        engine.run_all()
        assert (engine.shortcuts["jumped_steps"] > 0) is held
