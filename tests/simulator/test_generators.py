"""Synthetic workloads: arrivals, lengths, prefix groups, multi-turn, reproducibility, limits."""

import json

import numpy as np
import pytest

from simulator.workload.distributions import Constant, Normal, Uniform, parse_distribution
from simulator.workload.generators import (
    ArrivalProcess,
    PrefixGroup,
    TurnSpec,
    WorkloadSpec,
    generate_workload,
    parse_arrival,
)
from simulator.workload.requests import WorkloadError


def gen(seed=0, **kw):
    return generate_workload(WorkloadSpec(**kw), seed)


def test_same_seed_same_workload_other_seed_differs():
    spec = WorkloadSpec(n=500, arrival=parse_arrival("gamma:2,3"), prefixes=(PrefixGroup(64, 0.5, 3),),
                        turns=TurnSpec(turns=Uniform(1, 4)))
    a, b, c = generate_workload(spec, 7), generate_workload(spec, 7), generate_workload(spec, 8)
    for name in ("prompt_len", "output_len", "arrival", "prefix_id", "parent"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert a.ids == b.ids
    assert not np.array_equal(a.prompt_len, c.prompt_len)


def test_burst_arrives_at_step_zero():
    w = gen(n=100)
    assert w.n == 100 and w.arrival_unit == "step" and not w.arrival.any()


def test_poisson_rate_in_steps():
    w = gen(n=20_000, arrival=parse_arrival("poisson:4"))
    assert np.all(w.arrival == np.floor(w.arrival)) and np.all(np.diff(w.arrival) >= 0)
    assert w.n / w.arrival[-1] == pytest.approx(4, rel=0.03)


def test_poisson_in_seconds_has_unit_cv_and_microsecond_times():
    w = gen(n=20_000, arrival=parse_arrival("poisson:10", unit="s"))
    gaps = np.diff(w.arrival)
    assert w.arrival_unit == "s"
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)
    assert np.allclose(w.arrival, np.round(w.arrival, 6))


def test_oracle_poisson_time_means_seconds():
    assert parse_arrival("poisson-time:10") == ArrivalProcess("poisson", rate=10, unit="s")


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_gaps_have_the_requested_mean_and_cv(cv):
    w = gen(n=50_000, arrival=ArrivalProcess("gamma", rate=5, cv=cv, unit="s"))
    gaps = np.diff(w.arrival)
    assert gaps.mean() == pytest.approx(0.2, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08)


def test_every_k_steps():
    w = gen(n=10, arrival=parse_arrival("every:3"))
    assert w.arrival.tolist() == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]
    w = gen(n=6, arrival=parse_arrival("every:0.5"))
    assert w.arrival.tolist() == [0, 0, 1, 1, 2, 2]


def test_lengths_follow_their_distributions():
    w = gen(n=50_000, prompt=Normal(512, 128), output=parse_distribution("lognormal:256,128"))
    assert w.prompt_len.mean() == pytest.approx(512, rel=0.01)
    assert w.output_len.mean() == pytest.approx(256, rel=0.02)
    assert w.output_len.std() == pytest.approx(128, rel=0.05)


def test_shared_prefix_fraction_is_exact_and_prefix_is_prepended():
    w = gen(n=1000, prompt=Constant(100), prefixes=(PrefixGroup(512, 0.8),))
    assert w.prefix_len.tolist() == [512] and w.prefix_names == ("p0",)
    shared = w.prefix_id >= 0
    assert shared.sum() == 800
    assert set(w.prompt_len[shared].tolist()) == {612} and set(w.prompt_len[~shared].tolist()) == {100}


def test_include_mode_keeps_the_sampled_total_and_one_unique_token():
    w = gen(n=100, prompt=Constant(600), prefixes=(PrefixGroup(512, 1.0),), prefix_mode="include")
    assert set(w.prompt_len.tolist()) == {600}
    w = gen(n=100, prompt=Constant(100), prefixes=(PrefixGroup(512, 1.0),), prefix_mode="include")
    assert set(w.prompt_len.tolist()) == {513}


def test_several_groups_and_prefixes_split_as_asked():
    w = gen(n=10_000, prefixes=(PrefixGroup(512, 0.5, count=4), PrefixGroup(64, 0.25)))
    assert w.prefix_len.tolist() == [512] * 4 + [64]
    counts = np.bincount(w.prefix_id + 1, minlength=6) / w.n
    assert counts[0] == pytest.approx(0.25)
    assert counts[5] == pytest.approx(0.25)
    assert counts[1:5] == pytest.approx([0.125] * 4, abs=0.015)


