"""Benchmark the engine and print figures (not a test).

    python bench/bench_engine.py [--oracle] [--big N] [--sweep B N]

* ``--oracle``: each recorded oracle case (200 requests) in process, ms.
* ``--big N``: N requests, prompts and outputs ~N(512, 256) clipped >= 1,
  Poisson arrivals at 0.45 req/step (near the max_num_seqs=256 capacity),
  num_gpu_blocks 26,000, block 16, defaults otherwise: seconds and peak RSS.
* ``--sweep B N``: B configurations (num_gpu_blocks x max_num_seqs grid) of
  an N-request workload as one ``simulate`` call: seconds.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.config import EngineConfig  # noqa: E402
from simulator.engine import simulate  # noqa: E402
from simulator.oracle_io import load_json, read_workload  # noqa: E402
from simulator.workload import Workload  # noqa: E402


def normal_workload(n: int, rate: float, seed: int = 0) -> Workload:
    rng = np.random.default_rng(seed)
    prompt = np.maximum(rng.normal(512, 256, n).round(), 1)
    output = np.maximum(rng.normal(512, 256, n).round(), 1)
    arrival = np.floor(np.cumsum(rng.exponential(1 / rate, n)))
    return Workload(prompt_len=prompt, output_len=output, arrival=arrival)


def bench_oracle() -> None:
    data = ROOT / "tests" / "data" / "oracle"
    for run in sorted((data / "runs").glob("*.json.gz")):
        case = run.name[: -len(".json.gz")]
        wl = read_workload(data / "workloads" / f"{case.split('__')[0]}.json")
        cfg = EngineConfig.from_dict(load_json(data / "configs" / f"{case}.json"))
        t0 = time.perf_counter()
        r = simulate(wl, [cfg])[0]
        print(f"oracle {case:44s} {1000 * (time.perf_counter() - t0):7.1f} ms  steps={r.totals['num_steps']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oracle", action="store_true")
    ap.add_argument("--big", type=int, default=0)
    ap.add_argument("--sweep", type=int, nargs=2, metavar=("B", "N"))
    args = ap.parse_args()
    if args.oracle:
        bench_oracle()
    if args.big:
        wl = normal_workload(args.big, 0.45)
        t0 = time.perf_counter()
        r = simulate(wl, [EngineConfig(num_gpu_blocks=26_000)])[0]
        dt = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t = r.totals
        print(f"big n={args.big}: {dt:.2f} s, peak RSS {rss:.0f} MiB, steps={t['num_steps']} "
              f"schedule_calls={t['num_schedule_calls']} preemptions={t['preemptions']}")
    if args.sweep:
        b, n = args.sweep
        wl = normal_workload(n, 0.45, seed=1)
        blocks = np.linspace(4_000, 26_000, max(b // 4, 1)).astype(int)
        cfgs = [EngineConfig(num_gpu_blocks=int(x), max_num_seqs=s)
                for x in blocks for s in (64, 128, 256, 512)][:b]
        t0 = time.perf_counter()
        simulate(wl, cfgs)
        print(f"sweep {len(cfgs)} configs x {n} requests: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
