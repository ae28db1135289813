"""Benchmark sizing requests per second through ``POST /api/plan/`` (not a test).

    python bench/bench_plan_api.py [--n 2000]

Runs the whole Django stack in process (middleware, DRF parsing and
validation, the catalog lookups, :func:`simulator.sizing.closed_form.plan`, JSON
rendering) with Django's test client against a throw-away SQLite database
migrated with the catalog, with production settings (no local.env). Throttling
is disabled, and so is the log line of each expected 400. Prints, for
each request body: requests per second, and p50 / p99 latency in ms, plus
``simulator.sizing.closed_form.plan`` alone for comparison.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BODIES = {
    "catalog slugs (Llama 3.1 8B, 1x H100)": {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"},
    "catalog slugs (Llama 3.1 70B, TP 4, fp8 KV)": {"model": "llama-3-1-70b", "gpu": "h100-sxm5-80gb",
                                                   "tensor_parallel_size": 4, "kv_cache_dtype": "fp8"},
    "inline config.json + inline GPU": {
        "model": {"config": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                             "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                             "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}},
        "gpu": {"memory_gib": 79.18}},
    "bad input (400)": {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 3},
}


def setup_django(db_path: str) -> None:
    os.environ.setdefault("SECRET_KEY", "bench-secret-key-not-for-production-0123456789abcdefghijklmnop")
    os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ["KVP_ENV_FILE"] = ""  # production settings, whatever local.env says
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    # The "bad input" body answers 400 on purpose: no "Bad Request: /api/plan/" line per request.
    logging.getLogger("django.request").setLevel(logging.ERROR)
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def run(body: dict, n: int) -> list[float]:
    from django.test import Client

    client = Client()
    payload = json.dumps(body)
    expected = 400 if "tensor_parallel_size" in body and body["tensor_parallel_size"] == 3 else 200
    for _ in range(20):  # warm up
        client.post("/api/plan/", payload, content_type="application/json")
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = client.post("/api/plan/", payload, content_type="application/json")
        times.append(time.perf_counter() - t)
        if r.status_code != expected:
            raise SystemExit(f"unexpected {r.status_code}: {r.content[:300]!r}")
    return times


def bench_plan_alone(n: int) -> list[float]:
    from gpuprofiles.models import GpuProfile, ModelProfile
    from simulator.base import DeploymentSpec
    from simulator.sizing import plan

    model = ModelProfile.objects.get(slug="llama-3-1-8b").to_spec()
    gpu = GpuProfile.objects.get(slug="h100-sxm5-80gb").to_spec()
    dep = DeploymentSpec()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        plan(model, gpu, dep)
        times.append(time.perf_counter() - t)
    return times


def report(label: str, times: list[float]) -> None:
    total = sum(times)
    q = statistics.quantiles(times, n=100)
    print(f"| {label} | {len(times):,} | {len(times) / total:,.0f} | {q[49] * 1e3:.2f} | {q[98] * 1e3:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="requests per body")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(str(Path(tmp) / "bench.sqlite3"))
        from planner.api.sizing import PlanCreateApi

        PlanCreateApi.throttle_classes = []
        import django

        print(f"Python {platform.python_version()}, Django {django.get_version()}, {platform.machine()}, "
              f"{os.cpu_count()} CPUs, {platform.platform()}")
        print()
        print("| Request | Requests | Requests/s | p50 (ms) | p99 (ms) |")
        print("|---|---:|---:|---:|---:|")
        for label, body in BODIES.items():
            report(label, run(body, args.n))
        report("simulator.sizing.closed_form.plan alone (no HTTP)", bench_plan_alone(args.n))


if __name__ == "__main__":
    main()