def test_multi_turn_turns_extend_their_parent_context():
    spec = WorkloadSpec(n=300, prompt=Constant(100), output=Uniform(5, 50), arrival=parse_arrival("poisson:0.2"),
                        prefixes=(PrefixGroup(32, 1.0),),
                        turns=TurnSpec(turns=Constant(3), user_tokens=Constant(10), think_time=4.0))
    w = generate_workload(spec, 0)
    assert w.n == 300
    child = np.flatnonzero(w.parent >= 0)
    assert child.size == 200  # 100 conversations of 3 turns
    par = w.parent[child]
    assert np.all(par < child)
    assert np.array_equal(w.prompt_len[child], w.prompt_len[par] + w.output_len[par] + 10)
    # a turn arrives no earlier than one step per output token of its parent
    assert np.all(w.arrival[child] >= w.arrival[par] + w.output_len[par])
    assert np.all(np.diff(w.arrival) >= 0)
    assert np.array_equal(w.shared_len()[child], w.prompt_len[par] + w.output_len[par])
    first = w.parent < 0
    assert np.all(w.prefix_id[first] == 0) and np.all(w.prefix_id[~first] == -1)
    assert w.ids[0].startswith("c") and "t" in w.ids[0]


def test_multi_turn_last_conversation_is_cut_to_n():
    w = gen(n=10, turns=TurnSpec(turns=Constant(4)))
    assert w.n == 10 and (w.parent < 0).sum() == 3


def test_multi_turn_in_seconds_waits_for_output_time():
    spec = WorkloadSpec(n=40, output=Constant(100), arrival=parse_arrival("burst", unit="s"),
                        turns=TurnSpec(turns=Constant(2), think_time=0.0, seconds_per_output_token=0.02))
    w = generate_workload(spec, 0)
    child = w.parent >= 0
    assert np.allclose(w.arrival[child] - w.arrival[w.parent[child]], 2.0)


def test_spec_round_trips_through_json():
    spec = WorkloadSpec(n=50, prompt=parse_distribution("paretolognormal:max=4096"),
                        arrival=parse_arrival("gamma:3,2", unit="s"), prefixes=(PrefixGroup(256, 0.3, 2),),
                        prefix_mode="include", turns=TurnSpec(turns=Uniform(1, 5), think_time=2.5))
    d = json.loads(json.dumps(spec.to_dict()))
    assert set(d) == {"n", "prompt", "output", "arrival", "prefixes", "prefix_mode", "turns"}
    assert d["arrival"] == {"kind": "gamma", "rate": 3.0, "cv": 2.0, "interval": 1.0, "unit": "s"}
    assert d["prefixes"] == [{"length": 256, "fraction": 0.3, "count": 2}]
    assert WorkloadSpec.from_dict(d) == spec


def test_from_dict_accepts_distribution_and_arrival_strings():
    spec = WorkloadSpec.from_dict({"n": 10, "prompt": "const:5", "arrival": "poisson:2"})
    assert spec.prompt == Constant(5) and spec.arrival.rate == 2


@pytest.mark.parametrize("data, message", [
    ({"n": 0}, "n: must be"),
    ({"n": 2_000_001}, "n: must be"),
    ({"n": 2.5}, "n: must be a whole number"),
    ({"colour": 1}, "colour: unknown field"),
    ({"prompt": "normal:1"}, "prompt: normal takes 2"),
    ({"arrival": {"kind": "poisson", "rate": 0}}, "arrival.rate"),
    ({"arrival": {"kind": "fast"}}, "arrival.kind"),
    ({"arrival": "gamma:1"}, "arrival: gamma takes 2"),
    ({"prefixes": [{"length": 10, "fraction": 0.7}, {"length": 5, "fraction": 0.6}]}, "add up to at most 1"),
    ({"prefixes": [{"length": 0, "fraction": 0.5}]}, "prefixes.length"),
    ({"prefixes": [{"length": 10, "fraction": 1.5}]}, "prefixes.fraction"),
    ({"prefix_mode": "middle"}, "prefix_mode"),
    ({"turns": {"think_time": -1}}, "turns.think_time"),
    ({"turns": {"rounds": 3}}, "turns.rounds: unknown field"),
])
def test_bad_specs_name_the_field(data, message):
    with pytest.raises(WorkloadError, match=message):
        WorkloadSpec.from_dict(data)


def test_prompts_beyond_ten_million_tokens_are_refused():
    spec = WorkloadSpec(n=5, prompt=Constant(9_000_000), prefixes=(PrefixGroup(2_000_000, 1.0),))
    with pytest.raises(WorkloadError, match="10,000,000-token limit"):
        generate_workload(spec, 0)


def test_seed_must_be_a_non_negative_whole_number():
    with pytest.raises(WorkloadError, match="seed"):
        generate_workload(WorkloadSpec(n=1), -1)


def test_a_whole_number_past_a_floats_range_is_a_field_error_not_an_overflow():
    """A sweep form's workload JSON held a 400-digit prompt length: float() raised OverflowError, a 500 (found by
    tests/planner/test_hostile_form_values.py in CI)."""
    from simulator.workload.generators import PrefixGroup
    from simulator.workload.requests import WorkloadError

    with pytest.raises(WorkloadError) as caught:
        PrefixGroup(length=10 ** 400)
    assert caught.value.field == "prefixes.length" and "a number of 401 digits" in caught.value.message
