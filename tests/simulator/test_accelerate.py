"""The engine's shortcuts change no result: ``accelerate=True`` against ``accelerate=False``.

``simulate(..., accelerate=False)`` runs every configuration alone, one schedule call at a
time through the general path (no lazy decoders, decode jumps, lazy windows, own-key pool
paths, kept tier loads, shared schedules). Every shortcut must give the same result, JSON
byte for byte with the step series, on random runs: plain, with KV tiers, and batches whose
configurations share schedules. ``FastEngine.shortcuts`` counts what the shortcuts did, so
each test also checks that the shortcut it is about was taken.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulator.batch.runner import simulate
from simulator.clock.cost_model import StepCostTerms
from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.engine.results import assemble_result
from simulator.workload.requests import Workload


def random_workload(rng: np.random.Generator, n: int) -> Workload:
    """Arrivals in steps or seconds; own keys, shared prefixes or conversations (parents)."""
    unit = str(rng.choice(["step", "s"]))
    kind = int(rng.integers(0, 3))
    prompt, out = rng.integers(1, 300, n), rng.integers(1, 200, n)
    arrival = (np.sort(rng.exponential(0.05, n).cumsum()) if unit == "s"
               else np.sort(rng.integers(0, 60, n)).astype(float))
    extra = {}
    if kind == 1:
        plen = np.array([32, 120])
        pid = rng.integers(-1, 2, n)
        prompt = prompt + np.where(pid >= 0, plen[np.maximum(pid, 0)], 0)
        extra = dict(prefix_id=pid, prefix_len=plen)
    elif kind == 2:
        parent = np.full(n, -1)
        for r in range(1, n):
            if rng.random() < 0.4:
                p = int(rng.integers(0, r))
                parent[r] = p
                prompt[r] = prompt[p] + out[p] + rng.integers(1, 30)
        extra = dict(parent=parent)
    return Workload(prompt_len=prompt, output_len=out, arrival=arrival, arrival_unit=unit, **extra)


def random_config(rng: np.random.Generator, tier: bool) -> EngineConfig:
    """Block pressure, caps, chunking, async scheduling, max_model_len, clocks; tiers when ``tier``."""
    chunked = bool(rng.random() < 0.8)
    kw = dict(num_gpu_blocks=int(rng.integers(30, 800)), block_size=int(rng.choice([4, 16])),
              max_num_seqs=int(rng.integers(2, 64)),
              max_num_batched_tokens=int(rng.choice([64, 256, 2048])) if chunked else 2048,
              enable_prefix_caching=bool(tier or rng.random() < 0.8), enable_chunked_prefill=chunked,
              long_prefill_token_threshold=int(rng.choice([0, 0, 64])),
              scheduler_reserve_full_isl=bool(rng.random() < 0.7), watermark=float(rng.choice([0.0, 0.0, 0.05])),
              async_scheduling=bool(rng.random() < 0.3), max_model_len=[None, None, None, 400][int(rng.integers(0, 4))],
              max_steps=30_000)
    if rng.random() < 0.2:
        kw["cost_model"] = StepCostTerms(base_s=0.01, per_token_s=2e-5, per_req_s=1e-4)
    if tier:
        kw.update(kv_bytes_per_block=2**20,
                  cpu_tier={"num_blocks": int(rng.integers(20, 400)), "read_gbps": float(rng.choice([1.0, 20.0]))})
        if rng.random() < 0.2:
            kw["disk_tier"] = {"num_blocks": int(rng.integers(20, 400))}
        if rng.random() < 0.2:
            kw["kv_offload_threshold"] = float(rng.choice([0.3, 0.8]))
    elif rng.random() < 0.15:
        kw["prefix_cache"] = "radix"
    return EngineConfig(**kw)


def assert_same(wl: Workload, configs: list[EngineConfig]) -> None:
    fast = simulate(wl, configs, record_steps=True)
    slow = simulate(wl, configs, record_steps=True, accelerate=False)
    for i, (a, b) in enumerate(zip(fast, slow)):
        assert a.to_json(steps=True) == b.to_json(steps=True), i


def engine_pair(wl: Workload, cfg: EngineConfig):
    """The JSON results (step series included) of one run with and one without shortcuts, and the
    accelerated engine's shortcut counts."""
    out, counts = [], None
    for accelerate in (True, False):
        sim = FastEngine(wl, cfg, record_steps=True, accelerate=accelerate)
        sim.run_all()
        out.append(assemble_result(sim, True, None).to_json(steps=True))
        if accelerate:
            counts = dict(sim.shortcuts)
        else:
            assert not any(sim.shortcuts.values()), sim.shortcuts
    assert out[0] == out[1]
    return counts


@pytest.mark.parametrize("block", range(2))
def test_random_plain_runs_are_equal_without_shortcuts(block):
    for seed in range(block * 8, block * 8 + 8):
        rng = np.random.default_rng(seed)
        assert_same(random_workload(rng, int(rng.integers(5, 80))), [random_config(rng, tier=False)])


@pytest.mark.parametrize("block", range(2))
def test_random_tier_runs_are_equal_without_shortcuts(block):
    for seed in range(1000 + block * 8, 1000 + block * 8 + 8):
        rng = np.random.default_rng(seed)
        assert_same(random_workload(rng, int(rng.integers(5, 80))), [random_config(rng, tier=True)])


