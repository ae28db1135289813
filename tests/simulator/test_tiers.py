"""CPU / disk KV tiers: LRU per tier, demotion, onboarding, the seed 004 benefit and a metamorphic law."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.batch.runner import simulate
from simulator.engine.config import ConfigError, EngineConfig
from simulator.engine.core import FastEngine
from simulator.engine.tiers import KvTier, LruKeys, TierChain
from simulator.workload.requests import Workload
from tests.budget import seeds

# Llama 3.1 8B: 131,072 KV bytes per token (docs/sizing.md), 16-token blocks
BPB = 16 * 131_072


# -- the tier store --------------------------------------------------------------


def test_lru_keeps_the_most_recent_keys_and_pushes_out_the_oldest():
    lru = LruKeys(3, 100)
    assert lru.put(np.array([1, 2, 3])) == (3, pytest.approx(np.array([])))
    new, out = lru.put(np.array([1, 4]))  # 1 refreshed, 4 new: 2 is now the oldest
    assert new == 1 and out.tolist() == [2]
    assert lru.contains(np.array([1, 2, 3, 4])).tolist() == [True, False, True, True]
    new, out = lru.put(np.arange(10, 15))  # more than fits: the last three stay
    assert out.tolist() == [3, 1, 4, 10, 11]  # in the order they left: 3, 1, 4 first, then 10 and 11
    assert new == 5 and lru.contains(np.array([12, 13, 14])).all() and lru.size == 3


def test_a_zero_sized_tier_passes_everything_down():
    lru = LruKeys(0, 10)
    new, out = lru.put(np.array([1, 2]))
    assert new == 0 and out.tolist() == [1, 2]


def test_demotion_cascades_cpu_to_disk_and_then_drops():
    chain = TierChain([("cpu", KvTier(num_blocks=2)), ("disk", KvTier(num_blocks=3))], BPB, 100)
    chain.demote(np.array([1, 2, 3, 4, 5, 6]))
    chain.flush()  # demotions apply in order before the tiers are read
    assert chain.lru[0].contains(np.array([5, 6])).all()
    assert chain.lru[1].contains(np.array([2, 3, 4])).all()
    # every block was written to the CPU tier; 1, 2, 3, 4 were pushed on to disk, and 1 out of it
    assert chain.dropped == 1 and chain.offloaded == [6, 4]
    assert chain.totals()["tier_bytes_offloaded"] == 10 * BPB
    # a prefix continuing in the tiers: 5 (cpu), 3 (disk), then 1 is gone
    assert chain.match(np.array([5, 3, 1, 6])) == [1, 1]
    assert chain.match(np.array([9, 5])) == [0, 0]


class _ReferenceChain:
    """Tiers as ordered dicts, one key at a time: the meaning of TierChain's bulk operations."""

    def __init__(self, caps):
        self.caps = caps
        self.tiers = [dict() for _ in caps]
        self.offloaded = [0] * len(caps)
        self.dropped = 0

    def put(self, i, k):
        if i == len(self.tiers):
            self.dropped += 1
            return
        d = self.tiers[i]
        if k in d:
            d[k] = d.pop(k)  # most recent
        elif self.caps[i] <= 0:
            self.put(i + 1, k)  # a zero-sized tier passes it down unwritten
        else:
            d[k] = None
            self.offloaded[i] += 1
            if len(d) > self.caps[i]:
                oldest = next(iter(d))
                del d[oldest]
                self.put(i + 1, oldest)

    def match(self, keys):
        counts = [0] * len(self.tiers)
        for k in keys:
            where = [i for i, d in enumerate(self.tiers) if k in d]
            if not where:
                break
            counts[where[0]] += 1
        return counts


def _lru_order(lru):
    seg = lru.fifo[lru.head:lru.tail]
    return seg[lru.pos[seg] == np.arange(lru.head, lru.tail)].tolist()


