"""Speculative decoding as a search dimension (``SearchSpace.speculative``, ``search --speculative``; issue 32).

Llama 3.1 8B on small workloads as in test_search.py. The drafter's memory and step time come from
simulator.speculative (plan_with_draft, draft_step_terms), checked here against those functions directly.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator.cli.commands import main
from simulator.clock import overlapped
from simulator.search import SearchError, SearchSpace, search_deployments
from simulator.search.evaluate import default_max_model_len, latency_floors, prepare_candidate
from simulator.search.space import Slo, SloTarget, SpecOption
from simulator.speculative import DraftSpec, plan_with_draft
from tests.simulator.test_search import H100, L4, L40S, LLAMA_8B, SMALL, _workload
from tests.simulator.test_search_cli import BASE

EAGLE = SpecOption("eagle", 3, 0.7)
SPEC_SPACE = SearchSpace((H100, L40S, L4), tensor_parallel=(1,), precisions=("bf16",), max_num_seqs=(16,),
                         max_replicas=3, speculative=(None, "eagle:3:0.7", {"method": "ngram",
                                                                           "num_speculative_tokens": 4,
                                                                           "acceptance_rate": 0.5}))


def test_the_default_space_is_as_before_and_a_setting_multiplies_the_shapes():
    assert SMALL.speculative == (None,) and "speculative" not in SMALL.to_dict()
    assert [c.label for c in SMALL.candidates()] == [c.label for c in SearchSpace(
        SMALL.gpus, tensor_parallel=(1,), precisions=("bf16", "fp8"), max_num_seqs=(16,), max_replicas=3,
        speculative=(None,)).candidates()]
    cands = SPEC_SPACE.candidates()
    assert SPEC_SPACE.size == len(cands) == 9
    assert cands[1].label == "1x H100 SXM5 80GB (TP 1), bf16 weights, KV auto, max_num_seqs 16, EAGLE k=3 at acceptance 0.7"
    assert cands[2].speculative == SpecOption("ngram", 4, 0.5)
    assert SPEC_SPACE.to_dict()["speculative"][1] == {"method": "eagle", "num_speculative_tokens": 3,
                                                      "acceptance_rate": 0.7}
    assert cands[1].to_dict()["speculative"]["method"] == "eagle" and "speculative" not in cands[0].to_dict()


@pytest.mark.parametrize("value, message", [
    ("eagle:3", "space.speculative[0]: 'eagle:3' must look like METHOD:K:ACCEPTANCE"),
    ("eagle:x:0.7", "K must be a whole number"),
    ("draft_model:3:0.7", "space.speculative[0].method: must be one of eagle, eagle3, mtp, ngram (a draft model"),
    ("eagle:0:0.7", "space.speculative[0].num_speculative_tokens: must be a whole number from 1 to 16, got 0"),
    ("eagle:17:0.7", "space.speculative[0].num_speculative_tokens: must be a whole number from 1 to 16, got 17"),
    ("eagle:3:1.5", "space.speculative[0].acceptance_rate: must be a number in (0, 1]"),
    ("eagle:3:0", "space.speculative[0].acceptance_rate: must be a number in (0, 1]"),
    ({"method": "eagle", "num_speculative_tokens": 3, "acceptance": 0.7}, "unknown field(s) acceptance"),
])
def test_bad_settings_name_the_entry_and_the_rule(value, message):
    with pytest.raises(SearchError) as exc:
        SearchSpace((H100,), speculative=(value,))
    assert message in str(exc.value)
    with pytest.raises(SearchError, match="each setting at most once"):
        SearchSpace((H100,), speculative=("eagle:3:0.7", "eagle:3:0.7"))
    with pytest.raises(SearchError, match="give at least one value"):
        SearchSpace((H100,), speculative=())


def test_a_drafter_takes_its_memory_and_its_time_into_the_shape():
    wl = _workload()
    slo = Slo((SloTarget("ttft", "p90", 1.0),))
    mml = default_max_model_len(wl, LLAMA_8B)
    plain, eagle, ngram = (prepare_candidate(i, c, LLAMA_8B, SPEC_SPACE, mml, wl, slo)
                           for i, c in enumerate(SPEC_SPACE.candidates()[:3]))
    from simulator.base import DeploymentSpec

    dep = DeploymentSpec(max_num_seqs=16, max_model_len=mml)
    head = plan_with_draft(LLAMA_8B, H100, dep, DraftSpec("eagle", 3))
    assert eagle.config.num_gpu_blocks == head.num_gpu_blocks < plain.config.num_gpu_blocks  # the head's weights + KV
    assert ngram.config.num_gpu_blocks == plain.config.num_gpu_blocks  # n-gram lookup: no model
    assert plain.config.speculative is None
    assert eagle.config.speculative.num_speculative_tokens == 3 and eagle.config.speculative.acceptance_rate == 0.7
    assert eagle.config.speculative.draft_cost_model is not None and ngram.config.speculative.draft_cost_model is None


def test_the_gap_floors_are_lower_bounds_under_speculative_decoding():
    # (with and without drafters; vLLM's default async scheduling overlaps the CPU part of a step: the floors
    # once used the synchronous step and rejected an H100 whose simulated TPOT p50 was 6.6 ms at a 7.0 ms floor)
    wl = _workload(n=30, rate=2.0)
    slo = Slo((SloTarget("tpot", "p50", 1.0),))
    res = search_deployments(wl, LLAMA_8B, SPEC_SPACE, slo, exhaustive=True)
    mml = default_max_model_len(wl, LLAMA_8B)
    for o in res.outcomes:
        if not o.trials:
            continue
        cand = SPEC_SPACE.candidates()[o.index]
        p = prepare_candidate(o.index, cand, LLAMA_8B, SPEC_SPACE, mml, wl, slo)
        per_step = 1 if cand.speculative is None else 1 + cand.speculative.num_speculative_tokens
        timed = overlapped(p.config.cost_model, p.config.async_scheduling)  # as the engine times its steps
        floor = float(np.percentile(latency_floors(wl, timed, per_step)["tpot"], 50))
        assert all(t.figures["TPOT p50"] is None or floor <= t.figures["TPOT p50"] for t in o.trials), cand.label


def test_the_search_with_drafters_equals_brute_force():
    wl = _workload()
    slo = Slo((SloTarget("ttft", "p90", 0.4), SloTarget("tpot", "p90", 0.02)))
    fast = search_deployments(wl, LLAMA_8B, SPEC_SPACE, slo)
    brute = search_deployments(wl, LLAMA_8B, SPEC_SPACE, slo, exhaustive=True)
    assert fast.best is not None
    assert (fast.best.index, fast.best.replicas) == (brute.best.index, brute.best.replicas)


def test_the_cli_tries_the_settings_and_launches_the_drafter(capsys):
    assert main(BASE + ["--slo", "tpot:p90:0.02", "--precision", "bf16", "--speculative", "none,eagle:3:0.8",
                        "--check-seeds", "0", "--launch"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["outcomes"]) == 12  # 6 GPUs x 2 settings
    labels = [o["candidate"]["label"] for o in out["outcomes"]]
    assert sum(label.endswith(", EAGLE k=3 at acceptance 0.8") for label in labels) == 6
    if "speculative" in out["best"]["candidate"]:
        assert "--speculative-config" in out["launch"]["vllm_serve"]
    else:
        assert "--speculative-config" not in out["launch"]["vllm_serve"]
    assert main(BASE + ["--slo", "tpot:p90:0.02", "--speculative", "eagle:3:2"]) == 2
    assert capsys.readouterr().err.startswith("error: space.speculative[0].acceptance_rate: must be a number in (0, 1]")
