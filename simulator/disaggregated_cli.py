"""``python -m simulator cluster --disaggregated FILE``: a prefill pool and a decode pool (xPyD).

The file is a :func:`simulator.disaggregated.deployment_from_dict` object::

    {"prefill": {"config": {...}, "num_instances": 1, "routing": "least-loaded"},
     "decode":  {"config": {...}, "num_instances": 3, "routing": "least-loaded"},
     "link": {"bandwidth_gbps": 50, "latency_s": 0.0001}, "kv_bytes_per_token": 131072}

``--prefill-instances`` and ``--decode-instances`` (comma-separated lists) replace the file's counts
and sweep them: every (prefill, decode) pair is one point, prefill counts varying slowest.
"""

from __future__ import annotations

import argparse
from typing import Any

from simulator.budget import WorkloadSize, price_batch, price_run
from simulator.cli import (
    CliError,
    _check_memory,
    _dump,
    _emit,
    _instance_counts,
    _progress,
    _read_json,
    load_workload_file,
)
from simulator.disaggregated import DisaggError, DisaggregatedDeployment, deployment_from_dict
from simulator.metrics import MetricsError

#: Options that cannot go with --disaggregated (the replicas' own).
_REPLICA_ONLY = (("instances", "--instances"), ("find_replicas", "--find-replicas"), ("config", "--config"))


def _deployments(data: Any, args: argparse.Namespace) -> list[DisaggregatedDeployment]:
    base = deployment_from_dict(data)
    pre = _instance_counts(args.prefill_instances) if args.prefill_instances else [base.prefill.num_instances]
    dec = _instance_counts(args.decode_instances) if args.decode_instances else [base.decode.num_instances]
    out = []
    for p in pre:
        for d in dec:
            out.append(DisaggregatedDeployment(
                {**base.prefill.__dict__, "num_instances": p}, {**base.decode.__dict__, "num_instances": d},
                base.link, base.kv_bytes_per_token, base.seed,
                args.slo_ttft_s if args.slo_ttft_s is not None else base.slo_ttft_s,
                args.slo_itl_s if args.slo_itl_s is not None else base.slo_itl_s))
    return out


def _option_of(msg: str) -> str:
    """The error with its leading field named as the option when it is one (``prefill.num_instances``)."""
    field, sep, rest = msg.partition(":")
    opts = {"prefill.num_instances": "--prefill-instances", "decode.num_instances": "--decode-instances",
            "slo_ttft_s": "--slo-ttft-s", "slo_itl_s": "--slo-itl-s"}
    return f"{opts[field]}{sep}{rest}" if field in opts else f"--disaggregated {field}{sep}{rest}"


def cmd_disaggregated(args: argparse.Namespace) -> int:
    """Run every (prefill, decode) count of the deployment file; print one result or ``{"points": [...]}``."""
    if not args.disaggregated:
        raise CliError("--prefill-instances and --decode-instances need --disaggregated FILE")
    for attr, opt in _REPLICA_ONLY:
        if getattr(args, attr, None):
            raise CliError(f"{opt} does not go with --disaggregated (the pools are in its file)")
    data = _read_json(args.disaggregated, "disaggregated")
    try:
        items = _deployments(data, args)
    except (DisaggError, ValueError) as exc:
        raise CliError(_option_of(str(exc))) from None
    workload = load_workload_file(args.workload)
    size = WorkloadSize.of(workload)
    # one deployment at a time, both pools' engines alive together
    _check_memory(max((price_batch(price_run(size, pool.config, instances=pool.num_instances)
                                   for pool in (d.prefill, d.decode)) for d in items),
                      key=lambda price: price.memory_bytes), args, "This disaggregated run")
    points = []
    try:
        with _progress(f"{len(items)} disaggregated deployments x {workload.n:,} requests") as progress:
            for k, dep in enumerate(items):
                step = (lambda f, k=k: progress((k + f) / len(items))) if progress else None
                points.append(dep.run(workload, progress=step).to_dict(requests=args.requests))
    except (DisaggError, MetricsError) as exc:
        raise CliError(_option_of(str(exc)) if not str(exc).startswith("workload") else str(exc)) from None
    _emit(_dump(points[0] if len(points) == 1 else {"points": points}, args.indent), args.output)
    return 0


__all__ = ["cmd_disaggregated"]
