"""Record priority-scheduling cases from vLLM's real scheduler (``--scheduling-policy priority``).

An investigation tool, never run by the test suite. It drives vLLM 0.33.0's own v1 ``Scheduler`` through
the shared oracle's ``run_oracle.py`` (its directory is given on the command line; its venv has vLLM on
CPU, see its README), with two changes: each request is built with the workload's ``priority`` (vLLM's
``Request(priority=...)``), and the config's ``policy`` is ``"priority"``. The oracle's config already
passes ``policy`` to ``SchedulerConfig``; its ``make_request`` has no priority, so it is wrapped here.

The cases (:data:`CASES`): small workloads whose priorities are drawn with ``numpy.random.default_rng``;
request ids are zero-padded (``r007``) so vLLM's last tie-break (request id, compared as strings) is the
workload's order, which is the simulator's. Usage, from the repository root::

    ORACLE=path/to/vllm_oracle
    $ORACLE/venv/bin/python tools/oracle/record_priority.py $ORACLE tests/data/oracle/priority

writes ``workloads/NAME.json``, ``configs/NAME__VARIANT.json`` and ``runs/NAME__VARIANT.json.gz`` (the
oracle's output with columnar steps) under the output folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

#: (workload name, generator arguments) -> the variants recorded on it (config overrides of the oracle's).
WORKLOADS = {
    # priorities 0-2, everything at once: admission order by priority, ties by arrival then id
    "prio_burst": dict(n=48, prompt=(300, 120), output=(80, 40), levels=3, arrival="burst"),
    # one priority for all, everything at once: ties everywhere (the victim is the first in running order)
    "prio_ties": dict(n=40, prompt=(300, 120), output=(80, 40), levels=1, arrival="burst"),
    # Poisson arrivals in steps, priorities 0-4
    "prio_poisson": dict(n=60, prompt=(400, 200), output=(60, 30), levels=5, arrival="poisson:0.5"),
    # arrivals in seconds (the linear step clock), priorities 0-3
    "prio_time": dict(n=50, prompt=(350, 150), output=(50, 25), levels=4, arrival="poisson-time:20"),
    # a shared 256-token prefix for 70 % of the requests, priorities 0-2
    "prio_prefix": dict(n=48, prompt=(300, 100), output=(60, 30), levels=3, arrival="burst", prefix=256),
}

CASES = {
    "prio_burst": {"blocks100000__pc-on": dict(num_gpu_blocks=100000),
                   "blocks400__pc-on": dict(num_gpu_blocks=400),
                   "blocks400__pc-off": dict(num_gpu_blocks=400, enable_prefix_caching=False)},
    "prio_ties": {"blocks300__pc-on": dict(num_gpu_blocks=300)},
    "prio_poisson": {"blocks350__pc-on__thr128": dict(num_gpu_blocks=350, long_prefill_token_threshold=128),
                     "blocks250__pc-on__nochunk": dict(num_gpu_blocks=250, enable_chunked_prefill=False,
                                                       max_num_batched_tokens=2048),
                     "blocks350__pc-on__async": dict(num_gpu_blocks=350, async_scheduling=True)},
    "prio_time": {"blocks160__pc-on": dict(num_gpu_blocks=160,
                                           step_time_model={"base_s": 0.01, "per_token_s": 2e-5,
                                                            "per_req_s": 1e-4})},
    "prio_prefix": {"blocks300__pc-on": dict(num_gpu_blocks=300)},
}

BASE_CONFIG = dict(block_size=16, max_num_seqs=32, max_num_batched_tokens=1024, enable_prefix_caching=True,
                   enable_chunked_prefill=True, long_prefill_token_threshold=0, async_scheduling=False,
                   policy="priority")


def make_workload(n: int, prompt: tuple, output: tuple, levels: int, arrival: str, prefix: int = 0,
                  seed: int = 0) -> dict:
    """The oracle's compact workload JSON, with a ``priority`` per request."""
    rng = np.random.default_rng(seed)
    plen = np.clip(np.rint(rng.normal(*prompt, n)), 16, 1500).astype(int)
    olen = np.clip(np.rint(rng.normal(*output, n)), 1, 400).astype(int)
    prio = rng.integers(0, levels, n)
    shared = rng.random(n) < 0.7 if prefix else np.zeros(n, bool)
    if arrival == "burst":
        at = np.zeros(n)
    else:
        kind, rate = arrival.split(":")
        at = np.cumsum(rng.exponential(1 / float(rate), n))
        if kind == "poisson":
            at = np.floor(at)
    reqs = []
    for i in range(n):
        r = {"id": f"r{i:03d}", "max_tokens": int(olen[i]), "prompt_len": int(plen[i] + (prefix if shared[i] else 0)),
             "priority": int(prio[i])}
        if arrival.startswith("poisson-time"):
            r["arrival_time"] = round(float(at[i]), 6)
        else:
            r["arrival_step"] = int(at[i])
        if shared[i]:
            r["prefix"] = "p0"
        reqs.append(r)
    prefixes = {"p0": [int(t) for t in rng.integers(3, 32000, prefix)]} if prefix else {}
    return {"seed": seed, "prefixes": prefixes, "requests": reqs}


def record(oracle_dir: Path, out: Path) -> None:
    sys.path.insert(0, str(oracle_dir))
    import run_oracle  # the shared oracle (vLLM 0.33.0 on CPU)

    plain = run_oracle.make_request
    priority: dict[str, int] = {}

    def make_request(r: dict, hasher, arrival_time: float):
        req = plain(r, hasher, arrival_time)
        req.priority = priority[r["id"]]  # vLLM's Request(priority=...), read by Request.__lt__ and the victim
        return req

    run_oracle.make_request = make_request
    for sub in ("workloads", "configs", "runs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name, variants in CASES.items():
        wl = make_workload(**WORKLOADS[name])
        (out / "workloads" / f"{name}.json").write_text(json.dumps(wl, separators=(",", ":")))
        priority.clear()
        priority.update({r["id"]: r["priority"] for r in wl["requests"]})
        for variant, over in variants.items():
            cfg = {**BASE_CONFIG, **over}
            case = f"{name}__{variant}"
            (out / "configs" / f"{case}.json").write_text(json.dumps(cfg, indent=1))
            res = run_oracle.run(wl, cfg, record_steps=True)
            assert res["effective_vllm_config"]["policy"] == "priority", res["effective_vllm_config"]
            res["steps"] = run_oracle.to_columnar(res["steps"])
            res["recorded_by"] = "tools/oracle/record_priority.py"
            with gzip.open(out / "runs" / f"{case}.json.gz", "wt") as f:
                f.write(json.dumps(res, separators=(",", ":")))
            t = res["totals"]
            print(f"{case}: steps={t['num_steps']} preemptions={t['preemptions']} finished={t['finished']}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("oracle_dir", type=Path, help="the shared vllm_oracle folder (holds run_oracle.py)")
    ap.add_argument("out", type=Path, help="output folder (workloads/, configs/, runs/)")
    args = ap.parse_args(argv)
    record(args.oracle_dir, args.out)


if __name__ == "__main__":
    main()
