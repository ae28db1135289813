"""Load test of the production set-up on loopback: requests/s, latency and ``/healthz`` per client count (not a test).

    python bench/load_test.py [--clients 1,4,16,64,128] [--seconds 20] [--port 8765] [--json out.json]

Starts, on 127.0.0.1 only, what docker-compose runs: gunicorn with 3 workers
(``--timeout 60``) and a Celery worker (concurrency 2), with DEBUG off, on a
throw-away SQLite database and the embedded broker (or on PostgreSQL / Redis
when ``DATABASE_URL`` / ``REDIS_URL`` are set: give them a database of their own,
the test makes users and runs there). Then, for each client count in ``--clients``
(a level), for ``--seconds``:

- each client is a signed-in user of its own (an API token) looping, without pause, over sizing
  (``POST /api/plan/``), small simulations, the issue's 130-byte simulation (priced and refused), small
  and huge replicas searches by API and by page, and small sweeps;
- one anonymous client sends ``POST /api/plan/`` with a new forged ``X-Forwarded-For`` each time;
- a prober asks ``/healthz`` every 0.2 s, as the compose health check would, with that check's timeout
  (read from docker-compose.yml, 5 s) as the mark of a failed check.

Per level it prints requests answered per second, p50 / p99 latency per kind, the counts of 2xx (202
apart), 429, 503, other 4xx, other 5xx and no answer, and ``/healthz`` p50 / p99 / max with the probes
slower than the health check's timeout (or failed). Requests still in flight when a level ends are
waited for (they count in that level) before the next level starts. Exit status 1 when the service did not
hold: a request answered 5xx other than 503 or not at all, or a /healthz probe failed or took longer than
the health check's timeout.

Bounded: at most 128 clients per level, 8 levels, 60 s per level and 300 s of load in all (levels x
``--seconds``), plus the drain after each level (at most the client timeout, 70 s); nothing leaves the
machine. Figures: docs/operations.md, "Load test".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
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
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
MAX_CLIENTS, MAX_LEVELS, MAX_LEVEL_S, MAX_TOTAL_S = 128, 8, 60.0, 300.0
CLIENT_TIMEOUT_S = 70.0  # past gunicorn's 60 s worker timeout: a request killed there still answers here
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

#: (kind, method, path, body, weight) of a signed-in client's requests.
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
#: Status classes reported per level (0: no answer).
CLASSES = ("2xx", "202", "429", "503", "4xx", "5xx", "none")


def status_class(status: int) -> str:
    if status == 0:
        return "none"
    if status in (202, 429, 503):
        return str(status)
    return f"{status // 100}xx" if status // 100 in (2, 4, 5) else "4xx"


def health_check_timeout_s(compose: Path = ROOT / "docker-compose.yml") -> float:
    """The ``timeout`` of the web service's health check in docker-compose.yml (seconds)."""
    text = compose.read_text(encoding="utf-8")
    web = text[text.index("\n  web:"):]
    m = re.search(r"healthcheck:.*?\n\s+timeout:\s*(\d+)s", web, re.S)
    return float(m.group(1)) if m else 30.0  # Docker's default


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


class Level:
    """What one level measured: latency per kind and status, /healthz probes."""

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.counts: Counter = Counter()
        self.health_ms: list[float] = []  # every probe, a failed one at its time to fail
        self.health_failed = 0
        self.seconds = 0.0
        self.peak_rss = 0

    def add(self, kind: str, status: int, ms: float) -> None:
        with self.lock:
            self.latency[kind].append(ms)
            self.counts[(kind, status_class(status))] += 1

    def summary(self, health_timeout_s: float) -> dict:
        answered = sum(n for (_, c), n in self.counts.items() if c != "none")
        by_class = {c: sum(n for (_, k), n in self.counts.items() if k == c) for c in CLASSES}
        kinds = {}
        for kind, ms in sorted(self.latency.items()):
            kinds[kind] = {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
                           "p99_ms": round(percentile(ms, 0.99), 1),
                           **{c: self.counts[(kind, c)] for c in CLASSES if self.counts[(kind, c)]}}
        h = self.health_ms
        slow = sum(1 for v in h if v > health_timeout_s * 1000)
        served = by_class["2xx"] + by_class["202"]
        per_s = (lambda n: round(n / self.seconds, 2)) if self.seconds else (lambda n: 0.0)
        return {"clients": self.clients, "seconds": round(self.seconds, 1), "answered": answered,
                "rps": per_s(answered), "served_rps": per_s(served), "status": by_class,
                "kinds": kinds, "peak_rss_mib": round(self.peak_rss / 2**20),
                "healthz": {"probes": len(h), "failed": self.health_failed,
                            "over_timeout": slow, "timeout_s": health_timeout_s,
                            "p50_ms": round(statistics.median(h), 1) if h else None,
                            "p99_ms": round(percentile(h, 0.99), 1) if h else None,
                            "max_ms": round(max(h), 1) if h else None}}