@pytest.mark.parametrize("tier", [False, True])
def test_random_batches_sharing_schedules_are_equal_without_shortcuts(tier):
    """Batches over block counts and caps: the derived results equal each configuration run alone."""
    for seed in range(2000, 2005):
        rng = np.random.default_rng(seed)
        wl = random_workload(rng, int(rng.integers(5, 60)))
        base = random_config(rng, tier)
        configs = [base] + [replace(base, num_gpu_blocks=int(rng.integers(20, 1000)),
                                    max_num_seqs=int(rng.integers(2, 80))) for _ in range(4)]
        assert_same(wl, configs)


def test_every_shortcut_is_taken_on_these_runs():
    """Lazy steps, windows and jumps (plain runs), and kept loads and known release runs (tier runs)
    occur, and the results equal the general path's."""
    taken = dict.fromkeys(("lazy_steps", "window_steps", "jumped_steps", "kept_loads", "hit_runs"), 0)
    for seed in range(10):
        rng = np.random.default_rng(seed)
        n = 120
        arrival = np.cumsum(rng.exponential(3.0, n))  # spread out: decode-only stretches between arrivals
        wl = Workload(prompt_len=rng.integers(1, 300, n), output_len=rng.integers(1, 250, n),
                      arrival=arrival * 0.02 if seed % 2 else np.floor(arrival),
                      arrival_unit="s" if seed % 2 else "step")
        cfg = EngineConfig(num_gpu_blocks=int(rng.integers(60, 2000)), block_size=int(rng.choice([4, 16])),
                           max_num_seqs=int(rng.integers(4, 64)), async_scheduling=seed % 5 == 3)
        for k, v in engine_pair(wl, cfg).items():
            taken[k] += v
    for seed in range(8):
        rng = np.random.default_rng(seed)
        n = 60
        wl = Workload(prompt_len=rng.integers(50, 400, n), output_len=rng.integers(1, 200, n),
                      arrival=np.sort(rng.integers(0, 30, n)).astype(float))
        cfg = EngineConfig(num_gpu_blocks=int(rng.integers(40, 120)), block_size=16, max_num_seqs=int(rng.integers(8, 64)),
                           cpu_tier={"num_blocks": 400, "read_gbps": 1.0}, kv_bytes_per_block=2**20,
                           async_scheduling=seed % 2 == 1)
        for k, v in engine_pair(wl, cfg).items():
            taken[k] += v
    assert all(v > 0 for v in taken.values()), taken


def parents_workload(rng: np.random.Generator, n: int, into_outputs: bool) -> Workload:
    """Requests sharing leading tokens with an earlier one (``parent``, ``parent_len``): inside the parent's
    prompt, as a trace's shared ``hash_ids`` blocks are (a shared system prompt, a tree of prefixes), or, with
    ``into_outputs``, some follow-ups re-reading their parent's whole context, its output included (multi-turn)."""
    prompt, out = rng.integers(1, 300, n), rng.integers(1, 200, n)
    parent, plen = np.full(n, -1), np.full(n, -1)
    for r in range(1, n):
        if rng.random() < 0.6:
            p = int(rng.integers(0, r))
            parent[r] = p
            if into_outputs and rng.random() < 0.5:
                prompt[r] = prompt[p] + out[p] + rng.integers(1, 30)  # the whole context (parent_len -1)
            else:
                prompt[r] = max(int(prompt[r]), int(rng.integers(1, prompt[p] + 1)))
                plen[r] = int(rng.integers(1, min(prompt[p], prompt[r]) + 1))
    arrival = np.sort(rng.exponential(0.05, n).cumsum())
    return Workload(prompt_len=prompt, output_len=out, arrival=arrival, arrival_unit="s", parent=parent,
                    parent_len=plen)


@pytest.mark.parametrize("tier", [False, True])
def test_parents_inside_prompts_take_lazy_decoders_with_async_scheduling(tier):
    """A trace's shared prefixes (parents whose shared blocks lie in their prompt) defer publication: lazy
    decoders under asynchronous scheduling, results equal to the general path's; a follow-up that re-reads its
    parent's output turns the shortcut off (it looks up a decoder's blocks), results equal too."""
    lazy = shared_runs = 0
    for seed in range(6):
        rng = np.random.default_rng(3000 + seed)
        for into_outputs in (False, True):
            wl = parents_workload(rng, int(rng.integers(20, 70)), into_outputs)
            kw = dict(kv_bytes_per_block=2**20, cpu_tier={"num_blocks": int(rng.integers(20, 400)), "read_gbps": 1.0}
                      ) if tier else {}
            cfg = EngineConfig(num_gpu_blocks=int(rng.integers(40, 600)), block_size=int(rng.choice([4, 16])),
                               max_num_seqs=int(rng.integers(2, 48)), max_num_batched_tokens=int(rng.choice([64, 256, 2048])),
                               async_scheduling=seed % 3 != 2, max_steps=30_000, **kw)
            engine = FastEngine(wl, cfg)
            B = cfg.block_size
            whole = np.flatnonzero((wl.parent >= 0) & (wl.parent_len < 0))  # follow-ups re-reading a whole context
            p = wl.parent[whole]
            shared = bool(((wl.prompt_len[p] + wl.output_len[p]) // B * B > wl.prompt_len[p]).any())
            assert engine.outputs_shared == shared
            shared_runs += shared
            assert engine.defer_pub == (not shared)
            if cfg.async_scheduling:
                assert ("lazy_decoders" in engine.accelerators) == (not shared)
            counts = engine_pair(wl, cfg)
            if cfg.async_scheduling and not shared:
                lazy += counts["lazy_steps"]
    assert lazy > 0 and shared_runs > 0
