"""Golden tests: every row of vllm_startup_logs.csv, given its KV memory and from first principles."""

from __future__ import annotations

import statistics

import pytest

from simulator.base.specs import DeploymentSpec, GpuSpec
from simulator.sizing.closed_form import plan
from tests.simulator._sizing_data import first_number, golden_knobs, golden_model, load_json, log_rows

ROWS = log_rows()
GOLDEN = {k: v for k, v in load_json("golden_rows.json").items() if not k.startswith("_")}


def expected_tokens(row: dict, entry: dict) -> float | None:
    tok = first_number(row["kv_tokens"])
    if tok:
        return tok
    blocks = first_number(row["gpu_blocks"])
    return blocks * entry["block_size"] if blocks else None


def first_principles_error(rid: str) -> float:
    """Relative error of KV cache tokens (or, without a printed token count, available KV GiB)."""
    row, entry = ROWS[rid], GOLDEN[rid]
    res = plan(golden_model(entry), GpuSpec(name=entry["gpu"], memory_gib=entry["gpu_memory_gib"]),
               DeploymentSpec(**golden_knobs(entry)))
    ref = expected_tokens(row, entry)
    if ref:
        return res.kv_cache_tokens / ref - 1
    return res.memory_gib.kv / first_number(row["available_kv_gib"]) - 1


def test_every_log_row_has_golden_inputs():
    assert set(ROWS) == set(GOLDEN)


GIVEN_KV = [rid for rid, e in GOLDEN.items() if e.get("given_kv", True)]


@pytest.mark.parametrize("rid", GIVEN_KV)
def test_given_available_kv_tokens_match_vllm_within_1_percent(rid):
    row, entry = ROWS[rid], GOLDEN[rid]
    avail = first_number(row["available_kv_gib"])
    res = plan(golden_model(entry), GpuSpec(name=entry["gpu"], memory_gib=entry["gpu_memory_gib"] or 200.0),
               DeploymentSpec(**golden_knobs(entry), available_kv_gib=avail))
    exp = expected_tokens(row, entry)
    assert res.kv_cache_tokens == pytest.approx(exp, rel=0.01)
    conc = first_number(row["max_conc"])
    if conc:
        assert res.max_concurrency == pytest.approx(conc, rel=0.01)


def test_rows_without_given_kv_say_why():
    for _rid, e in GOLDEN.items():
        if not e.get("given_kv", True):
            assert e["why_not_given_kv"]


def test_gpt_oss_hybrid_row_reproduces_vllm_blocks_exactly_from_bytes():
    # R35: 45.32 GiB / (18 layers x 16 tokens x 2 KV heads x 64 x 2 x 2 B) = 330,018 blocks (printed).
    entry = GOLDEN["R35"]
    res = plan(golden_model(entry), GpuSpec(name="A100", memory_gib=79.15),
               DeploymentSpec(**golden_knobs(entry), available_kv_gib=45.32))
    assert res.bytes_per_block_per_gpu == 18 * 16 * 2 * 2 * 64 * 2
    assert res.num_kv_groups == 2
    assert res.num_gpu_blocks == pytest.approx(330018, abs=20)
    assert res.min_blocks_unservable == 1024 + 137


FIRST_PRINCIPLES = [rid for rid, e in GOLDEN.items() if e["first_principles"]]
WITHIN_5 = [rid for rid in FIRST_PRINCIPLES if not GOLDEN[rid].get("known_outlier")]
OUTLIERS = [rid for rid in FIRST_PRINCIPLES if GOLDEN[rid].get("known_outlier")]


@pytest.mark.parametrize("rid", WITHIN_5)
def test_first_principles_within_5_percent(rid):
    assert abs(first_principles_error(rid)) <= 0.05


@pytest.mark.parametrize("rid", OUTLIERS)
def test_known_outliers_stay_within_10_percent(rid):
    # Documented in golden_rows.json and docs/sizing.md; guard against drifting further.
    assert abs(first_principles_error(rid)) <= 0.10


def test_rows_not_computable_from_first_principles_say_why():
    for _rid, e in GOLDEN.items():
        if not e["first_principles"]:
            assert e["why"]


def test_error_summary():
    # Issue 18's goal: median <= 5 %, worst <= 15 % from model, GPU and knobs (vLLM version included).
    # Issue 31, measured: median 1.37 %, worst 6.49 % (R16, ROCm non-torch), 10 of 12 within 5 %, 9 within 2 %
    # (before issue 31: median 1.42 %, worst 6.86 %, 9 and 8); pinned with a little room.
    errs = sorted(abs(first_principles_error(r)) for r in FIRST_PRINCIPLES)
    assert len(errs) == 12
    assert statistics.median(errs) <= 0.015
    assert errs[-1] <= 0.07
    assert sum(e <= 0.05 for e in errs) >= 10 and sum(e <= 0.02 for e in errs) >= 9
