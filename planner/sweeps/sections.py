"""The parts of a sweep definition besides its axes: workload, cliff, cluster, SLO and calibration.

Each ``parse_*`` takes the raw JSON value and a :class:`planner.errors.FieldErrors`,
adds the problems it finds under the field's path, and returns the normalized
part (or None when it is absent or wrong).
"""

from __future__ import annotations

import math
from typing import Any

from planner.calibration.services import calibration_for
from planner.errors import FieldErrors
from planner.sweeps.axes import AXES
from planner.sweeps.cliff import max_evaluations
from planner.sweeps.limits import MAX_SWEEP_INSTANCES, MAX_TRACE_CHARS, max_requests
from simulator.cluster import ClusterError, parse_routing
from simulator.workload import (
    TRACE_FORMATS,
    TraceOptionError,
    TraceOptions,
    WorkloadError,
    WorkloadSpec,
    guess_format,
    read_any_trace,
)

#: The trace formats a workload's ``format`` may name: ``auto`` (guessed from the text), the planner's own
#: columns (``csv``, ``jsonl``) and the public formats (``docs/traffic.md``).
TRACE_FORMAT_NAMES = ("auto", "csv", "jsonl", *TRACE_FORMATS)
#: The trace options a public trace takes (``TraceOptions``; ``max_model_len`` comes from the deployment).
TRACE_OPTION_KEYS = ("window", "speedup", "rate_scale", "sample", "block_size", "seed")

CLIFF_METRICS = {"preemptions_per_request": "preemptions per request", "ttft_p99_steps": "TTFT p99 (steps)"}


# --------------------------------------------------------------------------- workload


def parse_workload(raw: Any, err: FieldErrors) -> dict | None:
    """Normalize the workload part: a generator spec with a seed, or a trace text."""
    if not isinstance(raw, dict):
        err.add("workload", "must be an object with 'spec' (a generated workload) or 'trace' (file text)")
        return None
    if set(raw) - {"spec", "seed", "trace", "format", "options"}:
        err.unknown(raw, ["spec", "seed", "trace", "format", "options"], "workload")
        return None
    if "trace" in raw:
        return _trace(raw, err)
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        err.add("workload.seed", "must be a whole number >= 0")
        return None
    try:
        spec = WorkloadSpec.from_dict(raw.get("spec", {}))
    except (WorkloadError, ValueError, TypeError) as exc:
        err.add_from("workload.spec", exc)
        return None
    if spec.n > max_requests():
        err.add("workload.spec.n", f"at most {max_requests():,} requests per sweep workload, got {spec.n:,}")
        return None
    return {"source": "spec", "spec": spec.to_dict(), "seed": seed, "n": spec.n,
            "arrival_unit": spec.arrival.unit}


def trace_options(raw: Any) -> TraceOptions | None:
    """The ``options`` of a public trace as :class:`TraceOptions` (None when absent); raises
    :class:`WorkloadError` naming the option."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise WorkloadError(f"must be an object of {', '.join(TRACE_OPTION_KEYS)}")
    bad = sorted(set(raw) - set(TRACE_OPTION_KEYS))
    if bad:
        raise WorkloadError(f"unknown trace option (known: {', '.join(TRACE_OPTION_KEYS)})", field=bad[0])
    kw = dict(raw)
    window = kw.get("window")
    if window is not None:
        if not isinstance(window, (list, tuple)) or len(window) != 2:
            raise WorkloadError("give [START, END] in seconds after the trace's first request", field="window")
        kw["window"] = tuple(window)
    return TraceOptions(**kw)


def read_workload_trace(text: str, fmt: str, options: Any = None):
    """``(workload, report, format)`` of a trace text: ``fmt`` ``auto`` resolved from the content, the
    report None for the planner's own columns; raises :class:`WorkloadError`."""
    if fmt == "auto":
        fmt = guess_format(text) or ("jsonl" if text.lstrip().startswith("{") else "csv")
    wl, report = read_any_trace(text, fmt, name="trace", options=trace_options(options))
    return wl, report, fmt


def _trace(raw: dict, err: FieldErrors) -> dict | None:
    text, fmt = raw.get("trace"), raw.get("format", "csv")
    if not isinstance(text, str) or not text.strip():
        err.add("workload.trace", "must be the text of a trace (CSV, JSONL or JSON)")
        return None
    if len(text) > MAX_TRACE_CHARS:
        err.add("workload.trace", f"trace too large: at most {MAX_TRACE_CHARS // 2**20} MiB")
        return None
    if fmt not in TRACE_FORMAT_NAMES:
        err.add("workload.format", f"must be one of {', '.join(TRACE_FORMAT_NAMES)}")
        return None
    options = raw.get("options")
    try:
        trace_options(options)
    except (WorkloadError, TypeError) as exc:
        err.add("workload.options", str(exc))
        return None
    try:
        wl, report, fmt = read_workload_trace(text, fmt, options)
    except (WorkloadError, ValueError) as exc:
        err.add("workload.options" if isinstance(exc, TraceOptionError) else "workload.trace", str(exc))
        return None
    out = {"source": "trace", "format": fmt, "trace": text, "n": wl.n, "arrival_unit": wl.arrival_unit}
    if options is not None:
        out["options"] = dict(options)
    if report is not None:
        out["trace_report"] = report.to_dict()
    return out


