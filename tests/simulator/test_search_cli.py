"""``python -m simulator search`` (simulator/search_cli.py): the answer as JSON or words, errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "gpuprofiles" / "data" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json")
GPUS = str(ROOT / "examples" / "search_gpus.json")
BASE = ["search", "--model", MODEL, "--gpus", GPUS, "--rate", "4", "--duration", "5", "--tp", "1",
        "--precision", "bf16,fp8", "--max-replicas", "3"]


def test_search_prints_the_answer_as_json(capsys):
    assert main(BASE + ["--slo", "ttft:p90:0.5", "--slo", "itl:p90:0.05"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"]["status"] == "answer"
    assert out["message"].startswith("Cheapest deployment meeting TTFT p90 <= 500 ms and ITL p90 <= 50 ms: ")
    assert len(out["outcomes"]) == 12  # 6 GPUs x 1 TP x 2 precisions x 1 max_num_seqs
    assert sum(out["counts"].values()) == 12
    assert out["frontier"] and all("cost_per_hour" in p for p in out["frontier"])


def test_search_summary_in_words(capsys):
    assert main(BASE + ["--slo", "ttft:p50:0.01", "--summary"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("No deployment in this space meets TTFT p50 <= 10 ms; none could at any replica count")
    assert "0 simulations" in text and "TTFT p50 is at least" in text


@pytest.mark.parametrize("extra, message", [
    (["--slo", "ttft:p90"], "error: slo: 'ttft:p90' must look like METRIC:PERCENTILE:SECONDS"),
    (["--slo", "ttft:p90:0.5", "--rate", "0"], "error: --rate: must be more than 0 requests per second"),
    (["--slo", "ttft:p90:0.5", "--tp", ""], "error: space.tensor_parallel: give at least one value"),
    (["--slo", "ttft:p90:0.5", "--precision", "fp7"], "error: space.precisions: 'fp7' is not one of"),
])
def test_bad_options_print_one_error_line(capsys, extra, message):
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
