"""SGLang's RadixCache as a prefix-cache model (``prefix_cache="radix"``): token granularity, same memory."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.batch.runner import simulate
from simulator.engine.config import ConfigError, EngineConfig
from simulator.workload.requests import Workload


def _sequential(prompts, prefix_ids, prefix_lens, gap=200, out=4):
    n = len(prompts)
    return Workload(prompt_len=np.array(prompts), output_len=np.full(n, out),
                    arrival=np.arange(n) * float(gap), prefix_id=np.array(prefix_ids),
                    prefix_len=np.array(prefix_lens))


def test_radix_reuses_a_prefix_to_the_token_while_blocks_stop_at_the_last_full_block():
    wl = _sequential([150, 130], [0, 0], [100])  # a 100-token prefix, then own tokens
    vllm, radix = (simulate(wl, [EngineConfig(num_gpu_blocks=100, block_size=16, prefix_cache=pc)])[0]
                   for pc in ("vllm", "radix"))
    assert vllm.requests["prefix_hit_tokens"].tolist() == [0, 96]  # 6 full blocks of 16
    assert radix.requests["prefix_hit_tokens"].tolist() == [0, 100]


def test_radix_counts_memory_in_tokens_so_no_block_is_half_empty():
    wl = _sequential([17, 17], [-1, -1], [], gap=0, out=2)
    vllm, radix = (simulate(wl, [EngineConfig(num_gpu_blocks=101, block_size=16, prefix_cache=pc)])[0]
                   for pc in ("vllm", "radix"))
    assert vllm.totals["peak_kv_blocks_used"] == 4  # 2 blocks each (17 and 18 tokens)
    assert radix.totals["peak_kv_blocks_used"] == 2 * 18  # token slots
    assert radix.totals["peak_kv_usage"] == pytest.approx(36 / 1600)
    assert vllm.totals["peak_kv_usage"] == pytest.approx(4 / 100)


def test_least_recently_used_prefixes_are_evicted_first_and_leaves_before_their_prefix():
    # 520 token slots. A, B, C (100-token prefix + 10 own tokens, 4 output tokens) each leave 113
    # cached slots (the last output token is never computed): 339 cached, 181 free. A 260-token
    # request (263 slots) evicts the 82 least recently used: A's 13-token leaf first, then the
    # last 69 tokens of A's prefix (31 left). C and B then hit whole and each take 13 new slots,
    # which come from the least recently used again: A's prefix, 31 - 26 = 5 tokens left. A's
    # own request then needs 108 slots, taken from the 260-token request's cached tokens.
    prompts = [110, 110, 110, 260, 110, 110, 110]
    pids = [0, 1, 2, -1, 2, 1, 0]
    wl = _sequential(prompts, pids, [100, 100, 100])
    r = simulate(wl, [EngineConfig(num_gpu_blocks=53, block_size=10, prefix_cache="radix")])[0]
    hits = r.requests["prefix_hit_tokens"].tolist()
    assert hits[4] == 100 and hits[5] == 100  # C and B survive whole
    assert hits[6] == 5
    assert r.totals["prefix_cache_evictions"] == 82 + 13 + 13 + 108


def test_a_running_request_keeps_its_prefix_referenced():
    # request 0 holds prefix 0 while others fill the cache; request 2 shares it
    wl = Workload(prompt_len=np.array([120, 300, 120]), output_len=np.array([200, 2, 2]),
                  arrival=np.array([0.0, 5.0, 10.0]), prefix_id=np.array([0, -1, 0]), prefix_len=np.array([100]))
    r = simulate(wl, [EngineConfig(num_gpu_blocks=80, block_size=10, prefix_cache="radix")])[0]
    assert r.requests["prefix_hit_tokens"].tolist()[2] == 100


def test_radix_config_round_trips_and_rejects_nonsense():
    cfg = EngineConfig(prefix_cache="radix")
    assert EngineConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="prefix_cache"):
        EngineConfig(prefix_cache="lru")
    with pytest.raises(ConfigError, match="token slots"):
        EngineConfig(prefix_cache="radix", num_gpu_blocks=40_000_000, block_size=16)
