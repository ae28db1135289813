"""Plan a day, not a peak (docs/autoscaling.md's worked example).

Llama 3.1 70B, TP 4 on H100 80GB per replica (4 GPUs at $3.00 per GPU-hour; sized as vLLM starts it, timed by the
roofline clock), serving a day of chat traffic: a daily shape (night at 35 % of the mean rate, peaks at 165 %,
24 hourly rates) of Poisson arrivals averaging ``RATE`` requests/s, prompt and output lengths drawn from the
Azure LLM inference conversation trace 2023 (``tests/data/traces/azure_conv_2023_head1500.csv``). The SLO:
TTFT <= 2 s and TPOT <= 50 ms. A replica starts in 110 s (``ColdStart`` defaults for 35 GiB of weights per GPU).

1. What one replica carries within the SLO: the smallest replica count for 10 minutes at the peak rate
   (``smallest_replicas``), so capacity = peak rate / that count.
2. Four policies over the same day: fixed at the peak count; scheduled (each hour's count from its rate, asked
   for one cold start early); the Kubernetes HPA on running requests per replica; the oracle that knows the
   rate one cold start ahead. Each day is simulated in one-hour chunks with 5 minutes either side.

Run from the repository root: ``python examples/day_plan.py [RATE]`` (default 10 requests/s: about 860,000
requests; a few minutes per policy on a 2-core machine).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.autoscale import (  # noqa: E402
    ColdStart,
    FixedPolicy,
    HpaPolicy,
    OraclePolicy,
    ScheduledPolicy,
    rate_curve,
)
from simulator.base import GpuSpec  # noqa: E402
from simulator.cluster import engine_config_for, smallest_replicas  # noqa: E402
from simulator.day import answer_day, simulate_day_in_chunks  # noqa: E402
from simulator.sizing import parse_hf_config  # noqa: E402
from simulator.workload import Workload  # noqa: E402

H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)
LLAMA_70B = ROOT / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-70B_config.json"
AZURE = ROOT / "tests" / "data" / "traces" / "azure_conv_2023_head1500.csv"
#: Share of the mean rate in each hour of the day (mean 1.0).
DAY_SHAPE = np.array([0.45, 0.38, 0.35, 0.35, 0.40, 0.55, 0.80, 1.10, 1.40, 1.60, 1.65, 1.55,
                      1.40, 1.45, 1.55, 1.60, 1.50, 1.30, 1.20, 1.35, 1.30, 1.00, 0.75, 0.56])
SLO_TTFT_S, SLO_TPOT_S = 2.0, 0.05
GPUS, PRICE = 4, 3.0


def traffic(rates: np.ndarray, span_s: float, seed: int = 0) -> Workload:
    """Poisson arrivals at ``rates[h]`` requests/s for ``span_s`` seconds each, Azure conversation lengths."""
    rng = np.random.default_rng(seed)
    parts = []
    for h, r in enumerate(rates):
        k = rng.poisson(r * span_s)
        parts.append(h * span_s + np.sort(rng.uniform(0.0, span_s, k)))
    arrival = np.concatenate(parts)
    with open(AZURE, newline="") as f:
        rows = list(csv.reader(f))[1:]
    pick = rng.integers(0, len(rows), arrival.size)
    prompts = np.array([int(r[1]) for r in rows])[pick]
    outputs = np.array([int(r[2]) for r in rows])[pick]
    return Workload(prompt_len=np.clip(prompts, 1, 8000), output_len=np.clip(outputs, 1, 2000), arrival=arrival,
                    arrival_unit="s")


def main(rate: float) -> None:
    model = parse_hf_config(json.loads(LLAMA_70B.read_text()))
    config, _ = engine_config_for(model, H100, max_model_len=16_384, tp=4)
    cold = ColdStart().seconds(35.0)
    peak_rate = rate * DAY_SHAPE.max()
    found = smallest_replicas(traffic(np.array([peak_rate]), 600.0, seed=1), config, slo_ttft_s=SLO_TTFT_S,
                              slo_itl_s=SLO_TPOT_S, routing="least-loaded")
    capacity = peak_rate / found.num_instances
    count = f"{found.num_instances} replica{'s' if found.num_instances > 1 else ''}"
    print(f"one replica carries {capacity:.2f} requests/s within the SLO ({count} for {peak_rate:.1f} requests/s "
          f"at the peak); cold start {cold:.0f} s")
    day = traffic(rate * DAY_SHAPE, 3600.0)
    hourly = [max(1, math.ceil(r / capacity)) for r in rate * DAY_SHAPE]
    policies = {
        "fixed at the peak": FixedPolicy(found.num_instances),
        "scheduled per hour": ScheduledPolicy(replicas=tuple(hourly), period_s=3600.0, lead_s=cold),
        "HPA, running requests": HpaPolicy(metric="running", target=48, min_replicas=1, max_replicas=16),
        "oracle": OraclePolicy(rates=rate_curve(day.arrival, 300.0), period_s=300.0, capacity_per_replica=capacity,
                               lead_s=cold + 15.0, max_replicas=16),
    }
    print(f"\n{day.n:,} requests over 24 h\n")
    print("| policy | GPU-hours | cost | saving against the fixed peak | attainment | worst hour | replicas started |")
    print("|---|---|---|---|---|---|---|")
    fixed_h = None
    for name, policy in policies.items():
        res = simulate_day_in_chunks(day, config, policy, chunk_s=3600.0, cold_start_s=cold)
        a = answer_day(res, gpus_per_replica=GPUS, price_per_gpu_hour=PRICE, slo_ttft_s=SLO_TTFT_S,
                       slo_tpot_s=SLO_TPOT_S)
        fixed_h = fixed_h or a.gpu_hours
        worst = a.worst_hours(1)[0]
        print(f"| {name} | {a.gpu_hours:,.0f} | ${a.cost:,.0f} | {1 - a.gpu_hours / fixed_h:.1%} | "
              f"{a.attainment:.2%} | hour {worst.hour}: {worst.attainment:.1%} | {a.replicas_started} |")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0)
