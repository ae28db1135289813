"""Speculative decoding in the engine (``simulator/speculative/drafting.py``, ``docs/speculative_decoding.md``).

What is checked, against vLLM v1's rules (``vllm/v1/core/sched/scheduler.py``, ``kv_cache_manager.py``):

* ``num_speculative_tokens`` 0 is the engine without speculation, JSON byte for byte on random runs;
* acceptance 1.0 gives every verification ``k + 1`` tokens; acceptance 0 gives one token a step;
* the acceptance draws follow the configured model (rate, per-position rates, length distribution)
  and depend only on the seed;
* the lookahead slots: a decoding request holds ``comp + 1 + k + lookahead`` slots (``k`` for EAGLE,
  0 for n-gram), ``tokens + lookahead`` from admission on; the unservable minimum and preemptions move with ``k``;
* the draft model's input slot: each scheduled request takes one budget token more (rule R6);
* EAGLE-style hashes cover the next token, so a shared prefix's last block is not hit (rule R4);
* multi-module MTP keeps prefill chunks ``k`` tokens from the prompt's end (rule R8);
* throughput with a roofline clock rises, then falls with ``k`` (the expectation is stated in the test).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.base.specs import GpuSpec
from simulator.batch.runner import simulate
from simulator.clock.cost_model import SAMPLER_PATHS, build_step_time_model, sampling_coefficients
from simulator.engine.config import ConfigError, EngineConfig
from simulator.engine.core import FastEngine
from simulator.sizing.hf_config import parse_hf_config
from simulator.speculative.drafting import SpeculativeConfig, uniform_draws
from simulator.speculative.memory import DraftSpec, draft_step_terms
from simulator.workload.requests import Workload
from tests.simulator.test_accelerate import random_config, random_workload

ROOT = Path(__file__).resolve().parents[2]


def one_request(prompt: int, output: int) -> Workload:
    return Workload(prompt_len=np.array([prompt]), output_len=np.array([output]), arrival=np.zeros(1))


def spec(k: int, method: str = "eagle", **acc) -> dict:
    acc = acc or {"acceptance_rate": 0.7}
    return {"method": method, "num_speculative_tokens": k, **acc}


@pytest.mark.parametrize("seed", range(12))
def test_k0_is_the_engine_without_speculation(seed):
    rng = np.random.default_rng(500 + seed)
    wl = random_workload(rng, int(rng.integers(20, 80)))
    cfgs = [random_config(rng, bool(rng.random() < 0.3)) for _ in range(2)]
    off = simulate(wl, cfgs, record_steps=True)
    zero = simulate(wl, [replace(c, speculative={"num_speculative_tokens": 0}) for c in cfgs], record_steps=True)
    for a, b in zip(off, zero):
        assert a.to_json(steps=True) == b.to_json(steps=True)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_acceptance_one_gives_k_plus_one_tokens_a_step(k):
    out = 40
    r = simulate(one_request(50, out), [EngineConfig(speculative=spec(k, acceptance_rate=1.0))])[0]
    t, req = r.totals, r.requests
    assert t["spec_acceptance_rate"] == 1.0
    assert t["spec_mean_acceptance_length"] == k + 1
    # first token from the prefill, then k + 1 a step (the last step trimmed at max_tokens)
    assert req["finish_step"][0] - req["first_token_step"][0] == -(-(out - 1) // (k + 1))
    assert req["num_output_tokens"][0] == out


def test_acceptance_zero_gives_one_token_a_step_and_scores_the_drafts():
    wl = one_request(50, 30)
    base = simulate(wl, [EngineConfig()])[0]
    r = simulate(wl, [EngineConfig(speculative=spec(3, acceptance_rate=0.0))])[0]
    assert r.requests["finish_step"][0] == base.requests["finish_step"][0]
    assert r.totals["spec_num_accepted_tokens"] == 0
    assert r.totals["spec_mean_acceptance_length"] == 1.0
    # each of the 29 verifications scored 1 + 3 tokens
    assert r.totals["total_decode_tokens"] == 29 * 4 == base.totals["total_decode_tokens"] * 4


def test_acceptance_follows_the_model():
    n = 400
    wl = Workload(prompt_len=np.full(n, 20), output_len=np.full(n, 200), arrival=np.zeros(n))
    probs = [0.1, 0.2, 0.3, 0.4]
    cases = [({"acceptance_rate": 0.6}, [0.6, 0.36, 0.216]),
             ({"position_acceptance_rates": [0.9, 0.5, 0.1]}, [0.9, 0.5, 0.1]),
             ({"acceptance_length_probs": probs}, [0.9, 0.7, 0.4])]
    for acc, want in cases:
        cfg = EngineConfig(max_num_seqs=512, max_num_batched_tokens=8192, speculative=spec(3, **acc))
        t = simulate(wl, [cfg])[0].totals
        assert t["spec_num_drafts"] > 10_000
        assert np.allclose(t["spec_position_acceptance_rates"], want, atol=0.015), (acc, t)
        assert t["spec_mean_acceptance_length"] == pytest.approx(1 + sum(want), abs=0.03)


def test_draws_depend_only_on_the_seed():
    wl = random_workload(np.random.default_rng(3), 60)
    wl = replace(wl, arrival_unit="step", arrival=np.sort(np.random.default_rng(4).integers(0, 60, wl.n)).astype(float))
    a, b, c = (simulate(wl, [EngineConfig(num_gpu_blocks=300, speculative={**spec(3), "seed": s})])[0]
               for s in (1, 1, 2))
    assert a.to_json(steps=True) == b.to_json(steps=True)
    assert a.to_json(steps=True) != c.to_json(steps=True)
    u = uniform_draws(7, np.arange(100_000), np.arange(100_000) % 97)
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.005


def test_same_draws_whatever_the_kv_size():
    """Draws are keyed by (request, output position): a pool that does not bind gives the same tokens."""
    wl = one_request(100, 60)
    a, b = (simulate(wl, [EngineConfig(num_gpu_blocks=nb, speculative=spec(4))])[0] for nb in (50, 5000))
    assert a.totals["spec_num_accepted_tokens"] == b.totals["spec_num_accepted_tokens"]
    assert a.requests["finish_step"][0] == b.requests["finish_step"][0]


@pytest.mark.parametrize("method, lookahead", [("eagle", 3), ("mtp", 3), ("draft_model", 3), ("ngram", 0)])
def test_lookahead_slots(method, lookahead):
    """Prompt 30: admission holds its 30 slots plus the lookahead (vLLM's waiting loop passes
    ``num_lookahead_tokens`` to ``allocate_slots``: 3 blocks of 16 with EAGLE, 2 with n-gram), then
    the first verification schedules 1 + 3 tokens at 30 computed: 34 slots, plus the lookahead."""
    cfg = EngineConfig(block_size=16, speculative=spec(3, method, acceptance_rate=0.0))
    eng = FastEngine(one_request(30, 3), cfg)
    eng.start()
    eng.advance(until=1)
    assert int(eng.requests.held[0]) == (3 if lookahead else 2)
    eng.advance(until=2)
    assert int(eng.requests.comp[0]) == 30 + 1  # three drafts rejected: computed back to the verified token
    assert int(eng.requests.held[0]) == -(-(34 + lookahead) // 16)  # rejected slots stay held


@pytest.mark.parametrize("method, slot", [("draft_model", 1), ("eagle", 0), ("ngram", 0)])
def test_draft_model_input_slot(method, slot):
    """vLLM's input budget (rule R6): with a 64-token budget and three 30-token prompts at once, the
    draft model charges each scheduled request one slot more: request 0 gets 30 (31 slots), request 1
    ``64 - 31 - 1 = 32`` tokens (the others 34)."""
    wl = Workload(prompt_len=np.array([30, 40, 30]), output_len=np.array([4, 4, 4]), arrival=np.zeros(3))
    cfg = EngineConfig(block_size=16, max_num_batched_tokens=64, speculative=spec(3, method))
    eng = FastEngine(wl, cfg)
    eng.start()
    eng.advance(until=1)
    assert eng.requests.comp[:3].tolist() == [30, 34 - 2 * slot, 0]


@pytest.mark.parametrize("method, hit", [("eagle", 16), ("mtp", 16), ("ngram", 32), ("draft_model", 32)])
def test_hash_lookahead(method, hit):
    """EAGLE-style block hashes cover the next token too (rule R4): of a 32-token shared prefix
    followed by a tail of its own, the second block's hash covers the tail's first token, so a later
    request hits 16 tokens with EAGLE and MTP, 32 with n-gram and the draft model."""
    wl = Workload(prompt_len=np.array([40, 40]), output_len=np.array([4, 4]), arrival=np.array([0.0, 5.0]),
                  prefix_id=np.array([0, 0]), prefix_len=np.array([32]))
    r = simulate(wl, [EngineConfig(block_size=16, enable_prefix_caching=True, speculative=spec(3, method))])[0]
    assert [q["prefix_hit_tokens"] for q in r.to_dict()["requests"]] == [0, hit]


@pytest.mark.parametrize("modules, second", [(1, 2), (3, 1)])
def test_multi_module_mtp_chunk_end(modules, second):
    """Multi-module MTP (rule R8): with a 12-token budget request 1 (4 tokens) would get a 2-token chunk
    ending 2 < k = 3 tokens before its prompt's end; with three modules vLLM shortens it by 1."""
    wl = Workload(prompt_len=np.array([10, 4]), output_len=np.array([4, 4]), arrival=np.zeros(2))
    sp = {**spec(3, "mtp"), "num_mtp_modules": modules}
    eng = FastEngine(wl, EngineConfig(block_size=16, max_num_batched_tokens=12, speculative=sp))
    eng.start()
    eng.advance(until=1)
    assert eng.requests.comp[:2].tolist() == [10, second]


