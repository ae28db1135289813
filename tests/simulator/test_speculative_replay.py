"""Replaying given acceptance: ``acceptance_pattern`` and ``acceptance_trace`` (``simulator/speculative/acceptance.py``,
``docs/speculative_decoding.md``, "Replaying measured acceptance").

What is checked:

* a pattern: the ``j``-th verification of request ``i`` accepts ``min(pattern[(i + j) mod L], d)``, counted by hand
  on a schedule with no cuts; admission's padded drafts (rule R7) take no entry; the general path
  (``accelerate=False``) gives what ``simulate`` gives; a request alone gains the same under async scheduling;
* a trace: ``N`` requests replayed by id and by order on a schedule with no cuts accept exactly the trace's
  tokens (coverage 1.0); past its line a request cycles its list or draws from its histogram; a trace
  recorded at ``k_t`` replays at ``k <= k_t`` as ``min(a_j, k)`` and refuses ``k > k_t``; a padded line's
  first entry is not replayed by a real verification; bad input names the field; a file through the CLI.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.batch.runner import simulate
from simulator.engine.config import ConfigError, EngineConfig
from simulator.engine.core import FastEngine
from simulator.engine.results import assemble_result
from simulator.speculative.drafting import SpeculativeConfig
from simulator.workload.oracle_io import load_json, read_workload
from simulator.workload.requests import Workload
from tests.simulator.test_accelerate import random_config, random_workload

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "data" / "oracle_spec"


def workload(prompts, outputs, ids=None) -> Workload:
    n = len(prompts)
    return Workload(prompt_len=np.array(prompts), output_len=np.array(outputs), arrival=np.zeros(n),
                    ids=None if ids is None else tuple(ids))


def spec(k: int, **acc) -> dict:
    return {"method": "eagle", "num_speculative_tokens": k, **acc}


def by_hand(gains_of, out: int) -> tuple[int, int]:
    """Verifications a request needs for ``out - 1`` tokens after its first, and the drafts they accept
    (each verification scores all ``k`` drafts: no cuts), with ``gains_of(j)`` the drafts the j-th accepts."""
    need, j, accepted = out - 1, 0, 0
    while need > 0:
        a = gains_of(j)
        need, j, accepted = need - (a + 1), j + 1, accepted + a
    return j, accepted


def test_a_pattern_by_hand():
    """Three requests, ``k = 3``, pattern ``[3, 1, 0, 2]``: request 0 accepts 3, 1, 0, 2, 3, ...; request 1
    starts at 1, request 2 at 0 (``(i + j) mod 4``). By hand: 12, 11 and 8 verifications, 18 + 15 + 12 = 45
    drafts accepted."""
    pattern, k = [3, 1, 0, 2], 3
    wl = workload([50, 40, 30], [30, 25, 20])
    r = simulate(wl, [EngineConfig(speculative=spec(k, acceptance_pattern=pattern))], record_steps=True)[0]
    want = [by_hand(lambda j, i=i: pattern[(i + j) % 4], int(o)) for i, o in enumerate(wl.output_len)]
    assert want == [(12, 18), (11, 15), (8, 12)]
    req = r.requests
    assert [f - t for f, t in zip(req["finish_step"], req["first_token_step"])] == [v for v, _ in want]
    assert r.totals["spec_num_accepted_tokens"] == 45 == sum(a for _, a in want)
    assert r.totals["spec_num_drafts"] == 31 and r.totals["spec_num_draft_tokens"] == 31 * k
    assert req["num_output_tokens"].tolist() == [30, 25, 20]
    assert "spec_trace_coverage" not in r.totals


def _recorded(wl, cfg, **kw) -> FastEngine:
    """The engine, noting (``seen``) for each verification its request, whether it is real, and the entry
    index it took (it wraps the engine's drafts' replay; it changes no decision)."""
    sim = FastEngine(wl, cfg, **kw)
    drafts = sim.drafts
    replayed = drafts._replayed
    sim.seen = []

    def noting(q, real):
        j = drafts._nver[q].copy()
        sim.seen += list(zip(q.tolist(), real.tolist(), j.tolist()))
        return replayed(q, real)

    drafts._replayed = noting
    return sim


def test_padded_admissions_take_no_pattern_entry():
    """``cached_prompts`` (a recorded case: prompts cached but their last token, so vLLM pads admissions with
    ``k`` dummy drafts, rule R7): the padded verifications accept 0 and leave the request's count where it was;
    each request's real verifications take entries 0, 1, 2, ... in order."""
    wl = read_workload(ORACLE / "workloads" / "cached_prompts.json")
    name = "cached_prompts__eagle-k3__b10000__pc-on__sync__mbt512"
    cfg = EngineConfig.from_dict(load_json(ORACLE / "configs" / f"{name}.json"))
    cfg = replace(cfg, speculative=spec(3, acceptance_pattern=[2, 3, 0]))
    sim = _recorded(wl, cfg, record_steps=True)
    sim.run_all()
    padded = [s for s in sim.seen if not s[1]]
    assert len(padded) >= 5, "the case pads admissions"
    per: dict[int, list[int]] = {}
    for q, real, j in sim.seen:
        if real:
            per.setdefault(q, []).append(j)
    assert all(js == list(range(len(js))) for js in per.values())
    t = assemble_result(sim, True, None).totals
    assert int(sim.drafts._nver.sum()) == t["spec_num_drafts"] - len(padded)


