"""Configurations that share a schedule (simulator/batch/sharing.py) give exactly their own results.

A batch runs one leader per schedule and derives the configurations its run
covers (other KV block counts, caps above its peak of running requests). Every
derived result must be byte-identical, step series included, to simulating
that configuration alone, and sharing must actually happen where it can.
"""

from __future__ import annotations

import numpy as np
import pytest

import simulator.batch.runner as engine_module
from simulator.batch.runner import simulate
from simulator.clock.cost_model import StepCostTerms
from simulator.engine.config import EngineConfig
from simulator.workload.requests import Workload
from tests.budget import seeds


@pytest.fixture
def engine_runs(monkeypatch):
    """How many engines a simulate call ran."""
    runs = []

    class Counting(engine_module.FastEngine):
        def __init__(self, *a, **k):
            runs.append(a[1])
            super().__init__(*a, **k)

    monkeypatch.setattr(engine_module, "FastEngine", Counting)
    return runs


def _alone(wl: Workload, cfg: EngineConfig):
    return simulate(wl, [cfg], record_steps=True)[0]


def _assert_same_as_alone(wl: Workload, cfgs: list[EngineConfig], results) -> None:
    """Each result's JSON (step series included) equals the configuration's run alone; a difference is reported
    where it starts (pytest's diff of two whole result texts took 7 minutes to print)."""
    for c, r in zip(cfgs, results):
        got, alone = r.to_json(steps=True), _alone(wl, c).to_json(steps=True)
        if got != alone:
            at = next((i for i, (x, y) in enumerate(zip(got, alone)) if x != y), min(len(got), len(alone)))
            pytest.fail(f"{c}: differs from its run alone at character {at}: ...{got[max(0, at - 80):at + 80]}... "
                        f"against ...{alone[max(0, at - 80):at + 80]}...")


