"""Golden tests: speculative decoding step by step against vLLM 0.33.0's real scheduler.

The cases in ``tests/data/oracle_spec`` were recorded from vLLM's own ``Scheduler`` /
``AsyncScheduler`` (CPU, a fake model that drafts and accepts what the planner's acceptance draws
accept; provenance and the case matrix in its README). Tolerance: none. For every schedule call
that scheduled tokens or preempted, the engine must schedule the same number of tokens for the same
requests, preempt the same requests and hold the same number of KV blocks; every request must get
its first token and finish on vLLM's step, with vLLM's preemptions and prefix hits; the totals must
be equal.

Cases the engine does not match yet are ``xfail(strict=True)`` with the vLLM rules that make them
diverge (``expected.json``; the rules are in ``docs/speculative_decoding.md``, "vLLM 0.33's rules,
step by step"). When a case's rules are implemented it passes, and strict xfail turns it red until
its entry in ``expected.json`` is removed.

The schedule is observed at two points of the engine, ``schedule()`` (the requests and tokens of a
call) and ``_preempt()`` (who is preempted), on the general path (``accelerate=False``: every call
goes through ``schedule()``; a run with draft tokens takes no accelerator anyway, and
:func:`test_the_traced_engine_is_simulate` checks that it is what ``simulate()`` gives).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.batch.runner import simulate
from simulator.engine.config import EngineConfig
from simulator.engine.core import FastEngine
from simulator.engine.results import assemble_result
from simulator.workload.oracle_io import load_json, read_workload

DATA = Path(__file__).resolve().parents[1] / "data" / "oracle_spec"
CASES = sorted(p.name[: -len(".json.gz")] for p in (DATA / "runs").glob("*.json.gz"))
EXPECTED = json.loads((DATA / "expected.json").read_text())
#: case -> the vLLM rules (docs numbering) the engine does not follow yet that make it diverge
DIVERGES: dict[str, str] = EXPECTED["diverges"]

TOTALS = ("finished", "preemptions", "requests_preempted_at_least_once", "num_steps",
          "total_scheduled_tokens", "prefix_cache_queries", "prefix_cache_hits",
          "preempted_prefix_cache_queries", "preempted_prefix_cache_hits", "peak_kv_blocks_used",
          "peak_running", "peak_waiting")
REQUEST_KEYS = ("id", "first_scheduled_step", "first_token_step", "finish_step", "num_preemptions",
                "prefix_hit_tokens", "num_output_tokens")

Step = tuple[int, dict[str, int], list[str], int]  # step, {request: tokens}, preempted, KV blocks used


class _Traced(FastEngine):
    """The engine, noting what each schedule call of its scheduler decided (it changes no decision)."""

    def start(self, *args, **kwargs) -> None:
        self.calls: list[tuple[dict[str, int], list[str]]] = []
        self._preempted: list[str] = []
        sch = self.scheduler
        preempt, schedule = sch.preempt, sch.schedule  # (the scheduler's own calls find these on the instance)

        def traced_preempt(q: int) -> None:
            self._preempted.append(self.wl.ids[q])
            preempt(q)

        def traced_schedule():
            e, ns, sampled, npre = schedule()
            if npre or (ns.size and ns.sum() > 0):  # (the calls the step series records)
                ids = self.wl.ids
                self.calls.append(({ids[q]: n for q, n in zip(e.tolist(), ns.tolist())}, sorted(self._preempted)))
            self._preempted = []
            return e, ns, sampled, npre

        sch.preempt, sch.schedule = traced_preempt, traced_schedule
        super().start(*args, **kwargs)


def case_files(case: str):
    workload = read_workload(DATA / "workloads" / f"{case.split('__')[0]}.json")
    return load_json(DATA / "runs" / f"{case}.json.gz"), workload, EngineConfig.from_dict(
        load_json(DATA / "configs" / f"{case}.json"))


def engine_run(workload, config):
    """The engine's result and its schedule calls that scheduled tokens or preempted."""
    sim = _Traced(workload, config, record_steps=True, accelerate=False)
    sim.run_all()
    result = assemble_result(sim, True, None)
    steps = result.steps
    assert len(sim.calls) == len(steps["step"])
    return result, [(int(st), sched, pre, int(used)) for st, (sched, pre), used in
                    zip(steps["step"], sim.calls, steps["kv_blocks_used"])]