@pytest.mark.parametrize("seed", range(8))
def test_replay_on_the_general_path_is_simulate(seed):
    """Random workloads and configurations (KV pressure, tiers, radix, sync and async): a pattern (even seeds)
    or a trace matched by order (odd seeds, cycling or drawing beyond its lines) gives on the general path what
    ``simulate`` gives, and every request finishes or is dropped."""
    rng = np.random.default_rng(4100 + seed)
    wl = random_workload(rng, int(rng.integers(20, 60)))
    acc = {"acceptance_pattern": [int(x) for x in rng.integers(0, 4, 5)]} if seed % 2 == 0 else {
        "acceptance_trace": {"requests": _trace(rng, 7), "beyond": ["cycle", "histogram"][seed // 2 % 2]}}
    cfg = replace(random_config(rng, bool(rng.random() < 0.3)), async_scheduling=bool(seed // 2 % 2),
                  speculative=spec(3, **acc))
    a = simulate(wl, [cfg], record_steps=True)[0]
    sim = FastEngine(wl, cfg, record_steps=True, accelerate=False)
    sim.run_all()
    b = assemble_result(sim, True, None)
    assert a.to_json(steps=True) == b.to_json(steps=True)
    assert a.totals["finished"] + a.totals["dropped_unservable"] == wl.n


def test_a_request_alone_gains_the_same_under_async_scheduling():
    wl = workload([50], [40])
    sc = spec(3, acceptance_pattern=[0, 3, 1, 2, 2])
    sync = simulate(wl, [EngineConfig(speculative=sc)])[0]
    asy = simulate(wl, [EngineConfig(async_scheduling=True, speculative=sc)])[0]
    assert asy.requests["finish_step"].tolist() == sync.requests["finish_step"].tolist()
    for key in ("spec_num_drafts", "spec_num_accepted_tokens"):
        assert asy.totals[key] == sync.totals[key], key


def _trace(rng, n: int, k: int = 3) -> list[dict]:
    lines = []
    for i in range(n):
        acc = rng.integers(0, k + 1, int(rng.integers(1, 30))).tolist()
        lines.append({"id": f"req-{i}", "num_spec_tokens": k, "per_step_accepted": acc,
                      "per_step_drafted": [k] * len(acc),
                      "acceptance_histogram": np.bincount(acc, minlength=k + 1).tolist()})
    return lines


def _exact_workload(lines, ids) -> Workload:
    """Each request's output ends at its line's last verification: ``1 + sum(a_j + 1)`` tokens."""
    outs = [1 + sum(a + 1 for a in ln["per_step_accepted"]) for ln in lines]
    return workload([64] * len(lines), outs, ids)


@pytest.mark.parametrize("match", ["id", "order"])
def test_a_trace_replays_exactly_on_a_schedule_without_cuts(match):
    """200 requests, a budget and a KV pool that cut nothing: the accepted tokens are the trace's, to the token;
    every verification replayed a recorded entry (coverage 1.0). By id the workload lists the requests in
    another order than the trace."""
    rng = np.random.default_rng(38)
    lines = _trace(rng, 200)
    perm = rng.permutation(200) if match == "id" else np.arange(200)
    wl = _exact_workload([lines[i] for i in perm], [lines[i]["id"] if match == "id" else f"w{j}"
                                                   for j, i in enumerate(perm)])
    cfg = EngineConfig(num_gpu_blocks=100_000, max_num_batched_tokens=65_536,
                       speculative=spec(3, acceptance_trace={"requests": lines}))
    r = simulate(wl, [cfg])[0]
    t = r.totals
    assert t["spec_num_accepted_tokens"] == sum(sum(ln["per_step_accepted"]) for ln in lines)
    assert t["spec_num_drafts"] == sum(len(ln["per_step_accepted"]) for ln in lines)
    assert t["spec_trace_coverage"] == 1.0 and t["preemptions"] == 0
    assert r.requests["num_output_tokens"].tolist() == wl.output_len.tolist()


@pytest.mark.parametrize("beyond", ["cycle", "histogram"])
def test_beyond_the_line(beyond):
    """One line of 2 entries, ``[3, 3]``, for a request of 40 tokens: cycling keeps accepting 3; the histogram
    (all 3) does too; coverage is the 2 recorded of the 10 verifications."""
    tr = {"requests": [{"num_spec_tokens": 3, "per_step_accepted": [3, 3]}], "beyond": beyond}
    r = simulate(workload([30], [40]), [EngineConfig(speculative=spec(3, acceptance_trace=tr))])[0]
    assert r.totals["spec_num_drafts"] == 10 and r.totals["spec_num_accepted_tokens"] == 30
    assert r.totals["spec_trace_coverage"] == pytest.approx(0.2)


def test_histogram_beyond_draws_from_the_requests_own_histogram():
    """Past its line a request draws from its ``acceptance_histogram``: with ``[1, 0, 0, 1]`` half its
    verifications accept 0 and half 3 (deterministic under the seed)."""
    tr = {"requests": [{"num_spec_tokens": 3, "per_step_accepted": [0], "acceptance_histogram": [1, 0, 0, 1]}],
          "beyond": "histogram"}
    cfg = EngineConfig(speculative=spec(3, acceptance_trace=tr))
    r = simulate(workload([30], [2000]), [cfg])[0]
    t = r.totals
    assert set(np.round(t["spec_position_acceptance_rates"], 6)) == {round(t["spec_position_acceptance_rates"][0], 6)}
    assert 0.4 < t["spec_acceptance_rate"] < 0.6
    assert simulate(workload([30], [2000]), [cfg])[0].totals == t


def test_a_smaller_k_replays_the_accepted_prefix():
    tr = {"requests": [{"num_spec_tokens": 5, "per_step_accepted": [5, 0, 2, 4]}]}
    r = simulate(workload([30], [1 + 4 + 1 + 3 + 4]), [EngineConfig(speculative=spec(3, acceptance_trace=tr))])[0]
    assert r.totals["spec_num_drafts"] == 4 and r.totals["spec_num_accepted_tokens"] == 3 + 0 + 2 + 3
    with pytest.raises(ConfigError) as exc:
        EngineConfig(speculative=spec(6, acceptance_trace=tr))
    assert exc.value.field == "speculative.acceptance_trace"
    assert exc.value.message == "recorded with num_speculative_tokens 5, cannot replay k = 6"


def test_a_padded_lines_first_entry_is_not_replayed():
    """vLLM's padded admission (prompt cached but its last token) recorded a first entry of 0 accepted;
    a real verification of the replay starts at the second entry."""
    line = {"num_spec_tokens": 3, "per_step_accepted": [0, 3, 3, 3], "usage": {
        "prompt_tokens": 33, "prompt_tokens_details": {"cached_tokens": 32}}}
    r = simulate(workload([30], [13]), [EngineConfig(speculative=spec(3, acceptance_trace={"requests": [line]}))])[0]
    assert r.totals["spec_num_drafts"] == 3 and r.totals["spec_num_accepted_tokens"] == 9
    assert r.totals["spec_trace_coverage"] == 1.0


T = "speculative.acceptance_trace"


@pytest.mark.parametrize("sp, field, message", [
    (spec(3, acceptance_pattern=[1, 4]), "speculative.acceptance_pattern[1]",
     "must be a whole number from 0 to 3 (num_speculative_tokens), got 4"),
    (spec(3, acceptance_pattern=[]), "speculative.acceptance_pattern", None),
    (spec(3, acceptance_pattern=[1, True]), "speculative.acceptance_pattern[1]", None),
    (spec(3, acceptance_pattern=[1], acceptance_rate=0.5), "speculative.acceptance_pattern",
     "give one acceptance model, not acceptance_rate and acceptance_pattern"),
    (spec(3, acceptance_trace={"requests": [{"num_spec_tokens": 3, "per_step_accepted": [1]}] * 4 + [
        {"num_spec_tokens": 3, "per_step_accepted": [0, 1, 2, 3, 3, 3, 3, 4]}]}),
     f"{T}.requests[4].per_step_accepted[7]",
     "must be a whole number from 0 to 3 (num_speculative_tokens of the trace), got 4"),
    (spec(3, acceptance_trace={"requests": [{"num_spec_tokens": 3, "per_step_accepted": [0, 3],
                                             "per_step_drafted": [3, 2]}]}),
     f"{T}.requests[0].per_step_drafted[1]", "2 drafted but 3 accepted"),
    (spec(3, acceptance_trace={"requests": [{"per_step_accepted": [0]}]}), f"{T}.requests[0].num_spec_tokens", None),
    (spec(3, acceptance_trace={"requests": []}), f"{T}.requests", None),
    (spec(3, acceptance_trace={"requests": [{"num_spec_tokens": 3, "per_step_accepted": []}], "match": "x"}),
     f"{T}.match", None),
    (spec(3, acceptance_trace={"requests": [{"num_spec_tokens": 3, "per_step_accepted": []}], "beyond": "x"}),
     f"{T}.beyond", None),
    (spec(3, acceptance_trace=[1]), T, None),
])
def test_bad_input_names_the_field(sp, field, message):
    with pytest.raises(ConfigError) as exc:
        EngineConfig.from_dict({"speculative": sp})
    assert exc.value.field == field, str(exc.value)
    assert not exc.value.message.startswith(field)
    if message:
        assert exc.value.message == message


def test_match_id_needs_every_id():
    tr = {"requests": [{"id": "a", "num_spec_tokens": 3, "per_step_accepted": [1]}], "match": "id"}
    with pytest.raises(ValueError) as exc:
        simulate(workload([30, 30], [5, 5], ["a", "b"]), [EngineConfig(speculative=spec(3, acceptance_trace=tr))])
    assert exc.value.field == f"{T}.match" and "'b'" in exc.value.message


def test_config_round_trip():
    for sp in (spec(3, acceptance_pattern=[3, 1, 0, 2]),
               spec(3, acceptance_trace={"requests": _trace(np.random.default_rng(1), 5), "beyond": "histogram"})):
        cfg = EngineConfig(speculative=sp)
        again = EngineConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
        assert again == cfg and hash(again) == hash(cfg)
        if "acceptance_pattern" in sp:  # (1 + the pattern's mean drafts accepted)
            assert again.speculative.expected_tokens_per_step() == pytest.approx(2.5)
        written = cfg.to_dict()["speculative"]
        assert {k: v for k, v in written.items() if k in sp} == sp


def test_a_trace_file_through_the_cli(tmp_path, capsys):
    """``{"path": ...}`` in a config file, relative to the config's folder: one JSON line per request, in
    vLLM's form (``metrics.speculative_decoding`` nested) or flat."""
    from simulator.cli import commands as cli

    (tmp_path / "traces").mkdir()
    lines = [{"id": "r0", "metrics": {"speculative_decoding": {"num_spec_tokens": 3, "per_step_accepted": [3, 3]}}},
             {"id": "r1", "num_spec_tokens": 3, "per_step_accepted": [0, 1]}]
    (tmp_path / "traces" / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "w.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "prompt_tokens": 30, "output_tokens": o,
                                                          "arrival_step": 0}) + "\n" for i, o in enumerate((9, 4))))
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"speculative": {"method": "eagle", "num_speculative_tokens": 3,
                                               "acceptance_trace": {"path": "traces/t.jsonl"}}}))
    assert cli.main(["run", "--workload", str(tmp_path / "w.jsonl"), "--config", str(cfg)]) == 0
    t = json.loads(capsys.readouterr().out)["totals"]
    assert t["spec_num_accepted_tokens"] == 3 + 3 + 0 + 1 and t["spec_trace_coverage"] == 1.0
    cfg.write_text(json.dumps({"speculative": {"method": "eagle", "num_speculative_tokens": 3,
                                               "acceptance_trace": {"path": "nope.jsonl"}}}))
    assert cli.main(["run", "--workload", str(tmp_path / "w.jsonl"), "--config", str(cfg)]) == 2
    assert "speculative.acceptance_trace.path" in capsys.readouterr().err


