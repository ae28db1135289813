"""The cliff finder brackets a grid's knee to the resolution with far fewer simulations."""

import pytest

from planner.sweeps.cliff import find_cliff, grid_knee, max_evaluations
from planner.sweeps.runner import build_workload, simulate_points


def knee_metric(x, knee=8400.0):
    """Preemptions per request: steep below the knee, zero above it."""
    return 0.0 if x >= knee else 0.5 * (knee - x) / knee + 0.05


@pytest.mark.parametrize("knee", [1234.0, 8400.0, 19_001.0])
def test_finds_the_knee_of_a_grid_within_the_resolution_using_under_a_third_of_the_simulations(knee):
    lo, hi, res = 500, 20_000, 100
    grid = list(range(lo, hi + 1, res))
    grid_vals = [knee_metric(x, knee) for x in grid]
    want = grid_knee(grid, grid_vals, 0.02)
    calls = []

    def evaluate(xs):
        calls.append(list(xs))
        return [knee_metric(x, knee) for x in xs]

    r = find_cliff(evaluate, lo=lo, hi=hi, resolution=res, threshold=0.02, integer=True)
    assert r.status == "found"
    assert abs(r.cliff - want) <= res and r.cliff - r.bad <= res
    assert r.evaluations < len(grid) / 3
    assert r.evaluations == sum(len(c) for c in calls) <= max_evaluations(lo, hi, res)


def test_rate_cliff_is_found_from_the_other_side():
    r = find_cliff(lambda xs: [0.0 if x <= 7.3 else 1.0 for x in xs], lo=1, hi=20, resolution=0.1,
                   threshold=0.02, bad_below=False)
    assert r.status == "found" and r.cliff <= 7.3 < r.bad and r.bad - r.cliff <= 0.1


def test_no_cliff_in_range_is_reported_not_invented():
    assert find_cliff(lambda xs: [0.0] * len(xs), lo=1, hi=100, resolution=1, threshold=0.02).status == "all_good"
    assert find_cliff(lambda xs: [1.0] * len(xs), lo=1, hi=100, resolution=1, threshold=0.02).status == "all_bad"


def test_relative_threshold_uses_the_good_end():
    r = find_cliff(lambda xs: [100.0 if x >= 50 else 1000.0 for x in xs], lo=1, hi=100, resolution=1,
                   threshold=2.0, relative=True)
    assert r.limit == 200.0 and r.bad < 50 <= r.cliff and r.cliff - r.bad <= 1


def test_on_the_real_engine_the_search_matches_a_grid():
    variant = {"source": "spec", "seed": 5, "spec": {"n": 40, "prompt": "normal:200,40", "output": "normal:60,10"},
               "prompt_scale": 1.0, "output_scale": 1.0}
    wl = build_workload(variant)
    cfg = {"num_gpu_blocks": 2, "max_num_seqs": 32, "block_size": 16}

    def evaluate(xs):
        pts = [{"index": i, "params": {"num_gpu_blocks": x}, "config": {**cfg, "num_gpu_blocks": int(x)}, "meta": {}}
               for i, x in enumerate(xs)]
        return [r["metrics"]["preemptions_per_request"] for r in simulate_points(wl, pts, record_steps=False)]

    lo, hi, res = 40, 1000, 10
    grid = list(range(lo, hi + 1, res))
    want = grid_knee(grid, evaluate(grid), 0.02)
    r = find_cliff(evaluate, lo=lo, hi=hi, resolution=res, threshold=0.02, integer=True)
    assert r.status == "found" and abs(r.cliff - want) <= res
    assert r.evaluations < len(grid) / 3
