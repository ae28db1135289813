"""Benchmark the deployment search and print figures (not a test).

    python bench/bench_search.py [--duration S] [--rate R] [--exhaustive] [--processes P]

Issue 17's goal: a space of 6 GPUs (``examples/search_gpus.json``) x TP {1,2,4,8} x 3 weight
precisions (bf16, fp8, int4) x 3 ``max_num_seqs`` (64, 256, 1024) = 216 replica shapes, up to 16
replicas each, for Llama 3.1 8B serving 10 minutes of Poisson traffic at 20 requests/s (12,000
requests; prompts normal(1024, 256), outputs normal(256, 64) tokens), SLO TTFT p90 <= 500 ms and
ITL p90 <= 50 ms. Prints the wall and CPU seconds, the simulations run and the outcome counts.
``--exhaustive`` also simulates every replica count of every fitting shape (slow: brute force).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.base import GpuSpec  # noqa: E402
from simulator.search import (  # noqa: E402
    SearchSpace,
    Slo,
    SloTarget,
    search_deployments,
)
from simulator.sizing import parse_hf_config  # noqa: E402
from simulator.workload import WorkloadSpec, generate_workload  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of traffic")
    ap.add_argument("--rate", type=float, default=20.0, help="requests per second")
    ap.add_argument("--exhaustive", action="store_true", help="brute force as well")
    ap.add_argument("--processes", type=int, default=1, help="forked processes (GPU types split among them)")
    args = ap.parse_args()
    model = parse_hf_config(json.loads((ROOT / "gpuprofiles/data/hf_configs/"
                                        "meta-llama--Meta-Llama-3.1-8B_config.json").read_text()), name="Llama 3.1 8B")
    gpus = tuple(GpuSpec(**g) for g in json.loads((ROOT / "examples/search_gpus.json").read_text()))
    wl = generate_workload(WorkloadSpec.from_dict({
        "n": round(args.rate * args.duration), "prompt": "normal:1024,256", "output": "normal:256,64",
        "arrival": {"kind": "poisson", "rate": args.rate, "unit": "s"}}), seed=0)
    space = SearchSpace(gpus, tensor_parallel=(1, 2, 4, 8), precisions=("bf16", "fp8", "int4"),
                        max_num_seqs=(64, 256, 1024), max_replicas=16)
    slo = Slo((SloTarget("ttft", "p90", 0.5), SloTarget("itl", "p90", 0.05)))
    for exhaustive in (False, True) if args.exhaustive else (False,):
        wall, cpu = time.perf_counter(), time.process_time()
        res = search_deployments(wl, model, space, slo, exhaustive=exhaustive, processes=args.processes)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if args.processes > 1:
            import resource

            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu += kids.ru_utime + kids.ru_stime
        counts = res.to_dict()["counts"]
        print(f"{'exhaustive' if exhaustive else 'search'}: {space.size} shapes, {wl.n:,} requests: "
              f"{wall:.1f} s wall, {cpu:.1f} s CPU, {res.num_simulations} simulations, {counts}")
        print("  " + res.message)


if __name__ == "__main__":
    main()
