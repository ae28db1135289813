"""Test-only reference engine: the same vLLM rules, one request and one step at a time.

:mod:`tests.simulator.reference_core` (``EngineSim``, a scalar Python kernel
following vLLM 0.33.0's v1 scheduler step for step) and
:mod:`tests.simulator.reference_blocks` (``BlockPool``, vLLM's block pool
with real block ids, an ordered free queue and a hash table) are the slow,
obviously-correct engine the fast kernel (:mod:`simulator.engine.core`) replaced.
:class:`ScalarEngine` runs it (every step through the plain ``schedule()`` /
``update_from_output()`` path: the reference has no shortcut) and checks the block-pool invariant after
every schedule call. The
fast engine must give identical results (``test_engine_properties.py``; with a CPU tier,
``test_tiers.py``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from simulator.engine.results import assemble_result
from tests.simulator.reference_core import EngineSim


class ScalarEngine(EngineSim):
    """EngineSim asserting ``in use + free == usable`` every step."""

    def schedule(self):
        out = super().schedule()
        pool = self.pool
        in_use = sum(1 for r in pool.ref.values() if r > 0)
        assert in_use + pool.num_free() == pool.usable
        held = {b for q in self.running for b in q.blocks}
        assert held <= {b for b, r in pool.ref.items() if r > 0}
        return out


def as_result(sim: EngineSim, record_steps: bool = False):
    """A finished scalar ``EngineSim`` as a SimResult (same assembly as the fast engine)."""
    reqs = sim.reqs
    col = lambda name, dt=np.int64: np.array([getattr(q, name) for q in reqs], dt)  # noqa: E731
    log = None
    if sim.log is not None:
        log = {k: getattr(sim.log, k) for k in ("step", "time_s", "num_running", "num_waiting",
                                                 "num_scheduled_tokens", "kv_blocks_used", "num_preempted")}
    requests = SimpleNamespace(  # the columns of the fast engine's RequestState that a result reads
        npre=col("npre"), status=col("status"), first_sched=col("first_sched"),
        first_token=col("first_token"), finish=col("finish"), hit_first=col("hit_first"),
        tok=sim.wl.prompt_len + col("num_out"), first_token_t=col("first_token_t", np.float64),
        finish_t=col("finish_t", np.float64))
    view = SimpleNamespace(wl=sim.wl, t=sim.t, pool=sim.pool, unfinished=sim.unfinished, clock=sim.clock,
                           requests=requests, log=log, tiers=sim.tiers, step_ends=sim.step_ends)
    return assemble_result(view, record_steps, None)


def simulate_scalar(workload, config, *, record_steps=False):
    """One configuration through the scalar kernel, as a SimResult."""
    sim = ScalarEngine(workload, config, record_steps=record_steps)
    sim.run()
    return as_result(sim, record_steps)