def test_num_mtp_modules_is_checked():
    with pytest.raises(ConfigError, match="speculative.num_mtp_modules: only for method mtp"):
        EngineConfig(speculative={**spec(3, "eagle"), "num_mtp_modules": 2})
    with pytest.raises(ConfigError, match="speculative.num_mtp_modules: must be a whole number from 1 to 16"):
        EngineConfig(speculative={**spec(3, "mtp"), "num_mtp_modules": 0})
    assert "num_mtp_modules" not in EngineConfig(speculative=spec(3, "mtp")).to_dict()["speculative"]


def test_unservable_minimum_moves_with_k():
    """One request of 64 context tokens fits 4 usable blocks of 16; its last verification holds
    k drafts and (EAGLE) k lookahead slots more."""
    wl = one_request(40, 25)
    for sp, dropped in [(None, 0), (spec(3, "ngram"), 1), (spec(3, "eagle"), 1)]:
        t = simulate(wl, [EngineConfig(num_gpu_blocks=5, block_size=16, speculative=sp)])[0].totals
        assert t["dropped_unservable"] == dropped, sp
    t = simulate(wl, [EngineConfig(num_gpu_blocks=6, block_size=16, speculative=spec(3, "eagle"))])[0].totals
    assert t["finished"] == 1 and t["dropped_unservable"] == 0


