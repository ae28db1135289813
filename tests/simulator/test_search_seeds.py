"""The search's verdict on other traffic seeds (simulator/search/seeds.py, ``search --check-seeds``).

Small Llama 3.1 8B workloads (tens of requests, as in test_search.py) so each simulation takes milliseconds.
The seed check is held against an independent computation: each seed's workload generated here and the
answer's shape simulated by :func:`simulator.cluster.replicas.simulate_cluster`, judged by ``judge``.
"""

from __future__ import annotations

import json

import pytest

from simulator.cli.commands import main
from simulator.cluster.replicas import simulate_cluster
from simulator.search import (
    SearchError,
    SeedCheck,
    check_seeds,
    other_seeds,
    search_deployments,
    seed_check_words,
    seed_count,
)
from simulator.search.evaluate import default_max_model_len, judge, prepare_candidate
from simulator.search.space import Slo, SloTarget
from tests.simulator.test_search import LLAMA_8B, SMALL, _workload
from tests.simulator.test_search_cli import BASE


def _independent_verdict(seed: int, best, slo: Slo, replicas: int) -> tuple[bool, float | None]:
    wl = _workload(seed=seed)
    cand = SMALL.candidates()[best.index]
    mml = max(int(best.sizing["max_model_len"]), default_max_model_len(wl, LLAMA_8B))
    prep = prepare_candidate(best.index, cand, LLAMA_8B, SMALL, mml, wl, slo)
    trial = judge(simulate_cluster(wl, prep.config, replicas, routing=SMALL.routing), wl, slo, 0.0)
    return trial.meets, trial.values["TTFT p90"]


def test_each_seeds_verdict_equals_an_independent_simulation():
    slo = Slo((SloTarget("ttft", "p90", 0.3), SloTarget("itl", "p90", 0.05)))
    res = search_deployments(_workload(), LLAMA_8B, SMALL, slo)
    assert res.best is not None and res.best.replicas > 1  # so one replica fewer is checked too
    check = check_seeds(res, lambda s: _workload(seed=s), LLAMA_8B, SMALL, slo, other_seeds(0))
    assert check.seeds == (1, 2, 3) and check.replicas == res.best.replicas
    for k, seed in enumerate(check.seeds):
        meets, ttft = _independent_verdict(seed, res.best, slo, res.best.replicas)
        assert check.meets[k] == meets and check.values["TTFT p90"][k] == pytest.approx(ttft, rel=1e-12)
        assert check.fewer_meets[k] == _independent_verdict(seed, res.best, slo, res.best.replicas - 1)[0]
    d = check.to_dict()
    assert d["stable"] == (all(check.meets) and not any(check.fewer_meets))
    assert f"meets on {sum(check.meets)} of 3" in d["words"]


def test_a_flipping_verdict_is_called_marginal_and_a_meeting_fewer_is_said():
    flip = SeedCheck((1, 2, 3), 2, (True, False, True), {"ITL p90": (0.012, 0.0556, 0.0097)},
                     {"ITL p90": 0.05}, (False, True, False))
    assert not flip.stable
    assert flip.words() == ("on 3 more traffic seeds (1, 2, 3): meets on 2 of 3 (ITL p90 9.7-55.6 ms against 50 ms): "
                            "marginal, consider one replica more; 1 replica meets on 1 of 3: the answer may be one "
                            "replica more than the traffic needs")
    steady = SeedCheck((4,), 3, (True,), {"TTFT p90": (0.2,)}, {"TTFT p90": 0.5}, (False,))
    assert steady.stable
    assert steady.words() == "on 1 more traffic seed (4): meets on 1 of 1 (TTFT p90 200 ms against 500 ms); 2 replicas miss on 1 of 1"


@pytest.mark.parametrize("seeds", [(), (1, 1), tuple(range(11))])
def test_bad_seed_lists_are_refused(seeds):
    slo = Slo((SloTarget("ttft", "p90", 5.0),))
    res = search_deployments(_workload(n=10), LLAMA_8B, SMALL, slo)
    with pytest.raises(SearchError, match="seeds: give 1 to 10 different seeds"):
        check_seeds(res, lambda s: _workload(n=10, seed=s), LLAMA_8B, SMALL, slo, seeds)


def test_the_cli_checks_three_seeds_by_default_and_says_how_much_traffic(capsys):
    assert main(BASE + ["--slo", "ttft:p90:0.5", "--seed", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seed_check"]["seeds"] == [6, 7, 8] and len(out["seed_check"]["meets"]) == 3
    assert out["traffic"].startswith(f"{20:,} requests arriving over ") and "Poisson at 4 requests/s, seed 5" in out["traffic"]
    assert main(BASE + ["--slo", "ttft:p90:0.5", "--check-seeds", "0", "--summary"]) == 0
    text = capsys.readouterr().out
    assert "across seeds" not in text and "traffic: 20 requests arriving over" in text
    assert main(BASE + ["--slo", "ttft:p90:0.5", "--check-seeds", "11"]) == 2
    assert capsys.readouterr().err.startswith("error: --check-seeds: a whole number of seeds from 0 to 10 (0: not checked), "
                                              "got 11")


def test_a_workload_file_is_one_draw(capsys, tmp_path):
    path = tmp_path / "wl.csv"  # BurstGPT's columns (docs/traffic.md)
    path.write_text("Timestamp,Model,Request tokens,Response tokens\n"
                    + "".join(f"{i * 0.25},ChatGPT,512,64\n" for i in range(12)))
    args = [a for a in BASE if a not in ("--rate", "4", "--duration", "5")]
    assert main(args + ["--workload", str(path), "--slo", "ttft:p90:0.5", "--summary"]) == 0
    text = capsys.readouterr().out
    assert "across seeds: not checked (a workload file is one draw)" in text
    assert "traffic: 12 requests arriving over 2.8 s (file wl.csv, 4 requests/s)" in text


@pytest.mark.parametrize("value", [0, 3, 10])
def test_the_seed_count_takes_0_to_10(value):
    assert seed_count(value) == value


@pytest.mark.parametrize("value", [-1, 11, True, "3", 2.0, None])
def test_the_seed_count_refuses_the_rest_naming_the_field(value):
    """One range check for the command line (``--check-seeds``) and the planner (``check_seeds``)."""
    with pytest.raises(SearchError) as exc:
        seed_count(value, "--check-seeds")
    assert str(exc.value) == f"--check-seeds: a whole number of seeds from 0 to 10 (0: not checked), got {value!r}"
    with pytest.raises(SearchError, match=r"^check_seeds: "):
        seed_count(value)


def test_the_cli_refuses_a_negative_seed_count_before_searching(capsys):
    assert main(BASE + ["--slo", "ttft:p90:0.5", "--check-seeds", "-1"]) == 2
    assert capsys.readouterr().err.startswith("error: --check-seeds: a whole number of seeds from 0 to 10")


def test_words_say_why_there_is_no_check():
    check = SeedCheck((4,), 1, (True,), {"TTFT p90": (0.2,)}, {"TTFT p90": 0.5}, None)
    assert seed_check_words(check, asked=1) == check.words() == seed_check_words(check.to_dict(), asked=1)
    assert seed_check_words(None, asked=3, one_draw="a trace") == "not checked (a trace is one draw)"
    assert seed_check_words(None, asked=3) == "not checked (no answer)"
    assert seed_check_words(None, asked=0, one_draw="a trace") is None