def test_the_docs_trace_example(tmp_path):
    """The shell block of docs/speculative_decoding.md, "Replaying measured acceptance", prints what the page
    shows under it (11 verifications, 23 accepted, coverage 0.818: counted by hand on the page)."""
    import os
    import subprocess
    import sys

    text = (ROOT / "docs" / "speculative_decoding.md").read_text(encoding="utf-8")
    section = text[text.index("## Replaying measured acceptance"):text.index("## Formulas")]
    block = section.split("```bash\n", 1)[1].split("```\n", 1)
    shown = block[1].strip().splitlines()[0].strip()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=str(ROOT))
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block[0]], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == shown == "11 23 0.818"


def test_the_caps():
    """At most 100,000 requests and 10,000,000 entries (a line of 10,000,001 is refused on its own)."""
    line = {"num_spec_tokens": 3, "per_step_accepted": [1]}
    with pytest.raises(ConfigError) as exc:
        EngineConfig(speculative=spec(3, acceptance_trace={"requests": [line] * 100_001}))
    assert exc.value.field == f"{T}.requests" and "100,000" in exc.value.message
    big = {"num_spec_tokens": 3, "per_step_accepted": [0] * 6_000_000}
    with pytest.raises(ConfigError) as exc:
        EngineConfig(speculative=spec(3, acceptance_trace={"requests": [line, big, big]}))
    assert exc.value.field == f"{T}.requests[2].per_step_accepted" and "10,000,000" in exc.value.message


