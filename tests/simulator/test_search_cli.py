"""``python -m simulator search`` (simulator/cli/search.py): the answer as JSON or words, errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli.commands import main

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
    (["--slo", "ttft:p90:0.5", "--tp", ""], "error: --tp: give at least one value"),
    (["--slo", "ttft:p90:0.5", "--precision", "fp7"], "error: --precision: 'fp7' is not one of"),
])
def test_bad_options_print_one_error_line(capsys, extra, message):
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def _answer_itl_p90(capsys, *extra) -> float:
    """ITL p90 of the answer under a target every shape meets (so the answer is the cheapest shape each time)."""
    assert main(BASE + ["--slo", "itl:p90:1", *extra]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best["candidate"]["label"].startswith("1x L4 (TP 1)")  # the cheapest GPU
    return best["candidate"]["label"], best["trials"][-1]["values"]["ITL p90"]


def test_the_generation_config_picks_the_sampler_and_sampling_overrides_it(capsys, tmp_path):
    plain = tmp_path / "generation_config.json"
    plain.write_text('{"bos_token_id": 1, "eos_token_id": 2}')  # no sampling fields: temperature only, no sort
    unknown = _answer_itl_p90(capsys)  # a config file names no model: the default top-k / top-p
    own = _answer_itl_p90(capsys, "--generation-config", str(plain))
    chosen = _answer_itl_p90(capsys, "--generation-config", str(plain), "--sampling", "top_k_top_p")
    assert own[0] == unknown[0] == chosen[0] and own[1] < unknown[1] == chosen[1]
    assert main(BASE + ["--slo", "itl:p90:0.05", "--generation-config", str(plain), "--summary"]) == 0
    assert "sampler: temperature only (the model's generation_config.json)" in capsys.readouterr().out
    assert main(BASE + ["--slo", "itl:p90:0.05", "--summary"]) == 0
    assert "sampler: top-k / top-p (the default: the model's sampling defaults are not known" in capsys.readouterr().out


def test_a_bad_generation_config_is_one_error_line(capsys, tmp_path):
    bad = tmp_path / "generation_config.json"
    bad.write_text('{"top_p": "high"}')
    assert main(BASE + ["--slo", "itl:p90:0.05", "--generation-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --generation-config: generation_config.top_p: must be a number") and err.count("\n") == 1


def test_a_generation_config_beside_the_config_is_read(capsys, tmp_path):
    (tmp_path / "config.json").write_text(Path(MODEL).read_text())  # a Hugging Face snapshot: both files together
    (tmp_path / "generation_config.json").write_text('{"temperature": 0.0}')
    args = ["search", "--model", str(tmp_path / "config.json"), *BASE[3:], "--slo", "itl:p90:1", "--summary"]
    assert main(args) == 0
    assert "sampler: greedy (temperature 0) (the model's generation_config.json)" in capsys.readouterr().out


def test_search_launch_prints_the_command_and_the_manifests(capsys):
    import shlex

    import yaml

    assert main(BASE + ["--slo", "ttft:p90:0.5", "--slo", "itl:p90:0.05", "--launch",
                        "--model-id", "meta-llama/Llama-3.1-8B-Instruct"]) == 0
    out = json.loads(capsys.readouterr().out)
    best, launch = out["best"], out["launch"]
    args = shlex.split(launch["vllm_serve"])
    assert args[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    opts = dict(zip(args[3::2], args[4::2]))
    assert opts["--max-num-seqs"] == str(best["candidate"]["max_num_seqs"])
    assert opts["--max-num-batched-tokens"] == str(best["sizing"]["max_num_batched_tokens"])
    assert opts["--max-model-len"] == str(best["sizing"]["max_model_len"])
    assert ("--quantization" in opts) == (best["candidate"]["precision"] == "fp8")
    dep, svc = yaml.safe_load_all(launch["kubernetes"])
    assert dep["kind"] == "Deployment" and dep["spec"]["replicas"] == best["replicas"] and svc["kind"] == "Service"
    assert main(BASE + ["--slo", "ttft:p90:0.5", "--launch", "--summary"]) == 0
    text = capsys.readouterr().out
    assert "To run it:\n\nvllm serve " in text and "kind: \"Deployment\"" in text