# --------------------------------------------------------------------------- cliff


def parse_cliff(raw: Any, err: FieldErrors) -> dict | None:
    """``{"param", "metric", "lo", "hi", "resolution", "threshold"}`` of a cliff search, defaults filled in."""
    if not isinstance(raw, dict):
        err.add("cliff", "must be an object with param, lo, hi, resolution")
        return None
    known = {"param", "metric", "lo", "hi", "resolution", "threshold"}
    err.unknown(raw, sorted(known), "cliff")
    param = raw.get("param", "num_gpu_blocks")
    if not isinstance(param, str) or param not in AXES or not AXES[param].get("cliff"):
        err.add("cliff.param", "must be num_gpu_blocks, gpu_memory_utilization or rate")
        return None
    metric = raw.get("metric", "preemptions_per_request")
    if not isinstance(metric, str) or metric not in CLIFF_METRICS:
        err.add("cliff.metric", f"must be one of {', '.join(CLIFF_METRICS)}")
    vals = {}
    for k in ("lo", "hi", "resolution"):
        v = raw.get(k)
        if not _positive_number(v):
            err.add(f"cliff.{k}", "must be a number > 0")
        vals[k] = v
    threshold = raw.get("threshold")
    if threshold is not None and not _positive_number(threshold):
        err.add("cliff.threshold", "must be a number > 0")
    if err.errors:
        return None
    vals = _cliff_range(param, vals, err)
    if vals is None:
        return None
    if threshold is None:
        threshold = 0.02 if metric == "preemptions_per_request" else 2.0
    return {"param": param, "metric": metric, "threshold": float(threshold), **vals}


def _positive_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _cliff_range(param: str, vals: dict, err: FieldErrors) -> dict | None:
    """``lo``/``hi``/``resolution`` checked against each other and the parameter (blocks rounded to whole)."""
    if vals["lo"] >= vals["hi"]:
        err.add("cliff.hi", "must be greater than lo")
        return None
    if vals["resolution"] >= vals["hi"] - vals["lo"]:
        err.add("cliff.resolution", "must be smaller than hi - lo")
        return None
    if param == "gpu_memory_utilization" and vals["hi"] > 1:
        err.add("cliff.hi", "utilization is a fraction <= 1")
        return None
    if param == "num_gpu_blocks":
        vals = {k: int(round(v)) if k != "resolution" else max(1, int(round(v))) for k, v in vals.items()}
        if vals["lo"] < 2:
            err.add("cliff.lo", "at least 2 blocks")
            return None
    return vals


def cliff_budget(cliff: dict) -> int:
    """Most simulations the cliff finder may run (see planner.sweeps.cliff)."""
    return max_evaluations(cliff["lo"], cliff["hi"], cliff["resolution"])


# --------------------------------------------------------------------------- cluster, SLO, calibration


def parse_cluster(raw: Any, err: FieldErrors) -> dict | None:
    """``{"num_instances": 1, "routing": "round-robin", "router_delay_s": 0}``: replicas behind a router."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        err.add("cluster", "must be an object with num_instances, routing, router_delay_s")
        return None
    err.unknown(raw, ["num_instances", "routing", "router_delay_s"], "cluster")
    n = raw.get("num_instances", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SWEEP_INSTANCES:
        err.add("cluster.num_instances", f"must be a whole number from 1 to {MAX_SWEEP_INSTANCES}")
    routing = raw.get("routing", "round-robin")
    try:
        routing = str(parse_routing(str(routing)))
    except ClusterError as exc:  # (at its field, routing: cluster.routing)
        err.add_from("cluster", exc)
    delay = raw.get("router_delay_s", 0.0)
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay) \
            or not 0 <= delay <= 3600:
        err.add("cluster.router_delay_s", "must be a number of seconds from 0 to 3,600")
    if err.errors:
        return None
    return {"num_instances": n, "routing": routing, "router_delay_s": float(delay)}


def parse_slo(raw: Any, err: FieldErrors) -> dict | None:
    """``{"ttft_s": 0.5, "itl_s": 0.05, "percentile": "p90"}``: latency targets for the replicas answer."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        err.add("slo", "must be an object with ttft_s and/or itl_s (seconds)")
        return None
    err.unknown(raw, ["ttft_s", "itl_s", "percentile"], "slo")
    out: dict[str, Any] = {}
    for k in ("ttft_s", "itl_s"):
        v = raw.get(k)
        if v is None:
            out[k] = None
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 3600:
            err.add(f"slo.{k}", "must be a number of seconds > 0 (at most 3,600)")
        else:
            out[k] = float(v)
    if not err.errors and out.get("ttft_s") is None and out.get("itl_s") is None:
        err.add("slo", "give ttft_s, itl_s or both")
    pct = raw.get("percentile", "p90")
    if pct not in ("p50", "p90", "p99"):
        err.add("slo.percentile", "must be p50, p90 or p99")
    out["percentile"] = pct
    return None if err.errors else out


def parse_calibration(ref: Any, owner, err: FieldErrors) -> tuple[dict, list[str]] | None:
    """``(roofline coefficients, names its fit moved)`` of the owner's calibration ``ref`` (``planner.calibration``),
    or None."""
    if ref is None:
        return None
    found = calibration_for(owner, ref)
    if found is None:
        err.add("calibration", f"no calibration {ref!r} among yours (see /api/calibrations/)")
    return found
