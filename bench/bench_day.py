"""Benchmark a day plan (issue 36's target: a 24-hour day at 20 requests/s, 1.7 million requests, autoscaled on
2 to 16 replicas, in under 5 minutes on the project's 2-core machine). Prints figures; not a test.

    python bench/bench_day.py [--hours H] [--rate R] [--chunk-s S] [--overlap-s S] [--processes P]

The day: Llama 3.1 70B, TP 4 on H100 80GB per replica (sized as vLLM starts it, timed by the roofline clock:
``simulator.cluster.engine_config_for``), a daily shape (night at 35 % of the mean rate, two peaks at 165 %)
of Poisson arrivals averaging R requests/s, prompt and output lengths drawn from the Azure LLM inference
conversation trace 2023 (``tests/data/traces/azure_conv_2023_head1500.csv``, resampled with seed 0), the
Kubernetes HPA on running requests per replica (target 48, 2 to 16 replicas, 300 s scale-down window), a cold
start of 135 s; simulated in chunks of ``--chunk-s`` with ``--overlap-s`` either side (default 300 s)
(``simulator.day.simulate_day_in_chunks``). Prints wall and CPU seconds, peak memory, and the answer.

``--processes P`` (P > 1) runs the chunks in P forked processes (``simulator.day.parallel``), chunk h + 1 sent as
soon as chunk h tells its handover (before its cool-down), as the planner's Celery workers run them
(``planner/dayplans/services.py``); ``--speculate`` adds a second chain from the middle of the day from a guessed
handover, kept where it meets the first. Same answer as one after another; CPU is then the processes' together,
and peak RSS the largest process's.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.day_plan import DAY_SHAPE, H100, LLAMA_70B, traffic  # noqa: E402
from simulator.autoscale import HpaPolicy  # noqa: E402
from simulator.cluster import engine_config_for  # noqa: E402
from simulator.day import answer_day, default_overlap_s, simulate_day_in_chunks  # noqa: E402
from simulator.day.chunks import sub_workload  # noqa: E402
from simulator.day.parallel import simulate_day_in_processes  # noqa: E402
from simulator.sizing import parse_hf_config  # noqa: E402


def day_workload(hours: float, rate: float, seed: int = 0):
    """Poisson arrivals following the example's daily shape (hour h at ``rate * DAY_SHAPE[h % 24]``); a last
    partial hour is cut short."""
    whole = int(hours)
    rates = rate * DAY_SHAPE[np.arange(max(1, int(np.ceil(hours)))) % 24]
    wl = traffic(rates, 3600.0, seed=seed)
    if hours == whole:
        return wl
    return sub_workload(wl, 0.0, hours * 3600.0)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=24.0, help="length of the day, hours (default 24)")
    ap.add_argument("--rate", type=float, default=20.0, help="mean requests per second (default 20)")
    ap.add_argument("--chunk-s", type=float, default=3600.0, help="chunk length, seconds (default 3600)")
    ap.add_argument("--overlap-s", type=float, help="overlap either side, seconds (default: the planner's, 300 for this "
                                                    "policy)")
    ap.add_argument("--speculate", action="store_true", help="with --processes: two chains, the second from a guessed "
                                                              "handover at the middle of the day (same answer)")
    ap.add_argument("--processes", type=int, default=1, help="chunks in a pool of P processes, pipelined as on the "
                                                                 "Celery workers (default 1: one after another here)")
    args = ap.parse_args()
    model = parse_hf_config(json.loads(LLAMA_70B.read_text()))
    config, _ = engine_config_for(model, H100, max_model_len=16_384, tp=4)
    wl = day_workload(args.hours, args.rate)
    policy = HpaPolicy(metric="running", target=48, min_replicas=2, max_replicas=16)
    overlap = args.overlap_s if args.overlap_s is not None else default_overlap_s(policy)
    t0, c0 = time.perf_counter(), time.process_time()
    met = None
    if args.processes > 1:
        res, met = simulate_day_in_processes(wl, config, policy, chunk_s=args.chunk_s, overlap_s=overlap,
                                             cold_start_s=135.0, processes=args.processes, speculate=args.speculate)
    else:
        res = simulate_day_in_chunks(wl, config, policy, chunk_s=args.chunk_s, overlap_s=overlap,
                                     cold_start_s=135.0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += kids.ru_utime + kids.ru_stime
    ans = answer_day(res, gpus_per_replica=4, price_per_gpu_hour=3.0, slo_ttft_s=2.0, slo_tpot_s=0.05)
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, kids.ru_maxrss) / 1024 ** 2
    print(f"{wl.n:,} requests over {args.hours:g} h at {args.rate:g}/s mean, chunks of {args.chunk_s:g} s "
          f"(+{overlap:g} s either side), {args.processes} process{'es' if args.processes > 1 else ''}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.2f} GiB, "
          f"{wl.n / wall:,.0f} requests/s")
    if args.processes > 1 and args.speculate:
        print(f"the second chain met the first at chunk {met}" if met is not None else "the chains did not meet")
    print(f"answer: {ans.gpu_hours:,.1f} GPU-hours (${ans.cost:,.0f}) against {ans.fixed_peak_gpu_hours:,.1f} fixed "
          f"at the peak of {ans.peak_replicas} replicas (saving {ans.saving:.1%}); attainment {ans.attainment:.2%} "
          f"(TTFT <= 2 s, TPOT <= 50 ms); {ans.replicas_started} replicas started; worst hours "
          f"{[(h.hour, round(h.attainment, 3)) for h in ans.worst_hours(3)]}")


if __name__ == "__main__":
    main()