def _random_case(seed: int) -> tuple[Workload, list[EngineConfig]]:
    """A workload of own keys and a grid of block counts (both sides of the cliff) x caps."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 160))
    unit = "s" if rng.random() < 0.3 else "step"
    prompt = rng.integers(1, int(rng.choice([60, 200, 600])), n)
    output = rng.integers(1, int(rng.choice([20, 100, 300])), n)
    if unit == "s":
        arrival = np.sort(rng.exponential(float(rng.choice([0.002, 0.02, 0.1])), n).cumsum())
    else:
        arrival = np.floor(np.cumsum(rng.exponential(float(rng.choice([0.2, 1, 5])), n)))
    wl = Workload(prompt_len=prompt, output_len=output, arrival=arrival, arrival_unit=unit)
    bs = int(rng.choice([4, 8, 16]))
    chunked = bool(rng.random() < 0.85)
    base = dict(block_size=bs,
                max_num_batched_tokens=int(rng.choice([64, 256, 2048])) if chunked else 2048,
                enable_prefix_caching=bool(rng.random() < 0.8),
                enable_chunked_prefill=chunked,
                long_prefill_token_threshold=int(rng.choice([0, 0, 32])),
                scheduler_reserve_full_isl=bool(rng.random() < 0.7),
                async_scheduling=bool(rng.random() < 0.3),
                max_steps=int(rng.choice([2_000_000, 2_000_000, 500])))
    if rng.random() < 0.2:
        base["cost_model"] = StepCostTerms(base_s=0.005, per_token_s=1e-5, per_req_s=1e-4)
    need = int(np.ceil((prompt + output).max() / bs))
    blocks = sorted({int(x) for x in rng.integers(need // 2 + 2, need * int(rng.choice([4, 20, 60])) + 3, 6)})
    caps = sorted({int(x) for x in rng.choice([1, 2, 4, 8, 16, 64, 256], 3)})
    return wl, [EngineConfig(num_gpu_blocks=b, max_num_seqs=c, **base) for b in blocks for c in caps]


def test_random_grids_equal_their_configurations_alone(engine_runs):
    # CI: 7 grids of the first 14; a quick local run: 4 of them (tests/budget.py), the cheaper 12-configuration
    # ones. The 7 catch every break of simulator/batch/sharing.py that all 14 caught (of 11 one-line breaks tried:
    # a cap check ``>=`` made ``>``, 12 of 14 grids differ, 5 of these 7; a shadow pool's reuses off by one, all
    # grids); the other 9 breaks no grid caught, the 14 included.
    derived = total = 0
    for seed in seeds([2, 5, 6, 8, 9, 10, 13], local=[2, 6, 9, 10]):
        wl, cfgs = _random_case(seed)
        engine_runs.clear()
        results = simulate(wl, cfgs, record_steps=True)
        derived += len(cfgs) - len(engine_runs)
        total += len(cfgs)
        _assert_same_as_alone(wl, cfgs, results)
    assert 4 * derived >= total  # sharing happens (60 of 102 configurations with this code; 30 of 48 locally)


def test_random_grids_in_worker_processes_equal_their_configurations_alone():
    # two leaders at once: a leader's candidates then include larger block counts (checks that
    # failed in the leader must fail in them too)
    for seed in seeds(range(100, 110), local=range(100, 103)):
        wl, cfgs = _random_case(seed)
        _assert_same_as_alone(wl, cfgs, simulate(wl, cfgs, record_steps=True, processes=2))


def _steady(n: int = 300, seed: int = 3) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload(prompt_len=rng.integers(20, 400, n), output_len=rng.integers(5, 200, n),
                    arrival=np.floor(np.cumsum(rng.exponential(2.0, n))))


def test_block_counts_past_the_cliff_share_one_run_and_keep_their_own_block_metrics(engine_runs):
    wl = _steady()
    cfgs = [EngineConfig(num_gpu_blocks=b, block_size=16, max_num_seqs=8) for b in (2000, 1200, 900, 700, 600)]
    results = simulate(wl, cfgs, record_steps=True)
    assert len(engine_runs) == 1
    _assert_same_as_alone(wl, cfgs, results)
    # the derived pools are not copies: a smaller pool evicts sooner and reuses blocks sooner
    ev = [r.totals["prefix_cache_evictions"] for r in results]
    life = [r.totals["mean_block_lifetime_steps"] for r in results]
    assert len(set(ev)) == len(ev) and len(set(life)) == len(life)
    assert [r.totals["peak_kv_usage"] for r in results] == sorted(r.totals["peak_kv_usage"] for r in results)


def test_a_cap_above_the_peak_of_running_requests_gives_the_same_run(engine_runs):
    wl = _steady()
    peak = simulate(wl, [EngineConfig(num_gpu_blocks=5000, max_num_seqs=1000)])[0].totals["peak_running"]
    engine_runs.clear()
    cfgs = [EngineConfig(num_gpu_blocks=5000, max_num_seqs=c) for c in (1000, peak + 1, peak // 2)]
    results = simulate(wl, cfgs, record_steps=True)
    assert len(engine_runs) == 2  # a cap below the peak binds: it runs alone
    _assert_same_as_alone(wl, cfgs, results)
    assert results[0].totals == results[1].totals != results[2].totals


def test_a_leader_that_preempts_covers_no_other_block_count(engine_runs):
    wl = _steady(seed=5)
    cfgs = [EngineConfig(num_gpu_blocks=b, block_size=16, max_num_seqs=64) for b in (90, 80, 70)]
    results = simulate(wl, cfgs, record_steps=True)
    assert all(r.totals["preemptions"] for r in results)
    assert len(engine_runs) == 3
    _assert_same_as_alone(wl, cfgs, results)


def test_block_counts_just_below_the_need_of_a_check_run_alone(engine_runs):
    """Past the cliff the runs agree, just below it they must not be derived."""
    wl = _steady(seed=7)
    top = EngineConfig(num_gpu_blocks=5000, block_size=16, max_num_seqs=64)
    peak = simulate(wl, [top])[0].totals["peak_kv_blocks_used"]
    engine_runs.clear()
    cfgs = [top] + [EngineConfig(num_gpu_blocks=peak + d, block_size=16, max_num_seqs=64) for d in (40, 3, 1, 0, -5)]
    results = simulate(wl, cfgs, record_steps=True)
    assert 1 < len(engine_runs) < len(cfgs)
    _assert_same_as_alone(wl, cfgs, results)


def test_shared_prefixes_never_share(engine_runs):
    wl = _steady()
    shared = Workload(prompt_len=wl.prompt_len + 64, output_len=wl.output_len, arrival=wl.arrival,
                      prefix_id=np.zeros(wl.n, np.int64), prefix_len=np.array([64]))
    cfgs = [EngineConfig(num_gpu_blocks=b, block_size=16, max_num_seqs=8) for b in (3000, 2000)]
    simulate(shared, cfgs)
    assert len(engine_runs) == 2


def test_block_counts_with_a_cpu_tier_share_one_run_and_keep_their_own_tier_metrics(engine_runs):
    """Nobody reads the tier without preemptions (own keys): each pool's evictions fill its own tier."""
    wl = _steady()
    tier = dict(cpu_tier={"num_blocks": 700, "write_latency_s": 0.001},
                disk_tier={"num_blocks": 5000, "write_latency_s": 0.002}, kv_bytes_per_block=1 << 20)
    cfgs = [EngineConfig(num_gpu_blocks=b, block_size=16, max_num_seqs=8, **tier) for b in (2000, 1200, 900, 700)]
    results = simulate(wl, cfgs, record_steps=True)
    assert len(engine_runs) == 1
    _assert_same_as_alone(wl, cfgs, results)
    for key in ("disk_tier_blocks_offloaded", "tier_bytes_offloaded", "tier_offload_time_s"):
        got = [r.totals[key] for r in results]
        assert len(set(got)) == len(got), (key, got)  # a smaller pool evicts more, sooner
    assert all(r.totals["disk_tier_blocks_offloaded"] > 0 for r in results)
    # with preemptions the tier is read (a preempted request's blocks come back from it): alone
    engine_runs.clear()
    small = [EngineConfig(num_gpu_blocks=b, block_size=16, max_num_seqs=64, **tier) for b in (60, 50)]
    results = simulate(wl, small)
    assert all(r.totals["preemptions"] for r in results) and len(engine_runs) == 2