def request(method: str, url: str, body: bytes | None, headers: dict, timeout: float = CLIENT_TIMEOUT_S) -> int:
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


def timed(level: Level, kind: str, method: str, url: str, body: bytes | None, headers: dict) -> None:
    start = time.perf_counter()
    status = request(method, url, body, headers)
    level.add(kind, status, (time.perf_counter() - start) * 1000)


def user_loop(base: str, token: str, stop: threading.Event, level: Level, seed: int) -> None:
    rng = random.Random(seed)
    weights = [w for *_, w in USER_MIX]
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    while not stop.is_set():
        kind, method, path, body, _ = rng.choices(USER_MIX, weights)[0]
        timed(level, kind, method, base + path, body, headers)


def anonymous_loop(base: str, stop: threading.Event, level: Level) -> None:
    i = 0
    body = json.dumps(PLAN).encode()
    while not stop.is_set():
        i += 1
        forged = {"Content-Type": "application/json", "X-Forwarded-For": f"198.51.100.{i % 250}"}
        timed(level, "anon-plan-forged-xff", "POST", base + "/api/plan/", body, forged)


def health_loop(base: str, stop: threading.Event, level: Level, timeout_s: float) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        status = request("GET", base + "/healthz", None, {}, timeout=max(30.0, timeout_s))
        ms = (time.perf_counter() - start) * 1000
        with level.lock:
            level.health_ms.append(ms)
            level.health_failed += status != 200
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


def start_servers(port: int, users: int, workdir: Path, anon_rate: str | None) -> tuple[list[subprocess.Popen],
                                                                                       list[str]]:
    env = {**os.environ, "DEBUG": "false", "SECRET_KEY": "load-test-" + "x" * 50, "ALLOWED_HOSTS": HOST,
           "SECURE_SSL_REDIRECT": "false", "SECURE_COOKIES": "false", "KVP_DATA_DIR": str(workdir),
           "PYTHONPATH": str(ROOT), "LOG_LEVEL": "WARNING"}
    if anon_rate:
        env["THROTTLE_ANON"] = anon_rate
    py = sys.executable
    make_users = ("import django; django.setup(); from django.core.management import call_command\n"
                  "call_command('migrate', interactive=False, verbosity=0)\n"
                  "from django.contrib.auth import get_user_model; from accounts.models import ApiToken; "
                  "from accounts.services import api_token_create; U = get_user_model()\n"
                  f"for i in range({users}):\n"
                  "    u, _ = U.objects.get_or_create(username=f'load{i}')\n"
                  "    ApiToken.objects.filter(user=u, name='load test').delete()  # a database used before\n"
                  "    print('token', api_token_create(user=u, name='load test')[1])")
    out = subprocess.run([py, "-c", make_users], cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
                         check=True, capture_output=True, text=True).stdout
    tokens = [line.split()[1] for line in out.splitlines() if line.startswith("token ")]
    log = open(workdir / "servers.log", "ab")  # noqa: SIM115 - lives as long as the servers
    web = subprocess.Popen([py, "-m", "gunicorn", "config.wsgi:application", "--bind", f"{HOST}:{port}",
                            "--workers", "3", "--timeout", "60"], cwd=ROOT, env=env, stdout=log, stderr=log,
                           start_new_session=True)
    worker = subprocess.Popen([py, "-m", "celery", "-A", "config", "worker", "--concurrency", "2",
                               "--loglevel", "WARNING"], cwd=ROOT, env=env, stdout=log, stderr=log,
                              start_new_session=True)
    return [web, worker], tokens


