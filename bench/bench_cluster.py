"""Benchmark replicas behind a router and print figures (not a test).

    python bench/bench_cluster.py [--instances N ...] [--sweep] [--processes P] [--repeat K]

Seed 000's scenario (``docs/cluster.md``): Llama 3.1 8B on one H100 SXM5 per
instance (vLLM defaults from ``simulator.sizing.closed_form.plan``, roofline clock), 500
requests at 100 requests/s, one 2,048-token prefix per tenant (16 tenants).

* default: one cluster per (instance count, policy), wall and CPU seconds;
  ``--instances`` sets the counts (default 4 and 64);
* ``--sweep``: instance counts 1, 2, 4, 8, 16 x the five policies below as one
  ``simulate`` batch of :class:`simulator.cluster.replicas.Deployment` items, with
  ``--processes P`` worker processes (0: one per CPU).
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

from simulator.base import DeploymentSpec, GpuSpec  # noqa: E402
from simulator.batch import simulate  # noqa: E402
from simulator.cluster import Deployment, simulate_cluster  # noqa: E402
from simulator.engine import EngineConfig  # noqa: E402
from simulator.sizing import parse_hf_config, plan  # noqa: E402
from simulator.workload import ArrivalProcess, PrefixGroup, WorkloadSpec, generate_workload  # noqa: E402

HF = ROOT / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
H100 = dict(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
            interconnect_gbps=900)
POLICIES = ("round-robin", "random", "least-loaded", "prefix-affinity", "weighted:prefix-affinity:3,queue-depth:1")


def seed_config() -> EngineConfig:
    model = json.loads(HF.read_text())
    sized = plan(parse_hf_config(model), GpuSpec(**H100), DeploymentSpec())
    return EngineConfig(num_gpu_blocks=sized.num_gpu_blocks, max_num_batched_tokens=sized.max_num_batched_tokens,
                        max_num_seqs=sized.max_num_seqs, cost_model={"kind": "roofline", "model": model, "gpu": H100})


def seed_workload():
    return generate_workload(WorkloadSpec(n=500, arrival=ArrivalProcess("poisson", rate=100.0, unit="s"),
                                          prefixes=(PrefixGroup(2048, 1.0, 16),)), 0)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}/{os.cpu_count()} cpus"


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, nargs="+", default=[4, 64])
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    cfg, wl = seed_config(), seed_workload()
    for _ in range(args.repeat):
        if args.sweep:
            items = [Deployment(cfg, n, pol) for n in (1, 2, 4, 8, 16) for pol in POLICIES]
            _, w, c = timed(lambda items=items: simulate(wl, items, processes=args.processes))
            print(f"sweep {len(items)} deployments (1-16 instances x {len(POLICIES)} policies) x {wl.n} requests, "
                  f"processes={args.processes}: {w:.2f} s wall ({c:.2f} s CPU in the parent)  ({load()})")
            continue
        for n in args.instances:
            for pol in POLICIES:
                r, w, c = timed(lambda n=n, pol=pol: simulate_cluster(wl, cfg, n, routing=pol))
                print(f"{n:3d} instances, {pol:42s} {w:6.2f} s wall, {c:6.2f} s CPU, "
                      f"hit rate {r.totals['prefix_cache_hit_rate']:.3f}  ({load()})")


if __name__ == "__main__":
    main()
