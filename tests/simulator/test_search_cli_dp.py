"""``python -m simulator search`` over DP sizes and expert parallelism (issue 34): the command of
docs/moe_parallelism.md run as the page shows it, and the shapes vLLM refuses as one error line (exit 2)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "moe_parallelism.md"
QWEN = str(ROOT / "gpuprofiles" / "data" / "hf_configs" / "Qwen--Qwen3-30B-A3B_config.json")
LLAMA = str(ROOT / "gpuprofiles" / "data" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json")
H100 = str(ROOT / "examples" / "search_gpus_h100.json")


def doc_command() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- search-dp-cli -->\s*```sh\n(.*?)```", text, re.S).group(1)
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "simulator"]
    return [sys.executable, *argv[1:]]


def test_the_documented_command_searches_dp_and_ep_shapes():
    done = subprocess.run(doc_command(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # every DP x EP shape of the space is a row (TP 1 and 2, DP 1, 2, 4, EP off and on)
    for label in ("(TP 1 x DP 2)", "(TP 1 x DP 2 + EP)", "(TP 1 x DP 4 + EP)", "(TP 2 x DP 4 + EP)", "(TP 2)"):
        assert label in out, label
    assert out.startswith("Cheapest deployment meeting TTFT p90 <= 300 ms and ITL p90 <= 50 ms: ")
    # the page's words about the answer hold: one replica of two GPUs at $7.56/h
    assert "1 replica of 2x H100 SXM5 80GB" in out.splitlines()[0] and "$7.56/h" in out.splitlines()[0]


def _json_search(capsys, *extra) -> dict:
    import json

    argv = ["search", "--model", QWEN, "--gpus", H100, "--rate", "10", "--duration", "4", "--tp", "1",
            "--precision", "bf16", "--check-seeds", "0", "--slo", "ttft:p90:0.5", *extra]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_max_gpus_bounds_the_replicas_of_a_dp_group(capsys):
    out = _json_search(capsys, "--dp", "2,4", "--ep", "on", "--max-replicas", "8", "--max-gpus", "6",
                       "--slo", "itl:p90:0.001")  # an ITL no shape meets: every count up to the cap is tried
    got = {o["candidate"]["label"].split(",")[0]: o for o in out["outcomes"]}
    two, four = got["2x H100 SXM5 80GB (TP 1 x DP 2 + EP)"], got["4x H100 SXM5 80GB (TP 1 x DP 4 + EP)"]
    price = two["candidate"]["price_per_replica"]
    assert max(t["num_instances"] for t in two["trials"]) == 3  # 3 x 2 GPUs within 6 (a trial counts DP groups)
    assert max(t["cost_per_hour"] for t in two["trials"]) == pytest.approx(3 * price)
    assert max(t["num_instances"] for t in four["trials"]) == 1  # 1 x 4 GPUs within 6
    assert max(t["cost_per_hour"] for t in four["trials"]) == pytest.approx(2 * price)
    assert "3 replicas (the most within space.max_gpus 6)" in two["reason"]


@pytest.mark.parametrize("model, extra, start, rule", [
    (LLAMA, ["--ep", "on"], "error: --ep: LlamaForCausalLM has no experts", "applies to MoE layers only"),
    (QWEN, ["--dp", "5"], "error: --dp: DP 5 runs with no TP of the space", "divide(intermediate_size, tp_size)"),
    (QWEN, ["--dp", "256", "--ep", "on"], "error: --dp: DP 256 runs with no TP of the space",
     "more than Qwen3MoeForCausalLM's 128 routed experts"),
    (QWEN, ["--dp", "2,16", "--max-gpus", "8"], "error: --dp: DP 16 needs at least 16 GPUs a replica",
     "more than the 8 of space.max_gpus"),
    (QWEN, ["--dp", "two"], "error: --dp: 'two' must be whole numbers", "separated by commas"),
    (QWEN, ["--ep", "maybe"], "error: --ep: must be off, on or off,on", "'maybe'"),
    (QWEN, ["--max-gpus", "0"], "error: --max-gpus: must be a whole number of GPUs", "got 0"),
])
def test_shapes_vllm_refuses_are_one_error_line_naming_the_option(capsys, model, extra, start, rule):
    argv = ["search", "--model", model, "--gpus", H100, "--rate", "4", "--duration", "2", "--tp", "1",
            "--precision", "bf16", "--slo", "ttft:p90:0.5", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(start) and rule in err and err.count("\n") == 1, err