def oracle_trace(oracle: dict) -> list[Step]:
    s = oracle["steps"]
    pre = s.get("preempted_ids") or [None] * len(s["step"])
    return [(st, dict(zip(ids, toks)), sorted(p or []), used)
            for st, ids, toks, p, used in zip(s["step"], s["sched_ids"], s["sched_tokens"], pre,
                                              s["kv_blocks_used"])]


def first_divergence(want: list[Step], got: list[Step]) -> tuple[int, str] | None:
    """The first schedule call where the engine parts from vLLM: (vLLM's step index, what differs)."""
    for w, g in zip(want, got):
        for name, a, b in (("step", w[0], g[0]), ("scheduled tokens", w[1], g[1]),
                           ("preempted", w[2], g[2]), ("kv_blocks_used", w[3], g[3])):
            if a != b:
                return w[0], name
    if len(want) != len(got):
        i = min(len(want), len(got))
        return (want[i][0] if i < len(want) else want[-1][0] + 1), "number of steps"
    return None


def _marks(case: str):
    rules = DIVERGES.get(case)
    # (raises: a case that breaks any other way than by differing from vLLM is an error, not an xfail)
    return [pytest.mark.xfail(strict=True, raises=AssertionError,
                              reason=f"vLLM rule(s) not followed yet: {rules}")] if rules else []


def test_the_recorded_cases_cover_the_matrix():
    configs = [load_json(DATA / "configs" / f"{c}.json") for c in CASES]
    assert len(CASES) >= 40
    assert {c["speculative"]["method"] for c in configs} == {"ngram", "eagle", "eagle3", "mtp", "draft_model"}
    assert {c["speculative"]["num_speculative_tokens"] for c in configs} == {1, 3, 5}
    assert {c["async_scheduling"] for c in configs} == {False, True}
    assert {c["enable_prefix_caching"] for c in configs} == {False, True}
    assert set(DIVERGES) <= set(CASES) and set(EXPECTED["exercises"]) == set(CASES)
    assert any(c not in DIVERGES for c in CASES)  # some match today
    # each of the seven rules of issue 38 changes the outcome of at least two cases
    for rule in ("R1", "R2", "R3", "R4", "R5", "R6", "R7"):
        assert sum(rule in rules for rules in EXPECTED["exercises"].values()) >= 2, rule


def test_first_divergence_finds_a_changed_step():
    oracle, workload, config = case_files(CASES[0])
    want = oracle_trace(oracle)
    assert first_divergence(want, want) is None
    step, sched, pre, used = want[1]
    assert first_divergence(want, want[:1] + [(step, sched, pre, used + 1)] + want[2:]) == (step, "kv_blocks_used")
    bumped = dict(sched, **{next(iter(sched)): sched[next(iter(sched))] + 1})
    assert first_divergence(want, want[:1] + [(step, bumped, pre, used)] + want[2:]) == (step, "scheduled tokens")
    assert first_divergence(want, want[:-1]) == (want[-1][0], "number of steps")


@pytest.mark.parametrize("case", [c for c in CASES if "__async" in c][:1] + [c for c in CASES if "__sync" in c][:1])
def test_the_traced_engine_is_simulate(case):
    _, workload, config = case_files(case)
    result, _ = engine_run(workload, config)
    assert result.to_json(steps=True) == simulate(workload, [config], record_steps=True)[0].to_json(steps=True)


@pytest.mark.parametrize("case", [pytest.param(c, marks=_marks(c)) for c in CASES])
def test_step_by_step_equal_vllm(case):
    oracle, workload, config = case_files(case)
    result, trace = engine_run(workload, config)
    assert first_divergence(oracle_trace(oracle), trace) is None
    got = [tuple(r[k] for k in REQUEST_KEYS) for r in result.to_dict()["requests"]]
    assert got == [tuple(r[k] for k in REQUEST_KEYS) for r in oracle["requests"]]
    assert {k: result.totals[k] for k in TOTALS} == {k: oracle["totals"][k] for k in TOTALS}