def test_kv_need_and_cliff_grow_with_lookahead():
    """At acceptance 0 every request decodes one token a step whatever k, so only the slots differ:
    a decoder holds k more slots with n-gram, 2k more with EAGLE. The peak KV need without pressure
    grows in that order, and so does the KV cliff (the fewest blocks with no preemption)."""
    rng = np.random.default_rng(11)
    n = 120
    wl = Workload(prompt_len=rng.integers(20, 200, n), output_len=rng.integers(20, 200, n),
                  arrival=np.sort(rng.integers(0, 200, n)).astype(float))
    peak, cliff = {}, {}
    grid = range(800, 960, 10)
    for name, sp in [("off", None), ("ngram", spec(4, "ngram", acceptance_rate=0.0)),
                     ("eagle", spec(4, "eagle", acceptance_rate=0.0))]:
        peak[name] = simulate(wl, [EngineConfig(num_gpu_blocks=20_000, speculative=sp)])[0].totals["peak_kv_blocks_used"]
        res = simulate(wl, [EngineConfig(num_gpu_blocks=b, speculative=sp) for b in grid])
        cliff[name] = min(b for b, r in zip(grid, res) if r.totals["preemptions"] == 0)
    assert peak["off"] < peak["ngram"] < peak["eagle"], peak
    assert cliff["off"] < cliff["ngram"] <= cliff["eagle"], cliff


