"""A queue still growing at the end of the traffic is an overloaded deployment (issue 32 item 3), whatever the
latency targets say: checked on queues built by hand, where the growth rate is known (arrivals minus service),
and through the replicas search."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cluster import smallest_replicas
from simulator.engine import EngineConfig
from simulator.engine.steady_state import GROWTH_SHARE, queue_growth
from simulator.workload import WorkloadSpec, generate_workload, parse_arrival


def fifo_first_tokens(arrival: np.ndarray, service_s: float) -> np.ndarray:
    """One server, first come first served, ``service_s`` each: when each request's first token comes."""
    out = np.empty_like(arrival)
    free = 0.0
    for i, a in enumerate(arrival):
        free = max(free, a) + service_s
        out[i] = free
    return out


@pytest.mark.parametrize("load", [2.0, 1.25])
def test_an_overloaded_queue_grows_at_arrivals_minus_service(load):
    mu = 10.0
    arrival = np.sort(np.random.default_rng(0).uniform(0, 600, int(load * mu * 600)))
    g = queue_growth(arrival, fifo_first_tokens(arrival, 1 / mu))
    assert g is not None and g.growing
    lam = arrival.size / 600
    assert g.rate_per_s == pytest.approx(lam - mu, rel=0.1)
    assert "still growing" in g.words() and f"{g.waiting_at_end:,}" in g.words()


@pytest.mark.parametrize("load", [0.5, 0.9])
def test_a_queue_that_keeps_up_is_steady(load):
    mu = 10.0
    arrival = np.sort(np.random.default_rng(1).uniform(0, 600, int(load * mu * 600)))
    g = queue_growth(arrival, fifo_first_tokens(arrival, 1 / mu))
    assert g is not None and not g.growing and g.rate_per_s < GROWTH_SHARE * g.arrival_rate_per_s


def test_requests_that_never_got_a_first_token_wait_to_the_end_and_too_few_are_not_judged():
    arrival = np.linspace(0, 100, 400)
    first = arrival + 0.1
    first[200:] = np.nan  # the second half never served
    g = queue_growth(arrival, first)
    assert g.growing and g.waiting_at_end == 200 and g.rate_per_s == pytest.approx(4.0)
    assert queue_growth(arrival[:60], first[:60]) is None


def test_the_replicas_search_never_takes_an_overloaded_count_for_a_meeting_one():
    """A TTFT target of 10 minutes lets one 60-second run of an overloaded replica through on latency alone;
    its growing queue does not."""
    wl = generate_workload(WorkloadSpec(n=1200, prompt="normal:512,64", output="normal:128,16",
                                        arrival=parse_arrival("poisson-time:20")), seed=0)
    cfg = EngineConfig(num_gpu_blocks=4000, block_size=16, max_num_seqs=32, max_num_batched_tokens=2048,
                       step_time_model={"base_s": 0.02, "per_token_s": 2e-5, "per_req_s": 1e-4})
    found = smallest_replicas(wl, cfg, slo_ttft_s=600.0, slo_itl_s=None, max_instances=8)
    one = next(t for t in found.trials if t.num_instances == 1)
    assert one.ttft_s <= 600.0 and one.unfinished == 0  # latency alone would pass it
    assert not one.meets and one.queue_growth_per_s > 1.0
    assert found.num_instances > 1
