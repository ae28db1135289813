"""Benchmark the engine and print figures (not a test).

    python bench/bench_engine.py [--oracle] [--big N] [--cli N] [--sweep B N] [--repeat K]

* ``--oracle``: each recorded oracle case (200 requests) in process, ms.
* ``--big N``: N requests, prompts and outputs ~N(512, 256) clipped >= 1,
  Poisson arrivals at 0.45 req/step (near the max_num_seqs=256 capacity),
  num_gpu_blocks 26,000, block 16, defaults otherwise: seconds and peak RSS.
* ``--cli N``: the ``--big`` workload written as a CSV trace and run through
  ``python -m simulator run`` as a whole process under ``/usr/bin/time -v``
  (wall seconds and peak RSS of the process, JSON output written to a file).
* ``--sweep B N``: B configurations (num_gpu_blocks x max_num_seqs grid) of
  an N-request workload as one ``simulate`` call: seconds; with
  ``--processes P`` spread over P worker processes (0: one per CPU). With
  ``--grid budgets`` the grid is max_num_batched_tokens x block_size instead
  (26,000 x 16 tokens of KV): configurations that share no schedule.
* ``--roofline``, ``--cpu-tier-gib G`` (with ``--oracle``, ``--cli``, ``--big`` and
  ``--sweep``): every configuration gets the Llama 3.1 8B / H100 roofline
  clock of ``bench/engine_inputs.py`` and a CPU tier of G GiB (Llama 3.1
  8B's 2 MiB blocks); the arrivals stay in steps.
* ``--repeat K``: run each measurement K times and print every run (report
  the best; the machine is shared). Every line shows the 1-minute load, and
  the CPU time next to the wall time (less sensitive to other processes on a
  shared machine, though not immune: they share caches and cores).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.engine_inputs import BPB, H100, HF, normal_workload  # noqa: E402
from simulator.batch import simulate  # noqa: E402
from simulator.engine import EngineConfig  # noqa: E402
from simulator.workload import (  # noqa: E402
    load_json,
    read_workload,
)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}/{os.cpu_count()} cpus"


def feature_fields(args) -> dict:
    """The config-file fields of ``--roofline`` and ``--cpu-tier-gib``."""
    out: dict = {}
    if args.roofline:
        out["cost_model"] = {"kind": "roofline", "model": json.loads(HF.read_text()), "gpu": H100}
    if args.cpu_tier_gib:
        out["cpu_tier"] = {"size_gib": args.cpu_tier_gib}
        out["kv_bytes_per_block"] = BPB
    return out


def features_label(args) -> str:
    return (", roofline clock" if args.roofline else "") + (
        f", {args.cpu_tier_gib:g} GiB CPU tier" if args.cpu_tier_gib else "")


def bench_cli(n: int, fields: dict, label: str) -> None:
    wl = normal_workload(n, 0.45)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "w.csv"
        with open(trace, "w") as f:
            f.write("arrival_step,prompt_tokens,output_tokens\n")
            for a, p, o in zip(wl.arrival.astype(int).tolist(), wl.prompt_len.tolist(), wl.output_len.tolist()):
                f.write(f"{a},{p},{o}\n")
        cfg = Path(tmp) / "c.json"
        cfg.write_text(json.dumps({"num_gpu_blocks": 26_000, **fields}))
        out = Path(tmp) / "out.json"
        cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "simulator", "run", "--workload", str(trace),
               "--config", str(cfg), "--output", str(out)]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if p.returncode:
            print(p.stderr[-2000:])
            return
        wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", p.stderr)
        h, m, sec = wall.groups()
        secs = int(h or 0) * 3600 + int(m) * 60 + float(sec)
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
        user = float(re.search(r"User time \(seconds\): ([\d.]+)", p.stderr).group(1))
        t = json.loads(out.read_text())["totals"]
        print(f"cli n={n}{label}: {secs:.2f} s wall ({user:.2f} s user CPU), peak RSS {rss:.0f} MiB, steps={t['num_steps']} "
              f"finished={t['finished']} preemptions={t['preemptions']}  ({load()})")


def bench_oracle(fields: dict, label: str) -> None:
    data = ROOT / "tests" / "data" / "oracle"
    for run in sorted((data / "runs").glob("*.json.gz")):
        case = run.name[: -len(".json.gz")]
        wl = read_workload(data / "workloads" / f"{case.split('__')[0]}.json")
        base = load_json(data / "configs" / f"{case}.json")
        got, note = fields, label
        if "cpu_tier" in fields and base.get("enable_prefix_caching") is False:
            # a tier keeps cached prefixes: none without prefix caching
            got = {k: v for k, v in fields.items() if k not in ("cpu_tier", "kv_bytes_per_block")}
            note = features_label(argparse.Namespace(roofline=bool(got), cpu_tier_gib=0)) + " (no tier: caching off)"
        cfg = EngineConfig.from_dict({**base, **got})
        t0, c0 = time.perf_counter(), time.process_time()
        r = simulate(wl, [cfg])[0]
        print(f"oracle {case:44s}{note} {1000 * (time.perf_counter() - t0):7.1f} ms "
              f"({1000 * (time.process_time() - c0):6.1f} ms CPU)  steps={r.totals['num_steps']}  ({load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oracle", action="store_true")
    ap.add_argument("--big", type=int, default=0)
    ap.add_argument("--cli", type=int, default=0)
    ap.add_argument("--sweep", type=int, nargs=2, metavar=("B", "N"))
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--grid", choices=("blocks", "budgets"), default="blocks")
    ap.add_argument("--roofline", action="store_true")
    ap.add_argument("--cpu-tier-gib", type=float, default=0)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    for _ in range(args.repeat):
        run_once(args)


def run_once(args) -> None:
    if args.oracle:
        bench_oracle(feature_fields(args), features_label(args))
    if args.cli:
        bench_cli(args.cli, feature_fields(args), features_label(args))
    if args.big:
        wl = normal_workload(args.big, 0.45)
        t0, c0 = time.perf_counter(), time.process_time()
        r = simulate(wl, [EngineConfig.from_dict({"num_gpu_blocks": 26_000, **feature_fields(args)})])[0]
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t = r.totals
        print(f"big n={args.big}{features_label(args)}: {dt:.2f} s ({dc:.2f} s CPU), peak RSS {rss:.0f} MiB, steps={t['num_steps']} "
              f"schedule_calls={t['num_schedule_calls']} preemptions={t['preemptions']}  ({load()})")
    if args.sweep:
        b, n = args.sweep
        wl = normal_workload(n, 0.45, seed=1)
        fields = feature_fields(args)
        if args.grid == "blocks":
            blocks = np.linspace(4_000, 26_000, max(b // 4, 1)).astype(int)
            grid = [dict(num_gpu_blocks=int(x), max_num_seqs=s) for x in blocks for s in (64, 128, 256, 512)]
        else:
            budgets = np.linspace(512, 8192, max(b // 4, 1)).astype(int)
            grid = [dict(num_gpu_blocks=26_000 * 16 // bs, block_size=bs, max_num_batched_tokens=int(x))
                    for x in budgets for bs in (8, 16, 32, 64)]
        cfgs = [EngineConfig.from_dict({**g, **fields}) for g in grid[:b]]
        t0, c0 = time.perf_counter(), time.process_time()
        simulate(wl, cfgs, processes=args.processes)
        print(f"sweep {len(cfgs)} configs ({args.grid}{features_label(args)}) x {n} requests, processes={args.processes}: "
              f"{time.perf_counter() - t0:.2f} s ({time.process_time() - c0:.2f} s CPU in the parent)  ({load()})")


if __name__ == "__main__":
    main()
