#!/usr/bin/env python3
"""A planning script against the KV Planner REST API, with plain ``requests``.

1. Sizes three deployments with ``POST /api/plan/`` (public; no token needed) and prints
   how many tokens of KV cache and how many 128K-token requests each holds.
2. Starts a sweep of KV-cache blocks with ``POST /api/sweeps/`` (needs a token), waits for
   it with a progress line, and downloads its report as CSV.

    export KVP_URL=http://127.0.0.1:8000        # default
    export KVP_TOKEN=$(python manage.py issue_token alice)   # or from /accounts/
    python examples/plan_and_sweep.py --csv kv-cliff.csv

Every error the API gives is JSON of one shape, ``{"errors": {field: [messages]}}``; this
script prints those messages and stops. It honours ``Retry-After`` when throttled (429).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from urllib.parse import urlparse

import requests

DEPLOYMENTS = [
    {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 1, "max_model_len": 131072},
    {"model": "llama-3-1-70b", "gpu": "h100-sxm5-80gb", "tensor_parallel_size": 4, "max_model_len": 131072},
    {"model": "llama-3-1-70b", "gpu": "h200-sxm-141gb", "tensor_parallel_size": 2, "max_model_len": 131072},
]

SWEEP = {
    "name": "Llama 3.1 8B on one H100: where is the KV cliff?",
    "model": "llama-3-1-8b",
    "gpu": "h100-sxm5-80gb",
    "deployment": {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.9},
    "engine": {"max_num_seqs": 256},
    "workload": {
        "spec": {
            "n": 300,
            "prompt": "normal:512,128",
            "output": "normal:256,64",
            "arrival": {"kind": "poisson", "rate": 4, "unit": "step"},
        },
        "seed": 0,
    },
    "axes": [{"param": "num_gpu_blocks", "start": 500, "stop": 20000, "steps": 8, "scale": "log"}],
}

FINAL = {"done", "failed", "cancelled"}


class ApiError(Exception):
    """An API answer in the error shape, with its HTTP status."""

    def __init__(self, status: int, errors: dict[str, list[str]]):
        self.status, self.errors = status, errors
        lines = [f"{field}: {'; '.join(msgs)}" for field, msgs in errors.items()]
        super().__init__(f"HTTP {status}\n  " + "\n  ".join(lines))


class Api:
    """A tiny client: one session, the token header, JSON in and out, the error shape, 429 retries."""

    def __init__(self, base_url: str, token: str | None, timeout: float = 60.0):
        self.base = base_url.rstrip("/")
        self.http = requests.Session()
        self.http.headers["Accept"] = "application/json"
        if token:
            self.http.headers["Authorization"] = f"Token {token}"
        self.timeout = timeout

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        for _ in range(5):
            response = self.http.request(method, self.base + path, timeout=self.timeout, **kwargs)
            if response.status_code != 429:
                break
            wait = float(response.headers.get("Retry-After", "5"))
            print(f"throttled; retrying in {wait:g} s", file=sys.stderr)
            time.sleep(wait)
        if response.status_code >= 400:
            try:
                errors = response.json()["errors"]
            except (ValueError, KeyError, TypeError):
                errors = {"non_field_errors": [response.text[:500]]}
            raise ApiError(response.status_code, errors)
        return response

    def get(self, path: str, **kwargs) -> dict:
        return self.request("GET", path, **kwargs).json()

    def post(self, path: str, body: dict | None = None) -> dict:
        return self.request("POST", path, json=body).json()


def size_deployments(api: Api) -> None:
    print(f"{'model':16} {'GPU':16} {'TP':>2} {'KV blocks':>10} {'KV tokens':>11} {'128K reqs':>9}  fits")
    for body in DEPLOYMENTS:
        plan = api.post("/api/plan/", body)
        print(
            f"{body['model']:16} {body['gpu']:16} {plan['tensor_parallel_size']:>2} {plan['num_gpu_blocks']:>10,} "
            f"{plan['kv_cache_tokens']:>11,} {plan['max_concurrency']:>9.2f}  {'yes' if plan['fits'] else 'no'}"
        )
    print()


def run_sweep(api: Api, *, poll_s: float = 1.0, timeout_s: float = 1800.0) -> dict:
    sweep = api.post("/api/sweeps/", SWEEP)
    print(f"sweep {sweep['id']} queued: {sweep['name']}")
    deadline = time.monotonic() + timeout_s
    while True:
        sweep = api.get(f"/api/sweeps/{sweep['id']}/")
        p = sweep["progress"]
        eta = f", ~{p['eta_s']:.0f} s left" if p.get("eta_s") is not None else ""
        print(
            f"\r  {p['status']:9} {p['points_done']:>3}/{p['points_total']} points "
            f"[{'#' * int(30 * p['fraction']):30}] {100 * p['fraction']:5.1f}%{eta}   ",
            end="",
            flush=True,
        )
        if sweep["status"] in FINAL:
            print()
            break
        if time.monotonic() > deadline:
            print()
            raise SystemExit(f"sweep {sweep['id']} not finished after {timeout_s:g} s (it goes on on the server)")
        time.sleep(poll_s)
    if sweep["status"] != "done":
        raise SystemExit(f"sweep {sweep['id']} ended {sweep['status']}: {sweep['progress'].get('error') or ''}")
    return sweep


def download_csv(api: Api, sweep: dict, path: str) -> None:
    slug = urlparse(sweep["report_url"]).path.rstrip("/").rsplit("/", 1)[-1]
    response = api.request("GET", f"/api/reports/{slug}/", params={"format": "csv"})
    with open(path, "wb") as fh:
        fh.write(response.content)
    rows = response.content.count(b"\n") - 1
    print(f"report: {sweep['report_url']} (public link)")
    print(f"wrote {path} ({rows} rows)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("KVP_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("KVP_TOKEN"), help="API token (default: $KVP_TOKEN)")
    parser.add_argument("--csv", default="sweep.csv", help="where to write the sweep's CSV")
    parser.add_argument("--no-sweep", action="store_true", help="only size the three deployments")
    args = parser.parse_args(argv)

    api = Api(args.url, args.token)
    try:
        size_deployments(api)
        if args.no_sweep:
            return 0
        if not args.token:
            print("a sweep needs a token: set KVP_TOKEN (see /accounts/ or manage.py issue_token)", file=sys.stderr)
            return 2
        sweep = run_sweep(api)
        download_csv(api, sweep, args.csv)
    except ApiError as exc:
        print(f"API error: {exc}", file=sys.stderr)
        return 1
    except requests.ConnectionError as exc:
        print(f"cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