def test_verification_is_charged_as_decode_and_the_drafter_as_passes():
    terms = build_step_time_model("linear").terms
    terms = replace(terms, base_s=0.0, tok_s=1e-3, dec_attn_s=1e-6)
    draft = replace(terms, tok_s=1e-4, dec_attn_s=0.0)
    wl = one_request(10, 3)
    cfg = EngineConfig(cost_model=terms, speculative={**spec(2, acceptance_rate=0.0), "draft_cost_model": draft})
    eng = FastEngine(wl, cfg, record_steps=True)
    eng.run_all()
    # the prefill of 10 tokens samples the first token: the drafter passes over the 10 tokens, then
    # once more over one token (k = 2 drafts); the verification of 1 + 2 tokens at 10 computed is
    # 3 decode tokens reading 13 KV tokens, then the drafter's two passes again
    first = terms.time(10, 55, 0, 0, 1, 10) + draft.time(10, 55, 0, 0, 1, 10) + draft.time(0, 0, 1, 11, 1, 0)
    verify = terms.time(0, 0, 3, 13, 1, 0) + draft.time(0, 0, 3, 13, 1, 0) + draft.time(0, 0, 1, 14, 1, 0)
    assert draft.time(0, 0, 3, 13, 1, 0) > 0 and terms.time(0, 0, 3, 13, 1, 0) > terms.time(0, 0, 1, 11, 1, 0)
    assert eng.log["time_s"][1] == pytest.approx(first)
    assert eng.log["time_s"][2] == pytest.approx(first + verify)


def test_each_scored_draft_pays_the_targets_sampler_row():
    """vLLM's rejection sampler applies the requests' top-k / top-p to the target's logits at every scored
    draft position: a verification of 1 + 2 tokens pays two sampler rows beyond the bonus token's (which
    the target's clock charges per request), the prefill's step none."""
    terms = replace(build_step_time_model("linear").terms, base_s=0.0, tok_s=1e-3, dec_attn_s=1e-6, gpu_req_s=1e-4)
    eng = FastEngine(one_request(10, 3), EngineConfig(cost_model=terms, speculative=spec(2, acceptance_rate=0.0)),
                     record_steps=True)
    eng.run_all()
    first = terms.time(10, 55, 0, 0, 1, 10)
    verify = terms.time(0, 0, 3, 13, 1, 0) + 2 * terms.gpu_req_s
    assert eng.log["time_s"][1] == pytest.approx(first)
    assert eng.log["time_s"][2] == pytest.approx(first + verify)


def test_the_drafter_samples_by_argmax_whatever_the_requests_sampling():
    """vLLM's proposers take each draft token as the argmax of the head's logits: the head's sampler is the
    ``greedy`` path even where the target's requests sort their logits (top-k / top-p)."""
    model, gpu = _llama8b_h100()
    greedy = SAMPLER_PATHS["greedy"][2] * model.vocab_size
    for co in (None, sampling_coefficients("top_k_top_p")):
        head = draft_step_terms(model, DraftSpec("eagle", 3), gpu, coefficients=co)
        assert head.gpu_req_s == pytest.approx(greedy)
    target = build_step_time_model("roofline", model=model, gpu=gpu).terms
    assert target.gpu_req_s > 50 * head.gpu_req_s  # the target's default path sorts


def _llama8b_h100():
    model = parse_hf_config(json.loads((ROOT / "tests/data/speculative/Meta-Llama-3.1-8B_config.json").read_text()))
    gpu = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.65, bandwidth_tbps=3.35, bf16_tflops=989,
                  fp8_tflops=1979, interconnect_gbps=450)
    return model, gpu


def test_throughput_rises_then_falls_with_k():
    """Expectation: at acceptance 0.7 a verification yields ``(1 - 0.7 ** (k + 1)) / 0.3`` tokens, which
    saturates at 3.33, while each step's cost grows linearly with k (k + 1 tokens per request through
    the GEMMs, k drafter passes). With 64 requests decoding at once on one H100 (Llama-3.1-8B, EAGLE
    head, roofline clock) throughput must rise from k = 0 to its best k in 1..4, then fall, and k = 8
    must be below that best."""
    model, gpu = _llama8b_h100()
    target = build_step_time_model("roofline", model=model, gpu=gpu).terms
    rng = np.random.default_rng(0)
    n = 64
    wl = Workload(prompt_len=rng.integers(200, 600, n), output_len=rng.integers(100, 200, n),
                  arrival=np.zeros(n), arrival_unit="s")
    tput = {}
    for k in (0, 1, 2, 3, 4, 6, 8):
        sp = None if k == 0 else {**spec(k), "draft_cost_model": draft_step_terms(model, DraftSpec("eagle", k), gpu)}
        r = simulate(wl, [EngineConfig(num_gpu_blocks=20_000, max_num_seqs=n, cost_model=target, speculative=sp)])[0]
        tput[k] = float(r.requests["num_output_tokens"].sum()) / r.totals["duration_s"]
    best = max(tput, key=tput.get)
    assert 1 <= best <= 4, tput
    assert tput[1] > tput[0] * 1.2, tput
    ks = sorted(tput)
    after = [tput[k] for k in ks if k >= best]
    assert all(a >= b for a, b in zip(after, after[1:])), tput
    assert tput[8] < 0.9 * tput[best], tput


