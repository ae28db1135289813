"""Traffic that changes over time (issue 35, item 3): stages, a day of hourly rates, bursts, and results per window."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest

from simulator.batch import simulate
from simulator.cli import commands as cli
from simulator.engine import EngineConfig
from simulator.engine.windows import time_windows
from simulator.workload import ArrivalProcess, WorkloadError, WorkloadSpec, generate_workload, parse_arrival


def test_stages_spread_the_requests_in_proportion_to_rate_times_duration():
    a = parse_arrival("stages:5x600,10x600,20x600", unit="s")
    assert a.kind == "piecewise" and a.segments == ((5.0, 600.0), (10.0, 600.0), (20.0, 600.0))
    assert a.expected_requests() == 21_000 and a.to_string() == "stages:5x600,10x600,20x600"
    wl = generate_workload(WorkloadSpec(n=21_000, arrival=a), seed=4)
    counts = np.histogram(wl.arrival, bins=[0, 600, 1200, 1800])[0]
    assert counts.sum() == 21_000 and wl.arrival.max() < 1800
    expected = np.array([3000, 6000, 12000])
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected))  # multinomial: within 4 standard deviations
    again = generate_workload(WorkloadSpec(n=21_000, arrival=a), seed=4)
    assert again.arrival.tolist() == wl.arrival.tolist()


def test_a_day_of_hourly_rates_and_bursts():
    day = parse_arrival("hourly:" + ",".join(str(100 * (h + 1)) for h in range(24)))
    assert day.unit == "s" and len(day.segments) == 24 and day.segments[0] == (100 / 3600, 3600.0)
    assert day.expected_requests() == pytest.approx(30_000)
    wl = generate_workload(WorkloadSpec(n=30_000, arrival=day), seed=0)
    per_hour = np.bincount((wl.arrival // 3600).astype(int), minlength=24)
    assert per_hour[23] > 15 * per_hour[0]  # 2,400 an hour at the end against 100 at the start
    bursts = parse_arrival("bursts:1,10,5,60,150", unit="s")
    assert bursts.segments == ((10, 5), (1, 55), (10, 5), (1, 55), (10, 5), (1, 25))
    assert bursts.expected_requests() == pytest.approx(3 * 50 + 55 + 55 + 25)


def test_piecewise_rates_round_trip_and_refuse_what_cannot_be_a_rate():
    a = parse_arrival("stages:1x10,0x5,3x2", unit="s")
    assert ArrivalProcess.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    assert WorkloadSpec.from_dict(WorkloadSpec(n=5, arrival=a).to_dict()).arrival == a
    for text, message in (("stages:1x10,2", "stages expects RATExDURATION"),
                          ("stages:0x10", "at least one segment needs a rate above 0"),
                          ("stages:1x0", "duration: must be > 0"),
                          ("stages:-1x4", "rate: must be >= 0"),
                          ("bursts:1,10,60,5,100", "0 < LEN < EVERY"),
                          ("hourly:a,b", "hourly expects 24 hourly rates")):
        with pytest.raises(WorkloadError, match=message):
            parse_arrival(text)
    with pytest.raises(WorkloadError, match="only a piecewise arrival takes segments"):
        ArrivalProcess("poisson", segments=((1.0, 2.0),))


def staged_run(n=3200, stages="stages:2x200,14x200"):  # n = the rates x durations
    wl = generate_workload(WorkloadSpec(n=n, arrival=parse_arrival(stages, unit="s")), seed=1)
    cfg = EngineConfig(num_gpu_blocks=3000, max_num_seqs=32, step_time_model={"base_s": 0.01, "per_token_s": 4e-5})
    return wl, simulate(wl, [cfg], record_steps=True)[0]


def test_windows_hold_every_request_and_their_percentiles_are_the_windows_own():
    wl, res = staged_run()
    rows = time_windows(res, 50.0)
    assert sum(r["arrived"] for r in rows) == wl.n
    assert sum(r["finished"] for r in rows) == res.totals["finished"]
    req = res.requests
    ttft = np.asarray(req["first_token_time_s"]) - np.asarray(req["arrival"])
    w3 = (wl.arrival >= 150) & (wl.arrival < 200)
    assert rows[3]["ttft_p90_ms"] == pytest.approx(np.percentile(ttft[w3], 90) * 1000)
    # the second stage (14/s) overloads 32 running slots: the queue grows there and not in the first
    assert max(r["waiting_max"] for r in rows[:4]) <= 2 < max(r["waiting_max"] for r in rows[4:8])
    assert rows[6]["ttft_p90_ms"] > 5 * rows[1]["ttft_p90_ms"]


def test_queue_means_are_weighted_by_step_time():
    steps = {"time_s": np.array([1.0, 2.0, 5.0, 6.0]), "num_waiting": np.array([4, 0, 2, 8]),
             "num_running": np.array([1, 1, 1, 1]), "kv_usage": np.array([0.5, 0.5, 0.5, 0.5])}
    requests = {"arrival": np.array([0.0]), "first_token_time_s": np.array([1.0]),
                "finish_time_s": np.array([6.0]), "num_output_tokens": np.array([6])}
    result = types.SimpleNamespace(arrival_unit="s", requests=requests, steps=steps)
    first, second = time_windows(result, 3.0)
    # window [0, 3): steps ending at 1 s (1 s long, 4 waiting) and 2 s (1 s, 0); [3, 6]: 5 s (3 s, 2), 6 s (1 s, 8)
    assert first["waiting_mean"] == pytest.approx(2.0) and first["waiting_max"] == 4
    assert second["waiting_mean"] == pytest.approx((3 * 2 + 8) / 4) and second["waiting_max"] == 8
    assert first["tpot_p90_ms"] == pytest.approx(1000.0) and first["e2e_p90_ms"] == pytest.approx(6000.0)
    assert second["arrived"] == 0 and second["ttft_p90_ms"] is None and second["finished"] == 1


def test_windows_refuse_step_arrivals_and_absurd_widths():
    wl = generate_workload(WorkloadSpec(n=20), seed=0)
    res = simulate(wl, [EngineConfig(num_gpu_blocks=500)])[0]
    with pytest.raises(ValueError, match="arrivals must be in seconds"):
        time_windows(res, 10.0)
    _, timed = staged_run(n=100)
    for bad in (0, -1.0, float("nan"), 1e-6):
        with pytest.raises(ValueError, match="window_s must be a number of seconds"):
            time_windows(timed, bad)


def test_cli_run_windows(tmp_path, capsys):
    wl_file, cfg = tmp_path / "w.json", tmp_path / "c.json"
    assert cli.main(["workload", "--n", "400", "--arrival", "stages:2x100,8x50", "--unit", "s", "--out", str(wl_file)]) == 0
    cfg.write_text(json.dumps({"num_gpu_blocks": 3000, "step_time_model": {"base_s": 0.01, "per_token_s": 3e-5}}))
    capsys.readouterr()
    assert cli.main(["run", "--workload", str(wl_file), "--config", str(cfg), "--windows", "25"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [w["start_s"] for w in out["windows"][:3]] == [0.0, 25.0, 50.0] and "steps" not in out
    assert sum(w["arrived"] for w in out["windows"]) == 400
    assert cli.main(["run", "--workload", str(wl_file), "--config", str(cfg), "--windows", "0"]) == 2
    assert "--windows: window_s must be a number of seconds > 0" in capsys.readouterr().err
