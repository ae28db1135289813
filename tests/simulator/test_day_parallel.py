"""A day's chunks on two processes (simulator.day.parallel): pipelined, and with a second chain from a guessed
handover, the result is exactly that of chunks one after another."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.autoscale import HpaPolicy
from simulator.base import ConfigError
from simulator.day import Handover, simulate_day_in_chunks
from simulator.day.parallel import Chains, can_fork, simulate_day_in_processes

from .test_day_fleet import CONFIG, workload

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs fork")


def _same(a, b) -> None:
    for col in ("first_token_time_s", "finish_time_s", "num_output_tokens", "num_preemptions", "pod"):
        assert np.array_equal(a.requests[col], b.requests[col], equal_nan=True), col
    assert a.requests["status"] == b.requests["status"]
    assert [p.to_dict() for p in a.pods] == [p.to_dict() for p in b.pods]
    assert a.samples == b.samples and a.started == b.started and a.end_s == b.end_s


@pytest.mark.parametrize("speculate", [False, True])
def test_chunks_on_two_processes_are_the_chunks_one_after_another(speculate):
    wl = workload(6000, "stages:3x300,30x120,3x300,20x120,3x300")
    policy = HpaPolicy(metric="running", target=24, max_replicas=6)
    one = simulate_day_in_chunks(wl, CONFIG, policy, chunk_s=300, overlap_s=120, cold_start_s=45.0)
    two, met = simulate_day_in_processes(wl, CONFIG, policy, chunk_s=300, overlap_s=120, cold_start_s=45.0,
                                         processes=2, speculate=speculate)
    assert max(s.ready for s in one.samples) >= 3, "the day should make the policy scale"
    _same(one, two)
    if not speculate:
        assert met is None
    else:  # here the lead-in from one replica handed the second chain the true handover
        assert met is not None


def _h(x: float) -> Handover:
    return Handover((x,), {})


def test_the_second_chain_counts_only_from_where_it_met_the_first():
    sent = []
    chains = Chains(6, lambda chain, i, h: sent.append((chain, i, h)))
    chains.told("handover", "L", 2, _h(9.0))      # the lead-in's guess for chunk 3
    chains.told("handover", "A", 0, _h(1.0))      # chunk 1's true start
    chains.told("chunk", "A", 0, "a0")
    chains.told("handover", "B", 3, _h(4.5))      # chunk 3 (from the guess) tells chunk 4's start
    chains.told("chunk", "B", 3, "b3")
    chains.told("handover", "A", 1, _h(2.0))
    chains.told("handover", "A", 2, _h(3.0))      # chunk 3's true start: not the guess, the first chain goes on
    assert chains.met is None and ("A", 3, _h(3.0)) in sent
    chains.told("handover", "B", 4, _h(5.0))
    chains.told("chunk", "B", 4, "b4")
    chains.told("handover", "A", 3, _h(4.5))      # chunk 4's true start: the second chain's, they meet at 4
    assert chains.met == 4 and ("A", 4, _h(4.5)) not in sent
    chains.told("chunk", "B", 5, "b5")
    for i in (1, 2, 3):
        chains.told("chunk", "A", i, f"a{i}")
    assert chains.final == {0: "a0", 1: "a1", 2: "a2", 3: "a3", 4: "b4", 5: "b5"}  # never b3, from the guess


def test_bad_processes_name_the_field():
    with pytest.raises(ConfigError, match="processes: must be a whole number from 1 to 16"):
        simulate_day_in_processes(workload(50, "poisson-time:5"), CONFIG, HpaPolicy(), processes=0)
