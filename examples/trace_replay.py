"""Replay public traces on real deployments (docs/traffic.md's worked example).

1. The Mooncake FAST'25 conversation trace (its first 600 requests, 201 s; prompts of 900 to 90,000 tokens
   sharing system prompts and earlier turns by 512-token block ids) on 8 replicas of Llama 3.1 70B, TP 4 on
   H100 80GB (32 GPUs), routed round-robin or by prefix affinity, with and without a 256 GiB CPU tier per
   replica for the prefix cache.
2. The Azure LLM inference conversation trace 2023 (its first 1,500 requests, 5.2 minutes) on Llama 3.1 8B,
   one H100 80GB, as published and sped up to three times its rate.

Each deployment is sized the way vLLM starts it and timed by the roofline clock
(``simulator.cluster.engine_config_for``). Run from the repository root: ``python examples/trace_replay.py``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.base import GpuSpec  # noqa: E402
from simulator.batch import simulate  # noqa: E402
from simulator.cluster import Deployment, engine_config_for  # noqa: E402
from simulator.engine.tiers import KvTier  # noqa: E402
from simulator.sizing import parse_hf_config  # noqa: E402
from simulator.workload import TraceOptions, read_public_trace  # noqa: E402

TRACES = ROOT / "tests" / "data" / "traces"
CONFIGS = ROOT / "tests" / "data" / "sizing" / "hf_configs"
AFFINITY = "weighted:prefix-affinity:3,queue-depth:1"
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)


def model(name: str):
    return parse_hf_config(json.loads((CONFIGS / f"{name}_config.json").read_text()))


def row(label: str, wl, item) -> str:
    res = simulate(wl, [item])[0]
    t, lat = res.totals, (res.latency() if callable(res.latency) else res.latency)  # engine or cluster
    return (f"| {label} | {wl.n:,} | {t['prefix_cache_hit_rate']:.1%} | "
            f"{lat.ttft.p50 * 1000:,.0f} | {lat.ttft.p90 * 1000:,.0f} | {lat.itl.p90 * 1000:,.1f} | "
            f"{t['preemptions']:,} |")


def main() -> None:
    print("| run | requests | prefix hit rate | TTFT p50 ms | TTFT p90 ms | ITL p90 ms | preemptions |")
    print("|---|---|---|---|---|---|---|")
    mooncake, _ = read_public_trace((TRACES / "mooncake_conversation_head600.jsonl").read_text(),
                                    options=TraceOptions(max_model_len=131_072))
    cfg70, _ = engine_config_for(model("meta-llama--Meta-Llama-3.1-70B"), H100, max_model_len=131_072, tp=4)
    tiered = dataclasses.replace(cfg70, cpu_tier=KvTier(size_gib=256.0))
    for routing, words in (("round-robin", "round-robin"), (AFFINITY, "prefix affinity")):
        for cfg, tier in ((cfg70, "GPU cache only"), (tiered, "+ 256 GiB CPU tier")):
            print(row(f"Mooncake conversation, 8 x 70B TP 4, {words}, {tier}", mooncake, Deployment(cfg, 8, routing)))
    cfg8, _ = engine_config_for(model("meta-llama--Meta-Llama-3.1-8B"), H100, max_model_len=16_384)
    text = (TRACES / "azure_conv_2023_head1500.csv").read_text()
    for speedup in (1.0, 3.0):
        azure, _ = read_public_trace(text, options=TraceOptions(speedup=speedup, max_model_len=16_384))
        print(row(f"Azure conversation 2023, 8B on 1 GPU, x{speedup:g} rate", azure, cfg8))


if __name__ == "__main__":
    main()