def _vllm_trace(oracle: dict, k: int) -> dict:
    """The accepted lengths vLLM's own run recorded, per request in verification order, as a trace (the
    verifications of drafts vLLM padded in, rule R7, left out: a trace of vLLM's metrics marks only an
    admission's through ``usage``)."""
    s = oracle["steps"]
    padded = s.get("padded_ids") or [[]] * len(s["step"])
    per: dict[str, list[int]] = {r["id"]: [] for r in oracle["requests"]}
    for ids, acc, pad in zip(s["acc_ids"], s["acc"], padded):
        for rid, a in zip(ids, acc):
            if rid not in (pad or ()):
                per[rid].append(int(a))
    return {"requests": [{"id": rid, "num_spec_tokens": k, "per_step_accepted": a} for rid, a in per.items()],
            "match": "id"}


def _replay_cases() -> list[str]:
    from tests.simulator.test_engine_oracle_spec import CASES
    return CASES


@pytest.mark.parametrize("case", _replay_cases())
def test_vllms_own_accepted_lengths_replay_step_by_step(case):
    """Replaying the accepted lengths vLLM recorded in a golden case (``tests/data/oracle_spec``) as an
    ``acceptance_trace`` gives vLLM's schedule step by step, as the seeded draws do, on all 69 cases (sync and
    async, KV pressure, preemptions, padded admissions in 6, every method)."""
    from tests.simulator.test_engine_oracle_spec import case_files, engine_run, first_divergence, oracle_trace

    oracle, wl, cfg = case_files(case)
    k = cfg.speculative.num_speculative_tokens
    replayed = replace(cfg, speculative=SpeculativeConfig(
        method=cfg.speculative.method, num_speculative_tokens=k, num_mtp_modules=cfg.speculative.num_mtp_modules,
        acceptance_trace=_vllm_trace(oracle, k)))
    result, got = engine_run(wl, replayed)
    assert first_divergence(oracle_trace(oracle), got) is None
    assert result.totals["spec_num_accepted_tokens"] == oracle["totals"]["spec_num_accepted_tokens"]
    assert result.totals["spec_trace_coverage"] == 1.0


def test_a_trace_on_replicas_replays_what_one_engine_does():
    """Four replicas behind a router (each a full engine given the requests routed to it): every request replays
    its own line whichever replica serves it, so with nothing cut the cluster accepts the trace's tokens."""
    from simulator.cluster.replicas import simulate_cluster

    rng = np.random.default_rng(7)
    lines = _trace(rng, 60)
    wl = _exact_workload(lines, [ln["id"] for ln in lines])
    cfg = EngineConfig(num_gpu_blocks=50_000, max_num_batched_tokens=16_384,
                       speculative=spec(3, acceptance_trace={"requests": lines}))
    res = simulate_cluster(wl, cfg, 4, routing="round-robin")
    per = [inst.result.totals for inst in res.instances]
    assert sum(t["spec_num_accepted_tokens"] for t in per) == sum(sum(ln["per_step_accepted"]) for ln in lines)
    assert all(t["spec_trace_coverage"] == 1.0 for t in per) and len(per) == 4
    assert res.totals["finished"] == 60