@pytest.mark.parametrize("seed", range(40))
def test_bulk_demotions_equal_one_key_at_a_time_wherever_the_tiers_are_read(seed):
    """Repeats, refreshes, pushes down the chain and reads at random points: the state and every
    counter equal the one-key-at-a-time reference, so when demotions are applied changes nothing."""
    rng = np.random.default_rng(seed)
    caps = [int(rng.choice([0, 1, 2, 3, 5, 8, 40, 300, 2000]))]
    if rng.random() < 0.6:
        caps.append(int(rng.choice([0, 1, 4, 9, 50])))
    nkeys = int(rng.choice([6, 30, 400]))
    chain = TierChain([(n, KvTier(num_blocks=c)) for n, c in zip(("cpu", "disk"), caps)], BPB, nkeys)
    ref = _ReferenceChain(caps)
    for _ in range(int(rng.integers(5, 60))):
        op = rng.random()
        if op < 0.6:
            size = int(rng.choice([0, 1, 3, 10, 200, 700]))
            keys = rng.integers(0, nkeys, size) if rng.random() < 0.7 else rng.permutation(nkeys)[:size]
            chain.demote(keys)
            for k in keys.tolist():
                ref.put(0, k)
        elif op < 0.8:
            keys = rng.permutation(nkeys)[:int(rng.integers(1, 8))]
            assert chain.match(keys) == ref.match(keys.tolist())
        elif op < 0.9:
            keys = rng.integers(0, nkeys, int(rng.integers(1, 6)))
            keys = np.array(list(dict.fromkeys(keys.tolist())))
            counts = chain.match(keys)
            run = keys[:sum(counts)]
            if rng.random() < 0.5:  # the engine's allocation for the load may evict more first
                more = rng.integers(0, nkeys, int(rng.choice([1, 3, 20])))
                chain.demote(more)
                for k in more.tolist():
                    ref.put(0, k)
            chain.onboard(run, counts, 16, 0.0)
            for k in run.tolist():  # loaded keys are refreshed in the tiers holding them
                for d in ref.tiers:
                    if k in d:
                        d[k] = d.pop(k)
        else:
            chain.flush()
    chain.flush()
    assert chain.offloaded == ref.offloaded and chain.dropped == ref.dropped
    for lru, d in zip(chain.lru, ref.tiers):
        assert _lru_order(lru) == list(d) and lru.size == len(d)


def test_a_read_that_pending_demotions_cannot_change_leaves_them_pending():
    """One tier: a match whose answer is sure without applying the pending demotions does not apply
    them, and an onboard queues its refresh behind them; the result equals the reference."""
    chain = TierChain([("cpu", KvTier(num_blocks=100))], BPB, 1000)
    ref = _ReferenceChain([100])
    for keys in (np.arange(100), np.arange(200, 205)):  # 0..99 held, then 5 demotions pending
        chain.demote(keys)
        for k in keys.tolist():
            ref.put(0, k)
        if keys[0] == 0:
            chain.flush()
    # 50, 51 are held with 50 keys older than them: 5 puts cannot push them out; 202 is queued
    assert chain.match(np.array([50, 51, 202, 300])) == ref.match([50, 51, 202, 300]) == [3]
    assert chain._npending == 5
    chain.onboard(np.array([50, 51, 202]), [3], 16, 0.0)
    assert chain._npending == 8  # the refresh waits behind the demotions
    for k in (50, 51, 202):
        ref.tiers[0][k] = ref.tiers[0].pop(k)
    # key 2 has 2 keys older than it: 8 queued puts might push it out, so the demotions are applied
    assert chain.match(np.array([2, 3])) == ref.match([2, 3]) == [0]
    assert chain._npending == 0
    assert _lru_order(chain.lru[0]) == list(ref.tiers[0]) and chain.offloaded == ref.offloaded


def test_the_final_demotions_of_a_run_count_every_block_written():
    """More distinct new keys than the CPU tier holds, in one flush: the old keys leave first, then
    the first new ones; every block counts as written to the CPU tier (none passes straight through)."""
    chain = TierChain([("cpu", KvTier(num_blocks=4)), ("disk", KvTier(num_blocks=100))], BPB, 1000)
    chain.demote(np.array([1, 2, 3]))
    chain.flush()
    chain.demote(np.arange(100, 110))
    t = chain.totals()
    assert _lru_order(chain.lru[0]) == [106, 107, 108, 109]
    assert _lru_order(chain.lru[1]) == [1, 2, 3, 100, 101, 102, 103, 104, 105]
    assert chain.offloaded == [13, 9] and t["cpu_tier_blocks_offloaded"] == 13
    spec = KvTier(num_blocks=1)
    assert t["tier_offload_time_s"] == pytest.approx(2 * spec.write_latency_s + 22 * BPB / (spec.write_gbps * 1e9))


