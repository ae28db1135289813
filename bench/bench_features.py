"""Benchmark the engine with its time-and-tiers features switched on (not a test).

    python bench/bench_features.py [--n 10000] [--batch 8]

The engine benchmark's workload (``bench/bench_engine.py --big``: prompts and
outputs ~N(512, 256), Poisson near the max_num_seqs=256 capacity, 26,000
blocks of 16 tokens as for Llama 3.1 8B on one H100), in process, under:

* ``plain``: the oracle's linear step time (what ``bench_engine.py`` measures);
* ``roofline``: the Llama 3.1 8B / H100 roofline clock (``EngineConfig.cost_model``);
* ``roofline + cpu tier``: plus a 64 GiB CPU tier (Llama 3.1 8B's 2 MiB blocks);
* ``radix``: SGLang's RadixCache model (token granularity);
* ``--batch B``: B configurations (roofline + CPU tiers of 0-112 GiB) in one ``simulate`` call
  (``--processes P``: spread over P worker processes, 0 = one per CPU).

Arrivals are converted to seconds (0.45 requests per 25 ms) for the time-based
runs. Prints wall seconds and the 1-minute load average (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine_inputs import BPB, H100, HF, normal_workload  # noqa: E402
from simulator.batch import simulate  # noqa: E402
from simulator.engine import EngineConfig  # noqa: E402
from simulator.workload import Workload  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="requests (default 10,000)")
    ap.add_argument("--batch", type=int, default=8, help="configurations in the batched run (0 = skip)")
    ap.add_argument("--processes", type=int, default=1, help="worker processes for the batched run (0 = one per CPU)")
    args = ap.parse_args()
    steps = normal_workload(args.n, 0.45)
    secs = Workload(prompt_len=steps.prompt_len, output_len=steps.output_len, arrival=steps.arrival * 0.025,
                    arrival_unit="s")
    roof = {"kind": "roofline", "model": json.loads(HF.read_text()), "gpu": H100}
    base = dict(num_gpu_blocks=26_000, block_size=16)
    runs = [
        ("plain (linear clock, step arrivals)", steps, EngineConfig(**base)),
        ("roofline clock", secs, EngineConfig(**base, cost_model=roof)),
        ("roofline + 64 GiB cpu tier", secs,
         EngineConfig(**base, cost_model=roof, cpu_tier={"size_gib": 64}, kv_bytes_per_block=BPB)),
        ("radix prefix cache, roofline", secs, EngineConfig(**base, cost_model=roof, prefix_cache="radix")),
    ]
    print(f"{args.n:,} requests; {os.cpu_count()} cpus")
    for label, wl, cfg in runs:
        t0 = time.perf_counter()
        r = simulate(wl, [cfg])[0]
        dt = time.perf_counter() - t0
        print(f"{label:40s} {dt:7.2f} s  steps {r.totals['num_steps']:,}  finished {r.totals['finished']:,}  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    if args.batch:
        terms = EngineConfig(cost_model=roof).cost_model
        cfgs = [EngineConfig(**base, cost_model=terms, kv_bytes_per_block=BPB,
                             cpu_tier={"size_gib": 16 * i} if i else None) for i in range(args.batch)]
        t0 = time.perf_counter()
        simulate(secs, cfgs, processes=args.processes)
        dt = time.perf_counter() - t0
        print(f"{args.batch} configs (roofline, cpu tier 0-{16 * (args.batch - 1)} GiB) in one call, "
              f"processes={args.processes}: {dt:.2f} s  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
