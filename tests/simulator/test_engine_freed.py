"""A finished engine is freed when its last reference goes: its parts hold none of its bound methods strongly.

A part holding a bound method of the engine (the loads' ``free``, the jumps' ``publish``) closed a reference cycle,
so a finished engine's arrays (hundreds of MiB at 100,000 requests) waited for the cyclic garbage collector, one
engine after another in a batch (``bench/bench_trace.py``: 310 MiB still held after a 100k run, 108 MiB before the
engine became parts). The cyclic collector is off here: only reference counting may free it.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.workload.requests import Workload

TIER = {"cpu_tier": {"num_blocks": 100}, "kv_bytes_per_block": 2**20}


@pytest.mark.parametrize("config", [
    EngineConfig(num_gpu_blocks=500),  # decode jumps, lazy decoders
    EngineConfig(num_gpu_blocks=120, **TIER),  # tier loads
    EngineConfig(num_gpu_blocks=500, async_scheduling=True),
    EngineConfig(num_gpu_blocks=500, speculative={"method": "eagle", "num_speculative_tokens": 3,
                                                  "acceptance_rate": 0.7}),
    EngineConfig(num_gpu_blocks=500, policy="priority"),
], ids=["plain", "tiers", "async", "speculative", "priority"])
def test_a_finished_engine_is_freed_by_reference_counting(config):
    rng = np.random.default_rng(0)
    n = 200
    wl = Workload(prompt_len=rng.integers(1, 300, n), output_len=rng.integers(1, 100, n),
                  arrival=np.sort(rng.integers(0, 50, n)).astype(float))
    gc.disable()
    try:
        sim = FastEngine(wl, config)
        sim.run_all()
        assert sim.t["finished"] == n
        alive = weakref.ref(sim)
        del sim
        assert alive() is None
    finally:
        gc.enable()
