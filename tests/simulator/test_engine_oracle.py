"""Golden tests: the engine reproduces vLLM 0.33.0's own decisions on every oracle case.

The cases in ``tests/data/oracle`` were recorded by the project's oracle
tool from vLLM's real v1 scheduler (sync and async, step and time arrivals);
those in ``tests/data/oracle/priority`` with ``--scheduling-policy priority``
and per-request priorities (``tools/oracle/record_priority.py``: priorities,
ties, preemption by priority under small KV pools, chunked prefill on and off,
prefix caching on and off). Tolerance: none. Totals and every request's first-token step, finish step and
preemption count must be equal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.batch.runner import simulate
from simulator.engine.config import EngineConfig
from simulator.workload.oracle_io import load_json, read_workload

DATA = Path(__file__).resolve().parents[1] / "data" / "oracle"
PRIORITY = "priority/"  # the priority cases' folder under DATA, as a case-name prefix
CASES = sorted(p.name[: -len(".json.gz")] for p in (DATA / "runs").glob("*.json.gz")) + sorted(
    PRIORITY + p.name[: -len(".json.gz")] for p in (DATA / "priority" / "runs").glob("*.json.gz"))
TOTALS = ("finished", "preemptions", "prefix_cache_hits", "preempted_prefix_cache_hits",
          "peak_kv_blocks_used", "num_steps", "total_scheduled_tokens",
          "prefix_cache_queries", "preempted_prefix_cache_queries",
          "requests_preempted_at_least_once", "total_prefill_tokens", "total_decode_tokens",
          "peak_running", "peak_waiting")


def _run(case: str):
    folder, case = (DATA / "priority", case[len(PRIORITY):]) if case.startswith(PRIORITY) else (DATA, case)
    oracle = load_json(folder / "runs" / f"{case}.json.gz")
    workload = read_workload(folder / "workloads" / f"{case.split('__')[0]}.json")
    config = EngineConfig.from_dict(load_json(folder / "configs" / f"{case}.json"))
    return oracle, simulate(workload, [config], record_steps=True)[0]


def test_all_recorded_cases_are_present():
    assert len(CASES) == 25 + 9
    assert any("async" in c for c in CASES) and any(c.startswith("v1_time") for c in CASES)
    prio = [c for c in CASES if c.startswith(PRIORITY)]
    assert all(load_json(DATA / "priority" / "configs" / f"{c[len(PRIORITY):]}.json")["policy"] == "priority"
               for c in prio)
    assert any("pc-off" in c for c in prio) and any("nochunk" in c for c in prio) and any("async" in c for c in prio)


@pytest.mark.parametrize("case", CASES)
def test_totals_equal_vllm(case):
    oracle, result = _run(case)
    got = {k: result.totals[k] for k in TOTALS}
    want = {k: oracle["totals"][k] for k in TOTALS}
    assert got == want
    assert result.totals["prefix_cache_hit_rate"] == pytest.approx(oracle["totals"]["prefix_cache_hit_rate"])
    assert result.totals["peak_kv_usage"] == pytest.approx(oracle["totals"]["peak_kv_usage"])


@pytest.mark.parametrize("case", CASES)
def test_every_request_equal_vllm(case):
    oracle, result = _run(case)
    records = result.to_dict()["requests"]
    keys = ("id", "first_scheduled_step", "first_token_step", "finish_step", "num_preemptions",
            "prefix_hit_tokens", "num_output_tokens")
    got = [tuple(r[k] for k in keys) for r in records]
    want = [tuple(r[k] for k in keys) for r in oracle["requests"]]
    assert got == want


@pytest.mark.parametrize("case", [c for c in CASES if "blocks1000_" in c or c.startswith(("v1_time", PRIORITY))])
def test_step_series_equal_vllm(case):
    oracle, result = _run(case)
    steps = oracle["steps"]
    for name in ("step", "num_running", "num_waiting", "num_scheduled_tokens", "kv_blocks_used",
                 "num_preempted"):
        assert result.steps[name].tolist() == steps[name], name
    if "time_s" in steps:
        assert result.steps["time_s"] == pytest.approx(steps["time_s"], abs=1e-6)
