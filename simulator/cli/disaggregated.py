"""``python -m simulator cluster --disaggregated FILE``: a prefill pool and a decode pool (xPyD).

The file is a :func:`simulator.cluster.disaggregated.deployment_from_dict` object::

    {"prefill": {"config": {...}, "num_instances": 1, "routing": "least-loaded"},
     "decode":  {"config": {...}, "num_instances": 3, "routing": "least-loaded"},
     "link": {"bandwidth_gbps": 50, "latency_s": 0.0001}, "kv_bytes_per_token": 131072}

``--prefill-instances`` and ``--decode-instances`` (comma-separated lists) replace the file's counts
and sweep them: every (prefill, decode) pair is one point, prefill counts varying slowest. Errors are
:class:`DisaggError` naming the option (or the file's field); :mod:`simulator.cli.commands` prints them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from simulator.batch import WorkloadSize, price_batch, price_run
from simulator.cli.values import option_words, read_json, whole_numbers
from simulator.cluster import DisaggError, DisaggregatedDeployment, deployment_from_dict
from simulator.engine import MetricsError

#: Options that cannot go with --disaggregated (the replicas' own).
_REPLICA_ONLY = (("instances", "--instances"), ("find_replicas", "--find-replicas"), ("config", "--config"))
#: Fields of the file that an option sets (error messages name the option).
_OPTIONS = {"prefill.num_instances": "--prefill-instances", "decode.num_instances": "--decode-instances",
            "slo_ttft_s": "--slo-ttft-s", "slo_itl_s": "--slo-itl-s"}


def _deployments(data: Any, args: argparse.Namespace) -> list[DisaggregatedDeployment]:
    try:
        base = deployment_from_dict(data)
    except (DisaggError, ValueError) as exc:
        raise DisaggError(_option_of(exc)) from None
    pre, dec = [base.prefill.num_instances], [base.decode.num_instances]
    if args.prefill_instances:  # these errors name their option in their words
        pre = whole_numbers(args.prefill_instances, "--prefill-instances", DisaggError)
    if args.decode_instances:
        dec = whole_numbers(args.decode_instances, "--decode-instances", DisaggError)
    out = []
    try:
        for p in pre:
            for d in dec:
                out.append(DisaggregatedDeployment(
                    {**base.prefill.__dict__, "num_instances": p}, {**base.decode.__dict__, "num_instances": d},
                    base.link, base.kv_bytes_per_token, base.seed,
                    args.slo_ttft_s if args.slo_ttft_s is not None else base.slo_ttft_s,
                    args.slo_itl_s if args.slo_itl_s is not None else base.slo_itl_s))
    except (DisaggError, ValueError) as exc:
        raise DisaggError(_option_of(exc)) from None
    return out


def _option_of(exc: Exception) -> str:
    """The error's words with its field named as the option that sets it, else as the file's field (a workload's
    error as it is)."""
    field = getattr(exc, "field", None)
    if field in _OPTIONS:
        return option_words(exc, _OPTIONS)
    if field is not None and (field == "workload" or field.startswith("workload.")):
        return str(exc)
    return f"--disaggregated {exc}"


def run_disaggregated_command(args: argparse.Namespace, *, load_workload_file: Callable,
                              check_memory: Callable, progress: Callable) -> dict[str, Any]:
    """Run every (prefill, decode) count of the deployment file; one result's dict, or ``{"points": [...]}``.

    ``check_memory(price, what)`` refuses a run over the memory limit; ``progress(what)`` is a context
    manager yielding a fraction callback (or None).
    """
    if not args.disaggregated:
        raise DisaggError("--prefill-instances and --decode-instances need --disaggregated FILE")
    for attr, opt in _REPLICA_ONLY:
        if getattr(args, attr, None):
            raise DisaggError(f"{opt} does not go with --disaggregated (the pools are in its file)")
    data = read_json(args.disaggregated, "--disaggregated", DisaggError)
    items = _deployments(data, args)
    workload = load_workload_file(args.workload)
    size = WorkloadSize.of(workload)
    # one deployment at a time, both pools' engines alive together
    check_memory(max((price_batch(price_run(size, pool.config, instances=pool.num_instances)
                                  for pool in (d.prefill, d.decode)) for d in items),
                     key=lambda price: price.memory_bytes), "This disaggregated run")
    points = []
    try:
        with progress(f"{len(items)} disaggregated deployments x {workload.n:,} requests") as bar:
            for k, dep in enumerate(items):
                step = (lambda f, k=k: bar((k + f) / len(items))) if bar else None
                points.append(dep.run(workload, progress=step).to_dict(requests=args.requests))
    except (DisaggError, MetricsError) as exc:
        raise DisaggError(_option_of(exc)) from None
    return points[0] if len(points) == 1 else {"points": points}


__all__ = ["run_disaggregated_command"]