def test_worker_processes_give_the_same_results():
    wl = _steady()
    cfgs = [EngineConfig(num_gpu_blocks=b, block_size=16, max_num_seqs=c)
            for b in (2000, 900, 300, 120) for c in (4, 8, 300)]
    one = simulate(wl, cfgs, record_steps=True)
    two = simulate(wl, cfgs, record_steps=True, processes=2)
    assert [r.to_json(steps=True) for r in one] == [r.to_json(steps=True) for r in two]


def test_a_leader_covers_other_block_counts_only_where_its_checks_end_the_same_way():
    """Long prompts, short outputs: admissions wait for blocks without preempting anything. A leader
    whose admissions failed must not cover a larger pool, where they would have fitted."""
    from simulator.batch.sharing import covers, shared_pool_factory
    from simulator.engine.core import FastEngine
    from simulator.engine.results import assemble_result

    rng = np.random.default_rng(11)
    wl = Workload(prompt_len=rng.integers(200, 400, 200), output_len=rng.integers(1, 8, 200),
                  arrival=np.floor(np.cumsum(rng.exponential(0.5, 200))))
    derived, refused = [], []
    for lead_blocks in (30, 120, 200, 400):
        sizes = [lead_blocks + d for d in (-100, -5, 1, 5, 100, 1000) if lead_blocks + d > 2]
        sim = FastEngine(wl, EngineConfig(num_gpu_blocks=lead_blocks, block_size=16, max_num_seqs=32),
                         record_steps=True, pool_factory=shared_pool_factory(sizes))
        sim.run_all()
        assert sim.t["preemptions"] == 0
        for b in sizes:
            cfg = EngineConfig(num_gpu_blocks=b, block_size=16, max_num_seqs=32)
            got = covers(sim, cfg, sim._unservable)
            (refused if got is None else derived).append((lead_blocks, b))
            if got is not None:
                assert assemble_result(sim, True, None, *got).to_json(steps=True) == _alone(wl, cfg).to_json(steps=True)
    # 400 blocks never ran short (its closest check passed 105 blocks to spare); the others did
    assert derived == [(400, 300), (400, 395), (400, 401), (400, 405), (400, 500), (400, 1400)]
    assert len(refused) == 17
