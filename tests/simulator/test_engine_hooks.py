"""The engine's named hook points (``simulator.engine.hooks``).

What is proved here:

* hooks that do nothing change nothing: every hook point is called, and the result is the plain
  engine's, JSON byte for byte with the step series, on random runs (tiers included);
* the admission verdicts do what they say: ``STOP`` holds the head and everything behind it, ``WAIT``
  passes over a request that keeps its place;
* a hook that keeps a finished request's blocks keeps them out of the pool until it gives them back
  (``engine.release``), and the shortcuts that finish requests outside the step's output are off.

The disaggregated prefill and decode instances, the hooks' users, are proved in ``test_disaggregated.py``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from simulator.engine.config import EngineConfig, StepTimeModel
from simulator.engine.core import FastEngine
from simulator.engine.hooks import ADMIT, STOP, WAIT, EngineHooks
from simulator.engine.results import assemble_result
from simulator.workload.requests import Workload
from tests.simulator.test_accelerate import random_config, random_workload


class Recorder(EngineHooks):
    """Counts every hook call and changes nothing."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()

    def before_schedule(self):
        self.calls["before_schedule"] += 1

    def admission(self, q, num_tokens, kept, nh, hit):
        self.calls["admission"] += 1
        return ADMIT

    def admitted(self, q):
        self.calls["admitted"] += 1

    def stalled(self, until):
        self.calls["stalled"] += 1
        return False

    def scheduled(self, ids, until):
        self.calls["scheduled"] += 1

    def finished(self, q, t_end):
        self.calls["finished"] += 1
        return False

    def idle(self, seconds):
        assert seconds > 0
        self.calls["idle"] += 1


def _json(wl, cfg, hooks=None, accelerate=True):
    sim = FastEngine(wl, cfg, record_steps=True, hooks=hooks, accelerate=accelerate)
    sim.run_all()
    return assemble_result(sim, True, None).to_json(steps=True), sim


@pytest.mark.parametrize("tier", [False, True])
def test_hooks_that_do_nothing_change_nothing(tier):
    seen: Counter = Counter()
    for seed in range(4000 + 10 * tier, 4008 + 10 * tier):
        rng = np.random.default_rng(seed)
        wl, cfg = random_workload(rng, int(rng.integers(5, 80))), random_config(rng, tier=tier)
        plain, _ = _json(wl, cfg)
        for accelerate in (True, False):
            rec = Recorder()
            got, _ = _json(wl, cfg, rec, accelerate)
            assert got == plain, (seed, accelerate)
            seen.update(rec.calls)
    assert {"before_schedule", "admission", "admitted", "scheduled", "finished", "idle"} <= set(seen)


STM = StepTimeModel(base_s=0.01, per_token_s=0.0, per_req_s=0.0)


def _three(arrival=(0.0, 0.0, 0.0)):
    return Workload(prompt_len=np.array([40, 40, 40]), output_len=np.array([3, 3, 3]), arrival=np.array(arrival),
                    arrival_unit="s")


class HoldHead(EngineHooks):
    """Request 0 may not be admitted before ``t``: ``verdict`` (STOP: nobody behind it either; WAIT: the others go)."""

    def __init__(self, verdict, t):
        self.verdict, self.t = verdict, t

    def admission(self, q, num_tokens, kept, nh, hit):
        return self.verdict if q == 0 and self.engine.clock < self.t else ADMIT


@pytest.mark.parametrize("verdict", [STOP, WAIT])
def test_admission_verdicts(verdict):
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, step_time_model=STM)
    _, sim = _json(_three(), cfg, HoldHead(verdict, 0.1))
    first = sim.requests.first_token_t
    assert first[0] >= 0.1
    if verdict == STOP:
        assert (first[1:] > 0.1).all()  # held behind the head of the line
    else:
        assert (first[1:] < 0.1).all()  # passed it over


class Keep(EngineHooks):
    """Keeps every finished request's blocks until ``give_back``."""

    holds_finished_blocks = holds_blocks = True

    def __init__(self):
        self.kept = []

    def finished(self, q, t_end):
        self.kept.append(q)
        return True

    def give_back(self):
        for q in self.kept:
            self.engine.release(q)
        self.kept.clear()


def test_a_hook_keeps_finished_blocks_until_it_gives_them_back():
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, step_time_model=STM)
    hooks = Keep()
    _, sim = _json(_three(), cfg, hooks)
    assert not {"lazy_decoders", "lazy_windows"} & sim.accelerators
    assert sorted(hooks.kept) == [0, 1, 2]
    held = int(sim.requests.held.sum())
    assert held == 3 * 3  # 42 tokens of context in blocks of 16, each
    assert sim.pool.num_free() == sim.pool.usable - held
    hooks.give_back()
    assert sim.pool.num_free() == sim.pool.usable and int(sim.requests.held.sum()) == 0