def test_onboard_time_is_latency_plus_bytes_over_bandwidth_and_loads_queue_on_the_link():
    tier = KvTier(num_blocks=100, read_gbps=10.0, read_latency_s=0.001)
    chain = TierChain([("cpu", tier)], BPB, 100)
    chain.demote(np.arange(10))
    one = 0.001 + 5 * BPB / 10e9
    assert chain.onboard(np.arange(5), [5], 16, now=1.0) == pytest.approx(1.0 + one)
    # a second load at the same moment waits for the first
    assert chain.onboard(np.arange(5, 10), [5], 16, now=1.0) == pytest.approx(1.0 + 2 * one)
    assert chain.hit_tokens == [160] and chain.onboarded == [10]


def test_size_in_gib_is_converted_with_the_bytes_per_block():
    cfg = EngineConfig(cpu_tier={"size_gib": 8}, kv_bytes_per_block=BPB)
    assert cfg.cpu_tier.blocks(BPB) == 8 * 1024 ** 3 // BPB == 4096


@pytest.mark.parametrize("kw, msg", [
    (dict(cpu_tier={"size_gib": 8}), "kv_bytes_per_block"),
    (dict(cpu_tier={"num_blocks": 8, "size_gib": 1}, kv_bytes_per_block=BPB), "exactly one"),
    (dict(cpu_tier={"num_blocks": -1}), "cpu_tier.num_blocks"),
    (dict(cpu_tier={"num_blocks": 8, "read_gbps": 0}), "cpu_tier.read_gbps"),
    (dict(cpu_tier={"num_blocks": 8, "speed": 3}), "cpu_tier.speed"),
    (dict(disk_tier={"num_blocks": 8}), "disk_tier: needs a cpu_tier"),
    (dict(cpu_tier={"num_blocks": 8}, enable_prefix_caching=False), "enable_prefix_caching"),
    (dict(kv_offload_threshold=0.5), "needs a cpu_tier"),
    (dict(cpu_tier={"num_blocks": 8}, kv_offload_threshold=1.5), "kv_offload_threshold"),
    (dict(cpu_tier="big"), "cpu_tier"),
])
def test_bad_tiers_name_the_field(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        EngineConfig(**kw)


# -- seed 004: long prefixes cycling through a GPU that holds fewer of them ------------


def _seed_004_workload(n: int = 60, prefixes: int = 5, length: int = 20_000) -> Workload:
    """KVBM's demo (seed 004): 20K-token prefixes (5 of them) cycling, one request every 2 s."""
    pid = np.arange(n) % prefixes
    return Workload(prompt_len=np.full(n, length + 200), output_len=np.full(n, 50),
                    arrival=np.arange(n) * 2.0, arrival_unit="s", prefix_id=pid,
                    prefix_len=np.full(prefixes, length))


def _seed_004(**tier) -> tuple[dict, np.ndarray]:
    wl = _seed_004_workload()
    # 4,000 blocks of 16 tokens hold 3 of the 5 prefixes (1,250 blocks each); Llama 3.1 8B on H100 roofline-like
    # linear clock: 10 ms a step + 20 us a token (a 20K prefill takes 0.41 s)
    cfg = EngineConfig(num_gpu_blocks=4000, block_size=16, kv_bytes_per_block=BPB,
                       cost_model={"kind": "linear", "base_s": 0.01, "per_token_s": 2e-5}, **tier)
    r = simulate(wl, [cfg])[0]
    return r.totals, r.requests["first_token_time_s"] - wl.arrival


def test_seed_004_a_cpu_tier_turns_recomputed_prefixes_into_hits_and_cuts_ttft():
    base, ttft0 = _seed_004()
    cpu, ttft1 = _seed_004(cpu_tier={"size_gib": 40})  # 20,480 blocks: every prefix fits
    # LRU cycling through 5 prefixes with room for 3: the GPU alone never hits
    assert base["prefix_cache_hit_rate"] < 0.01
    assert cpu["prefix_cache_hit_rate"] > 0.85
    assert cpu["cpu_tier_hit_tokens"] > 0.8 * cpu["prefix_cache_queries"]
    # loading 1,250 blocks (2.6 GB) at 50 GB/s takes ~52 ms instead of a 0.41 s prefill
    assert np.median(ttft1) < np.median(ttft0) / 3
    assert cpu["tier_bytes_onboarded"] == cpu["cpu_tier_blocks_onboarded"] * BPB


def test_seed_004_a_tier_too_slow_to_beat_recompute_shows_no_gain():
    _, ttft0 = _seed_004()
    slow, ttft1 = _seed_004(cpu_tier={"size_gib": 40, "read_gbps": 0.5})  # 2.6 GB take 5 s to load
    assert slow["prefix_cache_hit_rate"] > 0.85  # the blocks are there ...
    assert np.median(ttft1) >= np.median(ttft0)  # ... but waiting for them is no faster than recomputing


def test_a_disk_tier_catches_what_a_small_cpu_tier_pushes_out():
    cpu_only, _ = _seed_004(cpu_tier={"num_blocks": 1500})
    both, _ = _seed_004(cpu_tier={"num_blocks": 1500}, disk_tier={"num_blocks": 20_000, "read_gbps": 5.0})
    assert both["prefix_cache_hit_rate"] > cpu_only["prefix_cache_hit_rate"] + 0.2
    assert both["disk_tier_hit_tokens"] > 0 and both["tier_blocks_dropped"] == 0


def test_offload_threshold_keeps_gpu_occupancy_at_or_under_it():
    wl = _seed_004_workload()
    usable = 3999
    for thr in (0.5, 0.8):
        cfg = EngineConfig(num_gpu_blocks=4000, block_size=16, cpu_tier={"num_blocks": 20_000},
                           kv_offload_threshold=thr)
        sim = FastEngine(wl, cfg)
        sim.run_all()
        occupied = usable - sim.pool.top  # blocks in use or cached on the GPU
        assert occupied <= int(thr * usable)
        assert sim.tiers.offloaded[0] > 0
    plain = FastEngine(wl, EngineConfig(num_gpu_blocks=4000, block_size=16, cpu_tier={"num_blocks": 20_000}))
    plain.run_all()
    assert usable - plain.pool.top > int(0.8 * usable)


def test_configurations_differing_in_tiers_run_in_one_batch_as_alone():
    wl = _seed_004_workload(n=30)
    cfgs = [EngineConfig(num_gpu_blocks=4000, cpu_tier=t, kv_bytes_per_block=BPB)
            for t in (None, {"size_gib": 10}, {"size_gib": 40}, {"size_gib": 40, "read_gbps": 1.0})]
    batch = simulate(wl, cfgs)
    for cfg, r in zip(cfgs, batch):
        alone = simulate(wl, [cfg])[0]
        assert alone.totals == r.totals
        assert np.array_equal(alone.requests["first_token_time_s"], r.requests["first_token_time_s"])


# -- metamorphic: a tier never lowers the hit rate -------------------------------------


def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    P = int(rng.integers(1, 6))
    plen = rng.integers(16, 600, P)
    pid = rng.integers(-1, P, n)
    prompt = rng.integers(1, 300, n) + np.where(pid >= 0, plen[np.maximum(pid, 0)], 0)
    unit = "s" if seed % 2 else "step"
    arrival = np.sort(rng.exponential(0.3 if unit == "s" else 5, n).cumsum())
    if unit == "step":
        arrival = np.floor(arrival)
    wl = Workload(prompt_len=prompt, output_len=rng.integers(1, 60, n), arrival=arrival, arrival_unit=unit,
                  prefix_id=pid, prefix_len=plen)
    B = int(rng.choice([4, 16]))
    need = int(((prompt + 60) // B + 2).max())
    kw = dict(num_gpu_blocks=int(rng.integers(need, need * 4)), block_size=B,
              async_scheduling=bool(rng.integers(0, 2)))
    return wl, kw, int(rng.integers(0, 3 * kw["num_gpu_blocks"]))


@pytest.mark.parametrize("seed", range(0, 120))
def test_adding_a_cpu_tier_never_lowers_the_hit_rate(seed):
    wl, kw, cpu_blocks = _random_case(seed)
    without = simulate(wl, [EngineConfig(**kw)])[0].totals
    with_ = simulate(wl, [EngineConfig(**kw, cpu_tier={"num_blocks": cpu_blocks})])[0].totals
    assert with_["prefix_cache_hit_rate"] >= without["prefix_cache_hit_rate"] - 1e-12
    # and nothing is lost on the way
    assert with_["finished"] + with_["dropped_unservable"] + with_["unfinished"] == wl.n
    assert with_["unfinished"] == 0
    assert with_["cpu_tier_hit_tokens"] <= with_["prefix_cache_hits"] + with_["preempted_prefix_cache_hits"] + \
        with_["cpu_tier_blocks_onboarded"] * kw["block_size"]


def _tier_case(seed: int):
    """Random small workload and tiered config (sync or async, vLLM or radix cache, offload threshold)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 250))
    unit = str(rng.choice(["step", "s"]))
    rng.random()
    arrival = np.sort(rng.exponential(0.02, n).cumsum()) if unit == "s" else None
    wl = Workload(prompt_len=rng.integers(1, 600, n), output_len=rng.integers(1, 200, n),
                  arrival=arrival if arrival is not None else np.sort(rng.integers(0, n, n)).astype(float),
                  arrival_unit=unit)
    cfg = EngineConfig(
        num_gpu_blocks=int(rng.integers(60, 1500)), block_size=int(rng.choice([4, 16])),
        max_num_seqs=int(rng.integers(2, 48)), async_scheduling=bool(rng.random() < 0.4),
        long_prefill_token_threshold=int(rng.choice([0, 64])), watermark=float(rng.choice([0.0, 0.01])),
        prefix_cache=str(rng.choice(["vllm", "vllm", "radix"])),
        cpu_tier={"num_blocks": int(rng.integers(10, 2000)), "read_gbps": float(rng.choice([1.0, 50.0])),
                  "read_latency_s": 0.0001},
        disk_tier=({"num_blocks": int(rng.integers(10, 4000))} if rng.random() < 0.4 else None),
        kv_bytes_per_block=2 * 1024 * 1024,
        kv_offload_threshold=(float(rng.choice([0.5, 0.9])) if rng.random() < 0.3 else None))
    return wl, cfg


def _pressure_tier_case(seed: int, **over):
    """:func:`_tier_case` under block pressure, with one CPU tier and the vLLM cache (preemptions and loads)."""
    from dataclasses import replace

    wl, cfg = _tier_case(seed)
    rng = np.random.default_rng(seed)
    return wl, replace(cfg, num_gpu_blocks=int(rng.integers(40, 200)), disk_tier=None, kv_offload_threshold=None,
                       prefix_cache="vllm", max_num_seqs=int(rng.integers(8, 64)), **over)


#: The random tier cases whose shortcut run :func:`test_own_keys_with_tiers_equal_the_hash_table_pool` compares
#: with the general path (tests/budget.py: all 8 in CI, cases 0 and 3 locally).
OWN_KEYS_SEEDS = seeds(range(8), local=[0, 3])
#: Cases that once differed in ``tier_offload_time_s`` only (a latency per allocation call).
OFFLOAD_TIME_SEEDS = [2, 4, 6, 15, 31, 35, 40]


@pytest.mark.parametrize("seed", [s for s in OFFLOAD_TIME_SEEDS if s not in OWN_KEYS_SEEDS])
def test_lazy_decoders_with_tiers_change_nothing_offload_time_included(seed):
    """Copy times count one write latency per engine step with evictions, however allocations were grouped.

    :data:`OFFLOAD_TIME_SEEDS` once differed in ``tier_offload_time_s`` only; those among :data:`OWN_KEYS_SEEDS`
    (2, 4 and 6 in CI) are the same two runs compared the same way in the own-keys test, so they are run once.
    """
    from tests.simulator.test_engine_properties import assert_lazy_path_changes_nothing

    assert_lazy_path_changes_nothing(*_tier_case(seed))


def _equal_runs(out, seed) -> None:
    """The shortcut run ``out[0]`` and the general one ``out[1]`` are equal: their JSON (step series included),
    and, as :func:`tests.simulator.test_engine_properties.assert_lazy_path_changes_nothing` compares them, totals,
    per-request columns (NaN apart from infinities) and step series."""
    from tests.simulator.test_engine_properties import _same

    assert out[0].to_json(steps=True) == out[1].to_json(steps=True), seed
    _same(out[0], out[1])
    for k, v in out[0].steps.items():
        assert np.array_equal(v, out[1].steps[k]), (seed, k)


def _lazy_path_changes_nothing(wl: Workload, cfg: EngineConfig) -> tuple[int, dict]:
    """:func:`tests.simulator.test_engine_properties.assert_lazy_path_changes_nothing`, also returning the
    shortcut run's totals (they are the ones ``simulate`` gives: no third run to read them)."""
    from simulator.engine.results import assemble_result

    out, lazy = [], []
    for accelerate in (True, False):
        sim = FastEngine(wl, cfg, record_steps=True, accelerate=accelerate)
        sim.run_all()
        out.append(assemble_result(sim, True, None))
        lazy.append(sim.shortcuts["lazy_steps"])
    _equal_runs(out, None)
    assert lazy[1] == 0
    return lazy[0], out[0].totals


def test_async_lazy_decoders_with_tiers_change_nothing():
    """Asynchronous scheduling takes the lazy path with KV tiers too (loads, preemptions, step series)."""
    from dataclasses import replace

    cases = seeds(range(12), local=range(3))  # tests/budget.py: all 12 in CI
    lazy_calls = loaded = 0
    for seed in cases:
        wl, cfg = _tier_case(seed)
        cfg = replace(cfg, async_scheduling=True)
        lazy, totals = _lazy_path_changes_nothing(wl, cfg)
        lazy_calls += lazy > 0
        loaded += totals["cpu_tier_blocks_onboarded"] > 0
    # the lazy path ran, with loads from a tier (12 and 9 of the 12 cases with this code; 3 and 2 of 3 locally)
    assert 3 * lazy_calls >= 2 * len(cases) and 3 * loaded >= len(cases)


def test_loads_behind_a_blocked_head_do_not_livelock():
    """Requests behind the head kept onboarding into the blocks the head needed, for ever.

    Seed 40 of the random tier cases (async, 185 usable blocks of 4 tokens, a 1 GB/s CPU tier, offload
    at 50 % occupancy): after a load stall no request loads until the head then has finished.
    """
    wl, cfg = _tier_case(40)
    assert cfg.async_scheduling and cfg.num_gpu_blocks == 186
    cfg = EngineConfig(**{**cfg.__dict__, "max_steps": 50_000})
    r = simulate(wl, [cfg])[0]
    t = r.totals
    assert t["unfinished"] == 0 and t["finished"] + t["dropped_unservable"] == wl.n
    assert t["tier_load_stalls"] >= 1


def test_a_stalled_head_does_not_load_again_for_ever():
    """The head of the queue kept onboarding its own blocks after each stall (async, 20 usable blocks of
    16 tokens, a 16-token budget without chunked prefill, a CPU tier): after a stall no request loads
    until that head has finished, so it proceeds as it would without a tier."""
    rng = np.random.default_rng(5093)  # case 93 of a random termination test
    n = int(rng.integers(5, 80))
    unit = str(rng.choice(["step", "s"]))
    pid = rng.integers(-1, 2, n) if rng.random() < 0.4 else np.full(n, -1)
    pl = np.array([32, 120])
    prompt = rng.integers(1, 400, n) + np.where(pid >= 0, pl[np.maximum(pid, 0)], 0)
    wl = Workload(prompt_len=prompt, output_len=rng.integers(1, 300, n),
                  arrival=(np.sort(rng.exponential(0.05, n).cumsum()) if unit == "s"
                           else np.sort(rng.integers(0, 20, n)).astype(float)),
                  arrival_unit=unit, prefix_id=pid, prefix_len=pl)
    cfg = EngineConfig(num_gpu_blocks=21, block_size=16, max_num_seqs=14, max_num_batched_tokens=16,
                       enable_chunked_prefill=False, long_prefill_token_threshold=8, async_scheduling=True,
                       max_steps=20_000, cpu_tier={"num_blocks": 200, "read_gbps": 1.0},
                       kv_bytes_per_block=2**20, kv_offload_threshold=0.5)
    t = simulate(wl, [cfg])[0].totals
    assert t["unfinished"] == 0 and t["finished"] + t["dropped_unservable"] == wl.n
    assert t["finished"] >= 1 and t["num_schedule_calls"] < 5_000


def test_own_keys_with_tiers_equal_the_hash_table_pool():
    """With own keys a tier run keeps no hash table for blocks in use (registrations, keys written when
    blocks enter the free queue); it must equal the same run on the general hash-table pool
    (``accelerate=False``), step series included, with loads, stalls and preemptions happening."""
    from simulator.engine.results import assemble_result

    seen = dict(preemptions=0, onboarded=0, stalls=0)
    for seed in OWN_KEYS_SEEDS:  # tests/budget.py; only case 3 stalls
        wl, cfg = _tier_case(seed)
        out = []
        for accelerate in (True, False):
            sim = FastEngine(wl, cfg, record_steps=True, accelerate=accelerate)
            assert sim.own_keys == accelerate and sim.pool.defer_evictions == accelerate
            sim.run_all()
            assert accelerate or not sim.shortcuts["lazy_steps"]  # the general path takes no lazy step
            out.append(assemble_result(sim, True, None))
        _equal_runs(out, seed)  # also the offload-time check of the lazy test for its seeds among these
        t = out[0].totals
        seen["preemptions"] += t["preemptions"]
        seen["onboarded"] += t["cpu_tier_blocks_onboarded"]
        seen["stalls"] += t["tier_load_stalls"]
    assert all(v > 0 for v in seen.values()), seen


def test_load_and_read_shortcuts_change_nothing():
    """The tier path's shortcuts against the general path (``accelerate=False``), on runs with loads
    and preemptions: a request whose loads are done keeps its blocks as hits (not released and looked
    up again); a tiered head's GPU hits come from its release run (not a lookup), in the head check
    and, with synchronous scheduling, at admission; a match or an onboard whose answer is sure leaves
    the pending demotions pending; a flush of keys that cannot repeat skips the checks. Results and
    step series must be equal, and each shortcut must have been taken."""
    from simulator.engine.results import assemble_result

    taken = dict(kept=0, hit_run=0, sure=0, fresh=0)
    for seed in seeds(range(8), local=[2, 6]):  # tests/budget.py; both take every shortcut
        wl, cfg = _pressure_tier_case(seed)
        out = []
        for accelerate in (True, False):
            sim = FastEngine(wl, cfg, record_steps=True, accelerate=accelerate)
            if accelerate:
                taken["fresh"] += sim.tiers.fresh
            sim.run_all()
            out.append(assemble_result(sim, True, None))
            if accelerate:
                taken["kept"] += sim.shortcuts["kept_loads"]
                taken["hit_run"] += sim.shortcuts["hit_runs"]
                taken["sure"] += sim.tiers.sure_reads
            else:
                assert not sim.tiers.fresh and not sim.tiers.sure_reads
        assert out[0].to_json(steps=True) == out[1].to_json(steps=True), seed
    assert all(v > 0 for v in taken.values()), taken


def test_a_load_from_the_release_run_holds_its_keys_only_cached_carriers():
    """A load that starts from a waiting request's release run (synchronous scheduling) skips the
    kept-blocks check (``FastPool.sole_carriers``); the check must hold for every such load."""
    checked = 0
    for seed in range(16):
        wl, cfg = _pressure_tier_case(seed, async_scheduling=False)
        sim = FastEngine(wl, cfg)
        keep = sim.loads.keep_loaded

        def checked_keep(q, sim=sim, keep=keep, seed=seed):
            nonlocal checked
            if sim.load_from_run[q] and sim.requests.held[q] == sim.requests.ncached[q]:
                n = int(sim.requests.held[q])
                assert sim.pool.sole_carriers(int(sim.koff[q]), n, (int(sim.requests.tok[q]) - 1) // sim.B), (seed, q)
                checked += 1
            return keep(q)
        sim.loads.keep_loaded = checked_keep
        sim.run_all()
    assert checked > 100, checked


def test_offload_threshold_runs_take_no_jumps():
    """``kv_offload_threshold`` offloads after every step, so a run must step one at a time: the same
    as with jumps switched off (a random stress found 280 of 400 such runs differing when jumps skipped
    the per-step offloads: block idle and lifetime means, offload time)."""
    from simulator.engine.results import assemble_result

    for seed in range(20):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 30))
        wl = Workload(prompt_len=rng.integers(1, 40, n), output_len=rng.integers(1, 60, n),
                      arrival=np.sort(rng.integers(0, 30, n)).astype(float))
        cfg = EngineConfig(num_gpu_blocks=int(rng.integers(12, 60)), block_size=4, max_num_seqs=int(rng.integers(1, 6)),
                           cpu_tier={"num_blocks": 100}, kv_offload_threshold=float(rng.choice([0.1, 0.5, 0.9])))
        out = []
        for accelerate in (True, False):  # offloads after every step: no jumps nor windows even accelerated
            sim = FastEngine(wl, cfg, record_steps=True, accelerate=accelerate)
            sim.run_all()
            assert not sim.shortcuts["jumped_steps"] and not sim.shortcuts["window_steps"]
            out.append(assemble_result(sim, True, None).to_json(steps=True))
        assert out[0] == out[1], seed


def test_cpu_tier_runs_equal_the_scalar_reference():
    """The test-only scalar kernel with a CPU tier (demotion on eviction, loads at admission, load
    waits and stalls) against the engine, shortcuts on and off: totals, tier figures, per-request
    columns and step series equal; loads and stalls happen on these runs. Odd seeds share prefixes."""
    seen = dict(onboarded=0, stalls=0, preemptions=0)
    for seed in range(8):
        wl, cfg, _ = _shared_prefix_case(seed)
        totals = _equal_to_the_reference(wl, cfg, seed)
        seen["onboarded"] += totals["cpu_tier_blocks_onboarded"]
        seen["stalls"] += totals["tier_load_stalls"]
        seen["preemptions"] += totals["preemptions"]
    assert all(v > 0 for v in seen.values()), seen


def _shared_prefix_case(seed: int):
    """:func:`_pressure_tier_case` cut to 60 requests, odd seeds sharing two prefixes (loads come from them)."""
    from dataclasses import replace

    wl, cfg = _pressure_tier_case(seed)
    n = min(wl.n, 60)
    rng = np.random.default_rng(seed + 100)
    pl = np.array([48, 160])
    pid = rng.integers(-1, 2, n) if seed % 2 else np.full(n, -1)
    wl = Workload(prompt_len=wl.prompt_len[:n] + np.where(pid >= 0, pl[np.maximum(pid, 0)], 0),
                  output_len=np.minimum(wl.output_len[:n], 120), arrival=wl.arrival[:n],
                  arrival_unit=wl.arrival_unit, prefix_id=pid, prefix_len=pl)
    return wl, replace(cfg, num_gpu_blocks=int(rng.integers(30, 90)), enable_chunked_prefill=True), rng


def _equal_to_the_reference(wl: Workload, cfg: EngineConfig, seed: int) -> dict:
    """Assert the engine, shortcuts on and off, gives the scalar kernel's result (step series included); its totals."""
    from tests.simulator.scalar_reference import simulate_scalar

    slow = simulate_scalar(wl, cfg, record_steps=True)
    for accelerate in (True, False):
        fast = simulate(wl, [cfg], record_steps=True, accelerate=accelerate)[0]
        assert fast.to_json(steps=True) == slow.to_json(steps=True), (seed, accelerate)
    return slow.totals


def test_cpu_and_disk_tier_runs_equal_the_independent_scalar_tiers():
    """The scalar kernel's tiers are :class:`tests.simulator.reference_tiers.ScalarTiers` (one key at a time, an
    ordered dict per tier), not the engine's: a small CPU tier over a disk tier (keys pushed down, loaded from
    either, dropped off the bottom) gives the same totals, tier figures, per-request columns and step series as
    the engine, shortcuts on and off. Each figure below happens on these runs."""
    from dataclasses import replace


    seen = dict(cpu=0, disk=0, dropped=0, stalls=0)
    for seed in range(8):
        wl, cfg, rng = _shared_prefix_case(seed)
        cfg = replace(cfg, cpu_tier=KvTier(num_blocks=int(rng.integers(0, 24)), read_gbps=float(rng.choice([5, 50]))),
                      disk_tier=KvTier(num_blocks=int(rng.integers(8, 120)), read_gbps=2.0, read_latency_s=2e-4))
        totals = _equal_to_the_reference(wl, cfg, seed)
        seen["cpu"] += totals["cpu_tier_blocks_onboarded"]
        seen["disk"] += totals["disk_tier_blocks_onboarded"]
        seen["dropped"] += totals["tier_blocks_dropped"]
        seen["stalls"] += totals["tier_load_stalls"]
    assert all(v > 0 for v in seen.values()), seen


def test_offload_threshold_runs_equal_the_independent_scalar_tiers():
    """``kv_offload_threshold`` in the scalar kernel (after every schedule call the least recently freed cached
    blocks go to the CPU tier while the GPU holds more than the threshold) against the engine, with and without
    a disk tier below: identical results, and the offloads happen (more blocks written to the tier than the
    same run without the threshold)."""
    from dataclasses import replace

    from tests.simulator.scalar_reference import simulate_scalar

    earlier = 0
    for seed in range(6):
        wl, cfg, rng = _shared_prefix_case(seed)
        disk = KvTier(num_blocks=64) if seed % 3 == 0 else None
        cfg = replace(cfg, cpu_tier=KvTier(num_blocks=int(rng.integers(16, 200))), disk_tier=disk,
                      kv_offload_threshold=float(rng.choice([0.2, 0.5, 0.8])))
        totals = _equal_to_the_reference(wl, cfg, seed)
        plain = simulate_scalar(wl, replace(cfg, kv_offload_threshold=None))
        earlier += totals["cpu_tier_blocks_offloaded"] - plain.totals["cpu_tier_blocks_offloaded"]
    assert earlier > 0
