"""``python -m simulator run|sweep --workload TRACE [--trace-format F] [--trace-*]`` (issue 35, items 1 and 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import commands as cli

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
MOONCAKE = str(DATA / "mooncake_conversation_head600.jsonl")
AZURE = str(DATA / "azure_code_2023_head500.csv")


@pytest.fixture
def config(tmp_path) -> str:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"num_gpu_blocks": 200_000, "block_size": 16, "max_num_seqs": 128,
                                "max_num_batched_tokens": 8192, "max_model_len": 65_536,
                                "step_time_model": {"base_s": 0.01, "per_token_s": 2e-5}}))
    return str(path)


def run(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_run_guesses_the_format_and_reports_what_the_trace_became(capsys, config):
    code, out, err = run(capsys, "run", "--workload", MOONCAKE, "--config", config, "--trace-window", "0:30")
    assert code == 0 and "error" not in err
    trace = out["trace"]
    assert trace["format"] == "mooncake" and trace["format_guessed"] is True
    assert trace["requests"] == out["totals"]["finished"] + out["totals"]["dropped_unservable"]
    assert trace["dropped"]["outside_window"] == 600 - trace["requests"] - trace["dropped"].get(
        "longer_than_max_model_len", 0)
    assert 0 < out["totals"]["prefix_cache_hits"] <= trace["trace_shared_prompt_tokens"]


def test_run_with_a_named_format_and_the_configs_context_limit(capsys, config):
    code, out, _ = run(capsys, "run", "--workload", MOONCAKE, "--config", config, "--trace-format", "mooncake",
                       "--trace-window", "0:60", "--indent", "1")
    assert code == 0 and out["trace"]["format_guessed"] is False
    assert out["trace"]["dropped"]["longer_than_max_model_len"] > 0  # prompts of 65k tokens and more


def test_sweep_reads_the_trace_once_for_every_point(capsys, config):
    code, out, _ = run(capsys, "sweep", "--workload", AZURE, "--config", config, "--trace-speedup", "4",
                       "--grid", "max_num_seqs=8,64")
    assert code == 0 and out["trace"]["format"] == "azure" and out["trace"]["options"] == {"speedup": 4.0,
                                                                                             "max_model_len": 65536}
    assert [p["totals"]["finished"] for p in out["points"]] == [500, 500]


@pytest.mark.parametrize(("extra", "message"), [
    (["--trace-speedup", "0"], "error: --trace-speedup: must be a number from 1e-06"),
    (["--trace-window", "60"], "error: --trace-window '60': expected START:END in seconds"),
    (["--trace-window", "9:3"], "error: --trace-window: needs 0 <= start < end seconds"),
    (["--trace-sample", "0"], "error: --trace-sample: must be a whole number from 1"),
    (["--trace-format", "azure"], "error: workload: mooncake_conversation_head600.jsonl line 1: the header lacks TIMESTAMP"),
])
def test_bad_trace_options_are_one_line_and_status_2(capsys, config, extra, message):
    code, out, err = run(capsys, "run", "--workload", MOONCAKE, "--config", config, *extra)
    assert code == 2 and out is None
    assert err.startswith(message) and err.count("\n") == 1


def test_trace_options_on_the_planners_own_columns_are_refused(capsys, config, tmp_path):
    own = tmp_path / "own.csv"
    own.write_text("arrival_time,prompt_tokens,output_tokens\n0,10,4\n")
    code, _, err = run(capsys, "run", "--workload", str(own), "--config", config, "--trace-sample", "1")
    assert code == 2 and "--trace-sample: applies to public trace formats" in err
    code, out, _ = run(capsys, "run", "--workload", str(own), "--config", config, "--trace-format", "kv-planner")
    assert code == 0 and "trace" not in out and out["totals"]["finished"] == 1


def test_a_run_that_stops_at_its_step_limit_warns_and_exits_3(capsys, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"num_gpu_blocks": 200_000, "max_steps": 50}))
    code, out, err = run(capsys, "run", "--workload", AZURE, "--config", str(cfg))
    assert code == 3 and out["totals"]["unfinished"] > 0
    assert f"with {out['totals']['unfinished']:,} requests unfinished" in err and "exit status 3" in err
