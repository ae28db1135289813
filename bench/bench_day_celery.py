"""Benchmark issue 36's day through the planner's real Celery workers: a day plan created as the API creates one,
its chunks run by ``celery worker`` processes over Redis, stored in a database of its own. Prints figures; not a
test.

    python bench/bench_day_celery.py [--hours H] [--rate R] [--concurrency C] [--no-speculate]
                                     [--redis redis://127.0.0.1:6379/0] [--keep]

The day is ``bench/bench_day.py``'s: Llama 3.1 70B, TP 4 on H100 80GB per replica (the engine configuration
``simulator.cluster.engine_config_for`` sizes, sent as the plan's ``engine``), the example's daily shape of R
requests/s on average (``hourly:`` rates; the count is the shape's mean), prompt and output lengths drawn from
the Azure LLM inference conversation trace 2023 (``tests/data/traces/azure_conv_2023_head1500.csv``, as an
``empirical`` distribution, prompts at most 8,000 tokens, outputs 2,000), the HPA on running requests (target
48, 2 to 16 replicas), a cold start of 135 s, one-hour chunks (300 s overlaps), and by default the speculative
second chain (``planner/dayplans/services.py``). The arrivals are the planner's generator's, so the requests
differ from ``bench_day.py``'s (its own Poisson draw): the answer is of the same day, not the same requests.

One worker process with ``--concurrency C`` (default 2) prefork children, a fresh SQLite database in a
temporary directory (migrated here) and a private queue on the Redis at ``--redis``. Measured: wall time from
the plan's creation to its answer stored, the CPU of the worker's processes (sampled from ``/proc`` every 0.5 s:
each child's user + system seconds), the largest peak RSS of any of them (``VmHWM``), and the load average.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLK = os.sysconf("SC_CLK_TCK")


def definition(hours: int, rate: float) -> dict:
    """The day plan: bench_day.py's day in the planner's definition (module docstring)."""
    import numpy as np

    from examples.day_plan import AZURE, DAY_SHAPE, H100, LLAMA_70B
    from simulator.cluster import engine_config_for
    from simulator.sizing import parse_hf_config

    model = parse_hf_config(json.loads(LLAMA_70B.read_text()))
    config, _ = engine_config_for(model, H100, max_model_len=16_384, tp=4)
    with open(AZURE, newline="") as f:
        rows = list(csv.reader(f))[1:]
    per_hour = rate * 3600.0 * DAY_SHAPE[np.arange(hours) % 24]
    return {
        "name": f"bench: {hours} h at {rate:g}/s",
        "engine": config.to_dict(),
        "workload": {"spec": {"n": int(round(per_hour.sum())),
                              "prompt": {"kind": "empirical", "values": [min(int(r[1]), 8000) for r in rows]},
                              "output": {"kind": "empirical", "values": [min(int(r[2]), 2000) for r in rows]},
                              "arrival": "hourly:" + ",".join(f"{r:.0f}" for r in per_hour)}, "seed": 0},
        "policy": {"kind": "hpa", "metric": "running", "target": 48, "min_replicas": 2, "max_replicas": 16},
        "cold_start": {"seconds": 135}, "gpus_per_replica": 4, "price_per_gpu_hour": 3.0,
        "slo": {"ttft_s": 2, "tpot_s": 0.05}, "chunk_s": 3600,
    }


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from ``/proc``)."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def sample(pid: int, cpu: dict[int, float], hwm: dict[int, int]) -> None:
    """Each process's CPU seconds and peak RSS (KiB) so far, kept per pid."""
    for p in tree(pid):
        try:
            f = (Path("/proc") / str(p) / "stat").read_text().rsplit(")", 1)[1].split()
            cpu[p] = (int(f[11]) + int(f[12])) / CLK
            for line in (Path("/proc") / str(p) / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm[p] = int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=int, default=24, help="length of the day, whole hours (default 24)")
    ap.add_argument("--rate", type=float, default=20.0, help="mean requests per second (default 20)")
    ap.add_argument("--concurrency", type=int, default=2, help="worker processes (prefork children, default 2)")
    ap.add_argument("--no-speculate", action="store_true", help="the chunks pipelined only, no second chain")
    ap.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), help="the broker")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (database, worker log)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="kvp-bench-day-"))
    queue = f"kvp-bench-{uuid.uuid4().hex[:8]}"
    env = {"DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}", "REDIS_URL": args.redis, "KVP_SWEEP_QUEUE": queue,
           "DEBUG": "false", "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only"),
           "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from planner.dayplans import selectors, services
    from planner.dayplans.models import DayPlan

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench", password="bench-only-123")
    body = {**definition(args.hours, args.rate), "speculate": not args.no_speculate}
    log = open(tmp / "worker.log", "ab")  # noqa: SIM115 - closed at the end
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "--concurrency",
         str(args.concurrency), "--pool", "prefork", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
         "-n", f"{queue}@%h"], cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    cpu: dict[int, float] = {}
    hwm: dict[int, int] = {}
    try:
        time.sleep(3.0)  # the worker's start (imports) is not the day's
        sample(worker.pid, cpu, hwm)
        cpu0 = sum(cpu.values())
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        plan = services.dayplan_create(owner=owner, definition=body)
        created = time.perf_counter() - t0
        last = ""
        while True:
            sample(worker.pid, cpu, hwm)
            plan = DayPlan.objects.get(pk=plan.pk)
            if plan.is_final and (plan.answer or plan.status != "done"):
                break
            prog = selectors.dayplan_progress(plan=plan)
            line = f"{prog['chunks_done']}/{prog['chunks_total']} chunks"
            if line != last:
                print(f"  {time.perf_counter() - t0:6.1f} s: {line} (load {os.getloadavg()[0]:.1f})", flush=True)
                last = line
            if worker.poll() is not None:
                raise SystemExit(f"the worker exited ({worker.returncode}); log: {tmp / 'worker.log'}")
            time.sleep(0.5)
        wall = time.perf_counter() - t0
        load1 = os.getloadavg()
    finally:
        os.killpg(worker.pid, 9)
        worker.wait()
        log.close()
    if plan.status != "done":
        raise SystemExit(f"plan {plan.status}: {plan.error}")
    a = plan.answer
    spec_at = plan.snapshot["day"]["speculate_at"]
    text = (tmp / "worker.log").read_text(errors="replace")
    runs, again = text.count(": 'done'"), text.count("started from another handover")  # chunk tasks that ran
    print(f"{plan.snapshot['day']['requests']:,} requests over {args.hours} h at {args.rate:g}/s mean, "
          f"{plan.num_chunks} chunks, {args.concurrency} worker processes, "
          f"{'speculative from chunk ' + str(spec_at) if spec_at is not None else 'pipelined only'}: "
          f"{wall:.1f} s wall (creating the plan {created:.1f} s), {sum(cpu.values()) - cpu0:.1f} s CPU of the "
          f"worker's processes, peak RSS {max(hwm.values()) / 1024 ** 2:.2f} GiB (largest process), "
          f"{runs} chunk runs stored, {again} put back (a guess missed); load {load0[0]:.1f} at the start, {load1[0]:.1f} at the end "
          f"({os.cpu_count()} CPUs)")
    print(f"answer: {a['gpu_hours']:,.1f} GPU-hours (${a['cost']:,.0f}) against {a['fixed_peak_gpu_hours']:,.1f} "
          f"fixed at the peak of {a['peak_replicas']} replicas (saving {a['saving']:.1%}); attainment "
          f"{a['attainment']:.2%} (TTFT <= 2 s, TPOT <= 50 ms); worst hours {a['worst_hours']}")
    if args.keep:
        print(f"kept: {tmp}")
    else:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