def wait_until_up(base: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if request("GET", base + "/healthz", None, {}, timeout=2) == 200:
            return
        time.sleep(0.5)
    raise SystemExit("the server did not answer /healthz within 60 s (see servers.log)")


def run_level(base: str, tokens: list[str], clients: int, seconds: float, health_timeout_s: float,
              seed: int, pids: list[int]) -> Level:
    level, stop = Level(clients), threading.Event()
    threads = [threading.Thread(target=user_loop, args=(base, tokens[i], stop, level, seed * 1000 + i), daemon=True)
               for i in range(clients)]
    threads += [threading.Thread(target=anonymous_loop, args=(base, stop, level), daemon=True),
                threading.Thread(target=health_loop, args=(base, stop, level, health_timeout_s), daemon=True)]
    start = time.monotonic()
    for t in threads:
        t.start()
    while not stop.wait(min(0.5, max(0.0, start + seconds - time.monotonic()))):
        level.peak_rss = max(level.peak_rss, tree_rss_bytes(pids) if pids else 0)
        if time.monotonic() - start >= seconds:
            stop.set()
    for t in threads:  # requests in flight finish (each within the client timeout)
        t.join(timeout=CLIENT_TIMEOUT_S + 5)
    level.seconds = time.monotonic() - start
    return level


def print_level(s: dict) -> None:
    h, st = s["healthz"], s["status"]
    print(f"\n{s['clients']} clients, {s['seconds']:.0f} s: {s['answered']} answered ({s['rps']:.1f}/s, "
          f"{s['served_rps']:.1f}/s 2xx); "
          + ", ".join(f"{c}: {st[c]}" for c in CLASSES if st[c]))
    for kind, k in s["kinds"].items():
        statuses = ", ".join(f"{c}: {k[c]}" for c in CLASSES if c in k)
        print(f"  {kind:22s} n {k['n']:5d}  p50 {k['p50_ms']:8.0f} ms  p99 {k['p99_ms']:8.0f} ms  ({statuses})")
    print(f"  /healthz: {h['probes']} probes, {h['failed']} failed, {h['over_timeout']} over the health check's "
          f"{h['timeout_s']:.0f} s; p50 {h['p50_ms']} ms, p99 {h['p99_ms']} ms, max {h['max_ms']} ms")
    print(f"  peak resident memory of gunicorn + Celery (all processes): {s['peak_rss_mib']} MiB")


def print_table(levels: list[dict]) -> None:
    print("\n| clients | answered/s | 2xx/s | plan p99 ms | simulation p99 ms | /healthz p99 ms | /healthz max ms "
          "| over timeout | 429 | 503 | 5xx + none |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in levels:
        k, h, st = s["kinds"], s["healthz"], s["status"]
        print(f"| {s['clients']} | {s['rps']:.1f} | {s['served_rps']:.1f} | {k.get('plan', {}).get('p99_ms', '-')} | "
              f"{k.get('simulation', {}).get('p99_ms', '-')} | {h['p99_ms']} | {h['max_ms']} | "
              f"{h['over_timeout']}/{h['probes']} | {st['429']} | {st['503']} | {st['5xx'] + st['none']} |")


def parse_clients(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--clients: comma-separated whole numbers, not {text!r}") from None
    if not levels or len(levels) > MAX_LEVELS or not all(1 <= n <= MAX_CLIENTS for n in levels):
        raise argparse.ArgumentTypeError(f"--clients: 1 to {MAX_LEVELS} levels of 1 to {MAX_CLIENTS} clients")
    return levels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=parse_clients, default=[1, 4, 16, 64, 128],
                    help=f"client counts, one level each (at most {MAX_LEVELS} levels of {MAX_CLIENTS} clients)")
    ap.add_argument("--seconds", type=float, default=20.0,
                    help=f"length of each level (at most {MAX_LEVEL_S:.0f}; levels x seconds at most "
                         f"{MAX_TOTAL_S:.0f})")
    ap.add_argument("--port", type=int, default=8765, help="loopback port for gunicorn")
    ap.add_argument("--anon-rate", default=None, help="THROTTLE_ANON of the server (default: the settings' own)")
    ap.add_argument("--json", type=Path, default=None, help="also write the levels' figures to this file")
    args = ap.parse_args(argv)
    if not 1 <= args.seconds <= MAX_LEVEL_S or args.seconds * len(args.clients) > MAX_TOTAL_S:
        ap.error(f"--seconds must be 1 to {MAX_LEVEL_S:.0f}, and levels x seconds at most {MAX_TOTAL_S:.0f}")
    health_timeout_s = health_check_timeout_s()
    workdir = Path(tempfile.mkdtemp(prefix="kvp-load-"))
    procs, tokens = start_servers(args.port, max(args.clients), workdir, args.anon_rate)
    base = f"http://{HOST}:{args.port}"
    db = "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    broker = "Redis" if os.environ.get("REDIS_URL") else "the embedded broker"
    shed = os.environ.get("KVP_SHED_WAIT_S", "") or "the default"
    print(f"gunicorn x 3 (--timeout 60) + Celery x 2 on {db} and {broker}; levels {args.clients}, "
          f"{args.seconds:.0f} s each; health check timeout {health_timeout_s:.0f} s; KVP_SHED_WAIT_S {shed}")
    levels, held = [], False
    try:
        wait_until_up(base)
        for i, clients in enumerate(args.clients):
            level = run_level(base, tokens, clients, args.seconds, health_timeout_s, i, [p.pid for p in procs])
            summary = level.summary(health_timeout_s)
            print_level(summary)
            levels.append(summary)
        print_table(levels)
        if args.json:
            args.json.write_text(json.dumps(levels, indent=1), encoding="utf-8")
        errors = sum(s["status"]["5xx"] + s["status"]["none"] for s in levels)
        unhealthy = sum(s["healthz"]["failed"] + s["healthz"]["over_timeout"] for s in levels)
        if errors:
            print(f"\n{errors} requests answered 5xx (not 503) or not at all: see {workdir / 'servers.log'}")
        if unhealthy:
            print(f"\n{unhealthy} /healthz probes failed or took longer than the health check's "
                  f"{health_timeout_s:.0f} s")
        held = not errors and not unhealthy
    finally:
        for p in procs:  # quick shutdown (gunicorn) and cold shutdown (Celery): nothing here is kept
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGQUIT)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        if not levels or not any(s["status"]["5xx"] + s["status"]["none"] for s in levels):
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
