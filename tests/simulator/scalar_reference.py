"""Test-only reference engine: the same vLLM rules, one step at a time, no shortcuts.

It runs :class:`simulator._core.EngineSim` with the decode-stretch jump turned
off, so every step goes through the plain scalar ``schedule()`` /
``update_from_output()`` path (the path the 25 oracle cases pin to vLLM), and
checks the block-pool invariant after every schedule call. The fast engine
must give identical results.
"""

from __future__ import annotations

from simulator._core import EngineSim
from simulator.engine import _result


class ScalarEngine(EngineSim):
    """EngineSim without jumps, asserting ``in use + free == usable`` every step."""

    def _jump(self, next_arrival, tick, max_k):  # noqa: D401 - override
        return 0

    def schedule(self):
        out = super().schedule()
        pool = self.pool
        in_use = sum(1 for r in pool.ref.values() if r > 0)
        assert in_use + pool.num_free() == pool.usable
        held = {b for q in self.running for b in q.blocks}
        assert held <= {b for b, r in pool.ref.items() if r > 0}
        return out


def simulate_scalar(workload, config, *, record_steps=False):
    """One configuration through :class:`ScalarEngine`, as a SimResult."""
    sim = ScalarEngine(workload, config, record_steps=record_steps)
    sim.run()
    return _result(sim, record_steps, None)
