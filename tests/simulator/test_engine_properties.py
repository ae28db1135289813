"""Property tests: fast engine == scalar reference, invariants, reproducibility, batching."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.batch.runner import simulate
from simulator.engine.config import EngineConfig
from simulator.workload.requests import Workload
from tests.simulator.scalar_reference import ScalarEngine, simulate_scalar


def _workload(seed: int, n: int, shared: bool, unit: str) -> Workload:
    rng = np.random.default_rng(seed)
    prompt = rng.integers(1, 120, n)
    output = rng.integers(1, 60, n)
    if unit == "s":
        arrival = np.sort(rng.exponential(0.05, n).cumsum())
    else:
        arrival = np.sort(rng.integers(0, 30, n)).astype(float)
    prefix_id = np.full(n, -1)
    prefix_len = np.zeros(0, np.int64)
    if shared:
        prefix_len = np.array([32, 50])
        prefix_id = rng.integers(-1, 2, n)
        prompt = np.where(prefix_id >= 0, prompt + prefix_len[np.maximum(prefix_id, 0)], prompt)
    return Workload(prompt_len=prompt, output_len=output, arrival=arrival, arrival_unit=unit,
                    prefix_id=prefix_id, prefix_len=prefix_len)


configs = st.builds(
    EngineConfig,
    num_gpu_blocks=st.integers(12, 120),
    block_size=st.sampled_from([4, 8, 16]),
    max_num_seqs=st.integers(1, 12),
    max_num_batched_tokens=st.sampled_from([16, 64, 256]),
    enable_prefix_caching=st.booleans(),
    long_prefill_token_threshold=st.sampled_from([0, 8, 40]),
    scheduler_reserve_full_isl=st.booleans(),
    watermark=st.sampled_from([0.0, 0.05]),
    async_scheduling=st.booleans(),
)
cases = dict(seed=st.integers(0, 10_000), n=st.integers(1, 25), shared=st.booleans(),
             unit=st.sampled_from(["step", "s"]), config=configs)


def _same(a, b) -> None:
    assert a.totals == b.totals
    for k, v in a.requests.items():
        assert np.array_equal(np.asarray(v), np.asarray(b.requests[k]), equal_nan=v is not a.requests["id"]
                              and np.asarray(v).dtype.kind == "f"), k


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**cases)
def test_fast_engine_equals_scalar_reference(seed, n, shared, unit, config):
    wl = _workload(seed, n, shared, unit)
    fast = simulate(wl, [config], record_steps=True)[0]
    slow = simulate_scalar(wl, config, record_steps=True)
    _same(fast, slow)
    for k, v in fast.steps.items():
        assert np.array_equal(v, slow.steps[k]), k


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**cases)
def test_no_request_lost_and_blocks_return(seed, n, shared, unit, config):
    wl = _workload(seed, n, shared, unit)
    r = simulate(wl, [config], record_steps=True)[0]
    t = r.totals
    assert t["finished"] + t["dropped_unservable"] + t["unfinished"] == n
    assert t["unfinished"] == 0
    usable = config.num_gpu_blocks - 1
    used = r.steps["kv_blocks_used"]
    assert np.all((0 <= used) & (used <= usable))
    done = np.array(r.requests["status"]) == "finished"
    assert np.all(np.asarray(r.requests["num_output_tokens"])[done] == wl.output_len[done])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 25), shared=st.booleans(), config=configs)
def test_no_preemption_when_blocks_never_run_out(seed, n, shared, config):
    wl = _workload(seed, n, shared, "step")
    need = int((-(-(wl.prompt_len + wl.output_len) // config.block_size)).sum()) + 2
    big = EngineConfig(**{**config.__dict__, "num_gpu_blocks": need})
    r = simulate(wl, [big])[0]
    assert r.totals["preemptions"] == 0
    assert r.totals["peak_kv_blocks_used"] < need


def test_preemptions_happen_only_when_an_allocation_failed():
    events = []

    class Watched(ScalarEngine):
        def _allocate_running(self, q, n):
            need = -(-min(q.computed + n, self.max_model_len) // self.B) - len(q.blocks)
            ok = super()._allocate_running(q, n)
            events.append(("alloc", ok, need, self.pool.num_free()))
            return ok

        def _preempt(self, q):
            kind, ok, need, free = events[-1]
            assert kind == "alloc" and not ok and need > free
            events.append(("preempt",))
            super()._preempt(q)

    wl = _workload(3, 40, False, "step")
    sim = Watched(wl, EngineConfig(num_gpu_blocks=40, block_size=8))
    sim.run()
    assert sim.t["preemptions"] == sum(1 for e in events if e[0] == "preempt") > 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), config=configs)
def test_same_input_same_result(seed, config):
    wl = _workload(seed, 20, True, "s")
    a, b = simulate(wl, [config])[0], simulate(wl, [config])[0]
    _same(a, b)


def test_batch_equals_each_config_alone():
    wl = _workload(7, 60, True, "step")
    cfgs = [EngineConfig(num_gpu_blocks=b, block_size=bs, max_num_seqs=s, enable_prefix_caching=pc,
                         async_scheduling=asy, long_prefill_token_threshold=lp)
            for b, bs, s, pc, asy, lp in [(30, 8, 8, False, False, 0), (200, 16, 4, True, True, 16),
                                          (60, 4, 16, True, False, 0), (45, 8, 2, False, True, 8)]]
    batch = simulate(wl, cfgs)
    for c, r in zip(cfgs, batch):
        _same(r, simulate(wl, [c])[0])
    assert len({r.totals["num_steps"] for r in batch}) > 1
    # spread over worker processes: the same results, in the order of the configurations
    seen = []
    for r, p in zip(batch, simulate(wl, cfgs, processes=2, progress=seen.append)):
        _same(r, p)
    assert sorted(seen) == seen and seen[-1] == 1.0 and len(seen) == len(cfgs)


def test_processes_must_be_a_whole_number():
    import pytest

    for bad in (-1, 1.5, "2"):
        with pytest.raises(ValueError, match="processes"):
            simulate(_workload(1, 3, False, "step"), [EngineConfig(num_gpu_blocks=50)], processes=bad)


def test_unservable_requests_are_dropped_and_counted():
    wl = Workload(prompt_len=np.array([10, 500, 20]), output_len=np.array([5, 5, 5]),
                  arrival=np.zeros(3))
    r = simulate(wl, [EngineConfig(num_gpu_blocks=11, block_size=16)])[0]
    assert r.totals["dropped_unservable"] == 1 and r.totals["finished"] == 2
    assert r.requests["status"][1] == "dropped_unservable"


def test_without_chunked_prefill_a_prompt_over_the_budget_is_dropped_not_waited_on_for_ever():
    wl = Workload(prompt_len=np.array([10, 100, 20]), output_len=np.array([5, 5, 5]), arrival=np.zeros(3))
    cfg = EngineConfig(num_gpu_blocks=100, enable_chunked_prefill=False, max_num_batched_tokens=64)
    for asy in (False, True):
        r = simulate(wl, [EngineConfig(**{**cfg.__dict__, "async_scheduling": asy})])[0]
        t = r.totals
        assert (t["finished"], t["dropped_unservable"], t["unfinished"]) == (2, 1, 0)
        assert r.requests["status"][1] == "dropped_unservable"
        assert t["num_schedule_calls"] < 50  # it used to spin until max_steps (2,000,000 calls)


def test_without_chunked_prefill_a_long_prompt_whose_prefix_is_cached_still_runs():
    # 100 tokens > the 64-token budget, but 48 of them are a prefix the first request caches
    wl = Workload(prompt_len=np.array([60, 100]), output_len=np.array([5, 5]), arrival=np.zeros(2),
                  prefix_id=np.array([0, 0]), prefix_len=np.array([48]))
    cfg = EngineConfig(num_gpu_blocks=100, enable_chunked_prefill=False, max_num_batched_tokens=64)
    r = simulate(wl, [cfg])[0]
    assert r.totals["finished"] == 2 and r.totals["dropped_unservable"] == 0
    assert r.requests["prefix_hit_tokens"][1] == 48


def _workload_turns(seed: int, n: int, unit: str) -> Workload:
    """Multi-turn parents (children may arrive before their parent finishes: duplicate hashes)."""
    rng = np.random.default_rng(seed)
    out = rng.integers(1, 40, n)
    prompt = rng.integers(1, 80, n)
    parent = np.full(n, -1)
    prefix_len = np.array([20, 37])
    prefix_id = rng.integers(-1, 2, n)
    prompt = np.where(prefix_id >= 0, prompt + prefix_len[np.maximum(prefix_id, 0)], prompt)
    for r in range(1, n):
        if rng.random() < 0.4:
            p = int(rng.integers(0, r))
            parent[r] = p
            prompt[r] = prompt[p] + out[p] + rng.integers(1, 30)
    arrival = rng.exponential(0.05, n).cumsum() if unit == "s" else rng.integers(0, 40, n).astype(float)
    return Workload(prompt_len=prompt, output_len=out, arrival=arrival, arrival_unit=unit,
                    prefix_id=prefix_id, prefix_len=prefix_len, parent=parent)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), unit=st.sampled_from(["step", "s"]), config=configs,
       max_model_len=st.sampled_from([None, None, 90, 150]))
def test_fast_engine_equals_scalar_reference_multi_turn(seed, n, unit, config, max_model_len):
    config = EngineConfig(**{**config.__dict__, "max_model_len": max_model_len})
    wl = _workload_turns(seed, n, unit)
    fast = simulate(wl, [config], record_steps=True)[0]
    slow = simulate_scalar(wl, config, record_steps=True)
    _same(fast, slow)
    for k, v in fast.steps.items():
        assert np.array_equal(v, slow.steps[k]), k


def assert_lazy_path_changes_nothing(wl: Workload, config: EngineConfig) -> int:
    """Run ``config`` with the engine's shortcuts (lazy decoders among them) and without
    (``accelerate=False``); assert equal results (step series included). Returns the schedule
    calls the lazy path took."""
    from simulator.engine.core import FastEngine
    from simulator.engine.results import assemble_result

    out, fast = [], []
    for accelerate in (True, False):
        sim = FastEngine(wl, config, record_steps=True, accelerate=accelerate)
        sim.run_all()
        out.append(assemble_result(sim, True, None))
        fast.append(sim.shortcuts["lazy_steps"])
    _same(out[0], out[1])
    for k, v in out[0].steps.items():
        assert np.array_equal(v, out[1].steps[k]), k
    assert fast[1] == 0
    return fast[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**cases)
def test_lazy_decoders_change_nothing(seed, n, shared, unit, config):
    assert_lazy_path_changes_nothing(_workload(seed, n, shared, unit), config)


def test_async_lazy_decoders_change_nothing_and_are_used():
    """Asynchronous scheduling through lazy decoders == the general path, on runs long enough to use them."""
    for seed in range(12):
        rng = np.random.default_rng(seed)
        n = 150
        wl = _workload(seed, n, bool(seed % 2), "s" if seed % 3 == 0 else "step")
        wl = Workload(prompt_len=wl.prompt_len * 3, output_len=rng.integers(1, 150, n), arrival=wl.arrival,
                      arrival_unit=wl.arrival_unit, prefix_id=wl.prefix_id, prefix_len=wl.prefix_len)
        config = EngineConfig(num_gpu_blocks=int(rng.integers(150, 2500)), block_size=int(rng.choice([4, 16])),
                              max_num_seqs=int(rng.integers(4, 48)), async_scheduling=True,
                              enable_prefix_caching=seed % 4 != 1, long_prefill_token_threshold=[0, 64][seed % 2])
        lazy_calls = assert_lazy_path_changes_nothing(wl, config)
        assert lazy_calls > 0.5 * simulate(wl, [config])[0].totals["num_schedule_calls"], (seed, lazy_calls)


def test_lazy_windows_change_nothing_and_are_used():
    """Several lazy steps made at once (``LazyDecoders.window``) == the general path one step at a
    time (``accelerate=False``), step series and clock to the last bit included: linear and roofline
    clocks, arrivals in steps and seconds, a CPU tier. And windows do happen on these runs."""
    from simulator.clock.cost_model import StepCostTerms
    from simulator.engine.core import FastEngine
    from simulator.engine.results import assemble_result
    from tests.simulator.test_engine_cost_model import H100, LLAMA_8B_JSON

    roof = EngineConfig.from_dict({"cost_model": {"kind": "roofline", "model": LLAMA_8B_JSON, "gpu": H100}}).cost_model
    clocks = [None, roof, StepCostTerms(base_s=0.01, per_token_s=2e-5, per_req_s=1e-4)]
    used = 0
    for seed in range(15):
        rng = np.random.default_rng(seed)
        n = 120
        arrival = np.cumsum(rng.exponential(3.0, n))  # spread out: decode-only stretches between arrivals
        wl = Workload(prompt_len=rng.integers(1, 300, n), output_len=rng.integers(1, 250, n),
                      arrival=arrival * 0.02 if seed % 2 else np.floor(arrival), arrival_unit="s" if seed % 2 else "step")
        tier = {"cpu_tier": {"size_gib": 0.05}, "kv_bytes_per_block": 2 ** 21} if seed % 5 == 4 else {}
        config = EngineConfig(num_gpu_blocks=int(rng.integers(60, 2000)), block_size=int(rng.choice([4, 16])),
                              max_num_seqs=int(rng.integers(4, 64)), cost_model=clocks[seed % 3], **tier)
        out = []
        for accelerate in (True, False):
            sim = FastEngine(wl, config, record_steps=True, accelerate=accelerate)
            sim.run_all()
            out.append(assemble_result(sim, True, None))
            if accelerate:
                used += sim.shortcuts["window_steps"] > 0
        _same(out[0], out[1])
        for k, v in out[0].steps.items():
            assert np.array_equal(v, out[1].steps[k]), (seed, k)
    assert used >= 12


def test_peak_waiting_counts_arrivals_before_a_jump_that_max_steps_ends():
    """A request arrives while the running cap is full, a decode jump follows, and ``max_steps`` ends the run
    inside it: the queue of 1 still counts (it is in the step series; found by a random stress)."""
    wl = Workload(prompt_len=np.array([1, 1]), output_len=np.array([100, 5]), arrival=np.array([0.0, 5.0]))
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, max_num_seqs=1, max_steps=20)
    fast = simulate(wl, [cfg], record_steps=True)[0]
    assert fast.totals["peak_waiting"] == int(fast.steps["num_waiting"].max()) == 1
    assert simulate_scalar(wl, cfg).totals["peak_waiting"] == 1


def test_without_max_steps_the_step_limit_follows_from_the_workload(monkeypatch):
    """A configuration that names no ``max_steps`` gets a limit no finite run reaches (issue 35 item 4: the fixed
    2,000,000 used to stop a 1M-request run with requests unfinished and no word); a given one still holds."""
    import simulator.engine.config as config_module

    big = Workload(prompt_len=np.full(1000, 2000), output_len=np.full(1000, 1000), arrival=np.arange(1000.0) * 5)
    assert config_module.step_limit(EngineConfig(), big) == 2 * 3_000_000 + 4995 + 1000
    assert config_module.step_limit(EngineConfig(max_steps=20), big) == 20
    assert "max_steps" not in EngineConfig().to_dict() and EngineConfig.from_dict({}).max_steps is None
    assert EngineConfig.from_dict(EngineConfig(max_steps=7).to_dict()).max_steps == 7
    # With the floor lowered to 10 calls, a run that needs hundreds still finishes; a given limit of 10 stops it.
    monkeypatch.setattr(config_module, "MIN_STEP_LIMIT", 10)
    wl = Workload(prompt_len=np.full(20, 300), output_len=np.full(20, 30), arrival=np.zeros(20))
    cfg = EngineConfig(num_gpu_blocks=400, block_size=16, max_num_seqs=1, max_num_batched_tokens=64)
    res = simulate(wl, [cfg])[0]
    assert res.totals["unfinished"] == 0 and res.totals["num_schedule_calls"] > 20 * 30
    cut = simulate(wl, [EngineConfig(**{**cfg.__dict__, "max_steps": 10})])[0]
    assert cut.totals["unfinished"] > 0


tier_configs = st.builds(
    EngineConfig,
    num_gpu_blocks=st.integers(12, 80),
    block_size=st.sampled_from([4, 8, 16]),
    max_num_seqs=st.integers(1, 12),
    max_num_batched_tokens=st.sampled_from([16, 64, 256]),
    enable_prefix_caching=st.just(True),
    long_prefill_token_threshold=st.sampled_from([0, 8, 40]),
    watermark=st.sampled_from([0.0, 0.05]),
    async_scheduling=st.booleans(),
    kv_bytes_per_block=st.sampled_from([None, 2 ** 20]),
    cpu_tier=st.builds(dict, num_blocks=st.integers(0, 60), read_gbps=st.sampled_from([0.5, 50.0])),
    disk_tier=st.one_of(st.none(), st.builds(dict, num_blocks=st.integers(0, 80), read_gbps=st.just(1.0),
                                             read_latency_s=st.just(1e-3))),
    kv_offload_threshold=st.one_of(st.none(), st.sampled_from([0.1, 0.5, 0.9])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 25), shared=st.booleans(), unit=st.sampled_from(["step", "s"]),
       config=tier_configs)
def test_fast_engine_with_tiers_equals_scalar_reference(seed, n, shared, unit, config):
    """CPU and disk tiers and ``kv_offload_threshold`` against the scalar kernel, whose tiers are its own
    (:class:`tests.simulator.reference_tiers.ScalarTiers`), not the engine's."""
    wl = _workload(seed, n, shared, unit)
    fast = simulate(wl, [config], record_steps=True)[0]
    slow = simulate_scalar(wl, config, record_steps=True)
    _same(fast, slow)
    for k, v in fast.steps.items():
        assert np.array_equal(v, slow.steps[k]), k
