"""``simulate(on_result=...)``: each configuration's result as soon as it is finished (a caller that stops the
batch part-way, a cancelled sweep, keeps those: issue 33 item 6)."""

from __future__ import annotations

import pytest

from simulator.batch import simulate
from simulator.engine import EngineConfig
from simulator.workload.generators import WorkloadSpec, generate_workload


class Stop(Exception):
    pass


def _batch():
    wl = generate_workload(WorkloadSpec.from_dict({"n": 120, "prompt": "normal:256,64", "output": "normal:64,16",
                                                   "arrival": "poisson:2"}), seed=4)
    return wl, [EngineConfig(num_gpu_blocks=600, max_num_seqs=s) for s in (4, 8, 16, 32)]


@pytest.mark.parametrize("processes", [1, 2])
def test_every_result_is_handed_over_once_and_equals_the_returned_one(processes):
    wl, cfgs = _batch()
    seen = {}
    out = simulate(wl, cfgs, processes=processes, on_result=lambda b, r: seen.setdefault(b, []).append(r))
    assert sorted(seen) == list(range(len(cfgs))) and all(len(v) == 1 for v in seen.values())
    for b, r in enumerate(out):
        assert seen[b][0] is r


def test_a_batch_stopped_part_way_keeps_the_results_it_handed_over():
    wl, cfgs = _batch()
    seen: dict[int, object] = {}

    def progress(fraction: float) -> None:
        if len(seen) >= 2:
            raise Stop()

    with pytest.raises(Stop):
        simulate(wl, cfgs, progress=progress, on_result=seen.__setitem__)
    assert 2 <= len(seen) < len(cfgs)
    alone = simulate(wl, [cfgs[b] for b in seen])
    for (b, r), a in zip(seen.items(), alone):
        assert r.totals["finished"] == a.totals["finished"] == 120
        assert r.totals["preemptions"] == a.totals["preemptions"] and r.totals["num_steps"] == a.totals["num_steps"]
