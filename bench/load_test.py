"""Load test of the production set-up on loopback: what holds under mixed traffic from several users (not a test).

    python bench/load_test.py [--seconds 30] [--users 4] [--port 8765]

Starts, on 127.0.0.1 only, what docker-compose runs: gunicorn with 3 workers
(``--timeout 60``) and a Celery worker (concurrency 2), with DEBUG off, on a
throw-away SQLite database and the embedded broker (or on PostgreSQL / Redis
when ``DATABASE_URL`` / ``REDIS_URL`` are set). Then, for ``--seconds``:

- each of ``--users`` signed-in users (API tokens) loops over sizing
  (``POST /api/plan/``), small simulations, the issue's 130-byte simulation
  (priced and refused), small and huge replicas searches, and small sweeps;
- one anonymous client sends ``POST /api/plan/`` with a new forged
  ``X-Forwarded-For`` each time (the limit, ``--anon-rate``, must hold) and
  loads pages;
- a prober asks ``/healthz`` every 0.2 s.

Prints requests served per kind and status, the 429s, any 5xx, the latency of
``/healthz`` (p50, p99, max), and the peak resident memory of the server's
processes (gunicorn and Celery, all children). Bounded: at most 300 s and 16
users; nothing leaves the machine. Figures: docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
ISSUE_23_BODY = b'{"engine":{"num_gpu_blocks":2000},"workload":{"spec":{"n":5000,"output":"const:10000000"},"seed":0}}'
PLAN = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}
SIM = {"engine": {"num_gpu_blocks": 2000}, "workload": {"spec": {"n": 200, "arrival": "poisson:4"}, "seed": 0}}


def _replicas(n: int, prompt: int, output: int, rate: float) -> dict:
    return {**PLAN, "slo": {"ttft_s": 0.5, "itl_s": 0.05}, "max_instances": 8,
            "workload": {"spec": {"n": n, "prompt": f"const:{prompt}", "output": f"const:{output}",
                                  "arrival": {"kind": "poisson", "rate": rate, "unit": "s"}}, "seed": 0}}


SWEEP = {"engine": {"num_gpu_blocks": 2000, "max_num_seqs": 32},
         "workload": {"spec": {"n": 300, "prompt": "normal:300,50", "output": "normal:80,10"}, "seed": 1},
         "axes": [{"param": "num_gpu_blocks", "values": [200, 600, 1800]}]}

#: (kind, method, path, body, weight) of a signed-in user's requests.
USER_MIX = [
    ("plan", "POST", "/api/plan/", json.dumps(PLAN).encode(), 60),
    ("simulation", "POST", "/api/simulations/", json.dumps(SIM).encode(), 10),
    ("simulation-issue-23", "POST", "/api/simulations/", ISSUE_23_BODY, 5),
    ("replicas-small", "POST", "/api/replicas/", json.dumps(_replicas(100, 500, 100, 10)).encode(), 8),
    ("replicas-huge", "POST", "/api/replicas/", json.dumps(_replicas(2000, 100_000, 30_000, 1000)).encode(), 5),
    ("sweep", "POST", "/api/sweeps/", json.dumps(SWEEP).encode(), 5),
    ("page-replicas", "GET", "/replicas/?model=llama-3-1-8b&gpu=h100-sxm5-80gb&rate=1000&requests=2000"
                             "&prompt_mean=100000&output_mean=30000", None, 7),
]


class Results:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.health_ms: list[float] = []
        self.health_failures = 0

    def add(self, kind: str, status: int) -> None:
        with self.lock:
            self.counts[(kind, status)] += 1


def request(method: str, url: str, body: bytes | None, headers: dict, timeout: float = 70.0) -> int:
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError):
        return 0  # no answer


def user_loop(base: str, token: str, stop: threading.Event, results: Results, seed: int) -> None:
    rng = random.Random(seed)
    weights = [w for *_, w in USER_MIX]
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    while not stop.is_set():
        kind, method, path, body, _ = rng.choices(USER_MIX, weights)[0]
        results.add(kind, request(method, base + path, body, headers))


def anonymous_loop(base: str, stop: threading.Event, results: Results) -> None:
    i = 0
    body = json.dumps(PLAN).encode()
    while not stop.is_set():
        i += 1
        forged = {"Content-Type": "application/json", "X-Forwarded-For": f"198.51.100.{i % 250}"}
        results.add("anon-plan-forged-xff", request("POST", base + "/api/plan/", body, forged))
        if i % 10 == 0:
            results.add("anon-page", request("GET", base + "/catalog/gpus/", None, {}))


def health_loop(base: str, stop: threading.Event, results: Results) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        status = request("GET", base + "/healthz", None, {}, timeout=30)
        with results.lock:
            if status == 200:
                results.health_ms.append((time.perf_counter() - start) * 1000)
            else:
                results.health_failures += 1
        stop.wait(0.2)


def tree_rss_bytes(pids: list[int]) -> int:
    """Resident memory of these processes and all their descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, list(pids)
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def start_servers(port: int, users: int, workdir: Path, anon_rate: str) -> tuple[list[subprocess.Popen], list[str],
                                                                                dict]:
    env = {**os.environ, "THROTTLE_ANON": anon_rate, "DEBUG": "false", "SECRET_KEY": "load-test-" + "x" * 50, "ALLOWED_HOSTS": HOST,
           "SECURE_SSL_REDIRECT": "false", "SECURE_COOKIES": "false", "KVP_DATA_DIR": str(workdir),
           "PYTHONPATH": str(ROOT), "LOG_LEVEL": "WARNING"}
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)
    make_users = ("from django.contrib.auth import get_user_model; from accounts.services import "
                  "api_token_create; U = get_user_model()\n"
                  f"for i in range({users}):\n"
                  "    u, _ = U.objects.get_or_create(username=f'load{i}')\n"
                  "    print(api_token_create(user=u, name='load test')[1])")
    out = subprocess.run([py, "manage.py", "shell", "-c", make_users], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    tokens = [t for t in out.split() if t][-users:]
    log = open(workdir / "servers.log", "ab")  # noqa: SIM115 - lives as long as the servers
    web = subprocess.Popen([py, "-m", "gunicorn", "config.wsgi:application", "--bind", f"{HOST}:{port}",
                            "--workers", "3", "--timeout", "60"], cwd=ROOT, env=env, stdout=log, stderr=log,
                           start_new_session=True)
    worker = subprocess.Popen([py, "-m", "celery", "-A", "config", "worker", "--concurrency", "2",
                               "--loglevel", "WARNING"], cwd=ROOT, env=env, stdout=log, stderr=log,
                              start_new_session=True)
    return [web, worker], tokens, env


def wait_until_up(base: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if request("GET", base + "/healthz", None, {}, timeout=2) == 200:
            return
        time.sleep(0.5)
    raise SystemExit("the server did not answer /healthz within 60 s (see servers.log)")


def report(results: Results, seconds: float, peak: int) -> None:
    print(f"\n{seconds:.0f} s of load; requests by kind and status:")
    kinds = sorted({k for k, _ in results.counts})
    for kind in kinds:
        row = {s: n for (k, s), n in results.counts.items() if k == kind}
        print(f"  {kind:24s} " + ", ".join(f"{s or 'no answer'}: {n}" for s, n in sorted(row.items())))
    served = sum(n for (_, s), n in results.counts.items() if s)
    throttled = sum(n for (_, s), n in results.counts.items() if s == 429)
    errors = sum(n for (_, s), n in results.counts.items() if s >= 500 or s == 0)
    print(f"served {served} requests ({served / seconds:.1f}/s); 429: {throttled}; 5xx or no answer: {errors}")
    h = sorted(results.health_ms)
    if h:
        p99 = h[min(len(h) - 1, int(0.99 * len(h)))]
        print(f"/healthz: {len(h)} answered, {results.health_failures} failed; p50 {statistics.median(h):.1f} ms, "
              f"p99 {p99:.1f} ms, max {h[-1]:.1f} ms")
    print(f"peak resident memory of gunicorn + celery (all processes): {peak / 2**20:.0f} MiB")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="length of the load (at most 300)")
    ap.add_argument("--users", type=int, default=4, help="signed-in users sending requests (at most 16)")
    ap.add_argument("--port", type=int, default=8765, help="loopback port for gunicorn")
    ap.add_argument("--anon-rate", default="20/min",
                    help="THROTTLE_ANON of the server (low, so that the forged-header client meets it)")
    args = ap.parse_args(argv)
    if not 1 <= args.seconds <= 300 or not 1 <= args.users <= 16:
        ap.error("--seconds must be 1 to 300 and --users 1 to 16")
    workdir = Path(tempfile.mkdtemp(prefix="kvp-load-"))
    procs, tokens, _ = start_servers(args.port, args.users, workdir, args.anon_rate)
    base = f"http://{HOST}:{args.port}"
    results, stop, peak = Results(), threading.Event(), 0
    try:
        wait_until_up(base)
        threads = [threading.Thread(target=user_loop, args=(base, t, stop, results, i), daemon=True)
                   for i, t in enumerate(tokens)]
        threads += [threading.Thread(target=anonymous_loop, args=(base, stop, results), daemon=True),
                    threading.Thread(target=health_loop, args=(base, stop, results), daemon=True)]
        start = time.monotonic()
        for t in threads:
            t.start()
        while time.monotonic() - start < args.seconds:
            peak = max(peak, tree_rss_bytes([p.pid for p in procs]))
            time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=75)
        report(results, time.monotonic() - start, peak)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