@pytest.mark.parametrize("bad, field", [
    ({"num_speculative_tokens": -1, "acceptance_rate": 0.5}, "speculative.num_speculative_tokens"),
    ({"num_speculative_tokens": 1000, "acceptance_rate": 0.5}, "speculative.num_speculative_tokens"),
    ({"num_speculative_tokens": 3, "acceptance_rate": 1.5}, "speculative.acceptance_rate"),
    ({"num_speculative_tokens": 3, "acceptance_rate": -0.1}, "speculative.acceptance_rate"),
    ({"num_speculative_tokens": 3}, "speculative.acceptance_rate"),
    ({"num_speculative_tokens": 2, "position_acceptance_rates": [0.5, 0.8]}, "speculative.position_acceptance_rates"),
    ({"num_speculative_tokens": 2, "acceptance_length_probs": [0.5, 0.4]}, "speculative.acceptance_length_probs"),
    ({"num_speculative_tokens": 2, "acceptance_length_probs": [0.5, 0.4, 0.3]}, "speculative.acceptance_length_probs"),
    ({"num_speculative_tokens": 2, "acceptance_rate": 0.5, "method": "medusa"}, "speculative.method"),
    ({"num_speculative_tokens": 2, "acceptance_rate": 0.5, "colour": 1}, "speculative.colour"),
    ({"num_speculative_tokens": 2, "acceptance_rate": 0.5, "method": "ngram",
      "draft_cost_model": {"kind": "linear"}}, "speculative.draft_cost_model"),
])
def test_bad_input_names_the_field(bad, field):
    with pytest.raises(ConfigError) as exc:
        EngineConfig.from_dict({"speculative": bad})
    assert str(exc.value).startswith(field + ":"), str(exc.value)


@pytest.mark.parametrize("seed", range(6))
def test_async_k0_is_the_async_engine_without_speculation(seed):
    rng = np.random.default_rng(700 + seed)
    wl = random_workload(rng, int(rng.integers(15, 40)))
    cfg = replace(random_config(rng, False), async_scheduling=True)
    off = simulate(wl, [cfg], record_steps=True)[0]
    zero = simulate(wl, [replace(cfg, speculative={"num_speculative_tokens": 0})], record_steps=True)[0]
    assert off.to_json(steps=True) == zero.to_json(steps=True)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_async_acceptance_one_gives_k_plus_one_tokens_a_step(k):
    """vLLM's AsyncScheduler: a decoding request is scheduled ``1 + k`` tokens every step (its drafts are
    placeholders the worker fills), ``1 + d`` output placeholders each; with acceptance 1.0 each
    verification yields ``k + 1`` tokens, as under synchronous scheduling."""
    out = 40
    cfg = EngineConfig(async_scheduling=True, speculative=spec(k, acceptance_rate=1.0))
    r = simulate(one_request(50, out), [cfg], record_steps=True)[0]
    t, req = r.totals, r.requests
    assert t["spec_acceptance_rate"] == 1.0 and t["spec_mean_acceptance_length"] == k + 1
    assert req["finish_step"][0] - req["first_token_step"][0] == -(-(out - 1) // (k + 1))
    assert req["num_output_tokens"][0] == out
    # every verification scheduled 1 + k tokens (the last ones may run past the stop: vLLM skips a step
    # only when the one in flight surely reaches max_tokens, even with every draft rejected)
    scheduled = r.steps["num_scheduled_tokens"]
    assert scheduled[0] == 50 and set(scheduled[1:].tolist()) == {k + 1}


@pytest.mark.parametrize("rate", [0.0, 0.6])
def test_async_alone_a_request_gains_what_it_gains_synchronously(rate):
    """The acceptance draws depend on (seed, request, tokens so far), not on the schedule: a request alone
    gets the same tokens at the same steps under async scheduling; rejected drafts come off its computed
    tokens and its output placeholders when the output arrives."""
    wl = one_request(50, 30)
    sync = simulate(wl, [EngineConfig(speculative=spec(3, acceptance_rate=rate))])[0]
    asy = simulate(wl, [EngineConfig(async_scheduling=True, speculative=spec(3, acceptance_rate=rate))])[0]
    assert asy.requests["finish_step"] == sync.requests["finish_step"]
    assert asy.requests["num_output_tokens"] == sync.requests["num_output_tokens"] == [30]
    for key in ("spec_num_drafts", "spec_num_accepted_tokens", "spec_mean_acceptance_length"):
        assert asy.totals[key] == sync.totals[key], key
    if rate == 0.0:  # one token a step, as without drafts
        plain = simulate(wl, [EngineConfig(async_scheduling=True)])[0]
        assert asy.requests["finish_step"] == plain.requests["finish_step"]


def test_config_round_trip():
    cfg = EngineConfig(speculative={**spec(3, position_acceptance_rates=[0.8, 0.6, 0.4]),
                                    "draft_cost_model": {"kind": "linear", "base_s": 0.001}})
    again = EngineConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    assert "speculative" not in EngineConfig().to_dict()
    assert SpeculativeConfig(num_speculative_tokens=3, acceptance_rate=0.7).expected_tokens_per_step() == \
        pytest.approx((1 - 0.7**4) / 0.3)


def test_cli_sweep_grid_over_k_and_acceptance(tmp_path, capsys):
    from simulator.cli import commands as cli

    wl = tmp_path / "w.jsonl"
    wl.write_text("".join(json.dumps({"id": f"r{i}", "prompt_tokens": 30 + i, "output_tokens": 40, "arrival_step": i})
                          + "\n" for i in range(8)))
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"num_gpu_blocks": 500, "speculative": {
        "method": "ngram", "num_speculative_tokens": 2, "position_acceptance_rates": [0.5, 0.1]}}))
    assert cli.main(["sweep", "--workload", str(wl), "--config", str(cfg), "--grid",
                     "speculative.num_speculative_tokens=0,2", "--grid", "speculative.acceptance_rate=0,1"]) == 0
    pts = json.loads(capsys.readouterr().out)["points"]
    assert [p["params"] for p in pts] == [
        {"speculative.num_speculative_tokens": k, "speculative.acceptance_rate": a} for k in (0, 2) for a in (0, 1)]
    assert "spec_acceptance_rate" not in pts[0]["totals"]
    assert [p["totals"]["spec_acceptance_rate"] for p in pts[2:]] == [0.0, 1.0]
    assert cli.main(["sweep", "--workload", str(wl), "--grid", "speculative.k=1,2"]) == 2
    assert "speculative has acceptance_rate" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(16))
