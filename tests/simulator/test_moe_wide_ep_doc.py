"""docs/moe_parallelism.md, "Worked example: DeepSeek-V3 in pools of wide EP on H200 nodes": the page's search
command run as the page shows it (20 requests, a few seconds), its quoted lines found in the output, and every
figure of the section's prose rebuilt from that output (or from the model's config), not copied beside it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from simulator.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "moe_parallelism.md"
CONFIG = ROOT / "gpuprofiles" / "data" / "hf_configs" / "deepseek-ai--DeepSeek-V3_config.json"
SECTION = "### Worked example: DeepSeek-V3 in pools of wide EP on H200 nodes"


def section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def command(text: str) -> list[str]:
    block = re.search(r"<!-- docs-test: parse-only tests/simulator/test_moe_wide_ep_doc\.py[^>]*-->\s*```sh\n(.*?)```",
                      text, re.S).group(1)
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "simulator"]
    return argv[3:]


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_wide_ep_example_is_what_the_search_answers(capsys, monkeypatch):
    text = section()
    monkeypatch.chdir(ROOT)
    assert main(command(text)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()

    quoted = re.search(r"<!-- wide-ep-output -->\s*```text\n(.*?)```", text, re.S).group(1).splitlines()
    assert len(quoted) >= 8
    missing = [q for q in quoted if q not in lines]
    assert not missing, "the page quotes lines the search did not print:\n" + "\n".join(missing)

    def one(pattern: str) -> re.Match:
        found = [m for m in (re.search(pattern, line) for line in lines) if m]
        assert len(found) == 1, (pattern, found)
        return found[0]

    label = r"(\d+)x H200 SXM 141GB \(TP 1 x DP {dp} \+ EP\), fp8 weights, KV auto, max_num_seqs 256"
    agg8 = one(r"^misses +" + label.format(dp=8) + r": (\d+) replicas .*misses TPOT p90 by [\d.]+ ms \(([\d.]+) ms")
    agg16 = one(r"^misses +" + label.format(dp=16) + r": (\d+) replicas .*misses TTFT p90 by [\d,]+ ms "
                r"\(([\d,]+) ms .*misses TPOT p90 by [\d.]+ ms \(([\d.]+) ms")
    pair = one(r"^1P \[" + label.format(dp=8) + r"\] \+ 1D \[" + label.format(dp=8) + r"\] +(\d+) GPUs "
               r"\$([\d,.]+)/h +meets: TTFT p90 ([\d,]+) ms, TPOT p90 ([\d.]+) ms$")
    dec16 = one(r"^decode pool of " + label.format(dp=16) + r": (\d+) instance behind 1P \[" + label.format(dp=8))
    pre16 = one(r"^prefill pool of " + label.format(dp=16) + r": none: no prefill pool of up to (\d+) instances")
    assert one(r"^Winner: (\w+):").group(1) == "pools"
    traffic = one(r"^traffic: (\d+) requests")

    words = {2: "two"}
    g8, n8 = int(agg8.group(1)), int(agg8.group(2))
    g16, n16 = int(agg16.group(1)), int(agg16.group(2))
    cfg = json.loads(CONFIG.read_text())
    latent = cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 2  # bf16 KV, one TP rank
    expected = [
        f"{words[n8]} DP 8 + EP 8 groups ({n8 * g8} GPUs) miss TPOT p90 at {agg8.group(3)} ms",
        f"{words[n16]} DP 16 + EP 16 groups ({n16 * g16} GPUs) miss both, TTFT p90 {agg16.group(3)} ms and "
        f"TPOT p90 {agg16.group(4)} ms",
        f"1 prefill group and 1 decode group of DP 8 + EP 8 meet on {pair.group(3)} GPUs at ${pair.group(4)}/h, "
        f"TTFT p90 {pair.group(5)} ms and TPOT p90 {pair.group(6)} ms",
        f"each request's {latent:,} bytes a token move once",
        f"A DP 16 + EP 16 decode pool meets as well behind the same prefill group ({dec16.group(2)} instance), "
        f"but that pair takes {int(pair.group(1)) + int(dec16.group(1))} GPUs",
        f"No DP 16 + EP 16 prefill pool of up to {pre16.group(2)} groups meets TTFT p90 2 s",
        f"({traffic.group(1)} requests, about",
        f"more traffic than a {traffic.group(1)}-request check runs",
    ]
    page = flat(text)
    absent = [e for e in expected if e not in page]
    assert not absent, "the section lacks (or states otherwise):\n" + "\n".join(absent)
