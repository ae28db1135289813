"""Benchmark a day-scale trace through ``python -m simulator run`` (issue 35's target: 1,000,000 requests in
under 30 s and 2 GiB on the project's 2-core machine). Prints figures; not a test.

    python bench/bench_trace.py [--requests N] [--rate R] [--repeat K] [--keep DIR]

The trace is written in Mooncake's published layout (``timestamp`` ms, ``input_length``, ``output_length``,
``hash_ids`` of 512-token blocks): lengths drawn from the Azure LLM inference conversation trace 2023
(``tests/data/traces/azure_conv_2023_head1500.csv``, resampled with seed 0), Poisson arrivals at R requests/s
(default 20: a day's traffic is 1.7 million requests), half of the requests starting with one shared
512-token system prompt. It runs on one Llama 3.1 8B replica on an H100 80GB, sized as vLLM starts it and
timed by the roofline clock (``simulator.cluster.engine_config_for``), through the command line as a whole
process under ``/usr/bin/time -v``: wall and CPU seconds, peak RSS, and the trace reader's share (the same
file read in this process).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.base import GpuSpec  # noqa: E402
from simulator.cluster import engine_config_for  # noqa: E402
from simulator.sizing import parse_hf_config  # noqa: E402
from simulator.workload import read_public_trace  # noqa: E402

H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
               interconnect_gbps=900)
LLAMA_8B = ROOT / "tests" / "data" / "sizing" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
AZURE = ROOT / "tests" / "data" / "traces" / "azure_conv_2023_head1500.csv"


def write_trace(path: Path, n: int, rate: float, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with open(AZURE, newline="") as f:
        rows = list(csv.reader(f))[1:]
    prompts = np.array([int(r[1]) for r in rows])
    outputs = np.array([int(r[2]) for r in rows])
    pick = rng.integers(0, len(rows), n)
    prompt, output = np.maximum(prompts[pick], 1), np.maximum(outputs[pick], 1)
    stamp = np.cumsum(rng.exponential(1000.0 / rate, n)).astype(np.int64)
    shared = rng.random(n) < 0.5
    blocks = -(-prompt // 512)
    next_id = 1
    with open(path, "w") as out:
        for i in range(n):
            own = int(blocks[i]) - int(shared[i])
            ids = ([0] if shared[i] else []) + list(range(next_id, next_id + own))
            next_id += own
            out.write(json.dumps({"timestamp": int(stamp[i]), "input_length": int(prompt[i]),
                                  "output_length": int(output[i]), "hash_ids": ids}) + "\n")


def config_file(path: Path) -> None:
    model = parse_hf_config(json.loads(LLAMA_8B.read_text()))
    cfg, _ = engine_config_for(model, H100, max_model_len=16_384)
    path.write_text(json.dumps({**cfg.to_dict(), "max_steps": 1_000_000_000}))


def measure(trace: Path, cfg: Path) -> str:
    t0 = time.perf_counter()
    wl, report = read_public_trace(trace.read_text())
    read_s = time.perf_counter() - t0
    out = trace.with_suffix(".out.json")
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "simulator", "run", "--workload", str(trace),
           "--config", str(cfg), "--output", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 3):
        return f"failed ({done.returncode}): {done.stderr[-1500:]}"
    err = done.stderr
    h, m, s = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", err).groups()
    wall = int(h or 0) * 3600 + int(m) * 60 + float(s)
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", err).group(1))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) / 1024
    t = json.loads(out.read_text())["totals"]
    return (f"{wl.n:,} requests ({report.prompt_tokens:,} prompt tokens): {wall:.1f} s wall, {user:.1f} s user CPU, "
            f"peak RSS {rss:,.0f} MiB; reading the trace {read_s:.1f} s; steps {t['num_steps']:,}, finished "
            f"{t['finished']:,}, unfinished {t['unfinished']:,}, exit {done.returncode}  "
            f"(load {os.getloadavg()[0]:.1f}/{os.cpu_count()} cpus)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=20.0, help="requests per second")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", metavar="DIR", help="write the trace and config here (and reuse them)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(args.keep or tmp)
        where.mkdir(parents=True, exist_ok=True)
        trace, cfg = where / f"trace_{args.requests}_{args.rate:g}.jsonl", where / "llama8b_h100.json"
        if not trace.exists():
            write_trace(trace, args.requests, args.rate)
        config_file(cfg)
        for _ in range(args.repeat):
            print(measure(trace, cfg), flush=True)


if __name__ == "__main__":
    main()