def test_random_runs_with_drafts_finish_every_request(seed):
    """Random workloads and configurations (tiers, radix, max_model_len, chunking off, cost models,
    synchronous and asynchronous scheduling) with speculation: every request finishes or is dropped, a finished request has exactly its output
    (unless max_model_len cut it), and KV use never passes the pool."""
    rng = np.random.default_rng(900 + seed)
    wl = random_workload(rng, int(rng.integers(20, 80)))
    cfg = replace(random_config(rng, bool(rng.random() < 0.3)), async_scheduling=bool(seed % 2))
    method = str(rng.choice(["eagle", "ngram", "mtp"]))
    sp = spec(int(rng.integers(1, 6)), method, acceptance_rate=float(rng.choice([0.0, 0.5, 0.9, 1.0])))
    r = simulate(wl, [replace(cfg, speculative=sp)], record_steps=True)[0]
    t, req = r.totals, r.requests
    assert t["finished"] + t["dropped_unservable"] == wl.n, t
    done = np.array(req["status"]) == "finished"
    out = np.asarray(req["num_output_tokens"])[done]
    assert (out <= wl.output_len[done]).all()
    assert int((out < wl.output_len[done]).sum()) == t["requests_cut_short"]
    usable = (cfg.num_gpu_blocks - 1) * (cfg.block_size if cfg.prefix_cache == "radix" else 1)
    assert t["peak_kv_blocks_used"] <= usable
    assert 0.0 <= t["spec_acceptance_rate"] <= 1.0


def test_block_table_holds_the_draft_and_lookahead_slots():
    """A request's slice of the flat block table covers ``ceil((prompt + output - 1 + k + L) / B)``
    blocks (with B = 4 and EAGLE k = 5 that is 4 more than its context needs)."""
    cfg = EngineConfig(block_size=4, speculative=spec(5, acceptance_rate=1.0))
    eng = FastEngine(one_request(9, 8), cfg)
    assert int(eng.koff[1] - eng.koff[0]) >= -(-(9 + 8 - 1 + 5 + 5) // 4)
    eng.run_all()
    assert eng.t["finished"] == 1 and int(eng.requests.tok[0]) == 17
