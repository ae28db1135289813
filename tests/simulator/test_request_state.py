"""The per-request arrays live once, in the engine's :class:`~simulator.engine.request_state.RequestState`.

Proved: the engine carries no copy of them under its own names (code outside reads ``engine.requests.<array>``);
the scheduler and the lazy decoders, which take them under the same names, hold the very same arrays (no copy),
so a run's result reads what the scheduler wrote.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.engine.request_state import RequestState
from simulator.engine.results import assemble_result
from simulator.workload.requests import Workload


def test_the_engine_reads_the_request_arrays_from_its_request_state_only():
    rng = np.random.default_rng(1)
    n = 120
    wl = Workload(prompt_len=rng.integers(1, 300, n), output_len=rng.integers(1, 100, n),
                  arrival=np.sort(rng.integers(0, 40, n)).astype(float))
    sim = FastEngine(wl, EngineConfig(num_gpu_blocks=300))
    rs = sim.requests
    assert isinstance(rs, RequestState)
    for name in RequestState.SHARED:
        assert not hasattr(sim, name), name  # (was a second name for the same array on the engine)
        assert getattr(sim.scheduler, name) is getattr(rs, name), name
        if sim.lazy is not None:
            assert getattr(sim.lazy, name) is getattr(rs, name), name
    sim.run_all()
    result = assemble_result(sim, False, None)
    assert sim.t["finished"] == n and not rs.waiting and rs.num_running == 0
    assert np.array_equal(result.requests["num_output_tokens"], rs.tok - wl.prompt_len)
    assert np.array_equal(result.requests["num_output_tokens"], wl.output_len)
    assert np.array_equal(result.requests["num_preemptions"], rs.npre)
