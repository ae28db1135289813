"""The ``step_cost=`` hook of ``simulate``: a batched cost model advances each configuration's clock."""

from __future__ import annotations

import numpy as np

from simulator.batch.runner import simulate
from simulator.clock.cost_model import BatchStepTime, LinearStepTime
from simulator.engine.config import EngineConfig, StepTimeModel
from simulator.workload.requests import Workload


def _workload(unit: str = "s") -> Workload:
    rng = np.random.default_rng(4)
    n = 80
    arrival = np.sort(rng.exponential(0.02, n).cumsum()) if unit == "s" else np.sort(rng.integers(0, 60, n)) * 1.0
    return Workload(prompt_len=rng.integers(1, 300, n), output_len=rng.integers(1, 120, n),
                    arrival=arrival, arrival_unit=unit)


CFGS = [EngineConfig(num_gpu_blocks=b, block_size=16, async_scheduling=a,
                     step_time_model=StepTimeModel(base_s=0.01, per_token_s=2e-5, per_req_s=1e-4))
        for b, a in ((120, False), (400, False), (200, True))]


def test_linear_model_through_the_hook_equals_the_default_clock():
    # Sync configurations only: an async engine makes one empty schedule call
    # while the last outputs drain, which the cost model prices at 0 s (its
    # convention) and the default linear model at base_s (the oracle's).
    wl = _workload()
    sync = [c for c in CFGS if not c.async_scheduling]
    cost = BatchStepTime.from_models([LinearStepTime(c.step_time_model) for c in sync])
    for a, b in zip(simulate(wl, sync, record_steps=True), simulate(wl, sync, record_steps=True, step_cost=cost)):
        assert a.totals == b.totals
        for k in ("first_token_time_s", "finish_time_s", "finish_step"):
            assert np.array_equal(a.requests[k], b.requests[k], equal_nan=True), k
        assert np.array_equal(a.steps["time_s"], b.steps["time_s"])


class Recorder:
    """A BatchStepTime-like model (one configuration) that records its inputs, 1 ms a step."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def step_time(self, P, A, D, C, R, prefill_kv_tokens=None):
        self.calls.append((P, A, D, C, R))
        return np.full(1, 0.001)


def test_step_terms_add_up_to_the_totals():
    wl = _workload("step")
    for cfg in CFGS:
        rec = Recorder()
        r = simulate(wl, [cfg], step_cost=rec)[0]
        terms = np.array(rec.calls, dtype=np.int64).reshape(-1, 5)
        P, A, D, C, R = terms.T
        assert P.sum() == r.totals["total_prefill_tokens"]
        assert D.sum() == r.totals["total_decode_tokens"]
        assert np.all(A >= P) and np.all(C >= D) and np.all(R >= D)
        assert np.all((P > 0) | (A == 0)) and np.all((D > 0) | (C == 0))


def test_lazy_decoders_give_the_same_terms_as_the_general_path():
    from simulator.engine.core import FastEngine

    wl = _workload("step")
    cfg = CFGS[0]
    got = []
    for lazy in (True, False):
        rec = Recorder()
        sim = FastEngine(wl, cfg, step_cost=rec, accelerate=lazy)
        sim.run_all()
        got.append(rec.calls)
    assert got[0] == got[1] and len(got[0]) > 50
