"""``python -m simulator day``: a day of traffic on a fleet an autoscaling policy scales, priced (docs/autoscaling.md).

``--policy`` is a JSON object or file (``{"kind": "hpa", "metric": "running", "target": 48, "max_replicas": 8}``;
kinds ``fixed``, ``scheduled``, ``hpa``, ``oracle``: :mod:`simulator.autoscale.policies`). An ``oracle`` policy
without ``rates`` gets the workload's own rate per ``period_s`` and, without ``lead_s``, the cold start plus
one sync. The cold start is ``--cold-start-s`` or, from ``--weights-gib`` (per GPU), the parts of
:class:`simulator.autoscale.ColdStart` (``--cold-start FILE|JSON`` overrides any of them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simulator.autoscale import ColdStart
from simulator.day import ROUTINGS, answer_day, build_policy, default_overlap_s, simulate_day, simulate_day_in_chunks
from simulator.day.parallel import simulate_day_in_processes


def _json_arg(text: str, what: str, error: type[Exception]) -> Any:
    """A JSON object given inline or as a file name."""
    raw = text
    if not text.lstrip().startswith("{"):
        try:
            raw = Path(text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise error(f"{what}: cannot read {text!r} ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise error(f"{what}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict):
        raise error(f"{what}: must be a JSON object")
    return data


def add_day_parser(sub, add_trace_arguments) -> None:
    day = sub.add_parser(
        "day", help="replay a day of traffic against an autoscaling policy and price it (docs/autoscaling.md)",
        description="Simulate a workload (arrivals in seconds) on replicas of one engine configuration that an "
        "autoscaling policy starts and stops, each replica taking traffic after its cold start, and print "
        "{\"answer\": {gpu_hours, cost, fixed_peak_cost, attainment, hours: [...]}, \"pods\": [...], "
        "\"fleet\": {time_s, desired, ready, starting, ...}}.")
    day.add_argument("--workload", required=True, metavar="FILE", help="workload JSON or trace (as for run)")
    day.add_argument("--config", required=True, metavar="FILE", help="one replica's engine configuration JSON")
    day.add_argument("--policy", required=True, metavar="JSON|FILE",
                     help='autoscaling policy, e.g. \'{"kind": "hpa", "metric": "running", "target": 48, '
                          '"max_replicas": 8}\' (kinds fixed, scheduled, hpa, oracle)')
    day.add_argument("--cold-start-s", type=float, metavar="S",
                     help="seconds from asking for a replica to its first request (default: from --weights-gib)")
    day.add_argument("--weights-gib", type=float, default=15.0, metavar="GIB",
                     help="weights per GPU read at start, GiB (default 15: an 8B model in bf16)")
    day.add_argument("--cold-start", metavar="JSON|FILE",
                     help="cold-start parts: container_s, storage_gib_per_s, compile_s, graph_capture_s")
    day.add_argument("--routing", choices=ROUTINGS, default="least-loaded", help="how replicas share arrivals")
    day.add_argument("--gpus-per-replica", type=int, default=1, metavar="N", help="GPUs per replica (TP x PP)")
    day.add_argument("--price-per-gpu-hour", type=float, default=1.0, metavar="USD", help="price of a GPU-hour")
    day.add_argument("--slo-ttft-s", type=float, metavar="S", help="TTFT target for attainment, seconds")
    day.add_argument("--slo-tpot-s", type=float, metavar="S", help="TPOT target for attainment, seconds")
    day.add_argument("--chunk-s", type=float, metavar="S",
                     help="simulate the day in chunks of S seconds, each with --overlap-s either side (bounded "
                          "memory; a whole number of the policy's syncs; default: one run)")
    day.add_argument("--overlap-s", type=float, metavar="S",
                     help="warm-up and cool-down of each chunk, seconds (default: 300, or the policy's longest "
                          "stabilization window if longer)")
    day.add_argument("--processes", type=int, default=1, metavar="P",
                     help="with --chunk-s: the chunks in P forked processes, pipelined, with a second chain of "
                          "chunks from mid-day kept where it meets the first (the same answer; default 1)")
    day.add_argument("--output", "-o", metavar="FILE", help="write the JSON here instead of stdout")
    day.add_argument("--indent", type=int, metavar="N", help="pretty-print JSON with N spaces")
    add_trace_arguments(day)


def cold_start_seconds(args: argparse.Namespace, error: type[Exception]) -> float:
    if args.cold_start_s is not None:
        if args.cold_start:
            raise error("--cold-start-s and --cold-start: give one of them")
        return args.cold_start_s
    parts = ColdStart.from_dict(_json_arg(args.cold_start, "--cold-start", error)) if args.cold_start else ColdStart()
    if not 0 <= args.weights_gib <= 10_000:
        raise error(f"--weights-gib: must be 0 to 10,000 GiB, got {args.weights_gib:g}")
    return parts.seconds(args.weights_gib)


def run_day(args: argparse.Namespace, workload, config, error: type[Exception]) -> dict[str, Any]:
    cold = cold_start_seconds(args, error)
    policy = build_policy(_json_arg(args.policy, "--policy", error), workload.arrival, cold)
    met = None
    if args.processes != 1 and args.chunk_s is None:
        raise error("--processes: needs --chunk-s (one run is one process)")
    if args.chunk_s is None:
        res = simulate_day(workload, config, policy, cold_start_s=cold, routing=args.routing)
    elif args.processes != 1:
        res, met = simulate_day_in_processes(workload, config, policy, chunk_s=args.chunk_s, overlap_s=args.overlap_s,
                                             cold_start_s=cold, routing=args.routing, processes=args.processes)
    else:
        res = simulate_day_in_chunks(workload, config, policy, chunk_s=args.chunk_s, overlap_s=args.overlap_s,
                                     cold_start_s=cold, routing=args.routing)
    ans = answer_day(res, gpus_per_replica=args.gpus_per_replica, price_per_gpu_hour=args.price_per_gpu_hour,
                     slo_ttft_s=args.slo_ttft_s, slo_tpot_s=args.slo_tpot_s)
    chunks = None if args.chunk_s is None else {"chunk_s": args.chunk_s,
                                                "overlap_s": args.overlap_s or default_overlap_s(policy)}
    if chunks is not None and args.processes != 1:
        chunks.update(processes=args.processes, chains_met_at=met)
    return {"policy": res.policy, "routing": res.routing, "cold_start_s": res.cold_start_s, "end_s": res.end_s,
            "chunks": chunks,
            "answer": ans.to_dict(), "pods": [p.to_dict() for p in res.pods],
            "fleet": {k: v.tolist() for k, v in res.replicas_over_time().items()}}


__all__ = ["add_day_parser", "cold_start_seconds", "run_day"]
