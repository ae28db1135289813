"""The search's answer, frontiers, chunk merge and report statuses, as properties over random spaces.

Random outcomes (shapes with random prices, GPU counts and trials at random replica counts with random
figures) go through :func:`simulator.search.deployments.assemble` and :func:`merge_results`, and every
property is checked against a brute-force reading of the same trials: the answer is the cheapest
deployment that meets the SLO (ties: better latency, then fewer GPUs), it is on every target's frontier,
no frontier point is beaten by another deployment that meets the other targets, chunks merge to the
same answer, and the report's per-row statuses agree with each row's numbers. A real search split in
chunks is checked last.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.search.exports import row_status
from simulator.search.deployments import Outcome, answer_key, assemble, merge_results, search_deployments
from simulator.search.evaluate import Trial, miss_words
from simulator.search.space import SearchSpace, Slo, SloTarget
from tests.simulator.test_search import H100, L4, L40S, LLAMA_8B, _workload

SLO = Slo((SloTarget("ttft", "p90", 0.5), SloTarget("itl", "p99", 0.05), SloTarget("e2e", "p90", 8.0)))


def _trial(n: int, price: float, figures: tuple[float, float, float]) -> Trial:
    values = {tg.label: v for tg, v in zip(SLO.targets, figures)}
    misses = tuple(miss_words(tg.label, v, tg.max_s) for tg, v in zip(SLO.targets, figures) if v > tg.max_s)
    severity = max(v / tg.max_s for tg, v in zip(SLO.targets, figures))
    return Trial(n, n * price, values, 1.0, 100, 0, 0, 1000.0, 1.0, not misses, misses, severity)


@st.composite
def outcomes(draw):
    n_shapes = draw(st.integers(1, 7))
    prices = draw(st.lists(st.sampled_from([1.0, 1.5, 2.0, 3.0]), min_size=n_shapes, max_size=n_shapes))
    outs = []
    for i, price in enumerate(prices):
        gpus = draw(st.sampled_from([1, 2, 4]))
        counts = draw(st.sets(st.integers(1, 4), max_size=4))
        figs = st.tuples(st.sampled_from([0.2, 0.4, 0.5, 0.6, 0.9]), st.sampled_from([0.02, 0.04, 0.05, 0.07]),
                         st.sampled_from([3.0, 8.0, 9.0]))
        trials = {n: _trial(n, price, draw(figs)) for n in sorted(counts)}
        meeting = [n for n, t in trials.items() if t.meets]
        found = min(meeting) if meeting else None
        status = "meets" if found is not None else ("misses" if trials else "rejected")
        cand = {"label": f"shape {i}", "gpus_per_replica": gpus, "gpu": "G", "tensor_parallel": gpus,
                "pipeline_parallel": 1, "precision": "bf16", "kv_cache_dtype": "auto", "max_num_seqs": 16}
        outs.append(Outcome(i, cand, status, "why", found, None if found is None else trials[found].cost_per_hour,
                            None, 1, {}, tuple(trials[k] for k in sorted(trials))))
    return outs


def _answers(outs):
    """Brute force: every (outcome, trial) at the outcome's fewest meeting count, by the answer's rule."""
    pts = [(o, t) for o in outs for t in o.trials if o.replicas is not None and t.num_instances == o.replicas]
    return sorted(pts, key=lambda ot: answer_key(ot[1].cost_per_hour, ot[1],
                                                 ot[1].num_instances * ot[0].candidate["gpus_per_replica"],
                                                 ot[0].index))


def _meets(t, tg):
    return t.values[tg.label] <= tg.max_s


@settings(max_examples=300, deadline=None)
@given(outcomes(), st.integers(1, 3), st.randoms(use_true_random=False))
def test_answer_frontiers_merge_and_statuses(outs, chunks, rnd):
    res = assemble(outs, SLO, 0, 0.0)
    expected = _answers(outs)
    if not expected:
        assert res.best is None
        assert all(o.status != "answer" for o in res.outcomes)
    else:
        o, t = expected[0]
        assert (res.best.index, res.best.replicas) == (o.index, t.num_instances)
        assert t.meets
    # every target's frontier: points meet the other targets, none is beaten, the answer is on it
    for i, tg in enumerate(SLO.targets):
        front = [p for p in res.frontier if p["label"] == tg.label]
        others = [x for j, x in enumerate(SLO.targets) if j != i]
        pool = [(o, t) for o in outs for t in o.trials if all(_meets(t, x) for x in others)]
        for p in front:
            t = next(t for o in outs if o.index == p["index"] for t in o.trials if t.num_instances == p["replicas"])
            assert all(_meets(t, x) for x in others)
            for o2, t2 in pool:
                v, v2 = p["value_s"], t2.values[tg.label]
                assert not (round(t2.cost_per_hour, 9) < round(p["cost_per_hour"], 9) and v2 <= v), (p, t2)
                if round(t2.cost_per_hour, 9) == round(p["cost_per_hour"], 9) and not (p["meets"] and t2.meets):
                    assert not v2 < v, (p, t2)
        if res.best is not None:
            assert any(p["index"] == res.best.index and p["replicas"] == res.best.replicas for p in front)
        costs = [p["cost_per_hour"] for p in front]
        assert costs == sorted(costs)
    # chunks (as the Celery tasks split them) merge to the same answer and statuses
    parts = [[] for _ in range(chunks)]
    for o in outs:
        parts[rnd.randrange(chunks)].append(o)
    merged = merge_results([assemble(p, SLO, 1, 0.0).to_dict() for p in parts if p] or
                           [assemble([], SLO, 0, 0.0).to_dict()], SLO)
    assert (None if merged.best is None else (merged.best.index, merged.best.replicas)) == \
        (None if res.best is None else (res.best.index, res.best.replicas))
    assert [o.status for o in merged.outcomes] == [o.status for o in res.outcomes]
    assert [p for p in merged.frontier] == [p for p in res.frontier]
    # the report's rows: exactly one answer, each status agrees with its own row's figures
    rows = [row_status(o, t) for o in merged.to_dict()["outcomes"] for t in o["trials"] or [None]]
    assert sum(s == "answer" for s, _ in rows) == (0 if res.best is None else 1)
    for o in merged.to_dict()["outcomes"]:
        for t in o["trials"]:
            status, why = row_status(o, t)
            if status in ("answer", "meets"):
                assert t["meets"] and "misses" not in why
            else:
                assert status == "misses" and not t["meets"] and why.startswith("misses")
            if status != "answer":
                assert "cheapest" not in why


def test_equal_cost_ties_go_to_the_better_latency_then_fewer_gpus():
    slow, fast = (0.4, 0.04, 3.0), (0.2, 0.02, 3.0)
    mk = lambda i, gpus, figs: Outcome(i, {"label": f"s{i}", "gpus_per_replica": gpus}, "meets", "",  # noqa: E731
                                       1, 2.0, None, 1, {}, (_trial(1, 2.0, figs),))
    assert assemble([mk(0, 1, slow), mk(1, 1, fast)], SLO, 0, 0.0).best.index == 1  # the faster, listed second
    assert assemble([mk(0, 2, fast), mk(1, 1, fast)], SLO, 0, 0.0).best.index == 1  # same figures: fewer GPUs
    res = assemble([mk(0, 1, slow), mk(1, 1, fast)], SLO, 0, 0.0)
    assert [o.status for o in res.outcomes] == ["meets", "answer"]  # an equal-cost shape that meets "meets"


def test_edge_misses_print_digits_that_differ():
    text = miss_words("ITL p90", 0.03936, 0.0393)
    assert text == "misses ITL p90 by 0.06 ms (39.4 ms against 39.3 ms)"
    assert "(39.301 ms against 39.3 ms)" in miss_words("ITL p90", 0.039301, 0.0393)
    assert "39.3 ms against 39.3 ms" not in miss_words("ITL p90", 0.039301, 0.0393)


def test_a_chunked_search_keeps_the_one_search_answer():
    wl = _workload(n=30)
    slo = Slo((SloTarget("ttft", "p90", 0.3), SloTarget("itl", "p90", 0.05)))
    space = SearchSpace((H100, L40S, L4), tensor_parallel=(1,), precisions=("bf16", "fp8"), max_num_seqs=(16,),
                        max_replicas=3)
    whole = search_deployments(wl, LLAMA_8B, space, slo)
    n = len(space.candidates())
    parts = [search_deployments(wl, LLAMA_8B, space, slo, candidates=list(range(k, n, 3))).to_dict()
             for k in range(3)]
    merged = merge_results(parts, slo)
    assert (merged.best.index, merged.best.replicas) == (whole.best.index, whole.best.replicas)
    answers = [o for o in merged.outcomes if o.status == "answer"]
    assert len(answers) == 1 and all("cheapest" not in o.reason for o in merged.outcomes if o.status != "answer")
    for tg in slo.targets:
        assert any(p["label"] == tg.label and p["index"] == merged.best.index for p in merged.frontier)


def test_nothing_meets_names_the_closest_floor_not_the_first():
    wl = _workload(n=30)
    slo = Slo((SloTarget("itl", "p90", 0.004),))  # no GPU here decodes a token in 4 ms
    res = search_deployments(wl, LLAMA_8B, SearchSpace((L4, L40S, H100), tensor_parallel=(1,), max_replicas=2,
                                                       max_num_seqs=(16,)), slo)
    assert res.best is None and res.closest is None
    assert "the closest, 1x H100" in res.message, res.message
    assert math.isfinite(min(o.sizing["floor_severity"] for o in res.outcomes))


@pytest.mark.parametrize("bad", ["p0", "p100", "x90"])
def test_percentiles_outside_the_open_interval_are_refused(bad):
    from simulator.search.space import SearchError
    with pytest.raises(SearchError, match="slo.percentile"):
        SloTarget("itl", bad, 0.05)


def test_the_answer_states_its_margin_and_what_one_replica_fewer_gives():
    from simulator.search.deployments import margin_words

    slo = Slo.from_dict({"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5},
                                     {"metric": "itl", "percentile": "p90", "max_s": 0.04}]})
    labels = [tg.label for tg in slo.targets]

    def trial(n, ttft, itl, misses=()):
        return Trial(n, 10.0 * n, dict(zip(labels, (ttft, itl), strict=True)), 1.0, 100, 0, 0, 1.0, 1.0,
                     not misses, tuple(misses), max(ttft / 0.5, itl / 0.04))

    o = Outcome(index=0, candidate={"label": "x", "gpus_per_replica": 1}, status="meets", reason="", replicas=5,
                cost_per_hour=50.0, cost_per_million_tokens=None, min_replicas=1, sizing={},
                trials=(trial(4, 0.3, 0.0439, ["misses ITL p90 by 3.9 ms (43.9 ms against 40 ms)"]),
                        trial(5, 0.2, 0.0388)))
    words = margin_words(o, slo)
    assert "tightest: ITL p90 by 1.2 ms (38.8 ms against 40 ms)" in words and "marginal" in words
    assert "4 replicas would miss ITL p90 by 3.9 ms" in words and "misses" not in words
    roomy = Outcome(**{**o.__dict__, "trials": (trial(5, 0.2, 0.02),)})
    assert "marginal" not in margin_words(roomy, slo) and "replicas would" not in margin_words(roomy, slo)
